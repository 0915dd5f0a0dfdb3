// Test support for the pipeline's tests: a rig of real skills, scripted
// providers, executors, memory and approvals, and a sink that records what
// the pipeline sends to a signal's source.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iterator>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "base/executor.hpp"
#include "base/log.hpp"
#include "memory/memory_store.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/rule_book.hpp"
#include "providers/cascade.hpp"
#include "providers/scripted_provider.hpp"
#include "skills/registry.hpp"
#include "skills/skill_boot.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout::testing {

using namespace std::chrono_literals;

// Collects what the pipeline sends to the source.
class RecordingSink final : public ReplySink {
 public:
  void send(const Value& message) override {
    std::lock_guard lock(mutex_);
    messages_.push_back(message);
  }
  bool is_open() const override { return true; }
  std::vector<Value> messages() const {
    std::lock_guard lock(mutex_);
    return messages_;
  }
  std::vector<std::string> printed() const {
    std::vector<std::string> out;
    for (const Value& m : messages()) out.push_back(to_sexp(m));
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Value> messages_;
};

struct SkillSpec {
  std::string name;
  int priority;
  std::string extra = {};  // manifest lines; for a bundled skill, its config in place of the bundled one
  bool bundled = false;    // from plugins/ rather than the fixtures
};

// Skills, a cascade of scripted providers, two pools, memory and approvals.
struct Rig {
  LogCapture logs;
  TempDir state;
  SkillFixtures fixtures;
  Registry registry;
  EventLoops pool;  // two, as in the daemon, unless a test asks for fewer
  ThreadPool blocking{1};
  Cascade cascade;
  MemoryStore memory;
  std::unique_ptr<ApprovalStore> approvals;
  std::unique_ptr<RuleBook> rules;         // <state>/rules.yaml, empty until a test adds one
  std::unique_ptr<DecisionLog> decisions;  // with record_decisions: <state>/decisions
  std::unique_ptr<Pipeline> pipeline;
  std::vector<std::shared_ptr<ScriptedProvider>> providers;
  std::atomic<int> interrupts{0};  // Services::on_interrupt calls

  Rig(std::vector<SkillSpec> skills, std::vector<std::string> scripts, std::size_t loops = 2,
      const std::function<void(PipelineOptions&)>& configure = {}, bool record_decisions = false)
      : pool(loops) {
    std::vector<SkillManifest> manifests;
    guard_toolboxes(skills);
    for (const SkillSpec& spec : skills) {
      if (spec.bundled) {
        const auto file = std::filesystem::path(PP_MANIFEST_DIR) / (spec.name + ".yaml");
        auto manifest = SkillManifest::load(file);
        if (!spec.extra.empty()) {
          // The bundled manifest with its config: replaced by `extra`.
          std::ifstream in(file);
          std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
          text = text.substr(0, text.find("\nconfig:") + 1) + spec.extra;
          manifest = SkillManifest::parse(text, file);
        }
        INFO((manifest ? std::string() : manifest.error().message));
        REQUIRE(manifest.has_value());
        fixtures.install_library(spec.name, PP_PLUGIN_DIR);
        manifests.push_back(std::move(*manifest));
      } else {
        fixtures.install_library(spec.name);
        manifests.push_back(fixtures.manifest(spec.name, spec.priority, spec.extra));
      }
    }
    BootResult boot = boot_skills(std::move(manifests), fixtures.loader());
    for (const auto& d : boot.disabled) FAIL("skill '" << d.name << "' did not load: " << d.reason);
    registry.publish(boot.slots);
    for (std::size_t i = 0; i < scripts.size(); ++i) {
      auto script = ScriptedScript::parse(scripts[i], "script-" + std::to_string(i));
      INFO((script ? std::string() : script.error().message));
      REQUIRE(script.has_value());
      providers.push_back(
          std::make_shared<ScriptedProvider>(std::move(*script), &pool, "scripted-" + std::to_string(i)));
      cascade.add(providers.back());
    }
    auto store = ApprovalStore::open(state.path() / "approvals.sqlite3");
    REQUIRE(store.has_value());
    approvals = std::move(*store);
    auto book = RuleBook::open(state.path() / "rules.yaml");
    REQUIRE(book.has_value());
    rules = std::move(*book);
    PipelineOptions options;
    options.version = "0.1.0";
    if (configure) configure(options);
    if (record_decisions) {
      DecisionLogOptions log_options;
      log_options.folder = state.path() / "decisions";
      log_options.time_gates_every = 1;  // every gate's time in every record
      auto log = DecisionLog::open(log_options);
      REQUIRE(log.has_value());
      decisions = std::move(*log);
    }
    pipeline =
        std::make_unique<Pipeline>(Pipeline::Services{registry, cascade, pool, blocking, &memory, approvals.get(),
                                                      [this] { ++interrupts; }, decisions.get(), nullptr, rules.get()},
                                   options);
  }

  // A toolbox offers tools and actuators, so it names a guard: the rig's
  // first fixture gate, else a pass-gate-0 added for it (priority 0).
  static void guard_toolboxes(std::vector<SkillSpec>& skills) {
    static const std::set<std::string> kGates{"policy",       "approval-gate", "block-gate", "pass-gate-0",
                                              "rewrite-gate", "warn-gate",     "slow-gate",  "throw-gate"};
    std::string guard;
    for (const SkillSpec& spec : skills) {
      if (kGates.count(spec.name) != 0) {
        guard = spec.name;
        break;
      }
    }
    bool guarded = false;
    for (SkillSpec& spec : skills) {
      if (spec.bundled || spec.name.rfind("toolbox", 0) != 0 || spec.extra.find("guarded_by") != std::string::npos) {
        continue;
      }
      if (guard.empty()) guard = "pass-gate-0";
      spec.extra += "guarded_by: [" + guard + "]\n";
      guarded = true;
    }
    const bool present = std::any_of(skills.begin(), skills.end(), [&](const SkillSpec& s) { return s.name == guard; });
    if (guarded && !present) skills.push_back(SkillSpec{guard, 0});
  }

  ~Rig() {
    pool.stop();
    blocking.stop();
  }

  LoopReport run(Value signal, const std::shared_ptr<ReplySink>& sink = nullptr) {
    auto promise = std::make_shared<std::promise<LoopReport>>();
    auto future = promise->get_future();
    pipeline->inject(std::move(signal), sink, [promise](LoopReport report) { promise->set_value(std::move(report)); });
    REQUIRE(future.wait_for(20s) == std::future_status::ready);
    return future.get();
  }

  // Approves `token` through the pipeline, as an operator would ("test").
  Result<Value> approve(const std::string& token) {
    auto promise = std::make_shared<std::promise<Result<Value>>>();
    auto future = promise->get_future();
    pipeline->approve(token, "test", [promise](Result<Value> r) { promise->set_value(std::move(r)); });
    REQUIRE(future.wait_for(20s) == std::future_status::ready);
    return future.get();
  }

  bool logged(std::string_view needle) const { return logs.contains(needle); }
};

}  // namespace passepartout::testing
