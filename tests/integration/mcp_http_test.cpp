// `passepartout mcp probe URL` against third-party Streamable HTTP servers
// from npm (scripts/setup installs them, pinned, outside the repository): the
// reference server @modelcontextprotocol/server-everything, and the client
// scenarios of the MCP conformance suite (@modelcontextprotocol/conformance),
// which judge what the probe sent.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "integration/daemon_process.hpp"
#include "integration/npm_packages.hpp"
#include "support/loopback.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::TempDir;

// How long one run of the conformance suite may take: it starts its server,
// runs the client (its own timeout is 30 s) and writes its checks.
constexpr std::chrono::seconds kSuiteWait{90};

using testing::node_or_fail;
using testing::npm_dir;
using testing::package_script;

// A child process, its standard output and error in `log`, in `cwd`, with
// `env` as its whole environment; killed by the destructor if it still runs.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::vector<std::string>& env, const fs::path& cwd, fs::path log)
      : log_(std::move(log)) {
    std::vector<std::string> owned_args = args;
    std::vector<std::string> owned_env = env;
    std::vector<char*> argv;
    for (auto& arg : owned_args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& entry : owned_env) envp.push_back(entry.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    const int spawned = ::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      pid_ = -1;
      FAIL("posix_spawn " << args[0] << ": " << std::strerror(spawned));
    }
  }
  ~Child() { kill(); }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  std::string log() const { return testing::read_text_file(log_); }

  // Its exit status once it exited, nullopt while it runs (or a signal ended it).
  std::optional<int> poll() {
    if (pid_ <= 0) return status_;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
    pid_ = -1;
    if (WIFEXITED(status)) status_ = WEXITSTATUS(status);
    exited_ = true;
    return status_;
  }
  bool exited() const noexcept { return exited_; }

  // Waits at most `limit` for it to exit; its status, or nullopt (then it is killed).
  std::optional<int> wait(std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto status = poll(); status || exited_) return status;
      std::this_thread::sleep_for(20ms);
    }
    kill();
    return std::nullopt;
  }

  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  std::optional<int> status_;
  bool exited_ = false;
};

// @modelcontextprotocol/server-everything over Streamable HTTP (`node
// dist/index.js streamableHttp`, its port from PORT, its endpoint /mcp) on a
// free port; the constructor waits (at most kProcessWait) until it listens.
class EverythingServer {
 public:
  explicit EverythingServer(const fs::path& dir) {
    const std::string node = node_or_fail();
    const fs::path script = package_script("@modelcontextprotocol/server-everything", "dist/index.js");
    // The free port can be taken between closed_loopback_port() and node's
    // bind: then it exits with EADDRINUSE, and another port is tried.
    for (int attempt = 0; attempt < 3; ++attempt) {
      port_ = testing::closed_loopback_port();
      REQUIRE(port_ != 0);
      std::vector<std::string> env = testing::hermetic_env(dir);
      env.push_back("PORT=" + std::to_string(port_));
      const fs::path log = dir / ("everything-" + std::to_string(attempt) + ".log");
      child_ = std::make_unique<Child>(std::vector<std::string>{node, script.string(), "streamableHttp"}, env,
                                       script.parent_path(), log);
      // It prints this from its listen callback; the connection proves it is its port.
      const std::string listening = "listening on port " + std::to_string(port_);
      const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
      while (std::chrono::steady_clock::now() < deadline && !child_->poll() && !child_->exited()) {
        if (child_->log().find(listening) != std::string::npos) {
          if (const int fd = testing::connect_loopback(port_); fd >= 0) {
            ::close(fd);
            return;
          }
        }
        std::this_thread::sleep_for(20ms);
      }
      const std::string output = child_->log();
      child_->kill();
      if (output.find("EADDRINUSE") == std::string::npos && output.find("already in use") == std::string::npos) {
        FAIL("server-everything did not listen on port " << port_ << " within " << testing::kProcessWait.count()
                                                         << " s; its output:\n"
                                                         << output);
      }
    }
    FAIL("server-everything found no free port in three attempts");
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }
  std::string log() const { return child_->log(); }

