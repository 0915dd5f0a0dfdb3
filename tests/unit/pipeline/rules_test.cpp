// The operator's rules (pipeline/rules.hpp, pipeline/rule_book.hpp): what an
// action's subject is, each matcher, the rule an approval teaches (never
// wider than what was shown), the rules file read with every problem located
// and its examples checked, and the book: durable changes, reload, expiry,
// sessions, carrying a gate's rules to its new version.
#include <catch2/catch.hpp>

#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/rule_book.hpp"
#include "pipeline/rules.hpp"
#include "support/sexp.hpp"
#include "support/skill_fixtures.hpp"

namespace passepartout {
namespace {

using testing::sexp;
using testing::TempDir;

Value shell(const std::string& command) {
  return sexp("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"" + command + "\"))");
}

Value tool_call(const std::string& tool, const std::string& args) {
  return sexp("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"" + tool + "\" :ARGS " + args + "))");
}

Rule one_rule(const std::string& yaml) {
  auto rule = parse_rule(yaml, "test");
  INFO((rule ? std::string() : rule.error().message));
  REQUIRE(rule.has_value());
  return std::move(*rule);
}

bool covers(const Rule& rule, const Value& action) { return rule_matches(rule, rule_subject(action)); }

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_text(const std::filesystem::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::trunc);
  out << text;
}

TEST_CASE("an action's subject: the tool it calls, else its target: the shell's command either way", "[rules]") {
  const RuleSubject actuator = rule_subject(shell("ls -la"));
  CHECK(actuator.name == "shell");
  REQUIRE(actuator.command.has_value());
  CHECK(*actuator.command == "ls -la");
  const RuleSubject as_tool = rule_subject(tool_call("shell", "(:CMD \"ls -la\")"));
  CHECK(as_tool.name == "shell");
  CHECK(as_tool.command == actuator.command);
  const RuleSubject mcp = rule_subject(tool_call("mcp__fs__write_file", "(:PATH \"/srv/a\" :CONTENT \"x\")"));
  CHECK(mcp.name == "mcp__fs__write_file");
  CHECK_FALSE(mcp.command.has_value());
  CHECK(mcp.args.at("PATH").text() == "/srv/a");
}

TEST_CASE("a prefix covers further words, never a compound command, and paths only where it says", "[rules]") {
  TextMatcher prefix{TextMatcher::Kind::prefix, "npm run test", {}};
  CHECK(command_matches(prefix, "npm run test", RuleDecision::allow));
  CHECK(command_matches(prefix, "npm run test --watch", RuleDecision::allow));
  CHECK_FALSE(command_matches(prefix, "npm run tests", RuleDecision::allow));             // words, not characters
  CHECK_FALSE(command_matches(prefix, "npm run test && rm -rf ~", RuleDecision::allow));  // more than one command
  CHECK_FALSE(command_matches(prefix, "npm run test; rm x", RuleDecision::allow));
  CHECK_FALSE(command_matches(prefix, "npm run test $(rm x)", RuleDecision::allow));
  CHECK_FALSE(command_matches(prefix, "npm run test `rm x`", RuleDecision::allow));
  CHECK_FALSE(command_matches(prefix, "npm run test 'x'", RuleDecision::allow));
  CHECK_FALSE(command_matches(prefix, "npm run test ../../etc", RuleDecision::allow));   // a path it does not name
  CHECK_FALSE(command_matches(prefix, "npm run test --out=/tmp", RuleDecision::allow));  // an option value
  prefix.paths = {"/srv/**"};
  CHECK(command_matches(prefix, "npm run test /srv/app/x", RuleDecision::allow));
  CHECK_FALSE(command_matches(prefix, "npm run test /srv/../etc/passwd", RuleDecision::allow));  // never through ".."
  CHECK_FALSE(command_matches(prefix, "npm run test /etc/passwd", RuleDecision::allow));

  const TextMatcher exact{TextMatcher::Kind::exact, "ls -la", {}};
  CHECK(command_matches(exact, "ls -la", RuleDecision::allow));
  CHECK_FALSE(command_matches(exact, "ls -la /", RuleDecision::allow));
}

TEST_CASE("a deny or ask prefix finds its command anywhere in a compound one, quoted or not", "[rules]") {
  const TextMatcher curl{TextMatcher::Kind::prefix, "curl", {}};
  for (const RuleDecision decision : {RuleDecision::deny, RuleDecision::ask}) {
    CHECK(command_matches(curl, "curl https://example.com/x", decision));  // whatever follows
    CHECK(command_matches(curl, "ls; curl x", decision));
    CHECK(command_matches(curl, "echo $(curl x)", decision));
    CHECK(command_matches(curl, "echo `curl x`", decision));
    CHECK(command_matches(curl, "true && curl x | sh", decision));
    CHECK(command_matches(curl, "\"cu\"rl x", decision));
    CHECK(command_matches(curl, "c\\url x", decision));
    CHECK_FALSE(command_matches(curl, "echo curl", decision));
    CHECK_FALSE(command_matches(curl, "curly x", decision));
  }
  CHECK_FALSE(command_matches(curl, "ls; curl x", RuleDecision::allow));  // an allow never reads past one command
}

TEST_CASE("globs: * within a segment, ** across, never through ..", "[rules]") {
  CHECK(glob_matches("/srv/notes/*.md", "/srv/notes/a.md"));
  CHECK_FALSE(glob_matches("/srv/notes/*.md", "/srv/notes/sub/a.md"));
  CHECK(glob_matches("/srv/**", "/srv/notes/sub/a.md"));
  CHECK(glob_matches("/srv/**/a.md", "/srv/a.md"));
  CHECK_FALSE(glob_matches("/srv/**", "/srv/../etc/passwd"));
  CHECK_FALSE(glob_matches("/srv/**", "/srvx/a"));
  CHECK(glob_matches("/tmp/?", "/tmp/a"));
}

TEST_CASE("the rule an approval teaches is never wider than what was shown", "[rules]") {
  SECTION("exactly: the same command") {
    auto rule = taught_rule(shell("ls -la /tmp/a"), false);
    REQUIRE(rule.has_value());
    CHECK(rule->subject == "shell");
    CHECK(rule->command->kind == TextMatcher::Kind::exact);
    CHECK(covers(*rule, shell("ls -la /tmp/a")));
    CHECK_FALSE(covers(*rule, shell("ls -la /tmp/b")));
  }
  SECTION("prefix: the leading words; the same command with another path still asks") {
    auto rule = taught_rule(shell("ls -la /tmp/a"), true);
    REQUIRE(rule.has_value());
    CHECK(rule->command->text == "ls -la");
    CHECK(rule->command->paths == std::vector<std::string>{"/tmp/a"});
    CHECK(covers(*rule, shell("ls -la /tmp/a")));
    CHECK(covers(*rule, shell("ls -la -h /tmp/a")));
    CHECK_FALSE(covers(*rule, shell("ls -la /tmp/b")));
    CHECK_FALSE(covers(*rule, shell("ls -la /tmp/a; rm -rf /tmp/a")));
    CHECK_FALSE(covers(*rule, shell("ls /tmp/a")));
  }
  SECTION("prefix is refused where it cannot be narrow") {
    CHECK_FALSE(taught_rule(shell("./build.sh --fast"), true).has_value());  // the first word is a path
    CHECK_FALSE(taught_rule(shell("ls | wc -l"), true).has_value());         // shell syntax
    CHECK_FALSE(taught_rule(tool_call("mcp__fs__read_file", "(:PATH \"/a\")"), true).has_value());
  }
  SECTION("a tool: each argument exactly, and no argument it was not shown") {
    auto rule = taught_rule(tool_call("mcp__fs__read_file", "(:PATH \"/srv/a\")"), false);
    REQUIRE(rule.has_value());
    rule->gates = {"tool-permissions@1.0.0"};
    CHECK(covers(*rule, tool_call("mcp__fs__read_file", "(:PATH \"/srv/a\")")));
    CHECK_FALSE(covers(*rule, tool_call("mcp__fs__read_file", "(:PATH \"/srv/b\")")));
    CHECK_FALSE(covers(*rule, tool_call("mcp__fs__read_file", "(:PATH \"/srv/a\" :FOLLOW T)")));
    CHECK_FALSE(covers(*rule, tool_call("mcp__fs__write_file", "(:PATH \"/srv/a\")")));
  }
}

TEST_CASE("deny and ask rules check the arguments they name: allow rules cover no other", "[rules]") {
  const Rule ask = one_rule(R"(decision: ask
tool: "mcp__fs__write_*"
args: {path: {glob: "/srv/notes/**"}}
reason: writes to the notes are reviewed
)");
  CHECK(covers(ask, tool_call("mcp__fs__write_file", "(:PATH \"/srv/notes/a.md\" :CONTENT \"x\")")));
  CHECK_FALSE(covers(ask, tool_call("mcp__fs__write_file", "(:PATH \"/srv/other\" :CONTENT \"x\")")));
  CHECK_FALSE(covers(ask, tool_call("mcp__fs__read_file", "(:PATH \"/srv/notes/a.md\")")));
  const Rule allow = one_rule(R"(decision: allow
tool: "mcp__fs__write_*"
args: {path: {glob: "/srv/notes/**"}}
gates: [tool-permissions@1.0.0]
)");
  CHECK(covers(allow, tool_call("mcp__fs__write_file", "(:PATH \"/srv/notes/a.md\")")));
  CHECK_FALSE(covers(allow, tool_call("mcp__fs__write_file", "(:PATH \"/srv/notes/a.md\" :CONTENT \"x\")")));
}

TEST_CASE("a rules file with a failing example is refused with its line and the example", "[rules]") {
  const std::string text = R"(rules:
  - id: no-curl
    decision: deny
    target: shell
    command: {prefix: curl}
    reason: fetch through the http tool
    examples:
      match: ["curl https://example.com", "curl -s x"]
      not_match: ["curly braces", "echo curl"]
  - id: too-wide
    decision: deny
    target: shell
    command: {prefix: git}
    reason: no git
    examples:
      not_match: ["git status"]
)";
  auto rules = parse_rules(text, "rules.yaml");
  REQUIRE_FALSE(rules.has_value());
  CHECK(rules.error().message.find("rules.yaml:16:") != std::string::npos);
  CHECK(rules.error().message.find("rule 'too-wide': the example 'git status' should not match, and does") !=
        std::string::npos);
  CHECK(rules.error().message.find("no-curl") == std::string::npos);  // its examples agree
}

