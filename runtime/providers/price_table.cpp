// PriceTable: the built-in list prices, LiteLLM's price file read over them
// with nlohmann::json, lookup by provider and model, and a call's cost.
#include "providers/price_table.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <utility>

#include "base/file_io.hpp"

namespace passepartout {
namespace {

using Json = nlohmann::json;

// LiteLLM's file is a few MiB; anything far larger is not a price table.
constexpr std::size_t kMaxFileBytes = std::size_t{64} * 1024 * 1024;

struct BuiltinPrice {
  std::string_view model;
  double input;  // US dollars per million tokens, as price lists give them
  double output;
  double cache_read;
};

// List prices at the time of writing; they change, and operators keep them
// current with --price-table (LiteLLM's file) rather than with a new build.
constexpr std::array<BuiltinPrice, 6> kBuiltin = {{
    {"gpt-4o-mini", 0.15, 0.60, 0.075},
    {"gpt-4o", 2.50, 10.00, 1.25},
    {"claude-3-5-sonnet-20241022", 3.00, 15.00, 0.30},
    {"claude-3-5-haiku-20241022", 0.80, 4.00, 0.08},
    {"llama-3.1-70b-versatile", 0.59, 0.79, 0.59},
    {"gemini-2.0-flash", 0.10, 0.40, 0.025},
}};

constexpr std::string_view kInputKey = "input_cost_per_token";
constexpr std::string_view kOutputKey = "output_cost_per_token";
constexpr std::string_view kCacheReadKey = "cache_read_input_token_cost";

// 1-based line and column of byte `offset` in `text`.
std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  const std::string_view before = text.substr(0, offset);
  const auto line = static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n')) + 1;
  const std::size_t last_newline = before.rfind('\n');
  const std::size_t column = last_newline == std::string_view::npos ? offset + 1 : offset - last_newline;
  return {line, column};
}

// nlohmann's message without what this file's message says itself: the
// exception's id, its own "line L, column C" (it counts differently), and
// the echo of the bytes it last read (which may be invalid UTF-8).
std::string syntax_reason(const Json::parse_error& error) {
  std::string reason = error.what();
  if (const std::size_t bracket = reason.find("] "); reason.rfind('[', 0) == 0 && bracket != std::string::npos) {
    reason.erase(0, bracket + 2);
  }
  if (const std::size_t colon = reason.find(": "); reason.rfind("parse error", 0) == 0 && colon != std::string::npos) {
    reason.erase(0, colon + 2);
  }
  if (const std::size_t echo = reason.find("; last read: '"); echo != std::string::npos) {
    const std::size_t expected = reason.rfind("'; expected ");
    reason.erase(echo, expected != std::string::npos && expected > echo ? expected + 1 - echo : std::string::npos);
  }
  return reason;
}

// A JSON key's text as parsed, from its raw text between the quotes.
std::string decode_key(std::string_view raw) {
  if (raw.find('\\') == std::string_view::npos) return std::string(raw);
  try {
    return Json::parse("\"" + std::string(raw) + "\"").get<std::string>();
  } catch (const Json::exception&) {
    return std::string(raw);
  }
}

// The 1-based line of the key `field` inside the object of the top-level key
// `model`, in `text` that parsed as a JSON object; its last occurrence, as
// nlohmann keeps the last of repeated keys. nlohmann gives no positions
// after a successful parse, hence this walk over the text; 0 if not found.
std::size_t field_line(std::string_view text, std::string_view model, std::string_view field) {
  std::size_t line = 1;
  std::size_t found = 0;
  int depth = 0;
  bool in_model = false;  // the last key at depth 1 was `model`
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
    } else if (c == '"') {
      const std::size_t start = i + 1;
      std::size_t end = start;
      while (end < text.size() && text[end] != '"') end += text[end] == '\\' ? std::size_t{2} : std::size_t{1};
      end = std::min(end, text.size());
      i = end;  // on the closing quote; JSON strings hold no raw newline
      std::size_t next = end + 1;
      while (next < text.size() &&
             (text[next] == ' ' || text[next] == '\t' || text[next] == '\r' || text[next] == '\n')) {
        ++next;
      }
      if (next >= text.size() || text[next] != ':') continue;  // a value, not a key
      const std::string_view raw = text.substr(start, end - start);
      if (depth == 1) {
        in_model = decode_key(raw) == model;
      } else if (depth == 2 && in_model && decode_key(raw) == field) {
        found = line;
      }
    }
  }
  return found;
}

}  // namespace

