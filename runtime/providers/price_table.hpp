// PriceTable: what an LLM call costs, in US dollars per token, by model: the
// built-in prices of the presets' default models, or LiteLLM's price file.
// The JSON reader lives in the .cpp (it brings in nlohmann::json).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace passepartout {

// US dollars per token.
struct TokenPrice {
  double input = 0;
  double output = 0;
  double cache_read = 0;  // input tokens served from the prompt cache; equal to input when a source does not give it
};

// Prices by model name. A value: built once at start, copied into whoever
// prices calls; not synchronised (read it from any thread once built).
class PriceTable {
 public:
  // List prices, at the time of writing, of the presets' default models
  // (openai, anthropic, groq, gemini) and of gpt-4o and claude-3-5-haiku.
  // They go stale: operators keep them current with --price-table.
  static PriceTable builtin();

  // The built-in table with the entries of `file`, in LiteLLM's
  // model_prices_and_context_window.json format, added or replacing built-in
  // ones (per model). Errors name the file, and where they can its line:
  //   not_found, io_error   "<file>: cannot read: <reason>"
  //   limit_exceeded        a file over 64 MiB
  //   invalid_input         "<file>:<line>:<column>: <JSON syntax error>",
  //                         "<file>:1:1: expected a JSON object of models",
  //                         "<file>:<line>: model \"<name>\": <field> must be a non-negative number"
  static Result<PriceTable> read_litellm(const std::string& file);

  // The same from text already read: `base` with the text's entries laid
  // over it, `origin` naming the text in messages. Skipped, not refused: the
  // key "sample_spec" (LiteLLM's documentation of the format), entries that
  // are not objects, and entries with neither input_cost_per_token nor
  // output_cost_per_token (image, audio and embedding models priced per
  // image, second or request). A missing cache_read_input_token_cost is the
  // input price; a missing input or output cost is 0.
  static Result<PriceTable> parse_litellm(std::string_view text, const std::string& origin, PriceTable base);

  // The price of `model` as `provider` names it, nullptr when unknown. Tries
  // "<model>", then "<provider>/<model>" (LiteLLM's "groq/...", "gemini/..."),
  // then what follows model's last '/' (OpenRouter's "openai/gpt-4o-mini").
  // A dated snapshot such as "gpt-4o-mini-2024-07-18" is not matched to
  // "gpt-4o-mini": snapshots are priced apart (gpt-4o-2024-05-13 costs twice
  // gpt-4o), and a call priced wrong is worse than one counted as unpriced.
  // The pointer lives until the table is changed or destroyed.
  const TokenPrice* find(std::string_view provider, std::string_view model) const;

  // US dollars for a call: `input` counts every prompt token, `cached_input`
  // those of them read from the cache (TokenUsage's meaning), so
  //   (input - cached_input) * input price + cached_input * cache-read price + output * output price,
  // each count below 0 (unreported: -1) taken as 0.
  static double cost(const TokenPrice& price, std::int64_t input, std::int64_t cached_input, std::int64_t output);

  std::size_t size() const noexcept { return prices_.size(); }

  // Adds `model`'s price or replaces it.
  void set(std::string model, TokenPrice price);

 private:
  std::map<std::string, TokenPrice, std::less<>> prices_;
};

}  // namespace passepartout
