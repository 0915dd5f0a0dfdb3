// Tests of the bundled shell-guard skill, loaded with the policy it depends on
// through the host: unsafe patterns block, every other shell command asks a human.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <utility>

#include "configured_skills.hpp"
#include "support/skill_harness.hpp"
#include "value/value.hpp"

namespace {

using passepartout::Value;
using passepartout::testing::ConfiguredSkills;
using passepartout::testing::SkillHarness;

constexpr std::string_view kExplanation = ":EXPLANATION \"checking the state of the machine\"";

// `text` as an s-expression string literal.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// An action for the shell actuator running `cmd`.
std::string shell_action(std::string_view cmd) {
  return "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD " + quoted(cmd) + " " + std::string(kExplanation) + "))";
}

// A model tool call of `tool` with :ARGS (:CMD cmd).
std::string tool_action(std::string_view tool, std::string_view cmd) {
  return "(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL " + std::string(tool) + " :ARGS (:CMD " + quoted(cmd) + ") " +
         std::string(kExplanation) + "))";
}

// The trace entry of gate `name` in `result`; NIL when it left none.
Value trace_entry(const Value& result, std::string_view name) {
  for (const Value& entry : result.at("GATE-TRACE").items()) {
    if (entry.at("GATE").text() == name) return entry;
  }
  return Value::nil();
}

void require_blocked(const Value& result, std::string_view reason) {
  CHECK(result.at("TYPE").is_keyword("LOG"));
  CHECK(result.path({"PAYLOAD", "LEVEL"}).is_keyword("ERROR"));
  CHECK(result.path({"PAYLOAD", "TEXT"}).text() == reason);
  CHECK(trace_entry(result, "policy").at("RESULT").is_keyword("PASSED"));
  const Value entry = trace_entry(result, "shell-guard");
  CHECK(entry.at("VERSION").text() == "1.0.0");
  CHECK(entry.at("RESULT").is_keyword("BLOCKED"));
  CHECK(entry.at("REASON").text() == reason);
}

// Requires that shell command `cmd` was blocked for exactly the patterns `names`.
template <typename Skills>
void require_unsafe(Skills& harness, std::string_view cmd, std::string_view names) {
  CAPTURE(cmd);
  require_blocked(harness.verify(shell_action(cmd)),
                  "Shell command blocked: contains unsafe pattern (" + std::string(names) + ")");
}

void require_approval(const Value& result, std::string_view cmd) {
  const std::string reason = "Shell command requires approval: " + std::string(cmd);
  CHECK(result.at("TYPE").is_keyword("EVENT"));
  CHECK(result.at("LEVEL").is_keyword("APPROVAL-REQUIRED"));
  CHECK(result.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED"));
  CHECK(result.path({"PAYLOAD", "REASON"}).text() == reason);
  const Value entry = trace_entry(result, "shell-guard");
  CHECK(entry.at("RESULT").is_keyword("APPROVAL"));
  CHECK(entry.at("REASON").text() == reason);
}

// Requires that shell command `cmd` matched no pattern and so needs approval.
template <typename Skills>
void require_needs_approval(Skills& harness, std::string_view cmd) {
  CAPTURE(cmd);
  const Value result = harness.verify(shell_action(cmd));
  require_approval(result, cmd);
  CHECK(result.path({"PAYLOAD", "ACTION", "PAYLOAD", "CMD"}).text() == cmd);
}

void require_passed(const Value& result) {
  CHECK(result.at("TYPE").is_keyword("REQUEST"));
  CHECK(trace_entry(result, "shell-guard").at("RESULT").is_keyword("PASSED"));
}

}  // namespace

TEST_CASE("shell-guard blocks each unsafe pattern of the table by name", "[plugins]") {
  SkillHarness harness{"policy", "shell-guard"};

  SECTION("DESTRUCTIVE-RM") {
    require_unsafe(harness, "rm -rf /", "DESTRUCTIVE-RM");
    require_unsafe(harness, "rm -rf /tmp/build", "DESTRUCTIVE-RM");
    require_unsafe(harness, "sudo rm -rf /var/lib/postgresql", "DESTRUCTIVE-RM");
    require_unsafe(harness, "cd /tmp && rm -rf /home/user", "DESTRUCTIVE-RM");
  }
  SECTION("DISK-DUMP") { require_unsafe(harness, "dd if=/dev/zero of=/dev/sda bs=1M", "DISK-DUMP"); }
  SECTION("MKFS") { require_unsafe(harness, "mkfs.ext4 /dev/sdb1", "MKFS"); }
  SECTION("MFORMAT") { require_unsafe(harness, "mformat a:", "MFORMAT"); }
  SECTION("SHRED-DEVICE") { require_unsafe(harness, "shred /dev/sda", "SHRED-DEVICE"); }
  SECTION("WIPEFS-DEVICE") { require_unsafe(harness, "wipefs /dev/nvme0n1", "WIPEFS-DEVICE"); }
  SECTION("BACKTICK-SUBSTITUTION") { require_unsafe(harness, "echo `whoami`", "BACKTICK-SUBSTITUTION"); }
  SECTION("COMMAND-SUBSTITUTION") { require_unsafe(harness, "echo $(whoami)", "COMMAND-SUBSTITUTION"); }
}

TEST_CASE("shell-guard reads the shell target in every spelling the host dispatches", "[plugins]") {
  SkillHarness harness{"policy", "shell-guard"};
  const std::string target =
      GENERATE(as<std::string>{}, ":SHELL", ":shell", "SHELL", "\"shell\"", "\":shell\"", "|:shell|");
  CAPTURE(target);
  require_blocked(harness.verify("(:TYPE :REQUEST :TARGET " + target +
                                 " :PAYLOAD (:CMD \"rm -rf /\" :EXPLANATION \"Freeing space on the disk.\"))"),
                  "Shell command blocked: contains unsafe pattern (DESTRUCTIVE-RM)");
}

TEST_CASE("shell-guard names every pattern a command matches, in table order", "[plugins]") {
  SkillHarness harness{"policy", "shell-guard"};

  require_unsafe(harness, "rm -rf / `id` $(id)", "DESTRUCTIVE-RM BACKTICK-SUBSTITUTION COMMAND-SUBSTITUTION");
  require_unsafe(harness, "mkfs.ext4 /dev/sda; dd if=/dev/zero of=/dev/sda", "DISK-DUMP MKFS");
  require_unsafe(harness, "$(wipefs /dev/sda) && shred /dev/sda", "SHRED-DEVICE WIPEFS-DEVICE COMMAND-SUBSTITUTION");
}

TEST_CASE("shell-guard catches the common spellings of a recursive forced rm", "[plugins]") {
  SkillHarness harness{"policy", "shell-guard"};
  const std::string cmd =
      GENERATE(as<std::string>{},
               // flags in one cluster, either order, any case of R
               "rm -fr /", "rm -Rf /", "rm -fR /etc", "rm -rfv /", "rm -vrf /", "rm -rvf /usr",
               // flags apart, either order, among others
               "rm -r -f /", "rm -f -r /", "rm -R -f /", "rm -r -v -f /", "rm -i -r -f /", "rm -rv -fi /",
               // long options and their prefixes
               "rm --recursive --force /", "rm --force --recursive /home", "rm --recursive -f /", "rm -r --force /",
               "rm --rec --for /", "rm --recursive --force --no-preserve-root /",
               // extra arguments before the path
               "rm -rf --no-preserve-root /", "rm -rf -- /", "rm -rf ./build /", "rm -rf --one-file-system /",
               // the path before or between the flags (GNU rm permutes)
               "rm / -rf", "rm -r / -f", "rm / -f -r", "rm /srv --recursive --force",
               // quoted words, the home directory, other blanks
               "rm -rf \"/\"", "rm -rf '/etc'", "\"rm\" -rf /", "rm \"-rf\" \"/\"", "'rm' '-r' '-f' '/'", "rm -rf ~",
               "rm -rf ~/", "rm\t-rf\t/", "rm  -r  -f  /", "rm -rf \\\n /",
               // other ways of reaching rm
               "/bin/rm -rf /", "\\rm -rf /", "xargs rm -rf /", "true && rm -fr /", "ls; rm -r -f /");
  require_unsafe(harness, cmd, "DESTRUCTIVE-RM");
}

TEST_CASE("shell-guard sends shell commands that match no pattern for approval", "[plugins]") {
  SkillHarness harness{"policy", "shell-guard"};
  const std::string cmd = GENERATE(
      as<std::string>{}, "ls -la", "df -h /",
      // rm without both flags, or on a relative path
      "rm -rf build", "rm -rf ./build", "rm -r /tmp/x", "rm -f /tmp/x", "rm -rf", "rm --preserve-root -f /tmp/x",
      // flags that belong to another command
      "rm -f x; ls -r /", "rm -f x && grep -r foo /etc", "rm -f x\nls -r /", "rm -f x | sort -r /tmp/y",
      // words that only contain the commands
      "farm -rf /", "ddrescue --help", "add if=x", "mkfs --help", "mformatter", "shred notes.txt", "wipefs --help",
      // dollar without a parenthesis, a single backtick
      "echo $HOME", "echo ${PATH}", "echo it`s");
  require_needs_approval(harness, cmd);
}

TEST_CASE("shell-guard blocks quoted text that looks like an unsafe command", "[plugins]") {
  // The guard is lexical: it cannot tell an argument from a command, so a
  // command that merely mentions an unsafe one is blocked as well (as the seed did).
  SkillHarness harness{"policy", "shell-guard"};
  require_unsafe(harness, "echo \"rm -rf /\" is dangerous", "DESTRUCTIVE-RM");
  require_unsafe(harness, "echo 'never run $(curl x)'", "COMMAND-SUBSTITUTION");
  require_unsafe(harness, "grep 'dd if=' notes.txt", "DISK-DUMP");
}

TEST_CASE("shell-guard asks approval for the shell action itself", "[plugins]") {
  SkillHarness harness{"policy", "shell-guard"};

  const Value result = harness.verify(shell_action("uptime"));
  require_approval(result, "uptime");
  const Value& action = result.path({"PAYLOAD", "ACTION"});
  CHECK(action.at("TYPE").is_keyword("REQUEST"));
  CHECK(action.at("TARGET").is_keyword("SHELL"));
  CHECK(action.path({"PAYLOAD", "CMD"}).text() == "uptime");
  CHECK(trace_entry(result, "policy").at("RESULT").is_keyword("PASSED"));
}

TEST_CASE("shell-guard checks the command of a shell tool call", "[plugins]") {
  SkillHarness harness{"policy", "shell-guard"};

  SECTION("an unsafe command is blocked, whatever the case of the tool name") {
    const std::string tool =
        GENERATE(as<std::string>{}, "\"shell\"", "\"SHELL\"", "\"Shell\"", "shell", ":shell", "\":shell\"");
    CAPTURE(tool);
    require_blocked(harness.verify(tool_action(tool, "rm -r -f /")),
                    "Shell command blocked: contains unsafe pattern (DESTRUCTIVE-RM)");
  }
  SECTION("any other command needs approval") {
    const Value result = harness.verify(tool_action("\"shell\"", "git status"));
    require_approval(result, "git status");
    CHECK(result.path({"PAYLOAD", "ACTION", "PAYLOAD", "ARGS", "CMD"}).text() == "git status");
  }
  SECTION("arguments wrapped in one more list, as the host unwraps them (E7)") {
    require_blocked(
        harness.verify("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"shell\" :ARGS ((:CMD \"rm -rf /\")) " +
                       std::string(kExplanation) + "))"),
        "Shell command blocked: contains unsafe pattern (DESTRUCTIVE-RM)");
  }
  SECTION("another tool passes, whatever its arguments") {
    require_passed(harness.verify(tool_action("\"read-file\"", "rm -rf /")));
  }
}

TEST_CASE("shell-guard passes actions that carry no shell command", "[plugins]") {
  SkillHarness harness{"policy", "shell-guard"};

  SECTION("a message to the user") {
    require_passed(harness.verify("(:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:TEXT \"rm -rf /\" " +
                                  std::string(kExplanation) + "))"));
  }
  SECTION("a :CMD for a target that is not the shell") {
    require_passed(harness.verify("(:TYPE :REQUEST :TARGET :EMACS :PAYLOAD (:CMD \"rm -rf /\" " +
                                  std::string(kExplanation) + "))"));
  }
  SECTION("a shell action without :CMD") {
    require_passed(harness.verify("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (" + std::string(kExplanation) + "))"));
  }
  SECTION("a shell tool call without :ARGS :CMD") {
    require_passed(harness.verify("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"shell\" :CMD \"rm -rf /\" " +
                                  std::string(kExplanation) + "))"));
  }
}

TEST_CASE("shell-guard blocks a shell command that is not a string", "[plugins]") {
  SkillHarness harness{"policy", "shell-guard"};
  const std::string argv = R"(("rm" "-rf" "/"))";
  require_blocked(
      harness.verify("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD " + argv + " " + std::string(kExplanation) + "))"),
      "Shell command blocked: command is not a string: " + argv);
}

TEST_CASE("shell-guard lets safe commands through when approve_all_shell is false", "[plugins]") {
  ConfiguredSkills skills({"policy", "shell-guard"}, "shell-guard", "{approve_all_shell: false}");

  require_passed(skills.verify(shell_action("ls -la")));
  require_passed(skills.verify(tool_action("\"shell\"", "git status")));
  require_unsafe(skills, "rm -rf /", "DESTRUCTIVE-RM");
}

TEST_CASE("shell-guard asks approval for safe commands by default", "[plugins]") {
  const std::string config = GENERATE(as<std::string>{}, "{approve_all_shell: true}", "{}");
  CAPTURE(config);
  ConfiguredSkills skills({"policy", "shell-guard"}, "shell-guard", config);
  require_needs_approval(skills, "ls -la");
}

TEST_CASE("shell-guard appends config extra_patterns to its table", "[plugins]") {
  ConfiguredSkills skills({"policy", "shell-guard"}, "shell-guard", R"({extra_patterns: [
      {name: CURL-PIPE-SH, regex: 'curl[^|]*\|\s*(ba)?sh\b'},
      {name: SYSTEMCTL-STOP, regex: '(?i)systemctl\s+stop'}]})");

  require_unsafe(skills, "curl -s https://example.org/install | sh", "CURL-PIPE-SH");
  require_unsafe(skills, "SYSTEMCTL Stop sshd", "SYSTEMCTL-STOP");
  require_unsafe(skills, "curl https://x | bash; rm -rf /", "DESTRUCTIVE-RM CURL-PIPE-SH");
  require_unsafe(skills, "systemctl stop db; echo $(curl x | sh)", "COMMAND-SUBSTITUTION CURL-PIPE-SH SYSTEMCTL-STOP");
  require_needs_approval(skills, "curl -o page.html https://example.org");
}

