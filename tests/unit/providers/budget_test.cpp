// Budget (seed D10, A18): calendar windows, reservations against every cap
// that applies, settlement to the reported usage, refusals that name the cap
// and its reset, the ledger across a reopen (a reservation left open counted
// once at its worst case), the config's budget: map, and the cascade: a
// refused provider skipped for the next, nothing sent, and concurrent calls
// that never pass the cap.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/duration_text.hpp"
#include "base/executor.hpp"
#include "base/log.hpp"
#include "base/yaml_diagnostics.hpp"
#include "providers/budget.hpp"
#include "providers/budget_yaml.hpp"
#include "providers/cascade.hpp"
#include "support/async_wait.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::Awaited;
using passepartout::testing::CountDown;
using passepartout::testing::TempDir;

namespace {

// 2026-12-03T10:30:00Z, a Thursday.
constexpr std::int64_t kThursday = 1796293800000;
constexpr std::int64_t kDayMs = 86'400'000;

BudgetCap cap(BudgetUnit unit, double limit, BudgetPeriod::Kind kind = BudgetPeriod::Kind::daily,
              std::string provider = {}) {
  BudgetCap c;
  c.unit = unit;
  c.limit = limit;
  c.period = BudgetPeriod{kind};
  c.provider = std::move(provider);
  c.name = (c.provider.empty() ? "" : c.provider + ".") + c.period.text() + "_" + to_string(unit);
  return c;
}

std::shared_ptr<Budget> open_budget(const TempDir& dir, std::vector<BudgetCap> caps, PriceTable prices = {}) {
  BudgetConfig config;
  config.caps = std::move(caps);
  auto budget = Budget::open(dir.path() / "usage.sqlite3", std::move(config), std::move(prices));
  REQUIRE(budget);
  return *budget;
}

PriceTable one_price(std::string model, double input_per_m, double output_per_m) {
  PriceTable table;
  table.set(std::move(model), TokenPrice{input_per_m / 1e6, output_per_m / 1e6, input_per_m / 1e6 / 10});
  return table;
}

BudgetCall call_of(std::string_view provider, std::string_view model, std::int64_t input, std::int64_t output,
                   std::string_view session = {}) {
  return BudgetCall{provider, model, session, false, input, output};
}

TokenUsage usage(std::int64_t input, std::int64_t output, std::int64_t cached = -1) {
  TokenUsage u;
  u.input = input;
  u.output = output;
  u.cached_input = cached;
  return u;
}

}  // namespace

TEST_CASE("budget windows follow the UTC calendar: hour, day, Monday, month, and spans from the epoch",
          "[providers][budget]") {
  const auto [hour_start, hour_end] = BudgetPeriod{BudgetPeriod::Kind::hourly}.window(kThursday);
  CHECK(utc_timestamp(hour_start) == "2026-12-03T10:00:00Z");
  CHECK(utc_timestamp(hour_end) == "2026-12-03T11:00:00Z");
  const auto [day_start, day_end] = BudgetPeriod{BudgetPeriod::Kind::daily}.window(kThursday);
  CHECK(utc_timestamp(day_start) == "2026-12-03T00:00:00Z");
  CHECK(day_end - day_start == kDayMs);
  const auto [week_start, week_end] = BudgetPeriod{BudgetPeriod::Kind::weekly}.window(kThursday);
  CHECK(utc_timestamp(week_start) == "2026-11-30T00:00:00Z");  // the Monday before
  CHECK(utc_timestamp(week_end) == "2026-12-07T00:00:00Z");
  // A Monday is the start of its own week.
  CHECK(BudgetPeriod{BudgetPeriod::Kind::weekly}.window(week_start).first == week_start);
  const auto [month_start, month_end] = BudgetPeriod{BudgetPeriod::Kind::monthly}.window(kThursday);
  CHECK(utc_timestamp(month_start) == "2026-12-01T00:00:00Z");
  CHECK(utc_timestamp(month_end) == "2027-01-01T00:00:00Z");
  CHECK(utc_timestamp(BudgetPeriod{BudgetPeriod::Kind::monthly}.window(1772236800000).second) ==
        "2026-03-01T00:00:00Z");  // from 2026-02-28
  const BudgetPeriod thirty{BudgetPeriod::Kind::span, std::chrono::hours(24 * 30)};
  const auto [span_start, span_end] = thirty.window(kThursday);
  CHECK(span_start % (30 * kDayMs) == 0);
  CHECK(span_start <= kThursday);
  CHECK(span_end == span_start + 30 * kDayMs);
}

