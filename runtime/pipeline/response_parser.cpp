// Response parsing: the tool-call path, the s-expression path through the
// safe reader, and the plain-text message every other answer becomes.
#include "pipeline/response_parser.hpp"

#include <optional>
#include <utility>
#include <vector>

#include "base/utf8.hpp"
#include "value/json_bridge.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout {
namespace {

using namespace key_literals;

constexpr std::string_view kFence = "```";

bool is_language_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '_';
}

// Length of an opening fence line at `at` ("```lang" and its line break), or 0.
std::size_t opening_fence(std::string_view text, std::size_t at) {
  if (text.substr(at, kFence.size()) != kFence) return 0;
  std::size_t i = at + kFence.size();
  while (i < text.size() && is_language_char(text[i])) ++i;
  if (i < text.size() && text[i] == '\r') ++i;
  if (i < text.size() && text[i] == '\n') return i + 1 - at;
  return 0;
}

// Length of a line break and closing fence at `at` ("\n```" ending its line), or 0.
std::size_t closing_fence(std::string_view text, std::size_t at) {
  std::size_t i = at;
  if (i < text.size() && text[i] == '\r') ++i;
  if (i >= text.size() || text[i] != '\n') return 0;
  ++i;
  if (text.substr(i, kFence.size()) != kFence) return 0;
  const std::size_t end = i + kFence.size();
  const bool ends_line =
      end == text.size() || text[end] == '\n' || (text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n');
  return ends_line ? end - at : 0;
}

Value message_action(std::string text) {
  if (text.empty()) text = kNoResponse;
  return Value::plist({{"TYPE", Value::keyword("REQUEST")},
                       {"PAYLOAD", Value::plist({{"ACTION", Value::keyword("MESSAGE")},
                                                 {"TEXT", Value::string(text)},
                                                 {"EXPLANATION", Value::string(kProbabilisticExplanation)}})}});
}

// NIL or a list of key/value pairs with keyword keys.
bool is_plist(const Value& value) {
  if (value.is_nil()) return true;
  const std::span<const Value> items = value.items();
  if (!value.is_list() || items.size() % 2 != 0) return false;
  for (std::size_t i = 0; i < items.size(); i += 2) {
    if (!items[i].is_keyword()) return false;
  }
  return true;
}

bool is_blank(std::string_view text) { return text.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// D11 step 2, with Decision 5: the first call only, as a proper plist aimed
// at the tool actuator, or, for a function the offer says is an actuator, at
// that actuator with the arguments as its payload.
Value tool_call_action(const Value& calls, const Offer* offer, std::string* problem) {
  auto malformed = [problem](std::string text) {
    if (problem != nullptr) *problem = text;
    return message_action(std::move(text));
  };
  const std::span<const Value> items = calls.items();
  // A single call given without its list is taken as the list of one.
  const Value& first = !items.empty() && items[0].is_keyword() ? calls : items.front();
  const Value* call = &first;
  if (call->get("NAME") == nullptr && call->at("FUNCTION").is_list()) call = &call->at("FUNCTION");

  const Value& name = call->at("NAME");
  const bool named = (name.is_string() || name.is_symbol() || name.is_keyword()) && !name.text().empty();
  if (!named) return malformed("The model asked for a tool call without a tool name; nothing was run.");
  const std::string tool(name.text());

  Value args = call->at("ARGUMENTS");
  if (args.is_string()) {
    if (is_blank(args.text())) {
      args = Value();
    } else {
      auto parsed = json_to_value(args.text());
      if (!parsed) {
        return malformed("The model asked for tool '" + tool + "' with arguments that are not valid JSON (" +
                         parsed.error().message + "); nothing was run.");
      }
      args = std::move(*parsed);
    }
  }
  if (!is_plist(args)) {
    return malformed("The model asked for tool '" + tool +
                     "' with arguments that are not an object of named values; nothing was run.");
  }
  if (offer != nullptr) {
    if (const OfferedFunction* function = offer->find_native(tool)) return Offer::action_for_call(*function, args);
  }
  return Value::plist({{"TYPE", Value::keyword("REQUEST")},
                       {"TARGET", Value::keyword("TOOL")},
                       {"PAYLOAD", Value::plist({{"TOOL", Value::string(tool)},
                                                 {"ARGS", args},
                                                 {"EXPLANATION", Value::string(kFunctionCallingExplanation)}})}});
}

// D11 step 4 for a datum that read as a list (NIL included).
Value form_action(const Value& form) {
  Value normalized = plist_keywords_normalize(form);
  const Value& payload = normalized.at("PAYLOAD"_key);
  if (payload.is_list() && !payload.at("EXPLANATION"_key).is_nil()) return normalized;

  std::vector<Value> new_payload{Value::keyword("EXPLANATION"), Value::string(kProbabilisticExplanation)};
  if (payload.is_list()) new_payload.insert(new_payload.end(), payload.items().begin(), payload.items().end());
  const Value rest = normalized.without("PAYLOAD");
  std::vector<Value> action{Value::keyword("PAYLOAD"), Value::list(new_payload)};
  action.insert(action.end(), rest.items().begin(), rest.items().end());
  return Value::list(action);
}

}  // namespace

namespace {

constexpr std::string_view kSpace = " \t\r\n";

// `text` without leading and trailing blanks: what markdown_strip gives text
// without fences.
std::string_view trim_blank(std::string_view text) {
  const std::size_t begin = text.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  return text.substr(begin, text.find_last_not_of(kSpace) - begin + 1);
}

}  // namespace

std::string markdown_strip(std::string_view text) {
  if (text.find(kFence) == std::string_view::npos) return std::string(trim_blank(text));  // the common case
  std::string opened;
  opened.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (i == 0 || text[i - 1] == '\n') {
      if (const std::size_t fence = opening_fence(text, i)) {
        i += fence;
        continue;
      }
    }
    opened.push_back(text[i++]);
  }

  std::string closed;
  closed.reserve(opened.size());
  for (std::size_t i = 0; i < opened.size();) {
    if (const std::size_t fence = closing_fence(opened, i)) {
      i += fence;
      continue;
    }
    if (std::string_view(opened).substr(i, kFence.size()) == kFence) {
      i += kFence.size();
      continue;
    }
    closed.push_back(opened[i++]);
  }

  return std::string(trim_blank(closed));
}

