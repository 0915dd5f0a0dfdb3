// The budget on a running daemon with an openai endpoint (the loopback HTTP
// stub): a call over a cap is refused before any request reaches the
// endpoint, the user told which cap and when it resets; usage, cached tokens
// included, is priced from a LiteLLM-format price file and shown by
// `passepartout budget`, `status` and /metrics; and the ledger survives a
// kill -9 with a call in flight, counting that call once, at its worst case.
#include <signal.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "integration/daemon_process.hpp"
#include "support/http_client.hpp"
#include "support/http_stub.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using namespace std::chrono_literals;
using passepartout::testing::DaemonProcess;
using passepartout::testing::HttpStub;
using passepartout::testing::ProcessRun;
using passepartout::testing::StubChunk;
using passepartout::testing::StubResponse;
using passepartout::testing::TempDir;

namespace {

// stub-model at $1 per million input tokens, $2 per million output, $0.10 per million cached.
constexpr std::string_view kPrices = R"({
  "sample_spec": {"max_tokens": "LEGACY parameter", "input_cost_per_token": 0.0},
  "stub-model": {"max_tokens": 4096, "input_cost_per_token": 1e-06, "output_cost_per_token": 2e-06,
                 "cache_read_input_token_cost": 1e-07, "litellm_provider": "openai", "mode": "chat"}
})";

// A config with `local`, an openai endpoint at the stub, and `budget` (YAML lines) under budget:.
std::string write_config(const TempDir& dir, const HttpStub& stub, std::string_view budget) {
  std::ofstream(dir.path() / "prices.json") << kPrices;
  const auto file = dir.path() / "passepartout.yaml";
  std::ofstream(file) << "providers:\n"
                         "  - name: local\n"
                         "    kind: openai\n"
                         "    base_url: "
                      << stub.url("/v1")
                      << "\n"
                         "    model: stub-model\n"
                         "    api_key_env: LOCAL_KEY\n"
                         "    max_tokens: 1000\n"
                         "    timeouts: {connect: 10s, first_byte: 120s, idle: 60s}\n"
                         "budget:\n"
                      << budget;
  return file.string();
}

DaemonProcess::Options with_budget(const TempDir& dir, const std::string& config) {
  DaemonProcess::Options options;
  options.script = "rules: []\n";
  options.provider = "local";
  options.extra_args = {"--config", config, "--price-table", (dir.path() / "prices.json").string()};
  options.extra_env = {"LOCAL_KEY=sk-budget-test"};
  return options;
}

// A streamed answer whose usage chunk reports `input` prompt tokens, `cached` of them cached, and `output`.
StubResponse answer_with_usage(int input, int cached, int output) {
  StubResponse response;
  response.headers = {{"content-type", "text/event-stream"}};
  response.chunks.push_back(StubChunk{
      R"(data: {"id":"c1","object":"chat.completion.chunk","model":"stub-model","choices":[{"index":0,"delta":{"content":"priced answer"},"finish_reason":null}]})"
      "\n\n",
      0ms});
  response.chunks.push_back(StubChunk{
      R"(data: {"id":"c1","object":"chat.completion.chunk","model":"stub-model","choices":[],"usage":{"prompt_tokens":)" +
          std::to_string(input) + R"(,"completion_tokens":)" + std::to_string(output) +
          R"(,"prompt_tokens_details":{"cached_tokens":)" + std::to_string(cached) + "}}}\n\n",
      0ms});
  response.chunks.push_back(StubChunk{"data: [DONE]\n\n", 0ms});
  return response;
}

ProcessRun cli(const DaemonProcess& daemon, std::vector<std::string> args) {
  args.emplace_back("--socket");
  args.push_back(daemon.socket_path().string());
  return testing::run_passepartout(args, testing::hermetic_env(daemon.dir()));
}

nlohmann::json budget_json(const DaemonProcess& daemon) {
  const ProcessRun run = cli(daemon, {"budget", "--json"});
  INFO(run.out << run.err);
  REQUIRE(run.exit_status == 0);
  return nlohmann::json::parse(run.out);
}

}  // namespace

