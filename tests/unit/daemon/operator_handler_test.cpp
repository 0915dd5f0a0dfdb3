// Tests for the operator commands against a real skill host (fixture skills),
// a pipeline with no provider, and an approval store in a temp dir.
#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/executor.hpp"
#include "daemon/operator_handler.hpp"
#include "daemon/provider_status.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/gate_log.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/rule_book.hpp"
#include "pipeline/verifier.hpp"
#include "providers/cascade.hpp"
#include "providers/offline_provider.hpp"
#include "skills/skill_host.hpp"
#include "support/async_wait.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout {
namespace {

using testing::Awaited;
using testing::SkillFixtures;
using testing::TempDir;

// Two loaded skills (pass-gate-1 is a dependency of pass-gate-0) and one
// that fails to create, behind an OperatorHandler.
struct OperatorRig {
  TempDir state;
  SkillFixtures fx;
  std::unique_ptr<SkillHost> host;
  ThreadPool pool{1};
  ThreadPool blocking{1};
  ThreadPool control{1};
  Cascade cascade;
  std::unique_ptr<ApprovalStore> approvals;
  std::unique_ptr<RuleBook> rules;
  std::set<std::string> open_sessions{"s1"};  // what session_open answers
  std::unique_ptr<Pipeline> pipeline;
  SkillProblems problems;
  std::unique_ptr<OperatorHandler> handler;
  Awaited<bool> shutdown;  // set by the SHUTDOWN command, after its answer
  int changes = 0;         // control thread, before each answer

  OperatorRig() {
    for (auto name : {"pass-gate-0", "pass-gate-1", "create-fails"}) fx.install_library(name);
    fx.write_manifest("a.yaml", SkillFixtures::yaml("pass-gate-0", 10, "depends_on: [pass-gate-1 >=1.0]\n"));
    fx.write_manifest("b.yaml", SkillFixtures::yaml("pass-gate-1", 5));
    fx.write_manifest("c.yaml", SkillFixtures::yaml("create-fails", 50));
    auto created = SkillHost::create(SkillHostOptions{
        fx.manifest_dir(), fx.plugin_dir(), state.path() / "audit.sqlite3", true, state.path() / "workspace", {}});
    REQUIRE(created.has_value());
    host = std::move(*created);
    problems.record(host->boot("test"));
    auto store = ApprovalStore::open(state.path() / "approvals.sqlite3");
    REQUIRE(store.has_value());
    approvals = std::move(*store);
    auto book = RuleBook::open(state.path() / "rules.yaml");
    REQUIRE(book.has_value());
    rules = std::move(*book);
    pipeline = std::make_unique<Pipeline>(
        Pipeline::Services{
            host->registry(), cascade, pool, blocking, nullptr, approvals.get(), {}, nullptr, nullptr, rules.get()},
        PipelineOptions{});
    handler = std::make_unique<OperatorHandler>(OperatorHandler::Services{
        *host,
        *pipeline,
        approvals.get(),
        control,
        problems,
        "9.9.9",
        std::chrono::steady_clock::now(),
        [] {
          return HealthReport{"DEGRADED", true};
        },
        [] { return std::uint64_t{4}; },
        [this] { shutdown.set(true); },
        [this] { ++changes; },
        [this] { return provider_status(cascade, {}, {"anthropic: ANTHROPIC_API_KEY is not set"}); },
        {},
        nullptr,
        [] { return std::string("http://127.0.0.1:9106/metrics"); },
        [] {
          return OperatorHandler::ConnectionFigures{3, 7, 11};
        },
        [] { return std::string("not ready: no model provider is configured"); },
        nullptr,
        {},
        rules.get(),
        [this](std::string_view session) { return open_sessions.count(std::string(session)) != 0; },
        {}});
  }

  ~OperatorRig() {
    control.stop();
    pool.stop();
    blocking.stop();
  }