TEST_CASE("a rules file's mistakes are all reported, each where it is", "[rules]") {
  auto rules = parse_rules(R"(rules:
  - decision: deny
    target: shell
  - decision: maybe
    tool: mcp__x__y
    reason: r
  - decision: allow
    target: shell
    comand: {exact: ls}
  - decision: deny
    target: shell
    tool: shell
    reason: r
)",
                           "rules.yaml");
  REQUIRE_FALSE(rules.has_value());
  const std::string& message = rules.error().message;
  CHECK(message.find("rules.yaml:2:5: a deny rule needs a reason:") != std::string::npos);
  CHECK(message.find("rules.yaml:4:15: decision 'maybe' is not deny, ask or allow") != std::string::npos);
  CHECK(message.find("rules.yaml:9:5: unknown key 'comand' of a rule; did you mean 'command'?") != std::string::npos);
  CHECK(message.find("an allow rule names the gates it answers") != std::string::npos);
  CHECK(message.find("rules.yaml:12:5: a rule names one target or tool, not both") != std::string::npos);
}

TEST_CASE("the file the book writes reads back as the same rules", "[rules]") {
  TempDir dir;
  auto book = RuleBook::open(dir.path() / "rules.yaml");
  REQUIRE(book.has_value());
  CHECK((*book)->empty());
  Rule deny = one_rule(R"(id: no-curl
decision: deny
target: shell
command: {prefix: curl}
reason: "fetch: through the http tool"
note: "asked for by ops, #42"
examples: {match: ["curl x"], not_match: ["echo curl"]}
)");
  REQUIRE((*book)->add(deny, "test").has_value());
  auto taught = taught_rule(shell("ls -la /tmp/a b=c"), true);
  REQUIRE(taught.has_value());
  taught->id = "taught-1";
  taught->gates = {"shell-guard@1.0.0"};
  taught->expires_unix_ms = (*book)->now_ms() + 3'600'000;
  REQUIRE((*book)->add(*taught, "wire uid=0").has_value());

  auto again = RuleBook::open(dir.path() / "rules.yaml");
  INFO(read_text(dir.path() / "rules.yaml"));
  REQUIRE(again.has_value());
  const auto rules = (*again)->rules();
  REQUIRE(rules.size() == 2);
  CHECK(rules[0]->rule.id == "no-curl");
  CHECK(rules[0]->rule.reason == "fetch: through the http tool");
  CHECK(rules[0]->rule.note == "asked for by ops, #42");
  CHECK(rules[0]->rule.match_examples.size() == 1);
  CHECK(rules[1]->rule.command->text == "ls -la");
  CHECK(rules[1]->rule.command->paths == std::vector<std::string>{"/tmp/a", "b=c"});
  CHECK(rules[1]->rule.taught_by == "wire uid=0");
  CHECK(rules[1]->rule.expires_unix_ms / 1000 == taught->expires_unix_ms / 1000);
  CHECK(rules[1]->rule.gates == std::vector<std::string>{"shell-guard@1.0.0"});
}

