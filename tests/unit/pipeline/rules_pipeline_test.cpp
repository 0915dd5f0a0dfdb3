// The operator's rules in the loop: a deny rule blocks before any gate runs,
// an ask rule asks for what the gates let through, and a standing approval
// answers the gate it was taught for — the action still passes every gate
// and the last mile, runs exactly once, and the record, the decision log and
// the reply say which rule granted it; it never passes a block or acts
// without a guard. The shell runs only `echo` in the rig's temporary folder.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pipeline/approvals.hpp"
#include "pipeline/rule_book.hpp"
#include "pipeline/rules.hpp"
#include "skills/skill_manifest.hpp"
#include "support/sexp.hpp"
#include "unit/pipeline/pipeline_rig.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

using testing::RecordingSink;
using testing::Rig;
using testing::sexp;

constexpr const char* kScript = R"(rules:
  - match: "RESULT|harmless-word"
    reply: "Done."
  - match: "say it"
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo harmless-word" :EXPLANATION "Printing a word as asked."))'
  - match: "clean up"
    reply: '(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "rm -rf ~/scratch-that-is-not-there" :EXPLANATION "Removing the scratch folder as the user asked."))'
)";

Rig shell_rig(bool record_decisions = false) {
  return Rig({{"policy", 0, {}, true}, {"shell-guard", 0, {}, true}, {"shell", 0, {}, true}}, {kScript}, 2, {},
             record_decisions);
}

Rule rule_of(const std::string& yaml) {
  auto rule = parse_rule(yaml, "test");
  INFO((rule ? std::string() : rule.error().message));
  REQUIRE(rule.has_value());
  return std::move(*rule);
}

std::string all_of(const RecordingSink& sink) {
  std::string out;
  for (const std::string& m : sink.printed()) out += m + "\n";
  return out;
}

// The one pending approval, checked to have been asked for by `gate`,
// answered "always": the rule an operator's --remember teaches, added as `id`.
Approval teach_always(Rig& rig, const std::string& gate, const std::string& id) {
  auto pending = rig.approvals->pending();
  REQUIRE(pending.has_value());
  REQUIRE(pending->size() == 1);
  const Approval approval = (*pending)[0];
  CHECK(approval.gates == std::vector<std::string>{gate});
  Rule always = *taught_rule(approval.action, false);
  always.id = id;
  always.gates = approval.gates;
  REQUIRE(rig.rules->add(always, "test"));
  return approval;
}

TEST_CASE("an operator's deny rule blocks before any gate runs, traced as rules@host", "[pipeline][rules]") {
  Rig rig = shell_rig();
  REQUIRE(rig.rules->add(rule_of("id: no-echo\ndecision: deny\ntarget: shell\ncommand: {prefix: echo}\n"
                                 "reason: echo is not for agents\n"),
                         "test"));
  auto sink = std::make_shared<RecordingSink>();
  rig.run(user_input_signal("say it", "s1"), sink);
  const std::string shown = all_of(*sink);
  CHECK(shown.find("(:GATE \"rules\" :VERSION \"host\" :RESULT :BLOCKED :REASON \"rule no-echo: echo is not for "
                   "agents\")") != std::string::npos);
  CHECK(shown.find("shell-guard") == std::string::npos);  // no gate was asked
  CHECK(rig.approvals->pending_count() == 0);
  CHECK_FALSE(rig.logged("ACT START"));
  CHECK(rig.rules->find("no-echo")->hits.load() == 3);  // each of the three attempts
}

