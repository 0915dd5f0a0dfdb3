// The price table: built-in prices and their lookup by provider and model, a
// call's cost, and LiteLLM's price file read, with its errors located.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "providers/price_table.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::TempDir;

namespace {

constexpr double kPerMillion = 1e-6;

// LiteLLM's layout: the format's documentation, a chat model, a model priced
// per image, and one with no cache price.
const std::string kLiteLlm = R"({
  "sample_spec": {"max_tokens": "LEGACY parameter", "input_cost_per_token": 0.0, "litellm_provider": "one of https://docs.litellm.ai/docs/providers"},
  "gpt-4o-mini": {
    "max_tokens": 16384,
    "input_cost_per_token": 1.6e-07,
    "output_cost_per_token": 6.4e-07,
    "cache_read_input_token_cost": 8e-08,
    "litellm_provider": "openai",
    "mode": "chat"
  },
  "dall-e-3": {"mode": "image_generation", "output_cost_per_image": 0.04},
  "openrouter/mistralai/mistral-large": {"input_cost_per_token": 8e-06, "output_cost_per_token": 2.4e-05},
  "text-only-input": {"input_cost_per_token": 1e-06},
  "comment": "not an object"
})";

}  // namespace

TEST_CASE("builtin prices are found by model and by provider-qualified names", "[providers][price]") {
  const PriceTable table = PriceTable::builtin();
  CHECK(table.size() == 6);

  SECTION("exact model") {
    const TokenPrice* price = table.find("openai", "gpt-4o-mini");
    REQUIRE(price != nullptr);
    CHECK(price->input == Approx(0.15 * kPerMillion));
    CHECK(price->output == Approx(0.60 * kPerMillion));
    CHECK(price->cache_read == Approx(0.075 * kPerMillion));
    const TokenPrice* sonnet = table.find("anthropic", "claude-3-5-sonnet-20241022");
    REQUIRE(sonnet != nullptr);
    CHECK(sonnet->output == Approx(15.00 * kPerMillion));
  }
  SECTION("provider slash model as LiteLLM keys them") {
    PriceTable qualified;
    qualified.set("groq/llama-3.1-70b-versatile", TokenPrice{1, 2, 1});
    const TokenPrice* price = qualified.find("groq", "llama-3.1-70b-versatile");
    REQUIRE(price != nullptr);
    CHECK(price->output == 2);
    CHECK(qualified.find("openai", "llama-3.1-70b-versatile") == nullptr);
  }
  SECTION("openrouter style vendor slash model falls back to the model") {
    const TokenPrice* price = table.find("openrouter", "openai/gpt-4o-mini");
    REQUIRE(price != nullptr);
    CHECK(price == table.find("openai", "gpt-4o-mini"));
    const TokenPrice* flash = table.find("openrouter", "google/gemini-2.0-flash");
    REQUIRE(flash != nullptr);
    CHECK(flash->cache_read == Approx(0.025 * kPerMillion));
  }
}

TEST_CASE("an unknown or dated model has no price", "[providers][price]") {
  const PriceTable table = PriceTable::builtin();
  CHECK(table.find("openai", "gpt-9") == nullptr);
  CHECK(table.find("openai", "") == nullptr);
  CHECK(table.find("openrouter", "openai/") == nullptr);
  CHECK(table.find("openai", "gpt-4o-mini-2024-07-18") == nullptr);
  CHECK(PriceTable().find("openai", "gpt-4o-mini") == nullptr);
}

TEST_CASE("cost charges cached input at the cache-read price", "[providers][price]") {
  const TokenPrice price{2 * kPerMillion, 10 * kPerMillion, 0.5 * kPerMillion};
  CHECK(PriceTable::cost(price, 1'000'000, 0, 0) == Approx(2.0));
  CHECK(PriceTable::cost(price, 0, 0, 1'000'000) == Approx(10.0));
  // 600k uncached at $2/M, 400k cached at $0.5/M, 100k out at $10/M.
  CHECK(PriceTable::cost(price, 1'000'000, 400'000, 100'000) == Approx(1.2 + 0.2 + 1.0));

  SECTION("unreported counts are taken as zero") {
    CHECK(PriceTable::cost(price, 1'000'000, -1, -1) == Approx(2.0));
    CHECK(PriceTable::cost(price, -1, -1, -1) == 0.0);
  }
}