TEST_CASE("the book: deny before ask, standing approvals only for the gates they were taught for", "[rules]") {
  TempDir dir;
  std::int64_t now = 1'800'000'000'000;
  auto opened = RuleBook::open(dir.path() / "rules.yaml", [&now] { return now; });
  REQUIRE(opened.has_value());
  RuleBook& book = **opened;
  REQUIRE(book.add(one_rule("id: d\ndecision: deny\ntarget: shell\ncommand: {prefix: curl}\nreason: no\n"), "t"));
  REQUIRE(book.add(one_rule("id: a\ndecision: ask\ntarget: shell\ncommand: {prefix: git}\nreason: look\n"), "t"));
  Rule allow = *taught_rule(shell("ls -la"), false);
  allow.id = "s";
  allow.gates = {"shell-guard@1.0.0"};
  allow.expires_unix_ms = now + 60'000;
  REQUIRE(book.add(allow, "t"));

  CHECK(book.deciding(RuleDecision::deny, shell("curl -s x"), "s1")->rule.id == "d");
  CHECK(book.deciding(RuleDecision::deny, shell("git push"), "s1") == nullptr);
  CHECK(book.deciding(RuleDecision::ask, shell("git push"), "s1")->rule.id == "a");
  const std::vector<std::string> shell_guard{"shell-guard@1.0.0"};
  CHECK(book.standing(shell("ls -la"), shell_guard, "s1")->rule.id == "s");
  CHECK(book.standing(shell("ls -la"), std::vector<std::string>{"shell-guard@2.0.0"}, "s1") == nullptr);
  CHECK(book.standing(shell("ls -la"), std::vector<std::string>{"shell-guard@1.0.0", "policy@1.0.0"}, "s1") ==
        nullptr);  // a gate it was not taught for asked too
  CHECK(book.standing(shell("ls -la"), std::vector<std::string>{"shell-guard@1.0.0", "rules@host"}, "s1") ==
        nullptr);  // an operator's ask rule asked: ask beats allow
  CHECK(book.standing_count() == 1);
  CHECK(book.counts().deny_hits == 1);
  CHECK(book.find("s")->hits.load() == 1);

  SECTION("it asks again after expiry") {
    now += 60'000;
    CHECK(book.standing(shell("ls -la"), shell_guard, "s1") == nullptr);
    CHECK(book.standing_count() == 0);
  }
  SECTION("it asks again after it is removed, and the file no longer has it") {
    REQUIRE(book.remove("s").has_value());
    CHECK(book.standing(shell("ls -la"), shell_guard, "s1") == nullptr);
    CHECK(read_text(book.file()).find("id: s\n") == std::string::npos);
    CHECK_FALSE(book.remove("s").has_value());
  }
  SECTION("a new version of the gate is answered only once the operator carries the rule to it") {
    const std::vector<std::string> new_guard{"shell-guard@1.1.0"};
    CHECK(book.standing(shell("ls -la"), new_guard, "s1") == nullptr);
    auto carried = book.carry("shell-guard", "1.1.0");
    REQUIRE(carried.has_value());
    CHECK(*carried == 1);
    CHECK(book.standing(shell("ls -la"), new_guard, "s1")->rule.id == "s");
    CHECK(book.standing(shell("ls -la"), shell_guard, "s1") == nullptr);
    auto reopened = RuleBook::open(book.file(), [&now] { return now; });
    REQUIRE(reopened.has_value());
    CHECK((*reopened)->find("s")->rule.gates == new_guard);
  }
  SECTION("a session's rule covers that session alone, ends with it, and is never written to the file") {
    Rule mine = *taught_rule(shell("date -u"), false);
    mine.id = "mine";
    mine.gates = shell_guard;
    mine.scope = Rule::Scope::session;
    mine.session = "s1";
    REQUIRE(book.add(mine, "t"));
    CHECK(book.standing(shell("date -u"), shell_guard, "s1")->rule.id == "mine");
    CHECK(book.standing(shell("date -u"), shell_guard, "s2") == nullptr);
    CHECK(read_text(book.file()).find("date -u") == std::string::npos);
    CHECK(book.end_session("s1") == 1);
    CHECK(book.standing(shell("date -u"), shell_guard, "s1") == nullptr);
  }
  SECTION("an id in force is refused") {
    auto twice = book.add(one_rule("id: d\ndecision: deny\ntarget: cli\nreason: no\n"), "t");
    REQUIRE_FALSE(twice.has_value());
    CHECK(twice.error().message.find("in force already") != std::string::npos);
  }
}

