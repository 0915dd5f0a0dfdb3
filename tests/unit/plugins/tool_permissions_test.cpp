// Tests of the bundled tool-permissions gate (seed I4), verified through the
// host: each tool call is allowed, sent for approval or denied by its
// configured level; tools the table does not name need approval.
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

// A model tool call of `tool` (written as an s-expression: "\"shell\"", :shell, shell).
std::string tool_call(std::string_view tool, std::string_view target = ":TOOL") {
  return "(:TYPE :REQUEST :TARGET " + std::string(target) + " :PAYLOAD (:TOOL " + std::string(tool) +
         " :ARGS (:FILEPATH \"notes.txt\")))";
}

void require_passed(const Value& result) {
  CHECK(result.at("TYPE").is_keyword("REQUEST"));
  CHECK(result.at("GATE-TRACE").items().size() == 1);
}

void require_approval(const Value& result, std::string_view name) {
  CHECK(result.at("LEVEL").is_keyword("APPROVAL-REQUIRED"));
  CHECK(result.path({"PAYLOAD", "REASON"}).text() ==
        "Tool '" + std::string(name) + "' requires approval by tool-permissions");
}

void require_denied(const Value& result, std::string_view name) {
  CHECK(result.at("TYPE").is_keyword("LOG"));
  CHECK(result.path({"PAYLOAD", "LEVEL"}).is_keyword("ERROR"));
  CHECK(result.path({"PAYLOAD", "TEXT"}).text() == "Tool '" + std::string(name) + "' is denied by tool-permissions");
}

}  // namespace

TEST_CASE("tool-permissions applies the bundled table: the reading tools allowed, writing ones and shell asked",
          "[plugins]") {
  SkillHarness harness{"tool-permissions"};
  require_passed(harness.verify(tool_call("\"read-file\"")));
  require_passed(harness.verify(tool_call("\"list-files\"")));
  require_passed(harness.verify(tool_call("\"search-files\"")));
  require_approval(harness.verify(tool_call("\"write-file\"")), "write-file");
  require_approval(harness.verify(tool_call("\"edit-file\"")), "edit-file");
  require_approval(harness.verify(tool_call("\"shell\"")), "shell");
}

TEST_CASE("tool-permissions asks approval for a tool its table does not name", "[plugins]") {
  SkillHarness harness{"tool-permissions"};
  const Value result = harness.verify(tool_call("\"launch-rocket\""));
  require_approval(result, "launch-rocket");
  CHECK(result.path({"PAYLOAD", "ACTION", "PAYLOAD", "TOOL"}).text() == "launch-rocket");
}

TEST_CASE("tool-permissions denies a tool configured deny", "[plugins]") {
  ConfiguredSkills skills({"tool-permissions"}, "tool-permissions",
                          "{tools: {shell: deny, read-file: ALLOW, list_dir: Ask}}");
  require_denied(skills.verify(tool_call("\"shell\"")), "shell");
  require_passed(skills.verify(tool_call("\"read-file\"")));
  require_approval(skills.verify(tool_call("\"list_dir\"")), "list_dir");
  require_approval(skills.verify(tool_call("\"write-file\"")), "write-file");
}

TEST_CASE("tool-permissions learns name patterns: a name wins, then the longest pattern", "[plugins]") {
  ConfiguredSkills skills({"tool-permissions"}, "tool-permissions",
                          "{tools: {\"mcp__*\": ask, \"mcp__fs__*\": allow, \"mcp__fs__write*\": deny, "
                          "mcp__fs__write_note: allow, \"*_danger\": deny}}");
  require_passed(skills.verify(tool_call("\"mcp__fs__read_text_file\"")));
  require_denied(skills.verify(tool_call("\"mcp__fs__write_file\"")), "mcp__fs__write_file");
  require_passed(skills.verify(tool_call("\"mcp__fs__write_note\"")));  // its own name wins
  require_approval(skills.verify(tool_call("\"mcp__git__status\"")), "mcp__git__status");
  require_denied(skills.verify(tool_call("\"rocket_danger\"")), "rocket_danger");
  require_approval(skills.verify(tool_call("\"mcp_fs\"")), "mcp_fs");  // matches no pattern: asked (I4)
}

