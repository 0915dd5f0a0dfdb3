// The daemon against a third-party OpenAI-compatible server, @dwmkerr/mock-llm
// from the npm registry (scripts/setup installs it, pinned, outside the
// repository): its native shell call becomes the shell action, shell-guard
// holds it for approval, and once approved it runs.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "daemon/protocol.hpp"
#include "integration/daemon_process.hpp"
#include "integration/model_exchange.hpp"
#include "integration/npm_packages.hpp"
#include "support/loopback.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using testing::DaemonProcess;
using testing::TempDir;
using testing::WireClient;

constexpr std::string_view kExplanation = "Running a harmless command the user asked for.";

// @dwmkerr/mock-llm as a child process (`node <its bin script> --config
// <dir>/mock-llm.yaml`) on a free port of 127.0.0.1, its standard output and
// error in <dir>/mock-llm.log. The constructor waits (at most kProcessWait)
// until it listens; the destructor kills it.
class MockLlm {
 public:
  MockLlm(const fs::path& dir, const std::string& config) : dir_(dir), log_(dir / "mock-llm.log") {
    const std::string node = testing::node_or_fail();
    const fs::path package = testing::npm_dir() / "node_modules" / "@dwmkerr" / "mock-llm";
    const json about = json::parse(testing::read_text_file(package / "package.json"), nullptr, false);
    if (!about.is_object()) {
      FAIL("@dwmkerr/mock-llm is not installed in " << testing::npm_dir().string()
                                                    << ": run scripts/setup (it installs the tests' npm packages)");
    }
    version_ = about.value("version", "");
    const json bin = about.value("bin", json::object());
    const json entry = bin.is_object() ? bin.value("mock-llm", json()) : bin;
    if (!entry.is_string()) {
      FAIL("@dwmkerr/mock-llm " << version_ << " in " << package.string() << " names no bin script");
    }
    const fs::path script = package / entry.get<std::string>();
    const fs::path config_file = dir / "mock-llm.yaml";
    std::ofstream(config_file) << config;
    // The free port can be taken between closed_loopback_port() and node's
    // bind: then it exits with EADDRINUSE, and another port is tried.
    Start how = Start::exited;
    for (int attempt = 0; attempt < 3; ++attempt) {
      how = start(node, script, config_file);
      if (how != Start::exited || log().find("EADDRINUSE") == std::string::npos) break;
    }
    if (how == Start::timed_out) {
      FAIL("mock-llm " << version_ << " did not listen on 127.0.0.1:" << port_ << " within "
                       << testing::kProcessWait.count() << " s; its output:\n"
                       << log());
    }
    if (how != Start::listening) FAIL("mock-llm " << version_ << " did not start; its output:\n" << log());
  }

  ~MockLlm() { stop(); }
  MockLlm(const MockLlm&) = delete;
  MockLlm& operator=(const MockLlm&) = delete;

  std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }
  std::string log() const { return testing::read_text_file(log_); }
  // The chat completions it was asked for: it logs each request's method and path.
  std::size_t completions() const {
    const std::string text = log();
    std::size_t count = 0;
    constexpr std::string_view kLine = "POST /v1/chat/completions\n";
    for (auto at = text.find(kLine); at != std::string::npos; at = text.find(kLine, at + kLine.size())) ++count;
    return count;
  }

 private:
  enum class Start { listening, exited, timed_out };

  // Starts it on a free port (port_) and waits until it listens there; a
  // process that did not is gone when this returns.
  Start start(const std::string& node, const fs::path& script, const fs::path& config) {
    port_ = testing::closed_loopback_port();
    REQUIRE(port_ != 0);
    std::vector<std::string> args{node, script.string(), "--config", config.string()};
    std::vector<std::string> env = testing::hermetic_env(dir_);
    env.push_back("HOST=127.0.0.1");  // its default is every interface
    env.push_back("PORT=" + std::to_string(port_));
    std::vector<char*> argv;
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& entry : env) envp.push_back(entry.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int spawned = ::posix_spawn(&pid_, node.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
      pid_ = -1;
      FAIL("posix_spawn " << node << ": " << std::strerror(spawned));
    }

    // It prints this line from its listen callback; the connection proves it is its port.
    const std::string listening = "server running on 127.0.0.1:" + std::to_string(port_) + "\n";
    const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
    while (std::chrono::steady_clock::now() < deadline) {
      if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        return Start::exited;
      }
      if (log().find(listening) != std::string::npos) {
        if (const int fd = testing::connect_loopback(port_); fd >= 0) {
          ::close(fd);
          return Start::listening;
        }
      }
      std::this_thread::sleep_for(20ms);
    }
    stop();
    return Start::timed_out;
  }

  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

  fs::path dir_;
  fs::path log_;
  std::string version_;
  pid_t pid_ = -1;
  std::uint16_t port_ = 0;
};

