// Consensus on actions in a running daemon with three real endpoints (the
// loopback HTTP stub three times, each an OpenAI-compatible API): a proposal
// that acts is put to the other providers, concurrently, and only an agreed
// action reaches the gates. Agreement of all three and of two; three
// different actions (a disagreement, fed back as a rejection the next
// attempt's prompt shows); an answer whose arguments do not match the
// shell's schema (discarded, red-flagged); a slow provider (its call
// cancelled once two agree: the stub sees its connection closed);
// arguments equal up to key order and number form; ahead-by-k stopping as
// soon as it is decided; plain chat staying one call. Every command is
// harmless (echo) should a gate ever let one through.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "integration/daemon_process.hpp"
#include "integration/model_exchange.hpp"
#include "support/http_client.hpp"
#include "support/http_stub.hpp"
#include "support/loopback.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using namespace passepartout::testing;

std::string endpoint(std::string_view name, const HttpStub& stub) {
  return "  - name: " + std::string(name) + "\n    kind: openai\n    base_url: " + stub.url("/v1") +
         "\n    model: " + std::string(name) +
         "-model\n    stream: false\n"
         "    timeouts: {connect: 2s, first_byte: 30s, idle: 30s}\n";
}

StubResponse shell(std::string_view command) {
  return call_answer("openai", "call_1", "shell", shell_arguments(command));
}

// Three endpoints a, b and c (the cascade in that order unless `cascade`
// says otherwise) and the daemon, with `consensus` (YAML) in its config
// (none when empty).
struct Voters {
  HttpStub a;
  HttpStub b;
  HttpStub c;
  TempDir dir;
  std::unique_ptr<DaemonProcess> daemon;

  explicit Voters(std::string_view consensus, std::string_view cascade = "a, b, c", std::string_view more = "") {
    const auto config = dir.path() / "passepartout.yaml";
    std::ofstream(config) << "providers:\n"
                          << endpoint("a", a) << endpoint("b", b) << endpoint("c", c) << "provider_cascade: " << cascade
                          << "\n"
                          << (consensus.empty() ? std::string() : "consensus:\n" + std::string(consensus)) << more;
    DaemonProcess::Options options;
    options.script = "rules: []\n";
    std::string order(cascade);
    order.erase(std::remove(order.begin(), order.end(), ' '), order.end());
    options.provider = order;
    options.extra_args = {"--config", config.string()};
    options.metrics_port = "0";
    daemon = std::make_unique<DaemonProcess>(options);
  }

  // What each endpoint answers every request with.
  void answer(const StubResponse& to_a, const StubResponse& to_b, const StubResponse& to_c) {
    a.set_default(to_a);
    b.set_default(to_b);
    c.set_default(to_c);
  }
  void answer_all(const StubResponse& to_each) { answer(to_each, to_each, to_each); }

  json status(const char* command = "status") const {
    const auto env = hermetic_env(daemon->dir());
    const auto run = run_passepartout({command, "--json", "--socket", daemon->socket_path().string()}, env);
    INFO(run.out << run.err);
    REQUIRE(run.exit_status == 0);
    return json::parse(run.out);
  }
};

// The command the approval the frames announce would run ("" when none asks).
std::string asked_command(const std::vector<Value>& frames) {
  for (const Value& frame : frames) {
    if (frame.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED")) {
      return std::string(frame.path({"PAYLOAD", "ACTION", "PAYLOAD", "CMD"}).text());
    }
  }
  return {};
}

}  // namespace

TEST_CASE("consensus: three agree and the action reaches the gates, while plain chat stays one call",
          "[integration][consensus][concurrency]") {
  Voters v("  providers: [a, b, c]\n  quorum: 2\n");
  v.a.enqueue(text_answer("openai", "Hello there."));
  const auto hello = chat(*v.daemon, "hello", "s1", "r1");
  INFO(printed(hello));
  CHECK(printed(hello).find("Hello there.") != std::string::npos);
  CHECK(v.a.requests().size() == 1);
  CHECK(v.b.requests().empty());  // a reply does not act: no round
  CHECK(v.c.requests().empty());

  v.answer_all(shell("echo agreed"));
  const auto frames = chat(*v.daemon, "print agreed with the shell", "s1", "r2");
  INFO(printed(frames) << v.daemon->log());
  CHECK(asked_command(frames) == "echo agreed");  // the gates saw it, and ask a human
  CHECK(v.a.requests().size() == 2);
  // b and c were asked at once; the first to agree decided, and the other
  // may have been cancelled before its request went out.
  CHECK(v.b.requests().size() + v.c.requests().size() >= 1);
  CHECK(v.b.requests().size() <= 1);
  CHECK(v.c.requests().size() <= 1);
  CHECK(v.daemon->wait_for_log("consensus: 2 of"));
  const json status = v.status();
  REQUIRE(status["consensus"].size() == 1);
  CHECK(status["consensus"][0]["providers"] == "a,b,c");
  CHECK(status["consensus"][0]["agreed"] == 1);
  CHECK(status["consensus"][0]["disagreed"] == 0);

  REQUIRE(v.daemon->metrics_port() != 0);
  HttpConnection metrics(v.daemon->metrics_port());
  const std::string scraped = metrics.request("GET", "/metrics").body;
  INFO(scraped);
  CHECK(scraped.find("passepartout_consensus_rounds_total{providers=\"a,b,c\",outcome=\"agreed\"} 1") !=
        std::string::npos);
  CHECK(scraped.find("passepartout_consensus_calls_total{providers=\"a,b,c\",outcome=\"made\"} ") != std::string::npos);
}