TEST_CASE("tool-permissions asks for every MCP tool as bundled", "[plugins]") {
  SkillHarness harness{"tool-permissions"};
  require_approval(harness.verify(tool_call("\"mcp__everything__echo\"")), "mcp__everything__echo");
}

TEST_CASE("tool-permissions reads tool names and targets in any case and form", "[plugins]") {
  ConfiguredSkills skills({"tool-permissions"}, "tool-permissions", "{tools: {Shell: deny, read-file: allow}}");
  const std::string tool = GENERATE(as<std::string>{}, "\"shell\"", "\"SHELL\"", "\"Shell\"", "shell", ":shell");
  // A string or symbol with a leading ':' too: the host reads it as the keyword.
  const std::string target = GENERATE(as<std::string>{}, ":TOOL", ":tool", "\"tool\"", "TOOL", "\":tool\"", "|:tool|");
  CAPTURE(tool, target);
  require_denied(skills.verify(tool_call(tool, target)), "shell");
  require_passed(skills.verify(tool_call("\"READ-FILE\"", target)));
}

TEST_CASE("tool-permissions passes actions that are not tool calls", "[plugins]") {
  ConfiguredSkills skills({"tool-permissions"}, "tool-permissions", "{tools: {shell: deny}}");
  require_passed(skills.verify("(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"ls\"))"));
  require_passed(skills.verify("(:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:TOOL \"shell\" :TEXT \"hi\"))"));
  const Value log = skills.verify("(:TYPE :LOG :PAYLOAD (:LEVEL :ERROR :TEXT \"no\"))");
  CHECK(log.at("TYPE").is_keyword("LOG"));
  CHECK(log.at("GATE-TRACE").items()[0].at("RESULT").is_keyword("PASSED"));
}

TEST_CASE("tool-permissions blocks a tool call that does not name its tool", "[plugins]") {
  SkillHarness harness{"tool-permissions"};
  auto blocked = [&](std::string_view action, std::string_view shown) {
    const Value result = harness.verify(action);
    CHECK(result.at("TYPE").is_keyword("LOG"));
    CHECK(result.path({"PAYLOAD", "TEXT"}).text() ==
          "Tool call blocked: :PAYLOAD :TOOL must name the tool, got " + std::string(shown));
  };
  blocked("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:ARGS (:CMD \"ls\")))", "NIL");
  blocked("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL (\"shell\")))", "(\"shell\")");
  blocked("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"\"))", "\"\"");
}

TEST_CASE("tool-permissions with no table asks approval for every tool", "[plugins]") {
  ConfiguredSkills skills({"tool-permissions"}, "tool-permissions", "{}");
  require_approval(skills.verify(tool_call("\"read-file\"")), "read-file");
}

TEST_CASE("tool-permissions refuses to load with malformed config", "[plugins]") {
  using Case = std::pair<std::string, std::string>;  // config, expected message
  const Case bad =
      GENERATE(Case{"{tools: {shell: maybe}}", "config tools: 'shell': expected allow, ask or deny, got \"maybe\""},
               Case{"{tools: {shell: 1}}", "config tools: 'shell': expected allow, ask or deny, got 1"},
               Case{"{tools: [shell, deny]}",
                    "config tools: expected a map of tool name to allow, ask or deny, got (\"shell\" \"deny\")"},
               Case{"{tools: deny}", "config tools: expected a map of tool name to allow, ask or deny, got \"deny\""});
  CAPTURE(bad.first);
  ConfiguredSkills skills({"tool-permissions"}, "tool-permissions", bad.first);
  CHECK_THAT(skills.load_errors(), Catch::Contains("skill 'tool-permissions'") && Catch::Contains(bad.second));
}
