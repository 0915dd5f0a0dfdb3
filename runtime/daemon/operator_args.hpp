// What the operator commands share to read their arguments and answer:
// operator_handler.cpp and rules_requests.cpp. Private to runtime/daemon.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "daemon/protocol.hpp"
#include "value/value.hpp"

namespace passepartout::operator_args {

inline Value str(std::string_view text) { return Value::string(text); }
inline Value num(std::int64_t n) { return Value::integer(n); }

inline Value bad_request(std::string_view message) { return make_error_response(wire_error::kBadRequest, message); }

// The string argument `key`, or nullptr with `error` set.
inline const Value* string_argument(const Value& request, std::string_view key, Value& error) {
  const Value* value = request.get(key);
  if (value == nullptr || !value->is_string() || value->text().empty()) {
    error = bad_request(":" + std::string(key) + " \"...\" is required (a non-empty string)");
    return nullptr;
  }
  return value;
}

// An optional whole-number argument in [min, max]; false with `error` set when it is something else.
inline bool count_argument(const Value& request, std::string_view key, std::int64_t min, std::int64_t max,
                           std::int64_t& out, Value& error) {
  const Value* value = request.get(key);
  if (value == nullptr) return true;
  if (!value->is_integer() || value->as_integer() < min || value->as_integer() > max) {
    error = bad_request(":" + std::string(key) + " must be a whole number from " + std::to_string(min) + " to " +
                        std::to_string(max) +
                        (value->is_integer() ? "; got " + std::to_string(value->as_integer()) : std::string()));
    return false;
  }
  out = value->as_integer();
  return true;
}

// The wire's error code for a runtime error.
inline std::string_view code_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::not_found:
      return wire_error::kNotFound;
    case ErrorCode::invalid_input:
      return wire_error::kBadRequest;
    default:
      return wire_error::kRefused;
  }
}

// The error response for `error`.
inline Value error_response(const Error& error) { return make_error_response(code_for(error.code), error.message); }

}  // namespace passepartout::operator_args