  Value ask(std::string_view request_text) {
    auto request = read_sexp(request_text);
    REQUIRE(request.has_value());
    return ask(*request);
  }
  Value ask(const Value& request) {
    auto answer = std::make_shared<Awaited<Value>>();
    handler->handle(request, "test", [answer](Value response) { answer->set(std::move(response)); });
    auto response = answer->wait();
    REQUIRE(response.has_value());
    return *response;
  }
};

const Value* find_skill(const Value& skills, std::string_view name) {
  for (const Value& skill : skills.items()) {
    if (skill.at("NAME").text() == name) return &skill;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("STATUS reports the runtime, the skill folders, and SKILLS lists loaded and disabled skills",
          "[daemon][operator]") {
  OperatorRig rig;
  const Value status = rig.ask("(:TYPE :OPERATOR :COMMAND :STATUS :REQUEST-ID \"s1\")");
  INFO(to_sexp(status));
  REQUIRE(is_ok_response(status));
  CHECK(status.at("REQUEST-ID").text() == "s1");
  const Value& payload = status.at("PAYLOAD");
  CHECK(payload.at("VERSION").text() == "9.9.9");
  CHECK(payload.at("HEALTH").is_keyword("DEGRADED"));
  CHECK(payload.at("CONNECTIONS").as_integer() == 4);
  CHECK(payload.at("IN-FLIGHT").as_integer() == 0);
  CHECK(payload.at("PENDING-APPROVALS").as_integer() == 0);
  CHECK(payload.at("METRICS").text() == "http://127.0.0.1:9106/metrics");
  CHECK(payload.at("APPROVALS-REFUSED").as_integer() == 0);
  CHECK(payload.at("CONNECTIONS-REFUSED").as_integer() == 3);
  CHECK(payload.at("CONNECTIONS-EVICTED").as_integer() == 7);
  CHECK(payload.at("METRICS-EVICTED").as_integer() == 11);
  CHECK(payload.at("READY").is_nil());
  CHECK(payload.at("NOT-READY").text() == "not ready: no model provider is configured");
  // The folders `skills install` writes into.
  CHECK(payload.at("MANIFEST-DIR").text() == rig.fx.manifest_dir().string());
  CHECK(payload.at("PLUGIN-DIR").text() == rig.fx.plugin_dir().string());
  CHECK(payload.at("PROVIDERS").items().size() == 1);  // an empty cascade: only the one left out
  rig.cascade.add(std::make_shared<OfflineProvider>());
  const Value providers = rig.ask("(:TYPE :OPERATOR :COMMAND :STATUS)").path({"PAYLOAD", "PROVIDERS"});
  INFO(to_sexp(providers));
  REQUIRE(providers.items().size() == 2);
  const Value& offline = providers.items()[0];
  CHECK(offline.at("NAME").text() == "offline");
  CHECK(offline.at("KIND").text() == "offline");
  CHECK(offline.at("STATE").text() == "ready");
  CHECK(offline.at("CALLS").as_integer() == 0);
  CHECK(providers.items()[1].at("NAME").text() == "anthropic");
  CHECK(providers.items()[1].at("STATE").text() == "ANTHROPIC_API_KEY is not set");

  const Value skills = rig.ask("(:TYPE :OPERATOR :COMMAND :SKILLS)").path({"PAYLOAD", "SKILLS"});
  REQUIRE(skills.size() == 3);
  CHECK(skills.items()[0].at("NAME").text() == "pass-gate-1");  // load order
  const Value* loaded = find_skill(skills, "pass-gate-0");
  REQUIRE(loaded != nullptr);
  CHECK(loaded->at("STATE").is_keyword("LOADED"));
  CHECK(loaded->at("GATE").is_true());
  CHECK(loaded->at("SHA256").text().size() == 64);
  const Value* disabled = find_skill(skills, "create-fails");
  REQUIRE(disabled != nullptr);
  CHECK(disabled->at("STATE").is_keyword("DISABLED"));
  CHECK(disabled->at("REASON").text().find("create failed") != std::string_view::npos);
}

TEST_CASE("UNLOAD is refused while others depend on a skill, unless it cascades", "[daemon][operator]") {
  OperatorRig rig;
  const Value refused = rig.ask("(:TYPE :OPERATOR :COMMAND :UNLOAD :NAME \"pass-gate-1\")");
  INFO(to_sexp(refused));
  CHECK(error_response_code(refused) == "REFUSED");
  CHECK(refused.path({"PAYLOAD", "MESSAGE"}).text().find("pass-gate-1") != std::string_view::npos);

  const Value removed = rig.ask("(:TYPE :OPERATOR :COMMAND :UNLOAD :NAME \"pass-gate-1\" :CASCADE T)");
  INFO(to_sexp(removed));
  REQUIRE(is_ok_response(removed));
  const Value& changes = removed.path({"PAYLOAD", "CHANGES"});
  REQUIRE(changes.size() == 2);
  CHECK(changes.items()[0].at("SKILL").text() == "pass-gate-0");  // dependents first
  CHECK(changes.items()[1].at("KIND").text() == "remove");
  CHECK(rig.host->snapshot()->slots().empty());
  CHECK(rig.changes == 2);

  const Value history = rig.ask("(:TYPE :OPERATOR :COMMAND :HISTORY :LIMIT 10 :SKILL \"pass-gate-1\")");
  const Value& listed = history.path({"PAYLOAD", "CHANGES"});
  REQUIRE(listed.size() >= 2);
  CHECK(listed.items()[0].at("KIND").text() == "remove");  // newest first
  CHECK(listed.items()[0].at("REQUESTER").text() == "test");
}

TEST_CASE("RELOAD and LOAD go through the host and failures are REFUSED, leaving the old version",
          "[daemon][operator]") {
  OperatorRig rig;
  const Value reloaded = rig.ask("(:TYPE :OPERATOR :COMMAND :RELOAD :NAME \"pass-gate-0\")");
  INFO(to_sexp(reloaded));
  REQUIRE(is_ok_response(reloaded));
  CHECK(reloaded.path({"PAYLOAD", "CHANGES"}).items()[0].at("KIND").text() == "swap");

  const Value retried = rig.ask("(:TYPE :OPERATOR :COMMAND :RELOAD :NAME \"create-fails\")");
  INFO(to_sexp(retried));
  CHECK(error_response_code(retried) == "REFUSED");
  CHECK(find_skill(rig.handler->skills_value(), "create-fails")->at("STATE").is_keyword("DISABLED"));

  const std::string manifest = (rig.fx.manifest_dir() / "b.yaml").string();
  const Value swapped = rig.ask("(:TYPE :OPERATOR :COMMAND :LOAD :MANIFEST \"" + manifest + "\")");
  CHECK(is_ok_response(swapped));
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :LOAD :MANIFEST \"/no/such.yaml\")")) == "NOT-FOUND");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :RELOAD :NAME \"ghost\")")) == "NOT-FOUND");
}