TEST_CASE("the book reloads a changed file, and keeps its rules when the file no longer reads", "[rules]") {
  TempDir dir;
  const auto file = dir.path() / "rules.yaml";
  write_text(file, "rules:\n  - {id: d, decision: deny, target: shell, command: {prefix: curl}, reason: no}\n");
  auto opened = RuleBook::open(file);
  REQUIRE(opened.has_value());
  RuleBook& book = **opened;
  auto unchanged = book.reload();
  REQUIRE(unchanged.has_value());
  CHECK_FALSE(*unchanged);
  (void)book.deciding(RuleDecision::deny, shell("curl x"), "s");

  write_text(file, "rules:\n  - {id: d, decision: deny, target: shell, command: {prefix: wget}, reason: no}\n");
  auto changed = book.reload();
  REQUIRE(changed.has_value());
  CHECK(*changed);
  CHECK(book.deciding(RuleDecision::deny, shell("curl x"), "s") == nullptr);
  CHECK(book.deciding(RuleDecision::deny, shell("wget x"), "s")->hits.load() == 2);  // hits kept by id

  write_text(file, "rules:\n  - {id: d, decision: deny, target: shell, command: {prefix: curl}}\n");
  auto broken = book.reload();
  REQUIRE_FALSE(broken.has_value());
  CHECK(broken.error().message.find("rules.yaml:2:5: a deny rule needs a reason") != std::string::npos);
  CHECK(book.deciding(RuleDecision::deny, shell("wget x"), "s") != nullptr);  // the rules in force stay
  REQUIRE_FALSE(RuleBook::open(file).has_value());                            // and a start refuses the file
}