TEST_CASE("a signal that asks for consensus gets it with none configured: a majority of the cascade",
          "[integration][consensus][concurrency]") {
  Voters v("");
  v.answer(shell("echo asked"), shell("echo asked"), shell("echo other"));
  WireClient client = WireClient::tcp(v.daemon->port());
  client.expect_handshake();
  client.send("(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"s1\" :CONSENSUS T) :AUTH \"" + v.daemon->token() +
              "\" :REQUEST-ID \"r1\" :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"print asked\"))");
  std::vector<Value> frames;
  for (int i = 0; i < 64; ++i) {
    frames.push_back(client.expect_frame());
    if (frames.back().at("REQUEST-ID").text() == "r1") break;
  }
  INFO(printed(frames) << v.daemon->log());
  CHECK(asked_command(frames) == "echo asked");
  CHECK(v.b.requests().size() == 1);  // every provider asked at once, not after a first answer
  CHECK(v.c.requests().size() <= 1);
  CHECK(v.daemon->wait_for_log("consensus (quorum 2 of a, b, c) on this proposal"));
}

TEST_CASE("consensus: two of three agree, and the agreed action is the one the gates see",
          "[integration][consensus][concurrency]") {
  Voters v("  providers: [a, b, c]\n  quorum: 2\n");
  v.answer(shell("echo one"), shell("echo two"), shell("echo one"));
  const auto frames = chat(*v.daemon, "print something", "s1", "r1");
  INFO(printed(frames) << v.daemon->log());
  CHECK(asked_command(frames) == "echo one");
  // c's vote decided it; b was asked too, and may have been cancelled before its request went out.
  CHECK(v.c.requests().size() == 1);
  CHECK(v.b.requests().size() <= 1);
  CHECK(v.status()["consensus"][0]["agreed"] == 1);
}

TEST_CASE("consensus: every call of a round is reserved against the budget and recorded in the ledger",
          "[integration][consensus][concurrency]") {
  // Quorum 3 of 3: no call is cancelled, so each one settles.
  Voters v("  providers: [a, b, c]\n  quorum: 3\n", "a, b, c", "budget:\n  daily_tokens: 1m\n");
  v.answer_all(shell("echo metered"));
  const auto frames = chat(*v.daemon, "print metered", "s1", "r1");
  INFO(printed(frames) << v.daemon->log());
  CHECK(asked_command(frames) == "echo metered");
  const json budget = v.status("budget");
  INFO(budget.dump());
  REQUIRE(budget["today"].size() == 3);  // one row per provider
  for (const json& row : budget["today"]) CHECK(row["calls"] == 1);
  CHECK(budget["caps"][0]["spent"].get<double>() > 0);
}

TEST_CASE("consensus: when all three differ the disagreement is fed back and the next prompt shows the votes",
          "[integration][consensus][concurrency]") {
  Voters v("  providers: [a, b, c]\n  quorum: 2\n");
  v.answer(shell("echo one"), shell("echo two"), shell("echo three"));
  const auto frames = chat(*v.daemon, "print something", "s1", "r1");
  INFO(printed(frames) << v.daemon->log());
  CHECK(asked_command(frames).empty());  // nothing reached a human, nothing ran
  CHECK(printed(frames).find("The models did not agree on an action (quorum 2 of a, b, c)") != std::string::npos);
  // Three attempts, each a round of three calls.
  REQUIRE(v.a.requests().size() == 3);
  CHECK(v.b.requests().size() == 3);
  CHECK(v.c.requests().size() == 3);
  // The second attempt's prompt carries the first's consensus entry: the competing actions and their votes.
  const std::string second = v.a.requests()[1].body;
  CHECK(second.find(":GATE \\\"consensus\\\"") != std::string::npos);
  CHECK(second.find(":VOTES ((:ACTION (:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \\\"echo one\\\"") !=
        std::string::npos);
  CHECK(second.find(":PROVIDERS (\\\"b\\\")") != std::string::npos);
  const json status = v.status();
  CHECK(status["consensus"][0]["disagreed"] == 3);
  CHECK(status["consensus"][0]["agreed"] == 0);
}