TEST_CASE("a reservation holds the worst case, settles to the usage, and a call past the cap is refused naming it",
          "[providers][budget]") {
  TempDir dir;
  // gpt-x: $1 per million in, $2 per million out.
  auto budget = open_budget(dir, {cap(BudgetUnit::usd, 0.01)}, one_price("gpt-x", 1, 2));

  Budget::Reservation first;
  REQUIRE_FALSE(budget->reserve(call_of("openai", "gpt-x", 1000, 1000), first, kThursday));  // $0.003
  CHECK(budget->report(kThursday).caps[0].reserved == Approx(0.003));
  budget->settle(first, usage(1000, 500));  // $0.002
  CHECK_FALSE(first);
  BudgetReport report = budget->report(kThursday);
  CHECK(report.caps[0].spent == Approx(0.002));
  CHECK(report.caps[0].reserved == Approx(0.0).margin(1e-12));
  CHECK(report.caps[0].resets_at_ms == kThursday - kThursday % kDayMs + kDayMs);

  // $0.008 left: a call whose worst case is $0.009 is refused, changing nothing.
  Budget::Reservation second;
  const auto refusal = budget->reserve(call_of("openai", "gpt-x", 1000, 4000), second, kThursday);
  REQUIRE(refusal);
  CHECK_FALSE(second);
  CHECK(refusal->cap == "daily_usd");
  CHECK(refusal->remaining == Approx(0.008));
  CHECK(refusal->requested == Approx(0.009));
  CHECK(refusal->message ==
        "Budget exhausted: $0.0080 remaining, $0.0090 requested (cap daily_usd, resets 2026-12-04T00:00:00Z)");
  CHECK(budget->report(kThursday).caps[0].reserved == Approx(0.0).margin(1e-12));
  CHECK(budget->report(kThursday).refusals == 1);

  // The next day the cap starts again.
  Budget::Reservation tomorrow;
  CHECK_FALSE(budget->reserve(call_of("openai", "gpt-x", 1000, 4000), tomorrow, kThursday + kDayMs));
  budget->release(tomorrow);
  CHECK(budget->report(kThursday + kDayMs).caps[0].spent == Approx(0.0).margin(1e-12));
}

TEST_CASE("cached input is priced at the cache-read price and a call without usage keeps its estimate, flagged",
          "[providers][budget]") {
  TempDir dir;
  auto budget = open_budget(dir, {cap(BudgetUnit::usd, 1.0)}, one_price("gpt-x", 10, 20));
  Budget::Reservation r;
  REQUIRE_FALSE(budget->reserve(call_of("openai", "gpt-x", 2000, 100, "s1"), r, kThursday));
  // 2000 in of which 1500 cached (a tenth of the price), 100 out.
  budget->settle(r, usage(2000, 100, 1500));
  BudgetReport report = budget->report(kThursday);
  const double expected = 500 * 10e-6 + 1500 * 1e-6 + 100 * 20e-6;
  CHECK(report.caps[0].spent == Approx(expected));
  REQUIRE(report.all_time.size() == 1);
  CHECK(report.all_time[0].cached_tokens == 1500);
  CHECK(report.all_time[0].input_tokens == 2000);
  CHECK(report.all_time[0].estimated == 0);

  Budget::Reservation unknown;
  REQUIRE_FALSE(budget->reserve(call_of("openai", "gpt-x", 300, 700), unknown, kThursday));
  budget->settle(unknown, TokenUsage{});
  report = budget->report(kThursday);
  CHECK(report.all_time[0].estimated == 1);
  CHECK(report.all_time[0].input_tokens == 2300);
  CHECK(report.all_time[0].output_tokens == 800);
}

