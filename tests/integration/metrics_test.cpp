// The metrics and health endpoints of the real daemon: a scrape promtool
// accepts after real traffic (a blocked action among it), scrapes while
// signals flow, /readyz with and without skills, --metrics-port off, 0 and
// a port in use.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/protocol.hpp"
#include "integration/daemon_process.hpp"
#include "support/http_client.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using testing::converse;
using testing::DaemonProcess;
using testing::http_get;
using testing::WireClient;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kScript = R"(rules:
  - match: '(?i)\bhello\b'
    reply: "Hello! How can I help?"
  - match: 'disk'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "rm -rf ~/scratch" :EXPLANATION "Freeing space on the disk."))'
)";

DaemonProcess::Options with_metrics(std::vector<std::string> extra_args = {}) {
  DaemonProcess::Options options;
  options.script = std::string(kScript);
  options.extra_args = std::move(extra_args);
  options.metrics_port = "0";
  return options;
}

// The samples of an exposition: "name{labels}" -> value.
std::map<std::string, double> samples(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::size_t space = line.rfind(' ');
    out[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

// The sum of every sample of the family `name` (its own name, not _bucket etc.).
double family_sum(const std::map<std::string, double>& all, const std::string& name) {
  double sum = 0;
  for (const auto& [key, value] : all) {
    if (key == name || key.rfind(name + "{", 0) == 0) sum += value;
  }
  return sum;
}

std::string scrape(std::uint16_t port) {
  const auto reply = http_get(port, "/metrics");
  REQUIRE(reply.status == 200);
  return reply.body;
}

// promtool (Debian's prometheus package) on PATH or in /usr/bin; "" when absent.
std::string promtool() {
  std::vector<std::string> dirs{"/usr/bin"};
  if (const char* path = std::getenv("PATH")) {
    std::istringstream parts(path);
    for (std::string dir; std::getline(parts, dir, ':');) dirs.push_back(dir);
  }
  for (const std::string& dir : dirs) {
    const fs::path candidate = fs::path(dir) / "promtool";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

// Runs `promtool check metrics` on `text`; its exit status and output.
std::pair<int, std::string> promtool_check(const std::string& text, const fs::path& dir) {
  const std::string tool = promtool();
  if (tool.empty()) FAIL("promtool is not installed: run scripts/setup (it installs the Debian package prometheus)");
  const fs::path input = dir / "scrape.txt";
  const fs::path output = dir / "promtool.txt";
  std::ofstream(input) << text;
  const std::string command = tool + " check metrics < '" + input.string() + "' > '" + output.string() + "' 2>&1";
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, testing::read_text_file(output)};
}

Value status_of(const DaemonProcess& daemon) {
  WireClient client = WireClient::local(daemon.socket_path());
  client.expect_handshake();
  client.send("(:TYPE :OPERATOR :COMMAND :STATUS)");
  const Value response = client.expect_frame();
  REQUIRE(is_ok_response(response));
  return response.at("PAYLOAD");
}

}  // namespace

TEST_CASE("a scrape after real traffic, a blocked action among it, passes promtool check metrics",
          "[integration][metrics]") {
  DaemonProcess daemon(with_metrics());
  REQUIRE(daemon.metrics_port() != 0);
  {
    WireClient client = WireClient::local(daemon.socket_path());
    client.expect_handshake();
    converse(client, "hello there", "m-1");
    converse(client, "my disk is full", "m-2");  // the model proposes rm -rf; shell-guard blocks it
  }
  const std::string text = scrape(daemon.metrics_port());
  INFO(text);
  const auto all = samples(text);
  CHECK(all.at("passepartout_signals_total{sensor=\"user-input\",outcome=\"done\"}") == 2);
  CHECK(all.at("passepartout_skills_loaded") >= 5);
  bool blocked = false;
  for (const auto& [key, value] : all) {
    if (key.rfind("passepartout_gate_verdicts_total{skill=\"shell-guard\"", 0) == 0 &&
        key.find("verdict=\"block\"") != std::string::npos) {
      blocked = value >= 1;
    }
  }
  CHECK(blocked);
  CHECK(all.at("passepartout_verifications_total{stage=\"reason\",outcome=\"blocked\"}") >= 1);
  CHECK(all.at("passepartout_provider_calls_total{provider=\"scripted\",outcome=\"success\"}") >= 2);
  CHECK(all.at("passepartout_provider_call_duration_seconds_count{provider=\"scripted\"}") >= 2);
  CHECK(all.at("passepartout_skill_changes_total{kind=\"load\",outcome=\"ok\"}") >= 5);
  CHECK(all.at("passepartout_connections_accepted_total") >= 1);
  CHECK(all.at("passepartout_decisions_dropped_total") == 0);
  CHECK(all.at("process_resident_memory_bytes") > 0);
  CHECK(all.at("process_open_fds") > 0);
  CHECK(all.at("process_start_time_seconds") > 1.6e9);

  const auto [status, output] = promtool_check(text, daemon.dir());
  INFO(output);
  CHECK(status == 0);
}

TEST_CASE("scrapes while signals flow succeed and their counters never go down", "[integration][metrics]") {
  DaemonProcess daemon(with_metrics());
  REQUIRE(daemon.metrics_port() != 0);
  constexpr int kClients = 4;
  constexpr int kChatsEach = 25;
  std::atomic<int> chats_done{0};
  std::atomic<int> clients_failed{0};
  std::mutex failures_mutex;
  std::string failures;  // Catch2's assertions are not for these threads: they collect, the test checks
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      try {
        WireClient client = WireClient::local(daemon.socket_path());
        client.expect_handshake();
        for (int i = 0; i < kChatsEach; ++i) {
          converse(client, i % 5 == 0 ? "my disk is full" : "hello", "c" + std::to_string(c) + "-" + std::to_string(i));
          chats_done.fetch_add(1);
        }
      } catch (const std::exception& e) {
        const std::lock_guard guard(failures_mutex);
        failures += std::string(e.what()) + "\n";
        clients_failed.fetch_add(1);
        chats_done.fetch_add(kChatsEach);  // so the scraping loop ends
      }
    });
  }
  double last_signals = 0, last_verdicts = 0, last_calls = 0;
  int scrapes = 0;
  bool monotonic = true;
  testing::HttpConnection connection(daemon.metrics_port());
  while (chats_done.load() < kClients * kChatsEach || scrapes < 3) {
    const auto reply = connection.request("GET", "/metrics");
    REQUIRE(reply.status == 200);
    ++scrapes;
    const auto all = samples(reply.body);
    const double signals = family_sum(all, "passepartout_signals_total");
    const double verdicts = family_sum(all, "passepartout_gate_verdicts_total");
    const double calls = family_sum(all, "passepartout_provider_calls_total");
    monotonic = monotonic && signals >= last_signals && verdicts >= last_verdicts && calls >= last_calls;
    last_signals = signals;
    last_verdicts = verdicts;
    last_calls = calls;
  }
  for (auto& t : clients) t.join();
  INFO(failures);
  REQUIRE(clients_failed.load() == 0);
  CHECK(monotonic);
  CHECK(scrapes >= 3);
  const auto final_samples = samples(scrape(daemon.metrics_port()));
  CHECK(family_sum(final_samples, "passepartout_signals_total") == kClients * kChatsEach);
}

