// Failure classification for LLM APIs: status, error body and headers into a
// FailureClass, a masked message, the request id and Retry-After.
#include "providers/failure.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string>

#include "base/ascii.hpp"
#include "base/utf8.hpp"

namespace passepartout {

namespace {

using Json = nlohmann::json;
using namespace std::chrono;

constexpr std::size_t kMaxDetailBytes = 300;

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

std::string_view trim(std::string_view text) noexcept {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const std::size_t last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

std::optional<double> parse_number(std::string_view text) noexcept {
  text = trim(text);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value < 0) return std::nullopt;
  return value;
}

// An IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 5.6.7).
std::optional<system_clock::time_point> parse_http_date(std::string_view text) noexcept {
  text = trim(text);
  const std::size_t comma = text.find(", ");
  if (comma == std::string_view::npos) return std::nullopt;
  text.remove_prefix(comma + 2);
  if (text.size() != 24 || text.substr(20) != " GMT") return std::nullopt;
  static constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                               "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const auto month_name = std::find(kMonths.begin(), kMonths.end(), text.substr(3, 3));
  if (month_name == kMonths.end() || text[2] != ' ' || text[6] != ' ' || text[11] != ' ' || text[14] != ':' ||
      text[17] != ':') {
    return std::nullopt;
  }
  auto number = [&](std::size_t at, std::size_t size) -> int {
    int value = 0;
    const auto [end, ec] = std::from_chars(text.data() + at, text.data() + at + size, value);
    return ec == std::errc() && end == text.data() + at + size ? value : -1;
  };
  const int day_of_month = number(0, 2), year_number = number(7, 4);
  const int hours_part = number(12, 2), minutes_part = number(15, 2), seconds_part = number(18, 2);
  if (day_of_month < 1 || year_number < 0 || hours_part < 0 || hours_part > 23 || minutes_part < 0 ||
      minutes_part > 59 || seconds_part < 0 || seconds_part > 60) {
    return std::nullopt;
  }
  const year_month_day date{year{year_number}, month{static_cast<unsigned>(month_name - kMonths.begin() + 1)},
                            day{static_cast<unsigned>(day_of_month)}};
  if (!date.ok()) return std::nullopt;
  return sys_days(date) + hours(hours_part) + minutes(minutes_part) + seconds(seconds_part);
}

// At most kMaxDetailBytes of `text`, cut between two characters, valid UTF-8.
std::string shorten(std::string_view text) {
  text = trim(text);
  if (text.size() > kMaxDetailBytes) {
    std::size_t cut = kMaxDetailBytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) --cut;
    return replace_invalid_utf8(text.substr(0, cut)) + "...";
  }
  return replace_invalid_utf8(text);
}

std::string scalar_text(const Json& json) {
  if (json.is_string()) return json.get<std::string>();
  if (json.is_number_integer()) return std::to_string(json.get<std::int64_t>());
  return {};
}

// What an error body says, in the shapes the APIs use: OpenAI's and
// OpenRouter's {"error":{"message","type","code"}}, Anthropic's
// {"type":"error","error":{"type","message"}}, Ollama's {"error":"..."},
// vLLM's {"object":"error","message","type","code"}, and a list holding one
// of those (Gemini's OpenAI endpoint).
struct ErrorBody {
  std::string type;
  std::string code;
  std::string message;
  bool is_json = false;
};

ErrorBody read_error_body(std::string_view body) {
  ErrorBody out;
  Json json = Json::parse(body, nullptr, false);
  if (json.is_array() && !json.empty()) json = json.front();
  if (!json.is_object()) {
    out.message = std::string(body);
    return out;
  }
  out.is_json = true;
  const Json* error = &json;
  if (const auto found = json.find("error"); found != json.end()) {
    if (found->is_string()) {
      out.message = found->get<std::string>();
      return out;
    }
    if (found->is_object()) error = &*found;
  }
  if (const auto field = error->find("type"); field != error->end()) out.type = scalar_text(*field);
  if (const auto field = error->find("code"); field != error->end()) out.code = scalar_text(*field);
  if (const auto field = error->find("message"); field != error->end()) out.message = scalar_text(*field);
  if (out.message.empty() && out.type.empty() && out.code.empty()) out.message = std::string(body);
  return out;
}

bool mentions_any(const std::string& haystack, std::initializer_list<std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view needle) { return haystack.find(needle) != std::string::npos; });
}

bool is_context_length(const ErrorBody& error) {
  const std::string text = ascii_lower(error.type + ' ' + error.code + ' ' + error.message);
  return mentions_any(text, {"context_length_exceeded", "maximum context length", "prompt is too long",
                             "exceed_context_size", "exceeds the available context size", "context window",
                             "exceeds the context length", "exceeds maximum context length"});
}

