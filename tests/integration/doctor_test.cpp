// `passepartout doctor` checking model providers for real: the executable in a
// hermetic environment whose OPENAI_BASE_URL, OLLAMA_HOST and
// ANTHROPIC_BASE_URL point at loopback stubs (or at a closed port).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "integration/daemon_process.hpp"
#include "integration/mcp_harness.hpp"
#include "support/http_stub.hpp"
#include "support/loopback.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using namespace std::chrono_literals;
using passepartout::testing::HttpStub;
using passepartout::testing::StubResponse;
using passepartout::testing::TempDir;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kKey = "sk-doctor-secret-31337";

// The environment and the arguments of a doctor run with no daemon (its
// check fails; the provider checks are what these tests read).
struct Doctor {
  TempDir home;
  std::vector<std::string> env = testing::hermetic_env(home.path());

  testing::ProcessRun run(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{"doctor", "--socket", (home.path() / "absent.sock").string(), "--state-dir",
                                  home.path().string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::run_passepartout(args, env);
  }
  json run_json(std::vector<std::string> extra = {}) const {
    extra.emplace_back("--json");
    const auto result = run(extra);
    INFO(result.err);
    REQUIRE(result.exit_status >= 0);
    return json::parse(result.out);
  }
};

const json* provider(const json& document, std::string_view name) {
  for (const auto& entry : document["providers"]) {
    if (entry["name"] == name) return &entry;
  }
  return nullptr;
}

std::string openai_list(std::string_view model) {
  return R"({"object":"list","data":[{"id":"x"},{"id":")" + std::string(model) + R"("}]})";
}

}  // namespace

TEST_CASE("doctor finds the configured model at an openai endpoint and reports the providers in json",
          "[integration][doctor]") {
  HttpStub stub;
  stub.enqueue(StubResponse::text(openai_list("gpt-4o-mini")));
  Doctor doctor;
  doctor.env.push_back("OPENAI_API_KEY=" + std::string(kKey));
  doctor.env.push_back("OPENAI_BASE_URL=" + stub.url("/v1"));
  const json document = doctor.run_json();
  INFO(document.dump(2));
  const json* openai = provider(document, "openai");
  REQUIRE(openai != nullptr);
  CHECK((*openai)["kind"] == "openai");
  CHECK((*openai)["base_url"] == stub.url("/v1"));
  CHECK((*openai)["model"] == "gpt-4o-mini");
  CHECK((*openai)["verdict"] == "ok");
  CHECK((*openai)["http_status"] == 200);
  CHECK((*openai)["elapsed_ms"].is_number());
  CHECK((*openai)["detail"].get<std::string>().find("model 'gpt-4o-mini' offered") == 0);
  CHECK((*openai)["hint"] == "");
  // Those left out, each with why.
  const json* anthropic = provider(document, "anthropic");
  REQUIRE(anthropic != nullptr);
  CHECK((*anthropic)["verdict"] == "info");
  CHECK((*anthropic)["detail"] == "ANTHROPIC_API_KEY is not set");
  CHECK((*anthropic)["elapsed_ms"].is_null());
  const auto requests = stub.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].target == "/v1/models");
}

TEST_CASE("doctor names the refused key's variable and never prints the key", "[integration][doctor]") {
  HttpStub stub;
  stub.set_default(StubResponse::text(R"({"error":{"message":"Incorrect API key provided: )" + std::string(kKey) +
                                          R"(","type":"invalid_request_error","code":"invalid_api_key"}})",
                                      401));
  Doctor doctor;
  doctor.env.push_back("OPENAI_API_KEY=" + std::string(kKey));
  doctor.env.push_back("OPENAI_BASE_URL=" + stub.url("/v1"));
  const auto text = doctor.run();
  INFO(text.out << text.err);
  CHECK(text.exit_status == 1);
  CHECK(text.out.find("FAIL  provider openai") != std::string::npos);
  CHECK(text.out.find("401 from openai: OPENAI_API_KEY is set but refused") != std::string::npos);
  CHECK(text.out.find(kKey) == std::string::npos);
  CHECK(text.err.find(kKey) == std::string::npos);
  const auto json_run = doctor.run({"--json"});
  CHECK(json_run.out.find(kKey) == std::string::npos);
  CHECK(json_run.err.find(kKey) == std::string::npos);
  const json document = json::parse(json_run.out);
  CHECK((*provider(document, "openai"))["http_status"] == 401);
  CHECK((*provider(document, "openai"))["verdict"] == "fail");
}

TEST_CASE("doctor says to start ollama when its port refuses", "[integration][doctor]") {
  Doctor doctor;
  const std::uint16_t closed = passepartout::testing::closed_loopback_port();  // nothing listens
  REQUIRE(closed != 0);
  const std::string host = "127.0.0.1:" + std::to_string(closed);
  doctor.env.push_back("OLLAMA_HOST=" + host);
  const auto text = doctor.run();
  INFO(text.out << text.err);
  CHECK(text.out.find("FAIL  provider ollama") != std::string::npos);
  CHECK(text.out.find("connection refused at http://" + host) != std::string::npos);
  CHECK(text.out.find("is Ollama running? (ollama serve") != std::string::npos);
}