TEST_CASE("caps apply by provider and by session, and a token cap counts input and output", "[providers][budget]") {
  TempDir dir;
  auto budget = open_budget(dir, {cap(BudgetUnit::tokens, 1000, BudgetPeriod::Kind::session),
                                  cap(BudgetUnit::tokens, 5000, BudgetPeriod::Kind::monthly, "openai")});
  Budget::Reservation a;
  REQUIRE_FALSE(budget->reserve(call_of("ollama", "llama3", 400, 400, "alice"), a, kThursday));
  budget->settle(a, usage(400, 400));
  // alice has 200 left; bob has his own 1000.
  Budget::Reservation b;
  auto refused = budget->reserve(call_of("ollama", "llama3", 100, 200, "alice"), b, kThursday);
  REQUIRE(refused);
  CHECK(refused->cap == "session_tokens");
  CHECK(refused->resets_at_ms == 0);
  CHECK(refused->message.find("(cap session_tokens, for this session)") != std::string::npos);
  CHECK_FALSE(budget->reserve(call_of("ollama", "llama3", 100, 200, "bob"), b, kThursday));
  // A call outside any session is held to the provider cap only.
  Budget::Reservation c;
  CHECK_FALSE(budget->reserve(call_of("openai", "m", 2000, 2000), c, kThursday));
  Budget::Reservation d;
  refused = budget->reserve(call_of("openai", "m", 500, 600), d, kThursday);
  REQUIRE(refused);
  CHECK(refused->cap == "openai.monthly_tokens");
  CHECK(refused->remaining == Approx(1000));
  budget->release(c);
  CHECK_FALSE(budget->reserve(call_of("openai", "m", 500, 600), d, kThursday));
}

TEST_CASE("a dollar cap refuses a remote model it cannot price and lets a local one through free",
          "[providers][budget]") {
  TempDir dir;
  auto budget = open_budget(dir, {cap(BudgetUnit::usd, 5)});
  Budget::Reservation r;
  const auto refused = budget->reserve(call_of("openai", "mystery-1", 10, 10), r, kThursday);
  REQUIRE(refused);
  CHECK(refused->message.find("mystery-1") != std::string::npos);
  CHECK(refused->message.find("--price-table") != std::string::npos);
  BudgetCall local = call_of("ollama", "llama3", 10, 10);
  local.local = true;
  REQUIRE_FALSE(budget->reserve(local, r, kThursday));
  budget->settle(r, usage(10, 10));
  const BudgetReport report = budget->report(kThursday);
  CHECK(report.caps[0].spent == Approx(0.0).margin(1e-12));
  REQUIRE(report.all_time.size() == 1);
  CHECK_FALSE(report.all_time[0].unpriced);

  // With no dollar cap, an unpriced model is counted in tokens and flagged.
  TempDir other;
  auto tokens_only = open_budget(other, {});
  REQUIRE_FALSE(tokens_only->reserve(call_of("openai", "mystery-1", 10, 10), r, kThursday));
  tokens_only->settle(r, usage(7, 3));
  const BudgetReport flagged = tokens_only->report(kThursday);
  REQUIRE(flagged.all_time.size() == 1);
  CHECK(flagged.all_time[0].unpriced);
  CHECK(flagged.all_time[0].input_tokens == 7);
}

TEST_CASE("the ledger survives a reopen, and a reservation a dead daemon left is counted once at its worst case",
          "[providers][budget]") {
  TempDir dir;
  TempDir after_crash;
  {
    auto budget = open_budget(dir, {cap(BudgetUnit::tokens, 10000)});
    Budget::Reservation settled;
    REQUIRE_FALSE(budget->reserve(call_of("p", "m", 100, 50, "s"), settled, kThursday));
    budget->settle(settled, usage(80, 20));
    // A second call in flight when the process dies: what a kill -9 leaves
    // on disk then is the database and its write-ahead log as they are now.
    Budget::Reservation in_flight;
    REQUIRE_FALSE(budget->reserve(call_of("p", "m", 300, 200, "s"), in_flight, kThursday));
    for (const char* suffix : {"", "-wal"}) {
      std::filesystem::copy_file(dir.path() / (std::string("usage.sqlite3") + suffix),
                                 after_crash.path() / (std::string("usage.sqlite3") + suffix));
    }
  }
  for (int restart = 0; restart < 2; ++restart) {
    auto again = open_budget(
        after_crash, {cap(BudgetUnit::tokens, 10000), cap(BudgetUnit::tokens, 10000, BudgetPeriod::Kind::session)});
    const BudgetReport report = again->report(kThursday);
    // 80 + 20 settled, 300 + 200 abandoned: once, however often it reopens.
    CHECK(report.caps[0].spent == Approx(600));
    REQUIRE(report.all_time.size() == 1);
    CHECK(report.all_time[0].calls == 2);
    CHECK(report.all_time[0].estimated == 1);
    CHECK(report.in_flight == 0);
    // The session's spend is read back too.
    Budget::Reservation r;
    const auto refused = again->reserve(call_of("p", "m", 9000, 1000, "s"), r, kThursday);
    REQUIRE(refused);
    CHECK(refused->remaining == Approx(9400));
  }
}