TEST_CASE("bad operator requests are BAD-REQUEST and SHUTDOWN answers before it stops", "[daemon][operator]") {
  OperatorRig rig;
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR)")) == "BAD-REQUEST");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :REBOOT)")) == "BAD-REQUEST");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :UNLOAD :NAME 42)")) == "BAD-REQUEST");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :HISTORY :LIMIT 0)")) == "BAD-REQUEST");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :DENY :TOKEN \"feedfacefeedfacefeedfacefeedface\")")) ==
        "NOT-FOUND");
  CHECK(rig.ask("(:TYPE :OPERATOR :COMMAND :APPROVALS)").path({"PAYLOAD", "APPROVALS"}).is_nil());

  const Value bye = rig.ask("(:TYPE :OPERATOR :COMMAND :shutdown :REQUEST-ID \"x\")");
  CHECK(is_ok_response(bye));
  CHECK(bye.at("REQUEST-ID").text() == "x");
  CHECK(rig.shutdown.wait().has_value());
  CHECK(rig.shutdown.times_set() == 1);
}

TEST_CASE("APPROVALS answers a page, newest first, with the total, bad :LIMIT and :OFFSET are BAD-REQUEST",
          "[daemon][operator][approvals]") {
  OperatorRig rig;
  std::vector<std::string> created;  // oldest first
  for (int i = 0; i < 5; ++i) {
    auto approval = rig.approvals->create(*read_sexp("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo hi\"))"),
                                          *read_sexp("(:SESSION-ID \"s" + std::to_string(i % 2) + "\")"), {}, "");
    REQUIRE(approval.has_value());
    created.push_back(approval->token);
  }
  const Value first = rig.ask("(:TYPE :OPERATOR :COMMAND :APPROVALS :LIMIT 2)");
  INFO(to_sexp(first));
  REQUIRE(is_ok_response(first));
  CHECK(first.path({"PAYLOAD", "MESSAGE"}).text() == "1-2 of 5 pending (newest first)");
  CHECK(first.path({"PAYLOAD", "TOTAL"}).as_integer() == 5);
  CHECK(first.path({"PAYLOAD", "OFFSET"}).as_integer() == 0);
  CHECK(first.path({"PAYLOAD", "LIMIT"}).as_integer() == 2);
  const Value& newest = first.path({"PAYLOAD", "APPROVALS"}).items()[0];
  CHECK(newest.at("TOKEN").text() == created[4]);
  CHECK(newest.at("STATE").is_keyword("PENDING"));
  CHECK(newest.at("SESSION-ID").text() == "s0");
  CHECK(newest.get("RUN") == nullptr);

  std::vector<std::string> seen;
  for (int offset = 0; offset < 6; offset += 2) {
    const Value page = rig.ask("(:TYPE :OPERATOR :COMMAND :APPROVALS :LIMIT 2 :OFFSET " + std::to_string(offset) + ")");
    REQUIRE(is_ok_response(page));
    for (const Value& approval : page.path({"PAYLOAD", "APPROVALS"}).items()) {
      seen.emplace_back(approval.at("TOKEN").text());
    }
  }
  CHECK(seen == std::vector<std::string>(created.rbegin(), created.rend()));
  const Value past = rig.ask("(:TYPE :OPERATOR :COMMAND :APPROVALS :OFFSET 9)");
  CHECK(past.path({"PAYLOAD", "APPROVALS"}).is_nil());
  CHECK(past.path({"PAYLOAD", "TOTAL"}).as_integer() == 5);
  CHECK(past.path({"PAYLOAD", "LIMIT"}).as_integer() == 100);

  for (const auto& [request, message] : std::vector<std::pair<std::string, std::string>>{
           {":LIMIT 0", ":LIMIT must be a whole number from 1 to 1000; got 0"},
           {":LIMIT 1001", ":LIMIT must be a whole number from 1 to 1000; got 1001"},
           {":LIMIT \"ten\"", ":LIMIT must be a whole number from 1 to 1000"},
           {":OFFSET -1", ":OFFSET must be a whole number from 0 to 9223372036854775807; got -1"}}) {
    const Value bad = rig.ask("(:TYPE :OPERATOR :COMMAND :APPROVALS " + request + ")");
    INFO(request << " -> " << to_sexp(bad));
    CHECK(error_response_code(bad) == "BAD-REQUEST");
    CHECK(bad.path({"PAYLOAD", "MESSAGE"}).text() == message);
  }
}

