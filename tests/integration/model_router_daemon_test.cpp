// The bundled model-router in a running daemon with two real endpoints (the
// loopback HTTP stub twice): one the operator marked `local: true`, one
// remote. A prompt carrying the privacy tag reaches only the local one — the
// remote endpoint sees no request at all, then or for that session later —
// and when the local one is down the call fails instead of falling back.
// `status` shows the session local-only, and the local provider as local.
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "integration/daemon_process.hpp"
#include "support/http_stub.hpp"
#include "support/loopback.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"

using namespace passepartout;
using namespace std::chrono_literals;
using passepartout::testing::DaemonProcess;
using passepartout::testing::HttpStub;
using passepartout::testing::StubChunk;
using passepartout::testing::StubResponse;
using passepartout::testing::TempDir;
using passepartout::testing::WireClient;

namespace {

StubResponse answer(std::string_view text) {
  return StubResponse::text(
      R"({"id":"c1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":")" +
      std::string(text) + R"("},"finish_reason":"stop"}]})");
}

std::string endpoint(std::string_view name, const HttpStub& stub, bool local) {
  return "  - name: " + std::string(name) + "\n    kind: openai\n    base_url: " + stub.url("/v1") +
         "\n    model: " + std::string(name) + "-model\n    stream: false\n    local: " + (local ? "true" : "false") +
         "\n    timeouts: {connect: 2s, first_byte: 10s, idle: 10s}\n";
}

std::string chat(std::string_view text, std::string_view session, std::string_view token) {
  return "(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"" + std::string(session) + "\") :AUTH \"" +
         std::string(token) + "\" :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"" + std::string(text) + "\"))";
}

// The first frame that is no stream chunk.
Value reply_to(WireClient& client) {
  for (;;) {
    Value frame = client.expect_frame();
    if (frame.path({"TYPE"}).text() != "STREAM-CHUNK") return frame;
  }
}

}  // namespace

TEST_CASE("a private prompt reaches only the local endpoint, never the remote one, and fails closed",
          "[integration][providers][router]") {
  HttpStub remote;
  HttpStub nearby;
  remote.set_default(answer("from remote"));
  nearby.set_default(answer("from nearby"));
  TempDir dir;
  const auto config = dir.path() / "passepartout.yaml";
  std::ofstream(config) << "providers:\n"
                        << endpoint("remote", remote, false) << endpoint("nearby", nearby, true)
                        << "provider_cascade: remote, nearby\n";
  DaemonProcess::Options options;
  options.provider = "remote,nearby";
  options.extra_args = {"--config", config.string()};
  DaemonProcess daemon(options);
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();

  // Nothing private: the remote endpoint, asked first, answers.
  client.send(chat("what is the weather", "open", daemon.token()));
  CHECK(to_sexp(reply_to(client)).find("from remote") != std::string::npos);
  REQUIRE(remote.requests().size() == 1);

  // The privacy tag: only the local endpoint is asked.
  client.send(chat("summarise my @personal notes", "private", daemon.token()));
  const Value reply = reply_to(client);
  INFO(to_sexp(reply) << "\n" << daemon.log());
  CHECK(to_sexp(reply).find("from nearby") != std::string::npos);
  CHECK(remote.requests().size() == 1);
  REQUIRE(nearby.requests().size() == 1);
  CHECK(nearby.requests()[0].body.find("@personal") != std::string::npos);
  CHECK(daemon.wait_for_log("session private is local-only from now on"));

  // The local endpoint down: the call fails; the remote one is not asked,
  // though this turn carries nothing private (the session stays local-only).
  nearby.set_default(StubResponse::text("{\"error\":{\"message\":\"down\"}}", 500));
  client.send(chat("and the weather?", "private", daemon.token()));
  const Value failed = reply_to(client);
  INFO(to_sexp(failed));
  CHECK(to_sexp(failed).find("Neural Cascade Failure") != std::string::npos);
  CHECK(remote.requests().size() == 1);
  CHECK(nearby.requests().size() >= 2);

  const auto env = testing::hermetic_env(daemon.dir());
  const auto status = testing::run_passepartout({"status", "--socket", daemon.socket_path().string()}, env);
  INFO(status.out << status.err);
  CHECK(status.exit_status == 0);
  CHECK(status.out.find("1 sessions (private data: local providers only)") != std::string::npos);
  CHECK(status.out.find("nearby-model at " + nearby.url("/v1") + " (local)") != std::string::npos);
  CHECK(status.out.find("private  since ") != std::string::npos);
  const auto json = testing::run_passepartout({"status", "--json", "--socket", daemon.socket_path().string()}, env);
  const auto document = nlohmann::json::parse(json.out);
  REQUIRE(document["local_only_sessions"].size() == 1);
  CHECK(document["local_only_sessions"][0]["session"] == "private");
  CHECK(document["local_only_sessions"][0]["by"] == "model-router@1.0.0");
}