bool is_quota(const ErrorBody& error) {
  const std::string text = ascii_lower(error.type + ' ' + error.code + ' ' + error.message);
  return mentions_any(text,
                      {"insufficient_quota", "billing", "credit balance is too low", "exceeded your current quota"});
}

FailureClass classify(int status, const ErrorBody& error) {
  // Whatever the status (some servers answer it with a 500): retrying the same prompt cannot help.
  if (is_context_length(error)) return FailureClass::context_length;
  if (status == 402 || (is_quota(error) && (status == 0 || (status >= 400 && status < 500))))
    return FailureClass::quota;
  const std::string kind = ascii_lower(error.type + ' ' + error.code);
  if (status == 404 || kind.find("model_not_found") != std::string::npos) return FailureClass::unknown_model;
  if (status == 429) return FailureClass::rate_limited;
  if (status == 503 || status == 529 || kind.find("overloaded") != std::string::npos) return FailureClass::overloaded;
  if (status >= 500) return FailureClass::server_error;
  if (status == 401 || status == 403) return FailureClass::authentication;
  if (status >= 400) return FailureClass::bad_request;
  if (kind.find("rate_limit") != std::string::npos) return FailureClass::rate_limited;
  return FailureClass::truncated;
}

// The bytes of an API key ('*' too: APIs echo keys half-masked, "sk-proj-****abcd").
bool is_key_byte(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '*';
}

// The bytes of a bearer token (RFC 6750's b64token).
bool is_token_byte(char c) noexcept {
  return is_key_byte(c) || c == '.' || c == '~' || c == '+' || c == '/' || c == '=';
}

}  // namespace

const std::string* find_header(const HttpHeaders& headers, std::string_view name) noexcept {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) return &value;
  }
  return nullptr;
}

milliseconds parse_retry_after(const HttpHeaders& headers, system_clock::time_point now) {
  if (const std::string* ms = find_header(headers, "retry-after-ms")) {
    if (const auto value = parse_number(*ms); value && *value < 1e12) return milliseconds(std::llround(*value));
  }
  if (const std::string* after = find_header(headers, "retry-after")) {
    if (const auto value = parse_number(*after); value && *value < 1e9) {
      return milliseconds(std::llround(*value * 1000));
    }
    if (const auto date = parse_http_date(*after)) {
      return std::max(milliseconds(0), duration_cast<milliseconds>(*date - now));
    }
  }
  return milliseconds(-1);
}

std::string mask_credentials(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const bool at_word = i == 0 || !is_token_byte(text[i - 1]);
    std::size_t prefix = 0;
    if (at_word && text.substr(i, 3) == "sk-") {
      prefix = 3;
    } else if (at_word && (text.substr(i, 7) == "Bearer " || text.substr(i, 7) == "bearer ")) {
      prefix = 7;
    }
    if (prefix != 0) {
      const auto in_secret = prefix == 3 ? is_key_byte : is_token_byte;
      std::size_t end = i + prefix;
      while (end < text.size() && in_secret(text[end])) ++end;
      if (end - (i + prefix) >= 4) {
        out.append(text.substr(i, prefix)).append("***");
        i = end;
        continue;
      }
    }
    out.push_back(text[i++]);
  }
  return out;
}

ProviderReply classify_failure(int status, std::string_view body, const HttpHeaders& headers,
                               system_clock::time_point now) {
  const ErrorBody error = read_error_body(body);
  std::string message = status != 0 ? "HTTP " + std::to_string(status) : std::string("error event after HTTP 200");
  // The API's code names the error best ("context_length_exceeded"); a numeric one repeats a status.
  const bool numeric_code = error.code.find_first_not_of("0123456789") == std::string::npos;
  const std::string& label = numeric_code ? error.type : error.code;
  if (!label.empty()) message += ' ' + shorten(label);
  const std::string detail = shorten(error.message);
  message += detail.empty() ? std::string(status != 0 ? " with an empty body" : "") : ": " + detail;
  ProviderReply reply = ProviderReply::failed({}, classify(status, error));
  reply.http_status = status;
  if (const std::string* id = find_header(headers, "x-request-id"))
    reply.request_id = shorten(*id);
  else if (const std::string* other = find_header(headers, "request-id"))
    reply.request_id = shorten(*other);
  if (!reply.request_id.empty()) message += " (request " + reply.request_id + ")";
  reply.error = mask_credentials(message);
  reply.retry_after = parse_retry_after(headers, now);
  return reply;
}

}  // namespace passepartout