TEST_CASE("/readyz is 503 with the reason until skills are loaded, then 200, and /healthz 200 throughout",
          "[integration][metrics]") {
  testing::TempDir manifests;  // empty at the start
  DaemonProcess daemon(with_metrics({"--manifests", manifests.path().string()}));
  REQUIRE(daemon.metrics_port() != 0);
  const auto before = http_get(daemon.metrics_port(), "/readyz");
  CHECK(before.status == 503);
  CHECK(before.body.find("not ready: no skill is loaded") == 0);
  CHECK(before.body.find('\n') == before.body.size() - 1);  // one line
  CHECK(http_get(daemon.metrics_port(), "/healthz").status == 200);

  for (const auto& entry : fs::directory_iterator(PP_MANIFEST_DIR)) {
    fs::copy_file(entry.path(), manifests.path() / entry.path().filename());
  }
  daemon.signal(SIGHUP);  // rescans the manifest folder
  const auto deadline = Clock::now() + testing::kProcessWait;
  testing::HttpReply after;
  while ((after = http_get(daemon.metrics_port(), "/readyz")).status != 200 && Clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
  }
  INFO(after.body << daemon.log());
  CHECK(after.status == 200);
  CHECK(after.body == "ready\n");
  CHECK(http_get(daemon.metrics_port(), "/healthz").status == 200);
}