PriceTable PriceTable::builtin() {
  PriceTable table;
  for (const BuiltinPrice& p : kBuiltin) {
    table.set(std::string(p.model), TokenPrice{p.input / 1e6, p.output / 1e6, p.cache_read / 1e6});
  }
  return table;
}

Result<PriceTable> PriceTable::read_litellm(const std::string& file) {
  auto text = read_bounded_file(file, kMaxFileBytes);
  if (!text && text.error().code == ErrorCode::limit_exceeded) {
    return fail(ErrorCode::limit_exceeded, file + ": cannot read: larger than 64 MiB (" + text.error().message + ")");
  }
  if (!text) return fail(text.error().code, file + ": cannot read: " + text.error().message);
  return parse_litellm(*text, file, builtin());
}

Result<PriceTable> PriceTable::parse_litellm(std::string_view text, const std::string& origin, PriceTable base) {
  Json document;
  try {
    document = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& error) {
    // `byte` counts the bytes read, the offending one included.
    const auto [line, column] = line_column(text, error.byte > 0 ? error.byte - 1 : 0);
    return fail(ErrorCode::invalid_input,
                origin + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + syntax_reason(error));
  }
  if (!document.is_object()) return fail(ErrorCode::invalid_input, origin + ":1:1: expected a JSON object of models");

  for (const auto& item : document.items()) {
    const std::string& model = item.key();
    const Json& entry = item.value();
    if (model == "sample_spec" || !entry.is_object()) continue;
    if (!entry.contains(kInputKey) && !entry.contains(kOutputKey)) continue;
    // A cost given as text ("1.5e-07") is refused rather than read: LiteLLM
    // writes numbers, and a string there means the file is not what it seems.
    auto read_cost = [&](std::string_view key, double fallback) -> Result<double> {
      const auto found = entry.find(key);
      if (found == entry.end()) return fallback;
      if (found->is_number() && found->get<double>() >= 0) return found->get<double>();
      const std::size_t line = field_line(text, model, key);
      return fail(ErrorCode::invalid_input, origin + ":" + std::to_string(line > 0 ? line : 1) + ": model " +
                                                Json(model).dump() + ": " + std::string(key) +
                                                " must be a non-negative number");
    };
    auto input = read_cost(kInputKey, 0);
    if (!input) return fail(input.error().code, input.error().message);
    auto output = read_cost(kOutputKey, 0);
    if (!output) return fail(output.error().code, output.error().message);
    auto cache_read = read_cost(kCacheReadKey, *input);
    if (!cache_read) return fail(cache_read.error().code, cache_read.error().message);
    base.set(model, TokenPrice{*input, *output, *cache_read});
  }
  return base;
}

const TokenPrice* PriceTable::find(std::string_view provider, std::string_view model) const {
  if (model.empty()) return nullptr;
  if (const auto exact = prices_.find(model); exact != prices_.end()) return &exact->second;
  if (!provider.empty()) {
    std::string qualified;
    qualified.reserve(provider.size() + 1 + model.size());
    qualified.append(provider).append("/").append(model);
    if (const auto found = prices_.find(qualified); found != prices_.end()) return &found->second;
  }
  if (const std::size_t slash = model.rfind('/'); slash != std::string_view::npos && slash + 1 < model.size()) {
    if (const auto found = prices_.find(model.substr(slash + 1)); found != prices_.end()) return &found->second;
  }
  return nullptr;
}

double PriceTable::cost(const TokenPrice& price, std::int64_t input, std::int64_t cached_input, std::int64_t output) {
  // Clamped before the subtraction, so an unreported (-1) cache count is no
  // cache, and no pair of counts overflows.
  input = std::max<std::int64_t>(input, 0);
  cached_input = std::max<std::int64_t>(cached_input, 0);
  output = std::max<std::int64_t>(output, 0);
  const std::int64_t uncached = std::max<std::int64_t>(input - cached_input, 0);
  return static_cast<double>(uncached) * price.input + static_cast<double>(cached_input) * price.cache_read +
         static_cast<double>(output) * price.output;
}

void PriceTable::set(std::string model, TokenPrice price) { prices_.insert_or_assign(std::move(model), price); }

}  // namespace passepartout