// One rule of mock-llm's config for POST /v1/chat/completions: answer `body`
// when the request matches the JMESPath `match` ("" for any) and, given
// `sequence`, is that one (counted from 0) among the answers of rules with
// a sequence. Of the rules that match, the last answers.
std::string completion_rule(std::string_view match, std::optional<int> sequence, const json& body) {
  std::string rule = "  - path: \"^/v1/chat/completions$\"\n    method: POST\n";
  if (!match.empty()) rule += "    match: \"" + std::string(match) + "\"\n";
  if (sequence) rule += "    sequence: " + std::to_string(*sequence) + "\n";
  // A block scalar keeps the JSON as it is: mock-llm expands only {{...}}, never found in JSON outside strings.
  return rule + "    response:\n      status: 200\n      content: |\n        " + body.dump() + "\n";
}

json completion(const json& message, std::string_view finish_reason) {
  return {{"id", "chatcmpl-mock"},
          {"object", "chat.completion"},
          {"created", 1700000000},
          {"model", "mock-model"},
          {"choices", {{{"index", 0}, {"message", message}, {"finish_reason", finish_reason}}}},
          {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 5}, {"total_tokens", 15}}}};
}

json text_message(std::string_view text) { return {{"role", "assistant"}, {"content", text}}; }

// Whether the request offers a function `shell` whose parameters require
// cmd and explanation, and whether it gives the output of the call
// call_mock_1 back as that call's result (mock-llm keeps no requests: its
// rules check them).
constexpr std::string_view kOffersShell =
    "contains(body.tools[?type == 'function' && function.name == 'shell'].function.parameters.required[] || `[]`, "
    "'cmd') && contains(body.tools[?type == 'function' && function.name == 'shell'].function.parameters.required[] "
    "|| `[]`, 'explanation')";
constexpr std::string_view kGivesResult =
    "length(body.messages[?role == 'tool' && tool_call_id == 'call_mock_1' && contains(content || '', "
    "'mock-llm-run')]) > `0`";
constexpr std::string_view kNoShellOffered =
    "mock-llm: the request offered no function shell requiring cmd and explanation";
constexpr std::string_view kResultSeen = "It printed mock-llm-run.";

// The first completion that offers the shell: a native call of it; one
// that gives its result back: text saying so; any other: text (which says
// when the request did not offer the shell).
std::string mock_config() {
  const json arguments = {{"cmd", "echo mock-llm-run"}, {"explanation", kExplanation}};
  const json call = {{"role", "assistant"},
                     {"content", nullptr},
                     {"tool_calls",
                      {{{"id", "call_mock_1"},
                        {"type", "function"},
                        {"function", {{"name", "shell"}, {"arguments", arguments.dump()}}}}}}};
  return "rules:\n" + completion_rule("", std::nullopt, completion(text_message("The command waits."), "stop")) +
         completion_rule("!(" + std::string(kOffersShell) + ")", std::nullopt,
                         completion(text_message(kNoShellOffered), "stop")) +
         completion_rule(kOffersShell, 0, completion(call, "tool_calls")) +
         completion_rule(kGivesResult, std::nullopt, completion(text_message(kResultSeen), "stop"));
}

