// What the fatal-signal handler (log_crash.cpp) says about a crash beyond the
// signal: the skill hook running on the crashing thread, recorded durably in
// a file read at the next start; a note set by the process (the verifier
// command's load order); and a line for a skill that calls exit() in a hook.
#pragma once

#include <atomic>
#include <filesystem>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace passepartout {

// A loaded skill as the crash writer names it. The texts are borrowed from
// the skill's slot, which outlives every call into the skill.
struct RunningSkill {
  const char* name = "";
  const char* version = "";
  const char* sha256 = "";  // the library's bytes, lower-case hex
};

// A hook being run: `skill` is null when none is.
struct RunningHook {
  const RunningSkill* skill = nullptr;
  const char* hook = nullptr;  // "gate", "prompt", "call_tool", ... (a literal)
};

// The hook running on a thread, as that thread sets it around each call
// into a skill (HookScope; the verifier's gate loop sets it by hand, two
// stores per gate). Relaxed atomics, so the stores are plain moves and
// another thread may read them (running_hooks(), at shutdown).
struct RunningHookCell {
  std::atomic<const RunningSkill*> skill{nullptr};
  std::atomic<const char*> hook{nullptr};

  void set(const RunningSkill* running, const char* name) noexcept {
    hook.store(name, std::memory_order_relaxed);
    skill.store(running, std::memory_order_relaxed);
  }
  void clear() noexcept { skill.store(nullptr, std::memory_order_relaxed); }
  RunningHook get() const noexcept {
    return RunningHook{skill.load(std::memory_order_relaxed), hook.load(std::memory_order_relaxed)};
  }
};
// constinit: reaching it is one thread-pointer-relative address, in the hot
// path and in the signal handler.
extern constinit thread_local RunningHookCell t_running_hook;

// Marks the calling thread as running `hook` of `skill` for its lifetime.
class HookScope {
 public:
  HookScope(const RunningSkill& skill, const char* hook) noexcept : previous_(t_running_hook.get()) {
    t_running_hook.set(&skill, hook);
  }
  ~HookScope() { t_running_hook.set(previous_.skill, previous_.hook); }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

 private:
  RunningHook previous_;
};

// Makes the calling thread's running hook readable by running_hooks(), for
// the rest of the thread's life, under `role` (a literal that reads after
// "on ... thread": "an event loop", "a thread pool"). The executors' threads call it as they start; calling it
// again on the same thread does nothing.
void publish_running_hook(const char* role);

// A thread published with publish_running_hook() that is in a skill's hook now.
struct RunningHookOf {
  const char* role;
  RunningHook running;
};
// Every published thread in a skill's hook at the time of the call (at
// shutdown: the hooks that did not return within the grace). Any thread.
std::vector<RunningHookOf> running_hooks();

// Opens `file` for the fatal-signal handler (and the exit() handler) to record
// the skill whose hook was running when the process died: created with mode
// 0600 and emptied, close-on-exec, kept open for the life of the process; one
// line, then fsync (crash_record.hpp in skills/ reads it). Read the previous
// record before calling this. A second call replaces the first file.
Result<void> record_crashes_in(const std::filesystem::path& file);

// A text the fatal-signal handler writes before its crash line (at most
// 4 KiB; more is cut), e.g. what a command had done so far; empty clears it.
// Not while a fatal signal may be handled on another thread.
void set_crash_note(std::string_view text);

// Registers (once) an atexit and at_quick_exit handler that, when the thread
// calling exit() is running a skill's hook, logs "skill 'x' 1.0.0 called
// exit() in hook gate" and records it as the fatal-signal handler records a
// crash (cause "exit"). Nothing is written for an exit() outside a hook.
void log_exit_in_skill_hooks();

}  // namespace passepartout
