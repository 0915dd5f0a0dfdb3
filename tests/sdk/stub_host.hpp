// A minimal host for SDK tests: a pp_host_api over a tiny value tree, so the C++
// layer and the fixture libraries can be exercised without the runtime.
#pragma once

#include <cstdint>
#include <deque>
#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "passepartout/abi.h"

// A value: only what abi.h can express. Never modified once built.
struct pp_value {
  pp_kind kind = PP_KIND_NIL;
  std::int64_t integer = 0;
  double real = 0.0;
  std::string text;                    // string bytes, or keyword/symbol name
  std::vector<const pp_value*> items;  // list elements (shared, never owned)
};

// One hook invocation: owns what is built in it and the last error.
struct pp_call {
  std::deque<pp_value> built;  // stable addresses
  std::string error;

  const pp_value* keep(pp_value value) {
    built.push_back(std::move(value));
    return &built.back();
  }
};

// One skill instance: collects its log lines (any thread).
struct pp_self {
  std::mutex lines_mutex;
  std::vector<std::pair<pp_log_level, std::string>> lines;

  bool logged(pp_log_level level, const std::string& line);
};

namespace stub {

// The host table, with static storage duration.
const pp_host_api& host();

// Builders for test inputs, owned by `call`.
const pp_value* nil(pp_call& call);
const pp_value* integer(pp_call& call, std::int64_t value);
const pp_value* string(pp_call& call, std::string text);
const pp_value* keyword(pp_call& call, std::string name);
const pp_value* list(pp_call& call, std::vector<const pp_value*> items);
const pp_value* plist(pp_call& call, std::initializer_list<std::pair<std::string, const pp_value*>> entries);

// `v` as an s-expression (keywords upper-case with ':', strings quoted).
std::string print(const pp_value* v);

}  // namespace stub
