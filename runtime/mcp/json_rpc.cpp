// JSON-RPC 2.0 messages over nlohmann-json, read strictly.
#include "mcp/json_rpc.hpp"

#include <nlohmann/json.hpp>
#include <utility>

namespace passepartout::mcp {

namespace {

using Json = nlohmann::json;

// Compact JSON; a string that is not UTF-8 (never one this client parsed) is repaired, not thrown over.
std::string dump(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The first 80 bytes of `text`, for a message about it.
std::string excerpt(std::string_view text) {
  std::string out(text.substr(0, 80));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return text.size() > 80 ? out + "..." : out;
}

Result<RpcMessage> bad(std::string_view what, std::string_view text) {
  return fail(ErrorCode::invalid_input, std::string(what) + ": " + excerpt(text));
}

}  // namespace

Result<RpcMessage> parse_message(std::string_view text) {
  const Json json = Json::parse(text, nullptr, false);
  if (json.is_discarded()) return bad("not JSON", text);
  if (!json.is_object()) return bad("not a JSON-RPC message (a JSON object)", text);
  const auto version = json.find("jsonrpc");
  if (version == json.end() || *version != "2.0") return bad(R"(not JSON-RPC 2.0 ("jsonrpc": "2.0" missing))", text);

  RpcMessage message;
  const auto method = json.find("method");
  const auto id = json.find("id");
  if (method != json.end()) {
    if (!method->is_string() || method->get_ref<const std::string&>().empty()) {
      return bad("a request whose \"method\" is not a name", text);
    }
    message.method = method->get<std::string>();
    const auto params = json.find("params");
    if (params != json.end() && !params->is_object() && !params->is_array()) {
      return bad("a request whose \"params\" is neither an object nor an array", text);
    }
    message.params_json = params == json.end() ? std::string("{}") : dump(*params);
    if (id == json.end()) {
      message.kind = RpcMessage::Kind::notification;
      return message;
    }
    if (!id->is_string() && !id->is_number_integer())
      return bad("a request whose \"id\" is neither a string nor an integer", text);
    message.kind = RpcMessage::Kind::request;
    message.id_json = dump(*id);
    return message;
  }

  if (id == json.end() || !id->is_number_integer())
    return bad("a response without the integer \"id\" of a request", text);
  message.id = id->get<std::int64_t>();
  const auto result = json.find("result");
  const auto error = json.find("error");
  if ((result == json.end()) == (error == json.end())) {
    return bad(R"(a response with neither or both of "result" and "error")", text);
  }
  if (result != json.end()) {
    if (!result->is_object()) return bad("a response whose \"result\" is not an object", text);
    message.kind = RpcMessage::Kind::response;
    message.result_json = dump(*result);
    return message;
  }
  if (!error->is_object()) return bad("an error response whose \"error\" is not an object", text);
  const auto code = error->find("code");
  const auto said = error->find("message");
  if (code == error->end() || !code->is_number_integer()) return bad("an error without an integer \"code\"", text);
  message.kind = RpcMessage::Kind::error;
  message.error_code = code->get<std::int64_t>();
  message.error_message = said != error->end() && said->is_string() ? said->get<std::string>() : std::string();
  return message;
}

std::string request_text(std::int64_t id, std::string_view method, std::string_view params_json) {
  Json message = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  message["params"] = Json::parse(params_json, nullptr, false);
  if (message["params"].is_discarded()) message["params"] = Json::object();
  return dump(message);
}

std::string notification_text(std::string_view method, std::string_view params_json) {
  Json message = {{"jsonrpc", "2.0"}, {"method", method}};
  const Json params = Json::parse(params_json, nullptr, false);
  if (!params.is_discarded() && !params.empty()) message["params"] = params;
  return dump(message);
}

std::string result_text(std::string_view id_json, std::string_view result_json) {
  Json message = {{"jsonrpc", "2.0"}};
  message["id"] = Json::parse(id_json, nullptr, false);
  message["result"] = Json::parse(result_json, nullptr, false);
  if (message["result"].is_discarded()) message["result"] = Json::object();
  return dump(message);
}

std::string error_text(std::string_view id_json, std::int64_t code, std::string_view message_text) {
  Json message = {{"jsonrpc", "2.0"}};
  message["id"] = Json::parse(id_json, nullptr, false);
  message["error"] = {{"code", code}, {"message", message_text}};
  return dump(message);
}

Result<std::string> canonical_json(std::string_view json) {
  // nlohmann::json keeps object members in a sorted map: dumping it sorts the keys.
  const Json parsed = Json::parse(json, nullptr, false);
  if (parsed.is_discarded()) return fail(ErrorCode::invalid_input, "not JSON: " + excerpt(json));
  return dump(parsed);
}

}  // namespace passepartout::mcp
