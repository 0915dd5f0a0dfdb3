// Tests of the bundled shell actuator, loaded through the host with a private
// working folder: the seed's result strings (I3) and the process hygiene
// around them (timeouts kill the group, output is bounded, no descriptors leak).
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <thread>

#include "configured_skills.hpp"
#include "shell_support.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"
#include "value/value.hpp"

namespace {

using passepartout::Result;
using passepartout::Value;
using passepartout::testing::ConfiguredSkills;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;
using namespace passepartout::testing::shell;

// Whether process `pid` is gone (or a zombie waiting for its new parent).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z';
}

}  // namespace

TEST_CASE("shell serves the :SHELL actuator and has no gate", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
  const auto snapshot = skills.snapshot();
  for (std::string_view target : {"shell", "SHELL", ":shell"}) CHECK(snapshot->find_actuator(target) != nullptr);
  CHECK_FALSE(snapshot->find("shell")->has_gate());
  CHECK(snapshot->tools().empty());
}

TEST_CASE("shell answers a successful command with its stdout, run in the workdir", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
  CHECK(run(skills, "echo hello") == "hello\n");
  CHECK(run(skills, "pwd -P") == fs::canonical(dir.path()).string() + "\n");
  CHECK(run(skills, "printf 'a'; echo ignored >&2") == "a");
  CHECK(run(skills, "true").empty());
  SECTION("stdin is empty, so a command reading it does not wait") { CHECK(run(skills, "cat").empty()); }
  SECTION("the command inherits no descriptor of the host beyond 0, 1 and 2") {
    CHECK(run(skills, "ls /proc/self/fd") == "0\n1\n2\n3\n");  // 3: the folder ls reads
  }
}

TEST_CASE("shell answers a failing command with its code and stderr", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
  CHECK(run(skills, "echo out; echo oops >&2; exit 3") == "ERROR [3]: oops\n");
  CHECK(run(skills, "exit 1") == "ERROR [1]: ");
  CHECK_THAT(run(skills, "no-such-command-anywhere"),
             Catch::StartsWith("ERROR [127]: ") && Catch::Contains("not found"));
  SECTION("a command killed by a signal reports 128 + the signal") {
    CHECK(run(skills, "kill -9 $$") == "ERROR [137]: ");
  }
}

TEST_CASE("shell times a command out, kills its process group and says after how long", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
  const fs::path pid_file = dir.path() / "background.pid";

  const auto started = std::chrono::steady_clock::now();
  CHECK(run(skills, "sleep 30 & echo $! > background.pid; sleep 30", ":TIMEOUT 0.3") ==
        "ERROR: Command timed out after 0.3 seconds");
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));

  // The background sleep was in the group, and died with it.
  std::ifstream in(pid_file);
  pid_t background = 0;
  REQUIRE(in >> background);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = process_gone(background);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gone);

  SECTION("an integer timeout prints as one") {
    CHECK(run(skills, "sleep 5", ":TIMEOUT 1") == "ERROR: Command timed out after 1 seconds");
  }
  SECTION("exit code 124 reads as a timeout, as the seed's `timeout` reported it") {
    CHECK(run(skills, "exit 124") == "ERROR: Command timed out after 30 seconds");
  }
}

TEST_CASE("shell takes its default timeout from config and caps what an action asks", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path(), "timeout: 0.2, timeout_limit: 0.4"));
  CHECK(run(skills, "sleep 5") == "ERROR: Command timed out after 0.2 seconds");
  CHECK(run(skills, "sleep 5", ":TIMEOUT 100") == "ERROR: Command timed out after 0.4 seconds");
}

TEST_CASE("shell returns when the command exits, and what it left running in the background ends", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path(), "timeout: 5"));
  const auto started = std::chrono::steady_clock::now();
  const std::string answer = run(skills, "sleep 30 & echo $!");  // the background sleep holds the output pipe
  // Back before its 5 s timeout, with the output: it did not wait for the
  // pipe to close (how much sooner depends on the machine, not on the shell).
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
  REQUIRE_THAT(answer, Catch::Matches("[0-9]+\\s*"));
  const pid_t background = std::stoi(answer);
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = process_gone(background);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gone);
}

TEST_CASE("shell gives a command a few variables of the daemon's environment, and those configured", "[plugins]") {
  TempDir dir;
  ::setenv("PP_SHELL_TEST_SECRET", "s3cret-value", 1);  // as a provider's API key would be
  ConfiguredSkills plain({"shell"}, "shell", config(dir.path()));
  CHECK(run(plain, "printenv PP_SHELL_TEST_SECRET") == "ERROR [1]: ");
  CHECK_FALSE(run(plain, "printenv PATH").empty());
  CHECK(run(plain, "printenv HOME") == dir.path().string() + "\n");  // the workspace, not the daemon's home
  CHECK(run(plain, "printenv TMPDIR") == "/tmp\n");
  ConfiguredSkills passing({"shell"}, "shell", config(dir.path(), "pass_env: [PP_SHELL_TEST_SECRET]"));
  CHECK(run(passing, "printenv PP_SHELL_TEST_SECRET") == "s3cret-value\n");
  ::unsetenv("PP_SHELL_TEST_SECRET");
}

