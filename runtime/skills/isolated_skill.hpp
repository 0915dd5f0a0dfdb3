// ProcessSkillLibrary: the host side of a skill that runs in a worker process
// (`isolation: process`) — a synthesized pp_skill_api whose hooks forward
// over the worker's channel, so Slot, the verifier and hot swap use it as any table.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/result.hpp"
#include "passepartout/abi.h"
#include "skills/restart_policy.hpp"
#include "skills/skill_manifest.hpp"
#include "skills/slot.hpp"
#include "skills/worker_channel.hpp"
#include "value/value.hpp"

namespace passepartout {

struct LoaderOptions;
class WorkerProcess;

// Bits of the hook mask a worker describes its table with.
enum WorkerHook : std::uint32_t {
  kHookTrigger = 1U << 0,
  kHookPrompt = 1U << 1,
  kHookGate = 1U << 2,
  kHookSelfTest = 1U << 3,
  kHookExportState = 1U << 4,
  kHookImportState = 1U << 5,
  kHookCallTool = 1U << 6,
  kHookAct = 1U << 7,
  kHookObserve = 1U << 8,
  kHookErrorPolicy = 1U << 9,
  kHookMandate = 1U << 10,
  kHookSelectModel = 1U << 11,
};

// Created by SkillLoader on the control thread; its hooks are called from any
// thread, as any skill's. Owns the worker process: destroying it kills the
// worker. When a call finds its worker dead, a restart is scheduled for when
// the backoff has passed (RestartPolicy) and made by the library's own restart
// thread, with the config the instance was created with and its self-test;
// the state is lost. No call waits for a restart: until the new worker is up,
// calls fail at once saying why.
class ProcessSkillLibrary final : public SkillLibrary {
 public:
  // Starts the worker for `manifest` (the library at `source`, whose bytes
  // hash to `sha256`: the worker refuses others) and reads its table description.
  static Result<std::unique_ptr<ProcessSkillLibrary>> start(const SkillManifest& manifest,
                                                            const std::filesystem::path& source,
                                                            const std::string& sha256, const LoaderOptions& options);
  ~ProcessSkillLibrary() override;
  ProcessSkillLibrary(const ProcessSkillLibrary&) = delete;
  ProcessSkillLibrary& operator=(const ProcessSkillLibrary&) = delete;

  const std::filesystem::path& source_path() const override { return source_; }
  void* proxy() noexcept override { return this; }
  IsolationStatus isolation_status() const override;

  // The proxy table, for SkillTable::read (which checks it as any skill's table).
  const pp_skill_api& table() const noexcept { return table_; }

  // One request to the worker; failed with the reason the call could not be
  // answered (at once, when no worker is live: it died, or is restarting).
  Result<Value> call(FrameKind kind, const Value& request, std::chrono::milliseconds budget);
  // Kills the worker because it answered `what` (a reply of the wrong shape);
  // returns the reason every call then fails with.
  std::string protocol_violation(const std::string& what);

  Result<void> create(const Value& config);
  void destroy_instance();
  std::chrono::milliseconds call_budget() const noexcept { return call_budget_; }
  std::chrono::milliseconds control_budget() const noexcept { return control_budget_; }
  std::chrono::milliseconds action_budget() const noexcept { return action_budget_; }

  // The worker's pid (0 when none runs), for tests.
  int worker_pid_for_test() const;
  // System calls the sandbox denied this skill's processes so far, once per call and system call.
  std::uint64_t sandbox_denials() const noexcept { return sandbox_denials_.load(std::memory_order_relaxed); }

 private:
  ProcessSkillLibrary() = default;
  // Spawns a worker and checks its description against this table (or, the
  // first time, builds the table from it). mutex_ not held; while it starts,
  // the worker is `starting_`, for the destructor to kill.
  Result<std::shared_ptr<WorkerProcess>> spawn_worker();
  // spawn_worker(), then create with `config` (when `create`) and the self-test.
  Result<std::shared_ptr<WorkerProcess>> restart_worker(bool create, const Value& config);
  Result<void> read_description(const Value& description);
  // The live worker; failed at once when there is none. mutex_ not held.
  Result<std::shared_ptr<WorkerProcess>> live_worker();
  // Counts the death of `worker` once (backoff, quarantine). mutex_ held.
  void note_death_locked(const WorkerProcess& worker);
  // Counts a death for `reason`, logs it, and schedules the restart (or quarantines). mutex_ held.
  void record_death_locked(const std::string& reason);
  // The restart thread: waits until a scheduled restart is due, makes it, and
  // schedules another when it fails, until quarantine or destruction.
  void restart_loop();
  // Logs each system call the sandbox denied the first time (per skill), counts every one.
  void note_denials(const std::vector<std::string>& names);
  std::chrono::steady_clock::time_point now() const;

  std::string name_;
  std::string version_text_;
  std::filesystem::path source_;
  std::vector<std::string> worker_arguments_;
  std::filesystem::path executable_;
  std::size_t lanes_ = 4;
  std::uint64_t memory_limit_ = 0;
  std::chrono::milliseconds call_budget_{1000};
  std::chrono::milliseconds control_budget_{10'000};
  std::chrono::milliseconds action_budget_{600'000};
  std::function<std::chrono::steady_clock::time_point()> clock_;
  std::function<void(const std::string&, const std::string&)> on_quarantine_;

  // The proxy table and what its pointers point into.
  pp_skill_api table_{};
  std::uint32_t hook_mask_ = 0;
  std::deque<std::string> strings_;
  std::vector<pp_tool> tools_;
  std::vector<const char*> actuators_;
  std::vector<pp_actuator_spec> actuator_specs_;  // parallel to actuators_, when the worker described them
  std::vector<pp_config_key> config_keys_;

  // guards worker_, starting_, death_noted_, restarts_, restart_due_, restarting_, stopping_, created_, config_
  mutable std::mutex mutex_;
  std::condition_variable restart_wanted_;  // a restart was scheduled, or stopping_ set
  std::shared_ptr<WorkerProcess> worker_;
  std::shared_ptr<WorkerProcess> starting_;  // a worker being started by the restart thread
  bool death_noted_ = false;
  RestartPolicy restarts_;
  bool restart_due_ = false;  // a death was counted: restart once restarts_.next_start() has passed
  bool restarting_ = false;   // the restart thread is starting a worker
  bool stopping_ = false;     // the destructor runs: no more restarts
  bool created_ = false;
  Value config_;
  std::thread restarter_;  // runs restart_loop(); joined by the destructor

  std::mutex denials_mutex_;      // guards denied_
  std::set<std::string> denied_;  // system calls already logged
  std::atomic<std::uint64_t> sandbox_denials_{0};
};

}  // namespace passepartout