TEST_CASE("a ledger file of another kind is refused, naming it", "[providers][budget]") {
  TempDir dir;
  const auto file = dir.path() / "usage.sqlite3";
  {
    std::FILE* f = std::fopen(file.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("not a database at all, just text long enough to be looked at", f);
    std::fclose(f);
  }
  auto budget = Budget::open(file, {}, {});
  REQUIRE_FALSE(budget);
  CHECK(budget.error().message.find(file.string()) != std::string::npos);
}

TEST_CASE("the config's budget map reads periods, units, amounts and per-provider caps, and says what is wrong",
          "[providers][budget]") {
  const YAML::Node node = YAML::Load(
      "daily_usd: 5\n"
      "session_tokens: 200k\n"
      "usd: $100\n"
      "period: 30d\n"
      "per_provider:\n"
      "  openai: {monthly_usd: 50, hourly_tokens: 1.5m}\n");
  YamlProblems problems("cfg.yaml");
  BudgetConfig config;
  read_budget(node, problems, config);
  REQUIRE(problems.ok());
  REQUIRE(config.caps.size() == 5);
  CHECK(config.caps[0].name == "daily_usd");
  CHECK(config.caps[0].limit == 5);
  CHECK(config.caps[1].unit == BudgetUnit::tokens);
  CHECK(config.caps[1].period.kind == BudgetPeriod::Kind::session);
  CHECK(config.caps[1].limit == 200000);
  CHECK(config.caps[2].name == "usd_30d");
  CHECK(config.caps[2].period.kind == BudgetPeriod::Kind::span);
  CHECK(config.caps[2].period.span == std::chrono::hours(24 * 30));
  CHECK(config.caps[2].limit == 100);
  CHECK(config.caps[3].name == "openai.monthly_usd");
  CHECK(config.caps[3].provider == "openai");
  CHECK(config.caps[4].limit == 1500000);
  CHECK(config.caps[3].origin == "cfg.yaml:6:3");  // its provider's name
  CHECK(config.caps[0].origin == "cfg.yaml:1:1");

  YamlProblems bad("cfg.yaml");
  BudgetConfig ignored;
  read_budget(YAML::Load("daly_usd: 5\ndaily_tokens: lots\ntokens: 10\nweekly_usd: -1\n"), bad, ignored);
  const std::string message = bad.message();
  CHECK(message.find("cfg.yaml:1:1: unknown key 'daly_usd' in budget; did you mean 'daily_usd'?") != std::string::npos);
  CHECK(message.find("cfg.yaml:2:15: daily_tokens: 'lots' is not a number of tokens") != std::string::npos);
  CHECK(message.find("tokens needs a period in budget") != std::string::npos);
  CHECK(message.find("cfg.yaml:4:13: weekly_usd: '-1' is not an amount of US dollars") != std::string::npos);
}

// --- the cascade ------------------------------------------------------------------

namespace {

// Answers on another thread after `gate` opens, reporting `in` + `out` tokens; counts its calls.
class MeteredProvider final : public Provider {
 public:
  MeteredProvider(std::string name, std::int64_t max_output, bool local = false)
      : name_(std::move(name)), max_output_(max_output), local_(local) {}
  std::string_view name() const noexcept override { return name_; }
  std::string_view default_model() const noexcept override { return "m"; }
  bool is_local() const noexcept override { return local_; }
  std::int64_t max_output_tokens() const noexcept override { return max_output_; }
  void complete(const ProviderRequest& request, ProviderCompletion done) override {
    calls_.fetch_add(1);
    ProviderReply reply = ProviderReply::text("ok");
    reply.usage.input = request.prompt_tokens;
    reply.usage.output = max_output_;
    if (executor_ == nullptr) {
      done(std::move(reply));
      return;
    }
    executor_->post([done = std::move(done), reply = std::move(reply)]() mutable { done(std::move(reply)); });
  }
  int calls() const noexcept { return calls_.load(); }
  void answer_on(Executor* executor) { executor_ = executor; }

 private:
  std::string name_;
  std::int64_t max_output_;
  bool local_;
  std::atomic<int> calls_{0};
  Executor* executor_ = nullptr;
};

CascadeOutcome run(const Cascade& cascade, ProviderRequest request) {
  Awaited<CascadeOutcome> outcome;
  cascade.call(std::move(request), [&](CascadeOutcome o) { outcome.set(std::move(o)); });
  auto result = outcome.wait();
  REQUIRE(result.has_value());
  return std::move(*result);
}

ProviderRequest sized(std::int64_t prompt_tokens, std::string session = "s") {
  ProviderRequest request;
  request.prompt = "hello";
  request.prompt_tokens = prompt_tokens;
  request.session = std::move(session);
  return request;
}

}  // namespace

TEST_CASE("a provider over its cap is skipped before it is called and the next one answers",
          "[providers][budget][cascade]") {
  LogCapture log;
  TempDir dir;
  auto remote = std::make_shared<MeteredProvider>("remote", 100);
  auto local = std::make_shared<MeteredProvider>("local", 100, true);
  Cascade cascade({remote, local});
  cascade.set_budget(open_budget(dir, {cap(BudgetUnit::tokens, 250, BudgetPeriod::Kind::daily, "remote")}));

  CascadeOutcome first = run(cascade, sized(50));
  REQUIRE(first.ok());
  CHECK(first.provider == "remote");  // 150 of 250
  CascadeOutcome second = run(cascade, sized(50));
  REQUIRE(second.ok());
  CHECK(second.provider == "local");  // 150 more would pass the cap
  CHECK(remote->calls() == 1);
  CHECK(local->calls() == 1);
  REQUIRE(second.failures.size() == 1);
  CHECK(second.failures[0].failure == FailureClass::over_budget);
  REQUIRE(second.budget);
  CHECK(second.budget->cap == "remote.daily_tokens");
  CHECK(
      log.contains("PROBABILISTIC: Skipping remote (over budget: Budget exhausted: 100 tokens remaining, 150 "
                   "tokens requested (cap remote.daily_tokens, resets "));
}

TEST_CASE("an unmetered provider is neither held to the caps nor recorded", "[providers][budget][cascade]") {
  TempDir dir;
  auto free_one = std::make_shared<MeteredProvider>("scripted", 1000);
  Cascade cascade({free_one});
  BudgetConfig config;
  config.caps = {cap(BudgetUnit::tokens, 10)};
  config.unmetered = {"scripted"};
  auto budget = Budget::open(dir.path() / "usage.sqlite3", config, {});
  REQUIRE(budget);
  cascade.set_budget(*budget);
  CHECK(run(cascade, sized(500)).ok());
  const BudgetReport report = (*budget)->report();
  CHECK(report.all_time.empty());
  CHECK(report.caps[0].spent == Approx(0.0).margin(1e-12));
}

TEST_CASE("a call refused by every cap fails with the refusal and reaches no provider",
          "[providers][budget][cascade]") {
  TempDir dir;
  auto only = std::make_shared<MeteredProvider>("only", 1000);
  Cascade cascade({only});
  cascade.set_budget(open_budget(dir, {cap(BudgetUnit::tokens, 500, BudgetPeriod::Kind::session)}));
  CascadeOutcome outcome = run(cascade, sized(10));
  CHECK_FALSE(outcome.ok());
  CHECK(only->calls() == 0);
  REQUIRE(outcome.budget);
  CHECK(outcome.budget->requested == Approx(1010));
  REQUIRE(outcome.failures.size() == 1);
  CHECK(outcome.failures[0].failure == FailureClass::over_budget);
}

TEST_CASE("200 concurrent calls against a cap of 10 calls' worth: exactly 10 go out and the cap is never passed",
          "[providers][budget][cascade][concurrency]") {
  TempDir dir;
  ThreadPool answers(2);
  auto provider = std::make_shared<MeteredProvider>("p", 60);
  provider->answer_on(&answers);
  Cascade cascade({provider});
  auto budget = open_budget(dir, {cap(BudgetUnit::tokens, 1000)});  // a call: 40 in + 60 out
  cascade.set_budget(budget);

  constexpr int kCalls = 200;
  CountDown done(kCalls);
  std::atomic<int> answered{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int i = 0; i < kCalls / 4; ++i) {
        cascade.call(sized(40, ""), [&](CascadeOutcome outcome) {
          (outcome.ok() ? answered : refused).fetch_add(1);
          done.arrive();
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  REQUIRE(done.wait());
  answers.stop();
  CHECK(answered.load() == 10);
  CHECK(refused.load() == kCalls - 10);
  CHECK(provider->calls() == 10);
  const BudgetReport report = budget->report();
  CHECK(report.caps[0].spent == Approx(1000));
  CHECK(report.in_flight == 0);
}
