// Builders and classifiers for the wire protocol's messages.
#include "daemon/protocol.hpp"

#include <vector>

#include "base/utf8.hpp"

namespace passepartout {

namespace {

// `text` with every byte of an ill-formed UTF-8 sequence replaced by '?'.
std::string valid_utf8(std::string_view text) {
  std::string out(text);
  std::size_t from = 0;
  while (const auto bad = find_invalid_utf8(std::string_view(out).substr(from))) {
    out[from + *bad] = '?';
    from += *bad + 1;
  }
  return out;
}

bool is_response_with_status(const Value& message, std::string_view status) noexcept {
  return message.at("TYPE").is_keyword("RESPONSE") && message.at("STATUS").is_keyword(status);
}

}  // namespace

Value make_handshake(std::string_view version, std::span<const std::string> capabilities) {
  std::vector<Value> keywords;
  keywords.reserve(capabilities.size());
  for (const std::string& capability : capabilities) keywords.push_back(Value::keyword(capability));
  return Value::plist({{"TYPE", Value::keyword("EVENT")},
                       {"PAYLOAD", Value::plist({{"ACTION", Value::keyword("HANDSHAKE")},
                                                 {"VERSION", Value::string(valid_utf8(version))},
                                                 {"CAPABILITIES", Value::list(std::span<const Value>(keywords))}})}});
}

Value make_health_response(const HealthReport& report) {
  return Value::plist({{"TYPE", Value::keyword("HEALTH-RESPONSE")},
                       {"STATUS", Value::keyword(report.status.empty() ? "UNKNOWN" : report.status)},
                       {"CHECKED-P", Value::boolean(report.checked)}});
}

Value make_stream_chunk(std::string_view text) {
  return Value::plist(
      {{"TYPE", Value::keyword("STREAM-CHUNK")}, {"PAYLOAD", Value::plist({{"TEXT", Value::string(text)}})}});
}

Value make_ok_response(std::string_view message, const Value& extra) {
  std::vector<Value> payload;
  payload.reserve(2 + extra.items().size());
  payload.push_back(Value::keyword("MESSAGE"));
  payload.push_back(Value::string(valid_utf8(message)));
  payload.insert(payload.end(), extra.items().begin(), extra.items().end());
  return Value::plist({{"TYPE", Value::keyword("RESPONSE")},
                       {"STATUS", Value::keyword("OK")},
                       {"PAYLOAD", Value::list(std::span<const Value>(payload))}});
}

Value make_error_response(std::string_view code, std::string_view message) {
  return Value::plist(
      {{"TYPE", Value::keyword("RESPONSE")},
       {"STATUS", Value::keyword("ERROR")},
       {"PAYLOAD", Value::plist({{"MESSAGE", Value::string(valid_utf8(message))}, {"CODE", Value::keyword(code)}})}});
}

Value make_frame_error_response(const FrameError& error) {
  const std::string_view code =
      error.kind == FrameErrorKind::too_large ? wire_error::kFrameTooLarge : wire_error::kBadFrame;
  return make_error_response(code, error.message);
}

std::string_view message_type(const Value& message) noexcept {
  const Value& type = message.at("TYPE");
  return type.is_keyword() ? type.text() : std::string_view();
}

bool is_handshake(const Value& message) noexcept {
  return message.at("TYPE").is_keyword("EVENT") && message.path({"PAYLOAD", "ACTION"}).is_keyword("HANDSHAKE");
}

bool is_health_check(const Value& message) noexcept { return message.at("TYPE").is_keyword("HEALTH-CHECK"); }

bool is_health_response(const Value& message) noexcept { return message.at("TYPE").is_keyword("HEALTH-RESPONSE"); }

bool is_stream_chunk(const Value& message) noexcept { return message.at("TYPE").is_keyword("STREAM-CHUNK"); }

bool is_ok_response(const Value& message) noexcept { return is_response_with_status(message, "OK"); }

bool is_error_response(const Value& message) noexcept { return is_response_with_status(message, "ERROR"); }

std::string_view error_response_code(const Value& message) noexcept {
  if (!is_error_response(message)) return {};
  const Value& code = message.path({"PAYLOAD", "CODE"});
  return code.is_keyword() ? code.text() : std::string_view();
}

std::optional<std::string_view> auth_token(const Value& message) noexcept {
  const Value* token = message.get("AUTH");
  if (token == nullptr || !token->is_string()) return std::nullopt;
  return token->text();
}

}  // namespace passepartout
