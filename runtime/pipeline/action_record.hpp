// ActionRecord: what an actuator or tool carried out, made visible — logged
// when it starts and when it ends (what ran, with credentials masked as the
// gate log masks them; ok or failed; how long; the session), and told to the
// user as a message that shows what ran and its output.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

class ActionRecord {
 public:
  // Logs "ACT START [:SHELL] (session s): ls -la". `target` is the
  // actuator's upper-case name ("SHELL") or "TOOL"; `action` the action as
  // dispatched (a tool's name and arguments are read from its :PAYLOAD).
  ActionRecord(std::string_view target, const Value& action);

  // Logs "ACT END [:SHELL] (session s): ok in 12.3 ms: <output, masked and
  // cut>" or "... failed in 12.3 ms: <error>", and returns the message for
  // the user: (:ACTION :MESSAGE :TEXT "Ran ls -la on :SHELL:\n<output>"
  // :ACTED (:TARGET :SHELL :WHAT "ls -la" :STATUS :OK|:ERROR :MS 12.3)),
  // a :PAYLOAD a client prints as it prints any message.
  Value finish(const Result<Value>& result) const;

  // What ran, as people read it: a shell command's text, a tool's name and
  // arguments, else the printed :PAYLOAD.
  const std::string& what() const noexcept { return what_; }

  static constexpr std::size_t kMaxLoggedChars = 300;   // of what ran and of its output, per log line
  static constexpr std::size_t kMaxShownChars = 65536;  // of the output in the user's message

 private:
  std::string label_;   // ":SHELL" or "tool read-file"
  std::string target_;  // "SHELL" or "TOOL"
  std::string what_;
  std::string session_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace passepartout