TEST_CASE("the metrics endpoint answers 404 for other paths and 405 for other methods", "[integration][metrics]") {
  DaemonProcess daemon(with_metrics());
  CHECK(http_get(daemon.metrics_port(), "/nothing").status == 404);
  CHECK(http_get(daemon.metrics_port(), "/metrics", "POST").status == 405);
  CHECK(http_get(daemon.metrics_port(), "/healthz").body == "ok\n");
}

TEST_CASE("metrics port 0 picks a free port that status reports, and off serves none", "[integration][metrics]") {
  SECTION("0") {
    DaemonProcess daemon(with_metrics());
    REQUIRE(daemon.metrics_port() != 0);
    CHECK(status_of(daemon).at("METRICS").text() ==
          "http://127.0.0.1:" + std::to_string(daemon.metrics_port()) + "/metrics");
    CHECK(daemon.log().find("metrics: http://127.0.0.1:" + std::to_string(daemon.metrics_port())) != std::string::npos);
  }
  SECTION("off") {
    DaemonProcess::Options options = with_metrics();
    options.metrics_port = "off";
    DaemonProcess daemon(options);
    CHECK(daemon.metrics_port() == 0);
    CHECK(status_of(daemon).at("METRICS").text().empty());
    CHECK(daemon.log().find("metrics: off") != std::string::npos);
  }
}

TEST_CASE("a metrics port in use fails the start when it was chosen, and only warns when it is the default",
          "[integration][metrics]") {
  // A listening socket holds a port.
  const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(holder >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  SECTION("chosen") {
    socklen_t size = sizeof address;
    REQUIRE(::bind(holder, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(holder, 1) == 0);
    REQUIRE(::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &size) == 0);
    const std::string port = std::to_string(ntohs(address.sin_port));
    testing::TempDir dir;
    const auto run =
        testing::run_passepartout({"daemon", "--state-dir", (dir.path() / "state").string(), "--socket",
                                   (dir.path() / "s.sock").string(), "--port", "0", "--metrics-port", port},
                                  testing::hermetic_env(dir.path()));
    INFO(run.err);
    CHECK(run.exit_status != 0);
    CHECK(run.err.find("metrics endpoint: cannot listen on 127.0.0.1:" + port) != std::string::npos);
    CHECK(run.err.find("--metrics-port") != std::string::npos);
  }
  SECTION("the default, 9106") {
    // Taken here unless something else already holds it; either way the daemon finds it in use.
    address.sin_port = htons(9106);
    int one = 1;
    ::setsockopt(holder, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(holder, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0) ::listen(holder, 1);
    DaemonProcess::Options options = with_metrics();
    options.metrics_port = "";  // no flag: the default
    DaemonProcess daemon(options);
    REQUIRE(daemon.started());
    CHECK(daemon.metrics_port() == 0);
    CHECK(daemon.wait_for_log("metrics endpoint not served: cannot listen on 127.0.0.1:9106"));
    CHECK(daemon.log().find("--metrics-port") != std::string::npos);
  }
  ::close(holder);
}

}  // namespace passepartout