TEST_CASE("shell cuts output longer than the cap, before looking at the exit code", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
  CHECK(run(skills, "printf abcdefghij", ":MAX-OUTPUT 4") == "abcd\n... (output truncated to 4 chars)");
  CHECK(run(skills, "printf abcdefghij; exit 2", ":MAX-OUTPUT 4") == "abcd\n... (output truncated to 4 chars)");
  CHECK(run(skills, "printf abcd", ":MAX-OUTPUT 4") == "abcd");
  SECTION("the cap counts characters, not bytes") {
    CHECK(run(skills, "printf '\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9'", ":MAX-OUTPUT 3") ==
          "\xc3\xa9\xc3\xa9\xc3\xa9\n... (output truncated to 3 chars)");
  }
  SECTION("a flood of output is read to its end but not kept") {
    const auto started = std::chrono::steady_clock::now();
    CHECK(run(skills, "head -c 30000000 /dev/zero | tr '\\0' x", ":MAX-OUTPUT 5") ==
          "xxxxx\n... (output truncated to 5 chars)");
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(20));
  }
  SECTION("stderr of a failing command is capped the same way") {
    CHECK(run(skills, "printf 123456789 >&2; exit 1", ":MAX-OUTPUT 3") ==
          "ERROR [1]: 123\n... (output truncated to 3 chars)");
  }
}

TEST_CASE("shell takes its default output cap from config", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path(), "max_output: 3, max_output_limit: 6"));
  CHECK(run(skills, "printf abcdefghij") == "abc\n... (output truncated to 3 chars)");
  CHECK(run(skills, "printf abcdefghij", ":MAX-OUTPUT 1000") == "abcdef\n... (output truncated to 6 chars)");
}

TEST_CASE("shell replaces bytes that are not UTF-8 in what a command prints", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
  CHECK(run(skills, "printf '\\377ok\\300'") == "\xEF\xBF\xBDok\xEF\xBF\xBD");
}

TEST_CASE("shell refuses an action it cannot run, saying why", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path()));
  auto expect_error = [&](const Value& action, std::string_view message) {
    auto result = act(skills, action);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().message == message);
  };
  Value argv = Value::list({Value::string("ls")});
  expect_error(Value::plist({{"TARGET", Value::keyword("SHELL")}, {"PAYLOAD", Value::plist({{"CMD", argv}})}}),
               "shell: :PAYLOAD :CMD must be a string, got (\"ls\")");
  expect_error(Value::plist({{"TARGET", Value::keyword("SHELL")}}), "shell: :PAYLOAD :CMD must be a string, got NIL");
  expect_error(shell_action("ls", ":TIMEOUT -1"), "shell: :TIMEOUT must be a positive number of seconds, got -1");
  expect_error(shell_action("ls", ":TIMEOUT \"5\""), "shell: :TIMEOUT must be a positive number of seconds, got \"5\"");
  expect_error(shell_action("ls", ":MAX-OUTPUT 0"), "shell: :MAX-OUTPUT must be a positive integer, got 0");
  expect_error(shell_action(std::string_view("ls\0x", 4)), "shell: the command contains a NUL byte");
}

TEST_CASE("shell refuses to load without a usable workdir or with bad limits", "[plugins]") {
  const fs::path dir = "/tmp";                       // generated once for every run of the case: a folder that stays
  using Case = std::pair<std::string, std::string>;  // config, expected message
  const Case bad = GENERATE_COPY(
      Case{"{}", "config workdir: required, the folder commands run in; got NIL"},
      Case{"{workdir: /nonexistent/folder}", "config workdir: '/nonexistent/folder' is not an existing folder"},
      Case{config(dir, "timeout: 0"), "config timeout: expected a positive number of seconds, got 0"},
      Case{config(dir, "timeout: soon"), "config timeout: expected a positive number of seconds, got \"soon\""},
      Case{config(dir, "timeout: 60, timeout_limit: 10"), "config timeout: 60 s is above timeout_limit (10 s)"},
      Case{config(dir, "max_output: -5"), "config max_output: expected a positive integer, got -5"},
      Case{config(dir, "max_output: 10, max_output_limit: 5"), "config max_output: 10 is above max_output_limit (5)"},
      Case{config(dir, "shell: /nonexistent/sh"),
           "config shell: expected the path of an executable shell, got \"/nonexistent/sh\""});
  CAPTURE(bad.first);
  ConfiguredSkills skills({"shell"}, "shell", bad.first);
  CHECK_THAT(skills.load_errors(), Catch::Contains("skill 'shell'") && Catch::Contains(bad.second));
}

TEST_CASE("shell runs commands with the shell config names", "[plugins]") {
  TempDir dir;
  ConfiguredSkills skills({"shell"}, "shell", config(dir.path(), "shell: /bin/sh"));
  CHECK(run(skills, "echo $0") == "/bin/sh\n");
}