TEST_CASE("DENY :SESSION denies a session's pending approvals, APPROVAL shows one decided, STATUS counts refusals",
          "[daemon][operator][approvals]") {
  OperatorRig rig;
  const Value action = *read_sexp("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo hi\"))");
  std::vector<std::string> flood;
  for (std::size_t i = 0; i <= ApprovalOptions::kDefaultMaxPendingPerSession; ++i) {  // one more than the bound
    auto approval = rig.approvals->create(action, *read_sexp("(:SESSION-ID \"s1\")"), {}, "");
    if (approval) flood.push_back(approval->token);
  }
  CHECK(flood.size() == ApprovalOptions::kDefaultMaxPendingPerSession);
  const std::string other = rig.approvals->create(action, *read_sexp("(:SESSION-ID \"s2\")"), {}, "")->token;
  CHECK(rig.ask("(:TYPE :OPERATOR :COMMAND :STATUS)").path({"PAYLOAD", "APPROVALS-REFUSED"}).as_integer() == 1);

  const Value denied = rig.ask("(:TYPE :OPERATOR :COMMAND :DENY :SESSION \"s1\")");
  INFO(to_sexp(denied));
  REQUIRE(is_ok_response(denied));
  CHECK(denied.path({"PAYLOAD", "MESSAGE"}).text() == "denied 20 pending approvals of session 's1'");
  CHECK(denied.path({"PAYLOAD", "DENIED"}).as_integer() == 20);
  CHECK(rig.approvals->pending_count() == 1);
  const Value again = rig.ask("(:TYPE :OPERATOR :COMMAND :DENY :SESSION \"s1\")");
  CHECK(again.path({"PAYLOAD", "MESSAGE"}).text() == "no pending approvals of session 's1'");
  CHECK(again.path({"PAYLOAD", "DENIED"}).as_integer() == 0);
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :DENY :SESSION \"s1\" :TOKEN \"" + other + "\")")) ==
        "BAD-REQUEST");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :DENY :SESSION 7)")) == "BAD-REQUEST");

  const Value shown = rig.ask("(:TYPE :OPERATOR :COMMAND :APPROVAL :TOKEN \"" + flood[0] + "\")");
  INFO(to_sexp(shown));
  REQUIRE(is_ok_response(shown));
  const Value& approval = shown.path({"PAYLOAD", "APPROVAL"});
  CHECK(approval.at("STATE").is_keyword("DENIED"));
  CHECK(approval.at("DECIDED-BY").text() == "test");
  CHECK(approval.at("DECIDED-UNIX-MS").as_integer() > 0);

  REQUIRE(rig.approvals->approve(other, "cli").has_value());
  REQUIRE(rig.approvals->record_run(other, Approval::Run::running, 1).has_value());
  REQUIRE(rig.approvals->record_run(other, Approval::Run::failed, 1, "exit status 1").has_value());
  const Value failed = rig.ask("(:TYPE :OPERATOR :COMMAND :APPROVAL :TOKEN \"" + other + "\")");
  CHECK(failed.path({"PAYLOAD", "APPROVAL", "RUN"}).is_keyword("FAILED"));
  CHECK(failed.path({"PAYLOAD", "APPROVAL", "RUN-ERROR"}).text() == "exit status 1");
  CHECK(error_response_code(rig.ask(
            "(:TYPE :OPERATOR :COMMAND :APPROVAL :TOKEN \"feedfacefeedfacefeedfacefeedface\")")) == "NOT-FOUND");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :APPROVAL)")) == "BAD-REQUEST");
}