 private:
  std::unique_ptr<Child> child_;
  std::uint16_t port_ = 0;
};

// Runs the conformance suite's client scenario `scenario` with the probe as
// its client (tests/integration/mcp_conformance_client.sh), in a temp dir;
// every check it makes must pass (a warning fails as the suite itself fails it).
void run_conformance(std::string_view scenario) {
  TempDir dir;
  const std::string node = node_or_fail();
  const fs::path suite = package_script("@modelcontextprotocol/conformance", "dist/index.js");
  // The suite splits the command at spaces and appends the server's URL.
  const std::string command =
      "sh " + (fs::path(PP_SOURCE_DIR) / "tests" / "integration" / "mcp_conformance_client.sh").string() + " " +
      PP_PASSEPARTOUT_EXE;
  const fs::path results = dir.path() / "results";
  Child run({node, suite.string(), "client", "--command", command, "--scenario", std::string(scenario), "-o",
             results.string()},
            testing::hermetic_env(dir.path()), dir.path(), dir.path() / "suite.log");
  const auto status = run.wait(kSuiteWait);
  INFO("the suite's output:\n" << run.log());
  REQUIRE(status.has_value());  // it finished in time

  fs::path checks_file;
  if (fs::is_directory(results)) {
    for (const auto& entry : fs::directory_iterator(results)) {
      if (entry.path().filename().string().rfind(std::string(scenario) + "-", 0) == 0) {
        checks_file = entry.path() / "checks.json";
      }
    }
  }
  REQUIRE_FALSE(checks_file.empty());
  const json checks = json::parse(testing::read_text_file(checks_file), nullptr, false);
  REQUIRE(checks.is_array());
  std::string failing;
  std::size_t passed = 0;
  for (const json& check : checks) {
    const std::string verdict = check.value("status", "");
    if (verdict == "SUCCESS") ++passed;
    if (verdict != "FAILURE" && verdict != "WARNING") continue;
    failing += "  " + verdict + " " + check.value("id", "?") + ": " + check.value("description", "") + "\n";
    if (check.contains("errorMessage")) failing += "    " + check["errorMessage"].dump() + "\n";
    if (check.contains("details")) failing += "    " + check["details"].dump() + "\n";
  }
  INFO("the client's output:\n" << testing::read_text_file(checks_file.parent_path() / "stderr.txt"));
  INFO("failing checks:\n" << failing);
  CHECK(failing.empty());
  CHECK(passed > 0);
  CHECK(*status == 0);
}

}  // namespace

TEST_CASE("mcp probe calls server-everything's echo over Streamable HTTP", "[integration][mcp][mcp-http]") {
  TempDir dir;
  EverythingServer server(dir.path());
  const testing::ProcessRun run =
      testing::run_passepartout({"mcp", "probe", server.url(), "--call", "echo", R"({"message":"hi"})", "--json"},
                                testing::hermetic_env(dir.path()));
  INFO("stdout:\n" << run.out << "\nstderr:\n" << run.err << "\nserver-everything:\n" << server.log());
  REQUIRE(run.exit_status == 0);
  const json report = json::parse(run.out, nullptr, false);
  REQUIRE(report.is_object());
  CHECK(report["ok"] == true);
  CHECK(report["server"]["protocol_version"] == "2025-11-25");
  bool has_echo = false;
  for (const json& tool : report["tools"]) has_echo = has_echo || tool["name"] == "echo";
  CHECK(has_echo);
  CHECK(report["call"]["text"] == "Echo: hi");
  CHECK(report["call"]["is_error"] == false);
}

TEST_CASE("mcp conformance: the initialize scenario passes with mcp probe as the client",
          "[integration][mcp][mcp-http]") {
  run_conformance("initialize");
}

TEST_CASE("mcp conformance: the tools_call scenario passes with mcp probe as the client",
          "[integration][mcp][mcp-http]") {
  run_conformance("tools_call");
}

TEST_CASE("mcp conformance: the sse-retry scenario passes with mcp probe as the client",
          "[integration][mcp][mcp-http]") {
  run_conformance("sse-retry");
}

}  // namespace passepartout