TEST_CASE("verifications read the rules while an operator changes them", "[rules][concurrency]") {
  TempDir dir;
  auto opened = RuleBook::open(dir.path() / "rules.yaml");
  REQUIRE(opened.has_value());
  RuleBook& book = **opened;
  REQUIRE(book.add(one_rule("id: d\ndecision: deny\ntarget: shell\ncommand: {prefix: curl}\nreason: no\n"), "t"));
  std::atomic<bool> done{false};
  std::atomic<std::uint64_t> denied{0};
  std::vector<std::thread> readers;
  std::vector<int> failures;           // changes that did not take, by step
  const Value curl = shell("curl x");  // made here: Catch's assertions are for this thread alone
  const Value ls = shell("ls");
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      const std::vector<std::string> asked{"shell-guard@1.0.0"};
      while (!done.load(std::memory_order_acquire)) {
        // The deny rule is never removed: every read of any version finds it.
        if (book.deciding(RuleDecision::deny, curl, "s") != nullptr) denied.fetch_add(1);
        (void)book.standing(ls, asked, "s");
        (void)book.counts();
        (void)book.rules();
      }
    });
  }
  for (int i = 0; i < 50; ++i) {
    Rule allow = *taught_rule(ls, false);
    allow.id = "s" + std::to_string(i);
    allow.gates = {"shell-guard@1.0.0"};
    allow.scope = i % 2 == 0 ? Rule::Scope::always : Rule::Scope::session;
    allow.session = "s";
    const bool added = book.add(allow, "t").has_value();
    const bool removed = i % 3 != 0 || book.remove(allow.id).has_value();
    if (i % 7 == 0) (void)book.end_session("s");
    const bool reloaded = book.reload().has_value();
    if (!added || !removed || !reloaded) {
      failures.push_back(i);
    }
  }
  done.store(true, std::memory_order_release);
  for (std::thread& reader : readers) reader.join();
  CHECK(failures.empty());
  CHECK(denied.load() == book.find("d")->hits.load());
}

}  // namespace
}  // namespace passepartout
