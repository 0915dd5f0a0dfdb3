// Actuators: where an action goes — the host's built-ins (:TUI, :SYSTEM,
// :TOOL) or a skill's actuator — found by one lookup for the loop and approved runs.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "skills/registry.hpp"
#include "value/value.hpp"

namespace passepartout {

// Whether `name` is `literal`: the built-in targets are compared on every
// signal, and with the length known here the compiler compares the bytes
// in place instead of calling memcmp.
template <std::size_t N>
bool is_named(std::string_view name, const char (&literal)[N]) noexcept {
  return name.size() == N - 1 && std::memcmp(name.data(), literal, N - 1) == 0;
}

// What serves a target (E2). Valid while the snapshot it was found in lives.
struct Actuator {
  enum class Kind : std::uint8_t {
    reply,   // :TUI: the signal's source, through its reply sink
    system,  // :SYSTEM: logs messages (E6, Decisions 8)
    tool,    // :TOOL: the tool the action's :PAYLOAD :TOOL names (E7)
    skill,   // a skill's actuator
    none,    // nothing serves the target
  };
  Kind kind = Kind::none;
  const Snapshot::ActuatorEntry* actuator = nullptr;  // skill
  const Snapshot::ToolEntry* tool = nullptr;          // tool: nullptr when no skill offers it
  std::string tool_name;                              // tool: as tool_name_of(action)
};

// The actuator serving `target` (an upper-case name without ':', as
// target_name() gives) for `action`: the built-ins first, then the skills'
// actuators of `snapshot`. Any thread.
Actuator find_actuator(const Snapshot& snapshot, std::string_view target, const Value& action);

// A keyword or string naming a target, as an upper-case name without ':'
// ("" for any other value).
std::string target_name(const Value& target);
// The same, appended to `out`.
void append_target_name(std::string& out, const Value& target);

// E7: the tool a :TOOL action names, lower-cased ("" when it names none).
std::string tool_name_of(const Value& action);
// E7: a :TOOL action's arguments, unwrapped one level when the first element is itself a list.
Value tool_args_of(const Value& action);

// E6, Decisions 8: the :SYSTEM actuator; messages are logged; there is no evaluator.
void system_actuator(const Value& action);

}  // namespace passepartout
