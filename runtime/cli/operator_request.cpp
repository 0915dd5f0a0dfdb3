// Operator requests: sending one, waiting for its answer, reporting a
// failure with the hint that fits, and printing the answer as JSON or text.
#include "cli/operator_request.hpp"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <random>

#include "base/state_paths.hpp"
#include "cli/client.hpp"
#include "cli/exit_status.hpp"
#include "cli/terminal_text.hpp"
#include "daemon/protocol.hpp"
#include "daemon/token_file.hpp"

namespace passepartout::cli {

namespace {

using Clock = Client::Clock;

// A fresh id for one request, unique enough to tell our response from any other.
std::string new_request_id() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device random;
  std::string id = "cli-" + std::to_string(::getpid()) + "-";
  for (int i = 0; i < 4; ++i) {
    const unsigned bits = random();
    for (int nibble = 0; nibble < 4; ++nibble) id += kHex[(bits >> (4 * nibble)) & 0xf];
  }
  return id;
}

std::string hint_for(std::string_view code, const Target& target, const ErrorHints& hints) {
  if (code == wire_error::kUnauthorized) {
    if (target.token.empty()) {
      return "over TCP, operator commands need the daemon's token: pass --token-file FILE or set PASSEPARTOUT_TOKEN "
             "(looked for " +
             token_file(default_state_dir()).string() + "), or use the Unix socket (--socket PATH)";
    }
    return "the token from " + target.token_source + " was not accepted; use the one the daemon wrote";
  }
  if (code == wire_error::kNotFound) return hints.not_found;
  if (code == wire_error::kRefused) return hints.refused;
  if (code == wire_error::kBadRequest) {
    return "check the arguments; if they are right, compare the daemon's version (`passepartout status`) with "
           "this client's (`passepartout version`)";
  }
  if (code == wire_error::kShuttingDown) return "the daemon is stopping; start it again with `passepartout daemon`";
  if (code == wire_error::kBusy) return "the daemon has too many connections; try again shortly";
  if (code == wire_error::kTimeout) return "the daemon timed the connection out; try again";
  return {};
}

// Sends `request` and returns the failure's report, with the hint that fits
// it, from the daemon's error response.
std::optional<Value> operator_request(const Target& target, const OperatorRequest& operation, const Output& output,
                                      int& status) {
  ClientError error;
  std::optional<Value> frame = exchange_operator_request(target, operation, error);
  if (!frame) {
    status = report_client_error(output, error);
    return std::nullopt;
  }
  if (is_ok_response(*frame)) return frame;
  // An error response, or one whose :STATUS is neither :OK nor :ERROR.
  const std::string code(error_response_code(*frame));
  const Value& message = frame->path({"PAYLOAD", "MESSAGE"});
  std::string text = "`" + json_key(operation.command);
  text += "` failed: ";
  text += message.is_string() ? printable(message.text()) : std::string("the request failed");
  if (!code.empty()) text += " (" + code + ")";
  status = report_failure(output, text, hint_for(code, target, operation.hints),
                          code == wire_error::kBadRequest ? kExitUsage : kExitProblem, code);
  return std::nullopt;
}

}  // namespace

// Sends (:TYPE :OPERATOR :COMMAND :<command> :REQUEST-ID id [:AUTH token] arguments...)
// and waits for its :RESPONSE.
std::optional<Value> exchange_operator_request(const Target& target, const OperatorRequest& operation,
                                               ClientError& error) {
  const std::string_view command = operation.command;
  Client client;
  if (!client.open(target.endpoint, target.connect_timeout, error)) return std::nullopt;
  const std::string request_id = new_request_id();
  Value request = Value::plist({{"TYPE", Value::keyword("OPERATOR")},
                                {"COMMAND", Value::keyword(command)},
                                {"REQUEST-ID", Value::string(request_id)}});
  if (target.endpoint.is_tcp() && !target.token.empty()) request = request.with("AUTH", Value::string(target.token));
  for (const auto& [key, value] : operation.arguments) {
    if (!value.is_nil()) request = request.with(key, value);  // NIL: an option not given
  }

  const Clock::time_point deadline = Clock::now() + target.reply_timeout;
  if (!client.send(request, deadline, error)) return std::nullopt;
  for (;;) {
    Value frame;
    if (!client.read(frame, deadline, error)) {
      if (error.failure == ClientFailure::closed) {
        error.message = "the daemon at " + target.endpoint.describe() + " closed the connection before answering";
      } else if (error.failure == ClientFailure::timeout) {
        error.message = "no answer from the daemon at " + target.endpoint.describe() + " within " +
                        format_seconds(target.reply_timeout);
      }
      return std::nullopt;
    }
    if (message_type(frame) != "RESPONSE") continue;
    const Value& id = frame.at("REQUEST-ID");
    if (id.is_string() && id.text() != request_id) continue;
    return frame;
  }
}

std::string operator_failure_text(const Target& target, const OperatorRequest& request, const Value& response,
                                  std::string& hint) {
  const std::string code(error_response_code(response));
  hint = hint_for(code, target, request.hints);
  const Value& message = response.path({"PAYLOAD", "MESSAGE"});
  std::string text = message.is_string() ? printable(message.text()) : std::string("the request failed");
  if (!code.empty()) text += " (" + code + ")";
  return text;
}

std::optional<Value> send_operator_request(const Target& target, const OperatorRequest& request, const Output& output,
                                           int& status) {
  return operator_request(target, request, output, status);
}

int run_operator_command(const Target& target, const Output& output, const OperatorRequest& request,
                         const TextRender& text, const JsonAmend& amend) {
  int status = kExitOk;
  const std::optional<Value> response = operator_request(target, request, output, status);
  if (!response) return status;
  if (output.json) {
    OrderedJson document = payload_json(target, *response, request.lists);
    if (amend) amend(document, *response);
    print_json(output.out, document);
  } else {
    text(*response, output.out);
  }
  return kExitOk;
}

OrderedJson payload_json(const Target& target, const Value& response, const std::vector<std::string_view>& lists) {
  OrderedJson document{{"ok", true}, {"daemon", target.endpoint.describe()}};
  const Value& payload = response.at("PAYLOAD");
  const auto items = payload.items();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (!items[i].is_keyword()) continue;
    const std::string key = json_key(items[i].text());
    if (document.contains(key)) continue;
    const bool is_list =
        std::any_of(lists.begin(), lists.end(), [&](std::string_view name) { return items[i].is_keyword(name); });
    document[key] = is_list ? list_json(items[i + 1]) : value_json(items[i + 1]);
  }
  for (std::string_view name : lists) {
    const std::string key = json_key(name);
    if (!document.contains(key)) document[key] = OrderedJson::array();
  }
  return document;
}

std::string response_message(const Value& response, std::string_view fallback) {
  const Value& message = response.path({"PAYLOAD", "MESSAGE"});
  return message.is_string() && !message.text().empty() ? printable(message.text()) : std::string(fallback);
}

}  // namespace passepartout::cli