TEST_CASE("a call over the daily cap is refused before any request reaches the endpoint, naming the cap",
          "[integration][budget]") {
  HttpStub stub;
  TempDir dir;
  // The worst case of one call is at least 1000 output tokens at $2 per million: $0.002.
  DaemonProcess daemon(with_budget(dir, write_config(dir, stub, "  daily_usd: 0.001\n")));
  const std::string shown = testing::ask(daemon, "hello", "r1");
  INFO(shown << "\n" << daemon.log());
  CHECK(shown.find("Budget exhausted: $0.0010 remaining") != std::string::npos);
  CHECK(shown.find("(cap daily_usd, resets ") != std::string::npos);
  CHECK(stub.requests().empty());
  CHECK(stub.connections_accepted() == 0);

  const nlohmann::json budget = budget_json(daemon);
  REQUIRE(budget["caps"].size() == 1);
  CHECK(budget["caps"][0]["name"] == "daily_usd");
  CHECK(budget["caps"][0]["limit"] == Approx(0.001));
  CHECK(budget["caps"][0]["spent"] == Approx(0.0).margin(1e-12));
  CHECK(budget["refused"] == 1);
  const ProcessRun text = cli(daemon, {"budget"});
  CHECK(text.out.find("daily_usd") != std::string::npos);
  CHECK(text.out.find("$0.0010") != std::string::npos);
}

TEST_CASE("usage is priced from a LiteLLM file with cached tokens, and a kill -9 mid-call is counted once",
          "[integration][budget]") {
  HttpStub stub;
  stub.enqueue(answer_with_usage(1000, 800, 50));
  StubResponse stalled = StubResponse::text("{}");
  stalled.head_pause = 60s;  // a model slow to start: the call is in flight when the daemon dies
  stub.enqueue(stalled);
  TempDir dir;
  DaemonProcess::Options options = with_budget(dir, write_config(dir, stub, "  daily_usd: 5\n"));
  options.metrics_port = "0";
  // 200 fresh tokens at $1/M, 800 cached at $0.10/M, 50 out at $2/M.
  const double first_cost = 200 * 1e-6 + 800 * 1e-7 + 50 * 2e-6;
  DaemonProcess first(options);
  const std::string answered = testing::ask(first, "hello", "r1");
  INFO(answered << "\n" << first.log());
  CHECK(answered.find("priced answer") != std::string::npos);
  nlohmann::json budget = budget_json(first);
  REQUIRE(budget["today"].size() == 1);
  const nlohmann::json& row = budget["today"][0];
  CHECK(row["provider"] == "local");
  CHECK(row["model"] == "stub-model");
  CHECK(row["calls"] == 1);
  CHECK(row["input_tokens"] == 1000);
  CHECK(row["cached_tokens"] == 800);
  CHECK(row["output_tokens"] == 50);
  CHECK(row["usd"].get<double>() == Approx(first_cost));
  CHECK(budget["caps"][0]["spent"].get<double>() == Approx(first_cost));
  const ProcessRun status = cli(first, {"status"});
  CHECK(status.out.find("daily_usd $0.0004 of $5.0000") != std::string::npos);
  CHECK(status.out.find("local 80 % of 1000 input tokens this month") != std::string::npos);
  // /metrics: the cap and what the ledger counted.
  REQUIRE(first.metrics_port() != 0);
  testing::HttpConnection metrics(first.metrics_port());
  const std::string scraped = metrics.request("GET", "/metrics").body;
  CHECK(scraped.find("passepartout_budget_limit{cap=\"daily_usd\",unit=\"usd\"} 5") != std::string::npos);
  CHECK(scraped.find(
            "passepartout_usage_tokens_total{provider=\"local\",model=\"stub-model\",kind=\"cached_input\"} 800") !=
        std::string::npos);
  const ProcessRun text = cli(first, {"budget"});
  CHECK(text.out.find("1000 in (800 cached, 80 %), 50 out") != std::string::npos);

  // A second call, held by the endpoint, when the daemon is killed.
  testing::WireClient client = testing::WireClient::local(first.socket_path());
  client.expect_handshake();
  client.send(testing::user_input("hello again", "r2"));
  REQUIRE(stub.wait_requests(2, testing::kProcessWait));
  budget = budget_json(first);
  CHECK(budget["in_flight"] == 1);
  const double worst_case = budget["caps"][0]["reserved"].get<double>();
  CHECK(worst_case >= 1000 * 2e-6);  // at least max_tokens at the output price
  first.signal(SIGKILL);
  CHECK_FALSE(first.wait_exit().has_value());

  // The restarted daemon counts the dead call once, at its worst case, and the answered one as it was.
  DaemonProcess::Options restart = options;
  restart.state_from = first.state_dir();
  DaemonProcess second(std::move(restart));
  CHECK(second.log().find("call(s) in flight when the daemon last stopped") != std::string::npos);
  budget = budget_json(second);
  REQUIRE(budget["today"].size() == 1);
  CHECK(budget["today"][0]["calls"] == 2);
  CHECK(budget["today"][0]["estimated"] == 1);
  CHECK(budget["today"][0]["cached_tokens"] == 800);
  CHECK(budget["caps"][0]["spent"].get<double>() == Approx(first_cost + worst_case));
  CHECK(budget["in_flight"] == 0);
}