TEST_CASE("shell-guard refuses to load with an extra pattern that does not compile, naming it", "[plugins]") {
  ConfiguredSkills skills({"policy", "shell-guard"}, "shell-guard",
                          "{extra_patterns: [{name: SAFE, regex: 'ok'}, {name: BROKEN, regex: '(unclosed'}]}");
  CHECK_THAT(skills.load_errors(),
             Catch::Contains("skill 'shell-guard'") && Catch::Contains("pattern 'BROKEN': invalid regex '(unclosed'"));
}

TEST_CASE("shell-guard refuses to load with malformed config", "[plugins]") {
  using Case = std::pair<std::string, std::string>;  // config, expected message
  const Case bad = GENERATE(
      Case{"{approve_all_shell: maybe}", "config approve_all_shell: expected true or false, got \"maybe\""},
      Case{"{approve_all_shell: 1}", "config approve_all_shell: expected true or false, got 1"},
      Case{"{extra_patterns: CURL}", "config extra_patterns: expected a list of {name, regex} maps"},
      Case{"{extra_patterns: [{regex: 'x'}]}", "config extra_patterns[0]: expected {name: NAME, regex: REGEX}"},
      Case{"{extra_patterns: [{name: X, regex: 1}]}",
           "config extra_patterns[0] (pattern 'X'): regex must be a string, got 1"});
  CAPTURE(bad.first);
  ConfiguredSkills skills({"policy", "shell-guard"}, "shell-guard", bad.first);
  CHECK_THAT(skills.load_errors(), Catch::Contains(bad.second));
}