TEST_CASE("RULE-ADD, RULES, RULE, RULE-TEST, RULES-CARRY and RULE-REMOVE change and show the rules, audited",
          "[daemon][operator][rules]") {
  OperatorRig rig;
  const auto add_rule = [&rig](const char* yaml) {
    return rig.ask(Value::plist({{"TYPE", Value::keyword("OPERATOR")},
                                 {"COMMAND", Value::keyword("RULE-ADD")},
                                 {"YAML", Value::string(yaml)}}));
  };
  const Value bad = add_rule("decision: deny\ntarget: shell\n");
  CHECK(error_response_code(bad) == "BAD-REQUEST");
  CHECK(bad.path({"PAYLOAD", "MESSAGE"}).text().find("needs a reason") != std::string_view::npos);
  CHECK(rig.rules->empty());

  const Value added = add_rule(
      "id: no-curl\ndecision: deny\ntarget: shell\ncommand: {prefix: curl}\nreason: fetch through the http tool\n");
  INFO(to_sexp(added));
  REQUIRE(is_ok_response(added));
  CHECK(added.path({"PAYLOAD", "RULE", "ID"}).text() == "no-curl");
  CHECK(added.path({"PAYLOAD", "RULE", "TAUGHT-BY"}).text() == "test");
  CHECK(error_response_code(add_rule("id: no-curl\ndecision: ask\ntarget: cli\nreason: r\n")) == "REFUSED");

  const Value listed = rig.ask("(:TYPE :OPERATOR :COMMAND :RULES)");
  REQUIRE(listed.path({"PAYLOAD", "RULES"}).size() == 1);
  CHECK(listed.path({"PAYLOAD", "FILE"}).text() == rig.rules->file().string());
  const Value shown = rig.ask(R"((:TYPE :OPERATOR :COMMAND :RULE :ID "no-curl"))");
  CHECK(shown.path({"PAYLOAD", "TEXT"}).text().find("command: {prefix: curl}") != std::string_view::npos);
  CHECK(error_response_code(rig.ask(R"((:TYPE :OPERATOR :COMMAND :RULE :ID "nope"))")) == "NOT-FOUND");

  const Value tested = rig.ask(
      R"((:TYPE :OPERATOR :COMMAND :RULE-TEST :ACTION (:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "curl -s https://example.com"))))");
  CHECK(tested.path({"PAYLOAD", "DECISION"}).text() == "deny");
  CHECK(tested.path({"PAYLOAD", "RULE", "ID"}).text() == "no-curl");
  CHECK(tested.path({"PAYLOAD", "WHY"}).text().find("before any gate runs") != std::string_view::npos);
  const Value none = rig.ask(
      R"((:TYPE :OPERATOR :COMMAND :RULE-TEST :ACTION (:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "echo curl"))))");
  CHECK(none.path({"PAYLOAD", "DECISION"}).text() == "none");
  CHECK(rig.rules->find("no-curl")->hits.load() == 0);  // a test counts no hit

  // A standing approval for pass-gate-0 1.0.0; carried to the loaded version (the same: nothing to do).
  const Value allow = add_rule("id: ls\ndecision: allow\ntarget: shell\ncommand: ls\ngates: [pass-gate-0@0.9.0]\n");
  REQUIRE(is_ok_response(allow));
  const Value carried = rig.ask(R"((:TYPE :OPERATOR :COMMAND :RULES-CARRY :NAME "pass-gate-0"))");
  INFO(to_sexp(carried));
  REQUIRE(is_ok_response(carried));
  CHECK(carried.path({"PAYLOAD", "CARRIED"}).as_integer() == 1);
  CHECK(rig.rules->find("ls")->rule.gates == std::vector<std::string>{"pass-gate-0@1.0.0"});
  CHECK(error_response_code(rig.ask(R"((:TYPE :OPERATOR :COMMAND :RULES-CARRY :NAME "absent"))")) == "NOT-FOUND");

  REQUIRE(is_ok_response(rig.ask(R"((:TYPE :OPERATOR :COMMAND :RULE-REMOVE :ID "no-curl"))")));
  CHECK(error_response_code(rig.ask(R"((:TYPE :OPERATOR :COMMAND :RULE-REMOVE :ID "no-curl"))")) == "NOT-FOUND");
  CHECK(rig.rules->find("no-curl") == nullptr);
  const Value status = rig.ask("(:TYPE :OPERATOR :COMMAND :STATUS)");
  CHECK(status.path({"PAYLOAD", "RULES", "ALLOW"}).as_integer() == 1);
  CHECK(status.path({"PAYLOAD", "RULES", "DENY"}).as_integer() == 0);

  auto history = rig.host->history(20);
  REQUIRE(history.has_value());
  std::vector<std::string> audited;
  for (const auto& change : *history) {
    if (change.action.rfind("rule", 0) == 0) audited.push_back(change.action + " " + change.skill);
  }
  CHECK(audited ==
        std::vector<std::string>{"rule-remove no-curl", "rule-carry pass-gate-0", "rule-add ls", "rule-add no-curl"});
}

TEST_CASE("APPROVE :REMEMBER teaches nothing it cannot keep narrow, nor for an approval that did not run",
          "[daemon][operator][rules][approvals]") {
  OperatorRig rig;
  auto create = [&](const char* action, const char* session, std::vector<std::string> gates) {
    auto approval =
        rig.approvals->create(*read_sexp(action), *read_sexp(std::string("(:SESSION-ID \"") + session + "\")"),
                              std::move(gates), "a gate asks");
    REQUIRE(approval.has_value());
    return approval->token;
  };
  const auto remember = [&](const std::string& token, const std::string& more = {}) {
    return rig.ask("(:TYPE :OPERATOR :COMMAND :APPROVE :TOKEN \"" + token + "\" :REMEMBER T" + more + ")");
  };
  const std::string shell =
      create(R"((:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "ls | wc -l")))", "s1", {"pass-gate-0@1.0.0"});
  const Value prefix = remember(shell, R"( :MATCH "prefix")");
  CHECK(error_response_code(prefix) == "BAD-REQUEST");
  CHECK(prefix.path({"PAYLOAD", "MESSAGE"}).text().find("nothing was approved") != std::string_view::npos);
  CHECK(rig.approvals->find(shell)->state == Approval::State::pending);

  const std::string asked = create(R"((:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "ls")))", "s1", {"rules@host"});
  CHECK(remember(asked).path({"PAYLOAD", "MESSAGE"}).text().find("ask beats allow") != std::string_view::npos);

  const std::string gone =
      create(R"((:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "ls")))", "s9", {"pass-gate-0@1.0.0"});
  CHECK(remember(gone, R"( :SCOPE "session")").path({"PAYLOAD", "MESSAGE"}).text().find("has ended") !=
        std::string_view::npos);

  // Nothing in this rig serves :SHELL: the approval is refused and stays pending, and no rule is taught.
  const Value refused = remember(shell);
  CHECK_FALSE(is_ok_response(refused));
  CHECK(refused.path({"PAYLOAD", "MESSAGE"}).text().find("nothing was remembered") != std::string_view::npos);
  CHECK(rig.rules->empty());
  CHECK(rig.approvals->find(shell)->state == Approval::State::pending);
  CHECK(error_response_code(remember(shell, R"( :MATCH "wide")")) == "BAD-REQUEST");
}

}  // namespace passepartout