TEST_CASE("consensus: an answer whose arguments do not match the shell's schema is discarded before it votes",
          "[integration][consensus][concurrency]") {
  Voters v("  providers: [a, b, c]\n  quorum: 2\n", "c, a, b");  // c answers first: its answer opens the round
  v.answer(shell("echo valid"), shell("echo valid"),
           call_answer("openai", "call_1", "shell", json{{"cmd", 42}, {"explanation", "a number"}}));
  const auto frames = chat(*v.daemon, "print valid", "s1", "r1");
  INFO(printed(frames) << v.daemon->log());
  CHECK(asked_command(frames) == "echo valid");
  CHECK(
      v.daemon->wait_for_log("c's answer does not vote: its payload does not match the actuator's schema: "
                             "/cmd: expected string, got integer"));
  const json status = v.status();
  REQUIRE(status["consensus"].size() == 1);
  CHECK(status["consensus"][0]["providers"] == "a,b,c");
  REQUIRE(status["consensus"][0]["red_flags"].size() == 1);
  CHECK(status["consensus"][0]["red_flags"][0]["provider"] == "c");
  CHECK(status["consensus"][0]["red_flags"][0]["count"] == 1);
  CHECK(status["consensus"][0]["agreed"] == 1);
}

TEST_CASE("consensus: once two agree the slow provider's call is cancelled, its connection closed",
          "[integration][consensus][concurrency]") {
  Voters v("  providers: [a, b, c]\n  quorum: 2\n");
  // Equal up to key order, number form, the explanation and the command's surrounding blanks.
  v.a.set_default(call_answer(
      "openai", "call_1", "shell",
      json{{"cmd", "echo same"}, {"explanation", "Print a word to show the shell works."}, {"timeout", 5}}));
  v.b.set_default(call_answer(
      "openai", "call_1", "shell",
      json{{"timeout", 5.0}, {"explanation", "Show the shell answers, in other words."}, {"cmd", "  echo same "}}));
  StubResponse slow = shell("echo late");
  slow.head_pause = 60s;  // never answers within the test
  v.c.set_default(slow);
  const auto frames = chat(*v.daemon, "print same", "s1", "r1");
  INFO(printed(frames) << v.daemon->log());
  CHECK(asked_command(frames) == "echo same");
  // c's call was cancelled: its connection is closed, or, when b agreed
  // before c's request went out, it never left.
  if (v.c.wait_requests(1, 5s)) CHECK(v.c.wait_connections_closed(1, 10s));
  const json status = v.status();
  CHECK(status["consensus"][0]["agreed"] == 1);
  CHECK(status["consensus"][0]["cancelled"] == 1);
}

TEST_CASE("consensus: ahead-by-k stops as soon as one action is k votes ahead",
          "[integration][consensus][concurrency]") {
  Voters v("  providers: [a, b, c]\n  ahead_by: 2\n  max_calls: 5\n");
  v.answer_all(shell("echo ahead"));
  const auto frames = chat(*v.daemon, "print ahead", "s1", "r1");
  INFO(printed(frames) << v.daemon->log());
  CHECK(asked_command(frames) == "echo ahead");
  CHECK(v.a.requests().size() == 1);  // the proposal: one vote
  CHECK(v.b.requests().size() == 1);  // the second: two ahead, decided
  CHECK(v.c.requests().empty());
  CHECK(v.status()["consensus"][0]["calls"] == 2);
}

TEST_CASE("consensus on every proposal: a reply too is put to the providers at once",
          "[integration][consensus][concurrency]") {
  Voters v("  providers: [a, b, c]\n  quorum: 2\n  when: always\n");
  v.answer(text_answer("openai", "From a."), text_answer("openai", "From b."), text_answer("openai", "From c."));
  const auto frames = chat(*v.daemon, "hello", "s1", "r1");
  INFO(printed(frames) << v.daemon->log());
  // Replies agree (a vote is about what is done); the first voter's words are the answer.
  const std::string text = printed(frames);
  CHECK((text.find("From a.") != std::string::npos || text.find("From b.") != std::string::npos ||
         text.find("From c.") != std::string::npos));
  // All three asked at once; two replies decide, the third may be cancelled before it goes out.
  CHECK(v.a.requests().size() + v.b.requests().size() + v.c.requests().size() >= 2);
  CHECK(v.status()["consensus"][0]["agreed"] == 1);
}

}  // namespace passepartout