// The daemon with `mock` declared as the openai endpoint it uses, not
// streamed: mock-llm streams only a message's content (a tool call's null
// content makes it answer 500).
DaemonProcess::Options with_mock(const TempDir& dir, const MockLlm& mock) {
  const fs::path config = dir.path() / "passepartout.yaml";
  std::ofstream(config) << "providers:\n"
                           "  - name: mock\n"
                           "    kind: openai\n"
                           "    base_url: "
                        << mock.url("/v1")
                        << "\n"
                           "    model: mock-model\n"
                           "    stream: false\n"
                           "    api_key_env: MOCK_KEY\n";
  DaemonProcess::Options options;
  options.script = "rules: []\n";
  options.provider = "mock";
  options.extra_args = {"--config", config.string()};
  options.extra_env = {"MOCK_KEY=sk-mock-key-0123456789"};
  return options;
}

using testing::chat;

const Value* approval_request(const std::vector<Value>& frames) {
  for (const Value& frame : frames) {
    if (frame.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED")) return &frame;
  }
  return nullptr;
}

// Whether `gate` answered `verdict` in the frame's gate trace.
bool gate_said(const Value& frame, std::string_view gate, std::string_view verdict) {
  for (const Value& entry : frame.at("GATE-TRACE").items()) {
    if (entry.at("GATE").text() == gate) return entry.at("RESULT").is_keyword(verdict);
  }
  return false;
}

bool is_hex_token(std::string_view token) {
  return token.size() == 32 && token.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string printed(const std::vector<Value>& frames) {
  std::string text;
  for (const Value& frame : frames) text += to_sexp(frame) + "\n";
  return text;
}

}  // namespace

TEST_CASE("mock-llm's native shell call waits for approval, runs once approved, and its output is the call's result",
          "[integration][providers][mock-llm]") {
  TempDir dir;
  MockLlm mock(dir.path(), mock_config());
  DaemonProcess daemon(with_mock(dir, mock));

  const auto frames = chat(daemon, "please list the files using the shell", "s1", "r1");
  INFO(printed(frames) << "\ndaemon log:\n" << daemon.log() << "\nmock-llm log:\n" << mock.log());
  CHECK(mock.completions() >= 1);
  CHECK(printed(frames).find(kNoShellOffered) == std::string::npos);
  const Value* held = approval_request(frames);
  REQUIRE(held != nullptr);
  const std::string token(held->path({"PAYLOAD", "TOKEN"}).text());
  CHECK(is_hex_token(token));
  const Value& action = held->path({"PAYLOAD", "ACTION"});
  CHECK(action.at("TYPE").is_keyword("REQUEST"));
  CHECK(action.at("TARGET").is_keyword("SHELL"));
  CHECK(action.path({"PAYLOAD", "CMD"}).text() == "echo mock-llm-run");
  CHECK(action.path({"PAYLOAD", "EXPLANATION"}).text() == kExplanation);
  CHECK(gate_said(*held, "shell-guard", "APPROVAL"));

  WireClient op = WireClient::local(daemon.socket_path());
  op.expect_handshake();
  op.send("(:TYPE :OPERATOR :COMMAND :APPROVE :TOKEN \"" + token + "\")");
  const Value approved = op.expect_frame();
  INFO(to_sexp(approved));
  REQUIRE(is_ok_response(approved));
  CHECK(to_sexp(approved).find("mock-llm-run") != std::string::npos);  // the command's output

  // The session's next chat gives that output back to the model as the call's result.
  const auto next = chat(daemon, "what did it print?", "s1", "r2");
  INFO(printed(next) << "\nmock-llm log:\n" << mock.log());
  CHECK(mock.completions() >= 2);
  CHECK(printed(next).find(kResultSeen) != std::string::npos);
}

}  // namespace passepartout
