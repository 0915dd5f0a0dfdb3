// One operator request to the running daemon, and the one way an operator
// command ends: the answer as a JSON document (--json) or the command's text.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/client_commands.hpp"
#include "cli/client_output.hpp"
#include "value/value.hpp"

namespace passepartout::cli {

// What to suggest when the daemon answers with one of these codes.
struct ErrorHints {
  std::string not_found;
  std::string refused;
};

// (:TYPE :OPERATOR :COMMAND :<command> ...) as a command describes it.
struct OperatorRequest {
  std::string_view command;                                   // "STATUS", "LOAD", ...
  std::vector<std::pair<std::string_view, Value>> arguments;  // a NIL value (an option not given) is left out
  ErrorHints hints;
  std::vector<std::string_view> lists;  // payload keys that are always arrays in the JSON document
};

// Adds to the JSON document what the payload alone does not say.
using JsonAmend = std::function<void(OrderedJson& document, const Value& response)>;
// Writes the text of an :OK response to `out`.
using TextRender = std::function<void(const Value& response, std::ostream& out)>;

// Sends `request` and waits for its :OK response, which it returns; on a
// failure (no daemon, a timeout, an error response) reports it, sets
// `status` and returns nothing.
std::optional<Value> send_operator_request(const Target& target, const OperatorRequest& request, const Output& output,
                                           int& status);

// Sends `request` and returns the daemon's response to it, :OK or an error
// response; nothing, with `error` set, when the daemon cannot be reached or
// does not answer in time. Reports nothing.
std::optional<Value> exchange_operator_request(const Target& target, const OperatorRequest& request,
                                               ClientError& error);

// The daemon's message in an error `response` to `request` (with its code),
// and in `hint` what to do about it.
std::string operator_failure_text(const Target& target, const OperatorRequest& request, const Value& response,
                                  std::string& hint);

// Sends `request` and waits for its :OK response. On a failure (no daemon, a
// timeout, an error response) reports it and returns its status; else prints
// payload_json() amended by `amend` with --json, or calls `text`, and returns
// kExitOk.
int run_operator_command(const Target& target, const Output& output, const OperatorRequest& request,
                         const TextRender& text, const JsonAmend& amend = {});

// {"ok": true, "daemon": "<endpoint>", <payload keys>...}; `lists` are keys
// whose value is always an array.
OrderedJson payload_json(const Target& target, const Value& response, const std::vector<std::string_view>& lists);

// The daemon's :PAYLOAD :MESSAGE, or `fallback`.
std::string response_message(const Value& response, std::string_view fallback);

}  // namespace passepartout::cli