namespace passepartout {
namespace {

// A manifest for shadow-gate `version` (1 or 2) in mode `mode`, written as `file`.
std::string write_shadow_manifest(OperatorRig& rig, const std::string& file, int version, std::string_view mode) {
  rig.fx.install_library("shadow-gate-" + std::to_string(version));
  return rig.fx
      .write_manifest(
          file, "name: shadow-gate\nversion: " + std::to_string(version) + ".0.0\nlibrary: libshadow-gate-" +
                    std::to_string(version) +
                    ".so\nabi: 1\nisolation: in-process\npriority: 20\nconfig: { mode: " + std::string(mode) + " }\n")
      .string();
}

std::string quoted(const std::string& text) { return "\"" + text + "\""; }

}  // namespace

TEST_CASE("SHADOW, SHADOW-STATUS, PROMOTE and SHADOW-STOP go through the host, audited", "[daemon][operator][shadow]") {
  OperatorRig rig;
  const std::string live = write_shadow_manifest(rig, "shadow-live.yaml", 1, "pass");
  REQUIRE(is_ok_response(rig.ask("(:TYPE :OPERATOR :COMMAND :LOAD :MANIFEST " + quoted(live) + ")")));
  // The candidate's manifest lives beside the live one here; an operator keeps it out of the folder.
  const std::string candidate = write_shadow_manifest(rig, "shadow-candidate.yaml", 2, "block");

  // Errors are precise and change nothing.
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :SHADOW)")) == "BAD-REQUEST");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :SHADOW :MANIFEST \"/no/such.yaml\")")) == "NOT-FOUND");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :PROMOTE :NAME \"shadow-gate\")")) == "NOT-FOUND");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :SHADOW-STOP :NAME \"shadow-gate\")")) == "NOT-FOUND");
  CHECK(error_response_code(rig.ask("(:TYPE :OPERATOR :COMMAND :SHADOW-STATUS :NAME \"shadow-gate\")")) == "NOT-FOUND");
  const std::string not_loaded = rig.fx.write_manifest("ghost.yaml", SkillFixtures::yaml("pass-gate-2", 5)).string();
  rig.fx.install_library("pass-gate-2");
  const Value refused = rig.ask("(:TYPE :OPERATOR :COMMAND :SHADOW :MANIFEST " + quoted(not_loaded) + ")");
  INFO(to_sexp(refused));
  CHECK(error_response_code(refused) == "REFUSED");
  CHECK(refused.path({"PAYLOAD", "MESSAGE"}).text().find("'pass-gate-2' is not loaded") != std::string_view::npos);

  const Value shadowed = rig.ask("(:TYPE :OPERATOR :COMMAND :SHADOW :MANIFEST " + quoted(candidate) + ")");
  INFO(to_sexp(shadowed));
  REQUIRE(is_ok_response(shadowed));
  CHECK(shadowed.path({"PAYLOAD", "CHANGES"}).items()[0].at("KIND").text() == "shadow");

  // Two verifications through the pipeline's own path: the live gate passes, the candidate would block.
  for (int i = 0; i < 2; ++i) {
    Verification v;
    verify_and_record(DecisionStage::reason, rig.host->snapshot(),
                      *read_sexp("(:TYPE :REQUEST :TARGET :CLI :PAYLOAD (:TEXT \"x\"))"),
                      *read_sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hi\"))"), v);
    CHECK(v.outcome == VerifyOutcome::passed);
  }

  const Value status = rig.ask("(:TYPE :OPERATOR :COMMAND :SHADOW-STATUS :NAME \"shadow-gate\")");
  INFO(to_sexp(status));
  REQUIRE(is_ok_response(status));
  const Value& shadows = status.path({"PAYLOAD", "SHADOWS"});
  REQUIRE(shadows.size() == 1);
  const Value& entry = shadows.items()[0];
  CHECK(entry.at("NAME").text() == "shadow-gate");
  CHECK(entry.at("LIVE-VERSION").text() == "1.0.0");
  CHECK(entry.at("CANDIDATE-VERSION").text() == "2.0.0");
  CHECK(entry.at("SEEN").as_integer() == 2);
  CHECK(entry.at("AGREEMENTS").as_integer() == 0);
  CHECK(entry.at("DISAGREEMENTS").as_integer() == 2);
  CHECK(entry.at("CANDIDATE-BLOCKS").as_integer() == 2);
  REQUIRE(entry.at("LATEST").size() == 2);
  CHECK(entry.at("LATEST").items()[0].at("CANDIDATE-REASON").text() == "shadow-gate 2.0.0 says no");
  // STATUS mentions it too.
  CHECK(rig.ask("(:TYPE :OPERATOR :COMMAND :STATUS)").path({"PAYLOAD", "SHADOWS"}).size() == 1);

  SECTION("promote") {
    const Value promoted = rig.ask("(:TYPE :OPERATOR :COMMAND :PROMOTE :NAME \"shadow-gate\")");
    INFO(to_sexp(promoted));
    REQUIRE(is_ok_response(promoted));
    const Value& change = promoted.path({"PAYLOAD", "CHANGES"}).items()[0];
    CHECK(change.at("KIND").text() == "promote");
    CHECK(change.at("TO-VERSION").text() == "2.0.0");
    CHECK(change.at("DETAIL").text().find("\"seen\":2") != std::string_view::npos);
    CHECK(rig.host->snapshot()->find("shadow-gate")->version_text() == "2.0.0");
    const Value history = rig.ask("(:TYPE :OPERATOR :COMMAND :HISTORY :LIMIT 2 :SKILL \"shadow-gate\")");
    const Value& listed = history.path({"PAYLOAD", "CHANGES"});
    REQUIRE(listed.size() == 2);
    CHECK(listed.items()[0].at("KIND").text() == "promote");
    CHECK(listed.items()[1].at("KIND").text() == "shadow");
  }
  SECTION("stop") {
    const Value stopped = rig.ask("(:TYPE :OPERATOR :COMMAND :SHADOW-STOP :NAME \"shadow-gate\")");
    INFO(to_sexp(stopped));
    REQUIRE(is_ok_response(stopped));
    CHECK(rig.host->snapshot()->find("shadow-gate")->version_text() == "1.0.0");
    CHECK(rig.ask("(:TYPE :OPERATOR :COMMAND :SHADOW-STATUS)").path({"PAYLOAD", "SHADOWS"}).is_nil());
    const Value history = rig.ask("(:TYPE :OPERATOR :COMMAND :HISTORY :LIMIT 1 :SKILL \"shadow-gate\")");
    const Value& last = history.path({"PAYLOAD", "CHANGES"}).items()[0];
    CHECK(last.at("KIND").text() == "shadow-stop");
    CHECK(last.at("DETAIL").text().find("\"candidate-blocks\":2") != std::string_view::npos);
  }
}

}  // namespace passepartout
