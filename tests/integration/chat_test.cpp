// Interactive `passepartout chat` end to end: the real executable reading
// its lines from a pipe, talking to a real daemon with the scripted model.
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "integration/daemon_process.hpp"

namespace passepartout {
namespace {

using testing::DaemonProcess;
using testing::InteractiveProcess;

// A slash command that reached the model would get the first rule's answer.
constexpr std::string_view kScript = R"(rules:
  - match: '/help|/status|/bogus'
    reply: "a slash command reached the model"
  - match: '(?i)\bhello\b'
    reply: "Hello! How can I help?"
  - match: 'greet the operator'
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo approved-run" :EXPLANATION "Printing a greeting."))'
)";

DaemonProcess::Options options() {
  DaemonProcess::Options options;
  options.script = std::string(kScript);
  return options;
}

std::size_t count(const std::string& text, std::string_view what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// Waits until the daemon's log shows `expected` user inputs perceived (a
// round's log lines may follow its replies); false when it shows another
// number at the deadline.
bool perceived(const DaemonProcess& daemon, std::size_t expected) {
  const auto deadline = std::chrono::steady_clock::now() + testing::kProcessWait;
  while (count(daemon.log(), "EVENT (USER-INPUT)") != expected) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polled, as DaemonProcess::wait_for_log
  }
  return true;
}

// The text after `label` up to the end of its line.
std::string after(const std::string& text, std::string_view label, std::size_t from = 0) {
  const auto at = text.find(label, from);
  if (at == std::string::npos) return {};
  const auto start = at + label.size();
  return text.substr(start, text.find('\n', start) - start);
}

}  // namespace

TEST_CASE("interactive chat answers each line in one session and keeps slash commands from the model",
          "[integration][chat]") {
  DaemonProcess daemon(options());
  const auto run = testing::run_passepartout({"chat", "--socket", daemon.socket_path().string()},
                                             testing::hermetic_env(daemon.dir()),
                                             "hello\n/help\n\n/status\n/bogus now\nhello again\n");
  INFO(run.out << run.err << daemon.log());
  CHECK(run.exit_status == 0);  // the end of input
  CHECK(count(run.out, "Hello! How can I help?") == 2);
  CHECK(run.out.find("a slash command reached the model") == std::string::npos);
  CHECK(count(run.out, "Commands (never sent to the model):") == 2);  // /help, and after the unknown one
  CHECK(run.err.find("passepartout: unknown command /bogus (not sent to the model)") != std::string::npos);
  CHECK(run.out.find("daemon 0") != std::string::npos);
  CHECK(run.out.find("models: scripted") != std::string::npos);
  CHECK(after(run.out, "; session chat-").size() == 16);
  // The daemon perceived the two lines and nothing else (every answer is in).
  CHECK(perceived(daemon, 2));
}

TEST_CASE("interactive chat asks before a held action runs: y runs it, anything else denies it",
          "[integration][chat]") {
  DaemonProcess daemon(options());
  const std::string socket = daemon.socket_path().string();
  const auto env = testing::hermetic_env(daemon.dir());
  const auto run = testing::run_passepartout({"chat", "--socket", socket}, env,
                                             "greet the operator\ny\ngreet the operator\nno thanks\n/status\n");
  INFO(run.out << run.err);
  CHECK(run.exit_status == 0);
  CHECK(count(run.out, "Approval needed") == 2);
  CHECK(count(run.out, "  would run: echo approved-run\n") == 2);
  CHECK(count(run.out, "Run it? [y/N/a=always] ") == 2);
  CHECK(count(run.out, "approved-run\n") == 3);  // twice what would run, once what it printed
  CHECK(run.out.find("0 pending approval(s)") != std::string::npos);
  const std::string first = after(run.out, "  token:     ");
  const std::string second = after(run.out, "  token:     ", run.out.find("Run it?") + 1);
  REQUIRE(first.size() == 32);
  REQUIRE(second.size() == 32);
  CHECK(first != second);
  const std::string session = "chat-" + after(run.out, "; session chat-");
  std::vector<std::string> states;
  for (const std::string& token : {first, second}) {
    const auto shown = testing::run_passepartout({"approvals", "show", token, "--json", "--socket", socket}, env);
    INFO(shown.out << shown.err);
    REQUIRE(shown.exit_status == 0);
    const auto document = nlohmann::json::parse(shown.out);
    CHECK(document["approval"]["session_id"] == session);  // both lines in the one session
    states.push_back(document["approval"]["state"].get<std::string>());
  }
  CHECK(states == std::vector<std::string>{"approved", "denied"});
}

TEST_CASE("interactive chat's a approves always: the same action is not asked about again", "[integration][chat]") {
  DaemonProcess daemon(options());
  const auto run =
      testing::run_passepartout({"chat", "--socket", daemon.socket_path().string()},
                                testing::hermetic_env(daemon.dir()), "greet the operator\na\ngreet the operator\n");
  INFO(run.out << run.err);
  CHECK(run.exit_status == 0);
  CHECK(count(run.out, "Approval needed") == 1);
  CHECK(run.out.find("remembered as rule taught-") != std::string::npos);
  CHECK(run.out.find("Approved by standing rule taught-") != std::string::npos);
  CHECK(count(run.out, "approved-run\n") >= 3);  // what would run, what it printed, and the second run's
  CHECK(testing::read_text_file(daemon.state_dir() / "rules.yaml").find("command: {exact: echo approved-run}") !=
        std::string::npos);
}

TEST_CASE("interactive chat reconnects when the daemon restarts and sends the next line on the new connection",
          "[integration][chat]") {
  DaemonProcess first(options());
  const auto socket = first.socket_path();
  InteractiveProcess chat({"chat", "--socket", socket.string()}, testing::hermetic_env(first.dir()));
  chat.write("hello\n");
  REQUIRE(chat.wait_for_output("Hello! How can I help?"));
  first.signal(SIGTERM);
  REQUIRE(first.wait_exit() == 0);

  DaemonProcess::Options restart = options();
  restart.socket = socket;
  DaemonProcess second(std::move(restart));
  chat.write("hello once more\n");
  CHECK(chat.wait_for_output("Hello! How can I help?", 2));
  const auto run = chat.finish();
  INFO(run.out << run.err);
  CHECK(run.exit_status == 0);
  CHECK(run.err.find("passepartout: connection to the daemon lost; reconnecting") != std::string::npos);
  CHECK(run.err.find("passepartout: reconnected to " + socket.string()) != std::string::npos);
  CHECK(perceived(second, 1));  // the line went to the new daemon, once
}

TEST_CASE("interactive chat exits 6 when the daemon does not come back", "[integration][chat]") {
  DaemonProcess daemon(options());
  InteractiveProcess chat({"chat", "--timeout", "1", "--socket", daemon.socket_path().string()},
                          testing::hermetic_env(daemon.dir()));
  chat.write("hello\n");
  REQUIRE(chat.wait_for_output("Hello! How can I help?"));
  daemon.signal(SIGTERM);
  REQUIRE(daemon.wait_exit() == 0);
  chat.write("hello?\n");
  const auto run = chat.finish();
  INFO(run.out << run.err);
  CHECK(run.exit_status == 6);
  CHECK(run.err.find("passepartout: connection to the daemon lost; reconnecting") != std::string::npos);
  CHECK(run.err.find("could not reconnect to the daemon within 1") != std::string::npos);
}

}  // namespace passepartout
