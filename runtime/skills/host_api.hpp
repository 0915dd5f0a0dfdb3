// The host side of the skill ABI: the pp_host_api table every skill receives,
// and the per-call (pp_call) and per-instance (pp_self) contexts behind it.
#pragma once

#include <forward_list>
#include <string>

#include "passepartout/abi.h"
#include "value/value.hpp"

// The context of one hook invocation: owns the values the skill builds during
// the call and the error text it reports. Lives on the caller's stack; never
// allocates until the skill builds something or reports an error.
struct pp_call {
  std::forward_list<passepartout::Value> built;  // stable addresses for handed-out handles
  std::string error;

  const pp_value* keep(passepartout::Value value);
  // The skill's error text, or "no reason given" when it set none.
  std::string reason() const { return error.empty() ? std::string("no reason given") : error; }
  // Prepares for the next hook: forgets the last error (values stay alive).
  void reset_error() noexcept {
    if (!error.empty()) error.clear();
  }
};

// The host's handle for one skill instance; log lines are attributed to it.
struct pp_self {
  std::string skill_name;
  // For a skill in a worker process: the host-side object the proxy table's
  // create reaches its worker through (SkillLibrary::proxy()); null otherwise.
  void* proxy = nullptr;
};

namespace passepartout {

// The one host table, with static storage duration. Any thread.
const pp_host_api& host_api() noexcept;

// Handles are the addresses of Values: no conversion, no copy.
inline const pp_value* to_handle(const Value& value) noexcept { return reinterpret_cast<const pp_value*>(&value); }
// A NULL handle reads as NIL.
const Value& from_handle(const pp_value* handle) noexcept;

}  // namespace passepartout