TEST_CASE("an operator's ask rule asks for what the gates let through: approved, it runs",
          "[pipeline][rules][approvals]") {
  Rig rig({{"policy", 0, {}, true}, {"toolbox-a", 50}}, {R"(rules:
  - match: "record"
    reply: '(:TYPE :REQUEST :TARGET :RECORDER :PAYLOAD (:NOTE "keep this" :EXPLANATION "The user asked."))'
)"});
  REQUIRE(rig.rules->add(rule_of("id: review\ndecision: ask\ntarget: recorder\nreason: notes are reviewed\n"), "t"));
  auto sink = std::make_shared<RecordingSink>();
  LoopReport report = rig.run(user_input_signal("record it", "s1"), sink);
  CHECK(report.last_signal.at("STATUS").is_keyword("SUSPENDED"));
  auto pending = rig.approvals->pending();
  REQUIRE(pending.has_value());
  REQUIRE(pending->size() == 1);
  CHECK((*pending)[0].gates == std::vector<std::string>{"rules@host"});
  CHECK((*pending)[0].reason == "rule review asks: notes are reviewed");
  Result<Value> ran = rig.approve((*pending)[0].token);
  REQUIRE(ran.has_value());
  CHECK(ran->at("RECORDED").path({"PAYLOAD", "NOTE"}).text() == "keep this");
}

TEST_CASE("a standing approval answers its gate: the action runs once, and everything says which rule",
          "[pipeline][rules][approvals][concurrency]") {
  Rig rig = shell_rig(true);
  auto first = std::make_shared<RecordingSink>();
  rig.run(user_input_signal("say it", "s1"), first);
  const Approval asked = teach_always(rig, "shell-guard@1.0.0", "echo-always");
  REQUIRE(rig.pipeline->deny(asked.token, "test").has_value());

  auto sink = std::make_shared<RecordingSink>();
  LoopReport report = rig.run(user_input_signal("say it", "s1"), sink);
  const std::string shown = all_of(*sink);
  INFO(shown);
  CHECK(shown.find("APPROVAL-REQUIRED") == std::string::npos);
  CHECK(shown.find("Approved by standing rule echo-always") != std::string::npos);
  CHECK(shown.find("harmless-word") != std::string::npos);  // what it printed came back
  CHECK(sink->messages().back().path({"PAYLOAD", "TEXT"}).text() == "Done.");
  CHECK(report.stopped_by == "done");
  CHECK(rig.approvals->pending_count() == 0);

  // The approval it granted: decided by the rule, run once, done.
  const Value notice = sink->messages().front();
  const std::string token(notice.path({"PAYLOAD", "TOKEN"}).text());
  REQUIRE(token.size() == 32);
  auto granted = rig.approvals->find(token);
  REQUIRE(granted.has_value());
  CHECK(granted->state == Approval::State::approved);
  CHECK(granted->decided_by == "rule echo-always");
  CHECK(granted->run == Approval::Run::done);
  CHECK(rig.rules->find("echo-always")->hits.load() == 1);
  std::size_t ran = 0;
  for (const std::string& line : rig.logs.lines())
    if (line.find("ACT START [:SHELL]") != std::string::npos) ++ran;
  CHECK(ran == 1);

  // The decision log: the request the gates made, then the check before the run, each naming the rule.
  rig.decisions->flush();
  std::ifstream in(current_decisions_file(rig.state.path() / "decisions"));
  std::stringstream lines;
  lines << in.rdbuf();
  std::size_t granted_lines = 0;
  for (std::size_t at = 0; (at = lines.str().find("\"granted_by\":\"echo-always\"", at)) != std::string::npos; ++at) {
    ++granted_lines;
  }
  CHECK(granted_lines == 2);
}

TEST_CASE("a standing approval never passes a blocked action and never acts without its guard",
          "[pipeline][rules][guards]") {
  Rig rig = shell_rig();
  Rule everything = rule_of(
      "id: any-command\ndecision: allow\ntarget: shell\ncommand: {glob: \"*\"}\n"
      "gates: [shell-guard@1.0.0]\n");
  REQUIRE(rig.rules->add(everything, "test"));
  SECTION("shell-guard still blocks a destructive command") {
    auto sink = std::make_shared<RecordingSink>();
    rig.run(user_input_signal("clean up", "s1"), sink);
    const std::string shown = all_of(*sink);
    CHECK(shown.find("DESTRUCTIVE-RM") != std::string::npos);
    CHECK(shown.find("standing rule") == std::string::npos);
    CHECK_FALSE(rig.logged("ACT START"));
    CHECK(rig.rules->find("any-command")->hits.load() == 0);
  }
  SECTION("without shell-guard nothing runs: the guard rule fails it before any rule is asked") {
    std::vector<std::shared_ptr<const Slot>> kept;
    for (const auto& slot : rig.registry.snapshot()->slots()) {
      if (slot->name() != "shell-guard") kept.push_back(slot);
    }
    rig.registry.publish(std::move(kept));
    auto sink = std::make_shared<RecordingSink>();
    rig.run(user_input_signal("say it", "s1"), sink);
    CHECK(all_of(*sink).find(":GATE \"guard-rule\" :VERSION \"host\" :RESULT :FAILED") != std::string::npos);
    CHECK_FALSE(rig.logged("ACT START"));
    CHECK(rig.approvals->pending_count() == 0);
  }
}

TEST_CASE("a swapped gate is not pre-approved: its rules answer its new version once the operator carries them",
          "[pipeline][rules][approvals]") {
  Rig rig({{"policy", 0, {}, true}, {"toolbox-a", 50}}, {R"(rules:
  - match: "record"
    reply: '(:TYPE :REQUEST :TARGET :RECORDER :PAYLOAD (:NOTE "keep this" :EXPLANATION "The user asked."))'
)"});
  rig.fixtures.install_library("shadow-gate-1");
  rig.fixtures.install_library("shadow-gate-2");
  // shadow-gate 1.0.0, then 2.0.0, asking about every action, in place of the other.
  const auto with_gate = [&rig](int version) {
    auto manifest = SkillManifest::parse("name: shadow-gate\nversion: " + std::to_string(version) +
                                             ".0.0\nlibrary: libshadow-gate-" + std::to_string(version) +
                                             ".so\nabi: 1\nisolation: in-process\npriority: 20\n"
                                             "config: { mode: approval }\n",
                                         rig.fixtures.manifest_dir() / "shadow-gate.yaml");
    REQUIRE(manifest.has_value());
    auto slot = rig.fixtures.loader().load(*manifest);
    REQUIRE(slot.has_value());
    std::vector<std::shared_ptr<const Slot>> slots;
    for (const auto& kept : rig.registry.snapshot()->slots()) {
      if (kept->name() != "shadow-gate") slots.push_back(kept);
    }
    slots.push_back(std::move(*slot));
    rig.registry.publish(std::move(slots));
  };
  // The first message the user gets for "record it": an approval request, or the rule's grant.
  const auto first_answer = [&rig](const char* session) {
    auto sink = std::make_shared<RecordingSink>();
    rig.run(user_input_signal("record it", session), sink);
    REQUIRE_FALSE(sink->messages().empty());
    return to_sexp(sink->messages().front());
  };
  with_gate(1);
  REQUIRE(first_answer("s1").find("APPROVAL-REQUIRED") != std::string::npos);
  teach_always(rig, "shadow-gate@1.0.0", "record-always");
  CHECK(first_answer("s2").find("Approved by standing rule record-always") != std::string::npos);

  with_gate(2);
  CHECK(first_answer("s3").find("APPROVAL-REQUIRED") != std::string::npos);  // not taught for 2.0.0
  auto carried = rig.rules->carry("shadow-gate", "2.0.0");
  REQUIRE(carried.has_value());
  CHECK(*carried == 1);
  CHECK(first_answer("s4").find("Approved by standing rule record-always") != std::string::npos);
}

}  // namespace
}  // namespace passepartout
