// What the fatal-signal handler (log_crash.cpp) says about a crash beyond the
// signal: the skill hook running on the crashing thread, recorded durably in
// a file read at the next start; a note set by the process (the verifier
// command's load order); and a line for a skill that calls exit() in a hook.
#pragma once

#include <filesystem>
#include <string_view>

#include "base/result.hpp"

namespace passepartout {

// A loaded skill as the crash writer names it. The texts are borrowed from
// the skill's slot, which outlives every call into the skill.
struct RunningSkill {
  const char* name = "";
  const char* version = "";
  const char* sha256 = "";  // the library's bytes, lower-case hex
};

// The hook running on this thread: `skill` is null when none is. The host
// sets it around each call into a skill (HookScope; the verifier's gate loop
// sets it by hand, two stores per gate). constinit: reading it is one
// thread-pointer-relative load, in the hot path and in the signal handler.
struct RunningHook {
  const RunningSkill* skill = nullptr;
  const char* hook = nullptr;  // "gate", "prompt", "call_tool", ... (a literal)
};
extern constinit thread_local RunningHook t_running_hook;

// Marks the calling thread as running `hook` of `skill` for its lifetime.
class HookScope {
 public:
  HookScope(const RunningSkill& skill, const char* hook) noexcept : previous_(t_running_hook) {
    t_running_hook = RunningHook{&skill, hook};
  }
  ~HookScope() { t_running_hook = previous_; }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

 private:
  RunningHook previous_;
};

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