TEST_CASE("doctor gives the ollama pull command for a missing model, and warns when another provider works",
          "[integration][doctor]") {
  HttpStub ollama;
  ollama.enqueue(StubResponse::text(R"({"models":[{"name":"qwen2.5:latest"}]})"));
  HttpStub openai;
  openai.enqueue(StubResponse::text(openai_list("gpt-4o-mini")));
  Doctor doctor;
  doctor.env.push_back("OLLAMA_HOST=" + ollama.url("").substr(7));
  doctor.env.push_back("OPENAI_API_KEY=" + std::string(kKey));
  doctor.env.push_back("OPENAI_BASE_URL=" + openai.url("/v1"));
  doctor.env.push_back("PROVIDER_CASCADE=ollama,openai");
  const json document = doctor.run_json();
  INFO(document.dump(2));
  const json* first = provider(document, "ollama");
  REQUIRE(first != nullptr);
  CHECK((*first)["verdict"] == "warn");
  CHECK((*first)["detail"] == "model 'llama3' is not offered at " + ollama.url(""));
  CHECK((*first)["hint"].get<std::string>().find("ollama pull llama3") == 0);
  CHECK((*provider(document, "openai"))["verdict"] == "ok");
  // The cascade's order is kept.
  CHECK(document["providers"][0]["name"] == "ollama");
  CHECK(document["providers"][1]["name"] == "openai");
}

TEST_CASE("doctor checks anthropic's model list with its headers", "[integration][doctor]") {
  HttpStub stub;
  stub.enqueue(StubResponse::text(R"({"data":[{"id":"claude-3-5-sonnet-20241022"}],"has_more":false})"));
  Doctor doctor;
  doctor.env.push_back("ANTHROPIC_API_KEY=" + std::string(kKey));
  doctor.env.push_back("ANTHROPIC_BASE_URL=" + stub.url(""));
  const json document = doctor.run_json();
  INFO(document.dump(2));
  CHECK((*provider(document, "anthropic"))["verdict"] == "ok");
  const auto requests = stub.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].target == "/v1/models?limit=1000");
  CHECK(requests[0].header("x-api-key") == kKey);
  CHECK(requests[0].header("anthropic-version") == "2023-06-01");
}

TEST_CASE("doctor --no-network and PASSEPARTOUT_PROVIDER=offline make no request", "[integration][doctor]") {
  HttpStub stub;
  Doctor doctor;
  doctor.env.push_back("OPENAI_API_KEY=" + std::string(kKey));
  doctor.env.push_back("OPENAI_BASE_URL=" + stub.url("/v1"));
  SECTION("--no-network") {
    const json document = doctor.run_json({"--no-network"});
    INFO(document.dump(2));
    CHECK((*provider(document, "openai"))["verdict"] == "info");
    CHECK((*provider(document, "openai"))["detail"].get<std::string>().find("not checked: --no-network") !=
          std::string::npos);
  }
  SECTION("PASSEPARTOUT_PROVIDER=offline") {
    doctor.env.emplace_back("PASSEPARTOUT_PROVIDER=offline");
    const auto text = doctor.run();
    INFO(text.out);
    CHECK(text.out.find("INFO  provider offline") != std::string::npos);
    CHECK(text.out.find("PASSEPARTOUT_PROVIDER=offline: the offline provider answers") != std::string::npos);
  }
  CHECK(stub.connections_accepted() == 0);
  CHECK(stub.requests().empty());
}

TEST_CASE("doctor with nothing configured says how to configure a model", "[integration][doctor]") {
  Doctor doctor;
  const auto text = doctor.run();
  INFO(text.out);
  CHECK(text.out.find("INFO  provider offline") != std::string::npos);
  CHECK(text.out.find("no model provider is configured") != std::string::npos);
  CHECK(text.out.find("providers left out") != std::string::npos);
  CHECK(text.out.find("OPENAI_API_KEY is not set") != std::string::npos);
}

TEST_CASE("doctor ends in bounded time when a provider stalls", "[integration][doctor]") {
  HttpStub stub;
  StubResponse never = StubResponse::text("{}");
  never.head_pause = 60s;
  stub.set_default(never);
  Doctor doctor;
  doctor.env.push_back("OPENAI_API_KEY=" + std::string(kKey));
  doctor.env.push_back("OPENAI_BASE_URL=" + stub.url("/v1"));
  const auto text = doctor.run();  // run_passepartout gives up (exit_status -1) after 30 s
  INFO(text.out << text.err);
  CHECK(text.exit_status == 1);
  CHECK(text.out.find("no answer from " + stub.url("/v1/models") + " within 5 s") != std::string::npos);
}

TEST_CASE("doctor starts each MCP server as the daemon would, lists its tools, and says what is wrong",
          "[integration][doctor][mcp]") {
  Doctor doctor;
  const fs::path config = doctor.home.path() / "config.yaml";
  std::ofstream(config) << "mcp_servers:\n"
                        << testing::fixture_entry("fixture") << "  missing:\n    command: no-such-mcp-server\n"
                        << testing::as_daemon_user() << "  off:\n    command: x\n    disabled: true\n";
  const json document = doctor.run_json({"--config", config.string(), "--no-network"});
  INFO(document.dump(2));
  auto check = [&](std::string_view name) {
    for (const auto& entry : document["checks"]) {
      if (entry["name"] == name) return entry;
    }
    FAIL("no check " << name);
    return json();
  };
  const json fixture = check("mcp server 'fixture'");
  CHECK(fixture["status"] == "ok");
  CHECK(fixture["detail"].get<std::string>().starts_with("stdio, MCP 2025-06-18, 2 tools (2 offered); runs as "));
  const json missing = check("mcp server 'missing'");
  CHECK(missing["status"] == "fail");
  CHECK(missing["detail"].get<std::string>().find("no program 'no-such-mcp-server' on its PATH") != std::string::npos);
  CHECK(missing["hint"] == "try it by hand, to see what it says: passepartout mcp probe -- no-such-mcp-server");
  CHECK(check("mcp server 'off'")["status"] == "info");
  // Pins are the state folder's to keep: doctor wrote none.
  CHECK_FALSE(fs::exists(doctor.home.path() / "mcp-pins.json"));
}