Value plist_keywords_normalize(const Value& form) {
  if (!form.is_list()) return form;
  const std::span<const Value> items = form.items();
  bool changed = false;
  for (std::size_t i = 0; i < items.size(); i += 2) changed = changed || items[i].is_symbol();
  if (!changed) return form;
  std::vector<Value> normalized(items.begin(), items.end());
  for (std::size_t i = 0; i < normalized.size(); i += 2) {
    if (normalized[i].is_symbol()) normalized[i] = Value::keyword(normalized[i].text());
  }
  return Value::list(normalized);
}

namespace {

Value parse_text(std::string_view text, std::string* problem) {
  std::string repaired;  // only for a reply that is not valid UTF-8
  if (!is_valid_utf8(text)) {
    repaired = replace_invalid_utf8(text);
    text = repaired;
  }
  std::string stripped;  // only for a reply with fences; most are merely trimmed
  std::string_view cleaned;
  if (text.find(kFence) == std::string_view::npos) {
    cleaned = trim_blank(text);
  } else {
    stripped = markdown_strip(text);
    cleaned = stripped;
  }
  if (!cleaned.empty() && (cleaned.front() == '(' || cleaned.front() == '[')) {
    auto form = read_sexp_prefix(cleaned, nullptr, ReaderLimits{}, Utf8::checked);  // checked or repaired above
    if (form && form->is_sequence()) return form_action(*form);
    if (problem != nullptr) {
      *problem = form ? std::string("the answer opens a list but reads as no list")
                      : "the answer opens a list that does not read: " + form.error().message;
    }
  }
  return message_action(std::string(cleaned));
}

}  // namespace

Value parse_response_text(std::string_view text) { return parse_text(text, nullptr); }

Value parse_response(const ProviderReply& reply, const Offer* offer, std::string* problem) {
  switch (reply.kind) {
    case ProviderReply::Kind::tool_calls:
      if (reply.tool_calls.is_list()) return tool_call_action(reply.tool_calls, offer, problem);
      return parse_text(reply.content, problem);
    case ProviderReply::Kind::content:
      return parse_text(reply.content, problem);
    case ProviderReply::Kind::failure:
      return message_action(replace_invalid_utf8(reply.error));
  }
  return message_action(std::string());
}

}  // namespace passepartout
