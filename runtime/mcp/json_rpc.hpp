// JSON-RPC 2.0 as the Model Context Protocol uses it: the messages a client
// sends, and a strict reading of what a server sends back. What comes from a
// server is untrusted input: every field is checked, nothing is evaluated.
// JSON is handled by nlohmann-json inside json_rpc.cpp; this header speaks
// text, so that what includes it does not pull the JSON library in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace passepartout::mcp {

// The JSON-RPC error codes this client sends or reads specially.
inline constexpr std::int64_t kMethodNotFound = -32601;
inline constexpr std::int64_t kInvalidParams = -32602;

// One message read from a server.
struct RpcMessage {
  enum class Kind : std::uint8_t {
    response,      // a result for one of our requests: id, result
    error,         // an error for one of our requests: id, code, message
    request,       // the server asks us something (ping, roots/list): id, method, params
    notification,  // the server tells us something (notifications/tools/list_changed): method, params
  };
  Kind kind = Kind::notification;
  // Our requests' ids are integers; a server's request id is kept as the
  // JSON text it was (a number or a string), to answer it with the same.
  std::int64_t id = 0;
  std::string id_json;
  std::string method;
  std::string params_json;  // "{}" when absent
  std::string result_json;  // the result object's JSON text
  std::int64_t error_code = 0;
  std::string error_message;
};

// Reads one message: a JSON object with "jsonrpc": "2.0" and the fields of
// one of the kinds above, each of the right type. A response's id must be an
// integer (this client's ids are). Errors name what was wrong, briefly
// quoting the text.
Result<RpcMessage> parse_message(std::string_view text);

// The message texts this client sends (one line of compact JSON each, no
// newline). `params_json` must be a JSON object's text ("{}" for none).
std::string request_text(std::int64_t id, std::string_view method, std::string_view params_json);
std::string notification_text(std::string_view method, std::string_view params_json);
// The answer to a server's request `id_json` (as RpcMessage::id_json keeps it).
std::string result_text(std::string_view id_json, std::string_view result_json);
std::string error_text(std::string_view id_json, std::int64_t code, std::string_view message);

// `json` (an object's text) with every object's keys sorted and no
// whitespace: two definitions that mean the same print the same (for the
// pins of a tool's definition). Fails on text that is not JSON.
Result<std::string> canonical_json(std::string_view json);

}  // namespace passepartout::mcp