TEST_CASE("a LiteLLM file adds and replaces prices and skips what it cannot price", "[providers][price]") {
  auto read = PriceTable::parse_litellm(kLiteLlm, "prices.json", PriceTable::builtin());
  INFO((read ? std::string() : read.error().message));
  REQUIRE(read.has_value());
  const PriceTable& table = *read;
  // Six built-in, gpt-4o-mini replaced, two added.
  CHECK(table.size() == 8);
  CHECK(table.find("", "sample_spec") == nullptr);
  CHECK(table.find("openai", "dall-e-3") == nullptr);
  CHECK(table.find("", "comment") == nullptr);

  const TokenPrice* mini = table.find("openai", "gpt-4o-mini");
  REQUIRE(mini != nullptr);
  CHECK(mini->input == Approx(1.6e-07));
  CHECK(mini->output == Approx(6.4e-07));
  CHECK(mini->cache_read == Approx(8e-08));

  const TokenPrice* mistral = table.find("openrouter", "mistralai/mistral-large");
  REQUIRE(mistral != nullptr);
  CHECK(mistral->input == Approx(8e-06));
  CHECK(mistral->cache_read == Approx(8e-06));

  const TokenPrice* input_only = table.find("", "text-only-input");
  REQUIRE(input_only != nullptr);
  CHECK(input_only->output == 0);

  const TokenPrice* sonnet = table.find("anthropic", "claude-3-5-sonnet-20241022");
  REQUIRE(sonnet != nullptr);
  CHECK(sonnet->input == Approx(3.00 * kPerMillion));
}

TEST_CASE("a LiteLLM file with a syntax error is refused at its line and column", "[providers][price]") {
  const std::string text = "{\n  \"a\": {\"input_cost_per_token\": 1e-06},\n  oops\n}\n";
  auto read = PriceTable::parse_litellm(text, "prices.json", PriceTable());
  REQUIRE_FALSE(read.has_value());
  CHECK(read.error().code == ErrorCode::invalid_input);
  INFO(read.error().message);
  CHECK(read.error().message.rfind("prices.json:3:3: ", 0) == 0);
  CHECK(read.error().message.find("syntax error") != std::string::npos);
  CHECK(read.error().message.find("json.exception") == std::string::npos);
  CHECK(read.error().message.find("last read") == std::string::npos);
}

TEST_CASE("a LiteLLM cost given as a string is refused naming the model and the line", "[providers][price]") {
  // The key's text also stands before and after the model's own: as a model, nested deeper, in another model.
  const std::string text = R"({
  "input_cost_per_token": {"input_cost_per_token": 1e-06},
  "cheap": {
    "output_cost_per_token": 1e-06,
    "input_cost_per_token": "1e-06",
    "tiers": [{"input_cost_per_token": 5e-07}]
  },
  "zeta": {"input_cost_per_token": 1e-06}
})";
  auto read = PriceTable::parse_litellm(text, "prices.json", PriceTable());
  REQUIRE_FALSE(read.has_value());
  CHECK(read.error().code == ErrorCode::invalid_input);
  CHECK(read.error().message == "prices.json:5: model \"cheap\": input_cost_per_token must be a non-negative number");

  SECTION("a negative cache price too") {
    auto negative = PriceTable::parse_litellm(
        "{\"m\": {\"input_cost_per_token\": 1,\n\"cache_read_input_token_cost\": -1}}", "p.json", PriceTable());
    REQUIRE_FALSE(negative.has_value());
    CHECK(negative.error().message ==
          "p.json:2: model \"m\": cache_read_input_token_cost must be a non-negative number");
  }
}

TEST_CASE("a LiteLLM file that is not an object of models is refused", "[providers][price]") {
  auto read = PriceTable::parse_litellm("[1, 2]", "prices.json", PriceTable::builtin());
  REQUIRE_FALSE(read.has_value());
  CHECK(read.error().code == ErrorCode::invalid_input);
  CHECK(read.error().message == "prices.json:1:1: expected a JSON object of models");
}

TEST_CASE("read_litellm names a file it cannot read", "[providers][price]") {
  TempDir dir;
  const std::string file = (dir.path() / "missing.json").string();
  auto read = PriceTable::read_litellm(file);
  REQUIRE_FALSE(read.has_value());
  CHECK(read.error().code == ErrorCode::not_found);
  CHECK(read.error().message == file + ": cannot read: No such file or directory");
}

TEST_CASE("read_litellm lays a file over the built-in prices", "[providers][price]") {
  TempDir dir;
  const std::string file = (dir.path() / "model_prices_and_context_window.json").string();
  std::ofstream(file) << kLiteLlm;
  auto read = PriceTable::read_litellm(file);
  INFO((read ? std::string() : read.error().message));
  REQUIRE(read.has_value());
  CHECK(read->size() == 8);
  const TokenPrice* mini = read->find("openai", "gpt-4o-mini");
  REQUIRE(mini != nullptr);
  CHECK(mini->input == Approx(1.6e-07));
  CHECK(read->find("gemini", "gemini-2.0-flash") != nullptr);

  SECTION("its errors name it") {
    std::ofstream(file) << "{\n\"m\": {\"output_cost_per_token\": null}}";
    auto refused = PriceTable::read_litellm(file);
    REQUIRE_FALSE(refused.has_value());
    CHECK(refused.error().message == file + ":2: model \"m\": output_cost_per_token must be a non-negative number");
  }
}
