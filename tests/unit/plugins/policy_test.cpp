// Tests of the bundled policy skill, loaded from its manifest and library
// through the host: the explanation threshold, counted in code points.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "configured_skills.hpp"
#include "support/skill_harness.hpp"
#include "value/value.hpp"

namespace {

using passepartout::Value;
using passepartout::testing::ConfiguredSkills;
using passepartout::testing::SkillHarness;

constexpr std::string_view kReason =
    "Action blocked: Missing or insufficient :explanation. Please justify your reasoning.";
constexpr std::string_view kViolationLog = "policy: POLICY VIOLATION: Action lacks sufficient explanation.";

// A request to the TUI whose payload carries `explanation` (an s-expression).
std::string request_explaining(std::string_view explanation) {
  return "(:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:TEXT \"hello\" :EXPLANATION " + std::string(explanation) + "))";
}

// `text` as an s-expression string literal.
std::string quoted(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The one trace entry of `result`, which ran a single gate.
const Value& only_trace_entry(const Value& result) {
  REQUIRE(result.at("GATE-TRACE").size() == 1);
  return result.at("GATE-TRACE").items()[0];
}

void require_passed(const Value& result) {
  CHECK(result.at("TYPE").is_keyword("REQUEST"));
  const Value& entry = only_trace_entry(result);
  CHECK(entry.at("GATE").text() == "policy");
  CHECK(entry.at("VERSION").text() == "1.0.0");
  CHECK(entry.at("RESULT").is_keyword("PASSED"));
}

void require_blocked(const Value& result) {
  CHECK(result.at("TYPE").is_keyword("LOG"));
  CHECK(result.path({"PAYLOAD", "LEVEL"}).is_keyword("WARN"));
  CHECK(result.path({"PAYLOAD", "TEXT"}).text() == kReason);
  const Value& entry = only_trace_entry(result);
  CHECK(entry.at("GATE").text() == "policy");
  CHECK(entry.at("RESULT").is_keyword("BLOCKED"));
  CHECK(entry.at("REASON").text() == kReason);
}

bool logged(const SkillHarness& harness, std::string_view line) {
  const std::vector<std::string> lines = harness.logs();
  return std::find(lines.begin(), lines.end(), line) != lines.end();
}

}  // namespace

TEST_CASE("policy passes an explanation of eleven characters and blocks one of ten", "[plugins]") {
  SkillHarness harness{"policy"};

  SECTION("eleven characters pass") {
    require_passed(harness.verify(request_explaining(quoted("12345678901"))));
    CHECK_FALSE(logged(harness, kViolationLog));
  }
  SECTION("ten characters are blocked, with a warning in the log") {
    require_blocked(harness.verify(request_explaining(quoted("1234567890"))));
    CHECK(logged(harness, kViolationLog));
  }
  SECTION("an empty explanation is blocked") { require_blocked(harness.verify(request_explaining(quoted("")))); }
}

TEST_CASE("policy counts an explanation's length in code points, not bytes", "[plugins]") {
  SkillHarness harness{"policy"};

  SECTION("eleven two-byte characters pass") {
    require_passed(harness.verify(request_explaining(quoted("ééééééééééé"))));
  }
  SECTION("ten two-byte characters (twenty bytes) are blocked") {
    require_blocked(harness.verify(request_explaining(quoted("éééééééééé"))));
  }
  SECTION("ten characters mixing one- and two-byte ones are blocked") {
    require_blocked(harness.verify(request_explaining(quoted("naïve café"))));
  }
  SECTION("eleven four-byte characters pass") {
    require_passed(harness.verify(request_explaining(quoted("🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂"))));
  }
  SECTION("ten four-byte characters (forty bytes) are blocked") {
    require_blocked(harness.verify(request_explaining(quoted("🙂🙂🙂🙂🙂🙂🙂🙂🙂🙂"))));
  }
}

TEST_CASE("policy blocks an action without an explanation string", "[plugins]") {
  SkillHarness harness{"policy"};

  SECTION("no payload") { require_blocked(harness.verify("(:TYPE :REQUEST :TARGET :TUI)")); }
  SECTION("a payload without :EXPLANATION") {
    require_blocked(harness.verify("(:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:TEXT \"hello\"))"));
  }
  SECTION("a payload that is not a property list") {
    require_blocked(harness.verify("(:TYPE :REQUEST :TARGET :TUI :PAYLOAD \"a long enough payload text\")"));
  }
  SECTION("an explanation at the top level instead of in the payload") {
    require_blocked(
        harness.verify("(:TYPE :REQUEST :TARGET :TUI :EXPLANATION \"a long enough explanation\" :PAYLOAD (:TEXT "
                       "\"hello\"))"));
  }
  SECTION("an explanation that is NIL") { require_blocked(harness.verify(request_explaining("NIL"))); }
  SECTION("an explanation that is an integer") {
    require_blocked(harness.verify(request_explaining("123456789012345")));
  }
  SECTION("an explanation that is a symbol") {
    require_blocked(harness.verify(request_explaining("A-LONG-ENOUGH-SYMBOL")));
  }
  SECTION("an explanation that is a keyword") {
    require_blocked(harness.verify(request_explaining(":A-LONG-ENOUGH-KEYWORD")));
  }
  SECTION("an explanation that is a list of strings") {
    require_blocked(harness.verify(request_explaining("(\"a long enough\" \"explanation\")")));
  }
}

TEST_CASE("policy passes rejections and log lines, which are shown rather than run", "[plugins]") {
  SkillHarness harness{"policy"};

  const Value result = harness.verify("(:TYPE :LOG :PAYLOAD (:LEVEL :ERROR :TEXT \"Shell command blocked\"))");
  CHECK(result.at("TYPE").is_keyword("LOG"));
  CHECK(only_trace_entry(result).at("RESULT").is_keyword("PASSED"));
  CHECK_FALSE(logged(harness, kViolationLog));
}

TEST_CASE("policy reads its threshold from config min_explanation_length", "[plugins]") {
  SECTION("a lower threshold lets a short explanation through") {
    ConfiguredSkills skills({"policy"}, "policy", "{min_explanation_length: 3}");
    require_passed(skills.verify(request_explaining(quoted("four"))));
    require_blocked(skills.verify(request_explaining(quoted("two"))));
  }
  SECTION("a higher threshold blocks what the default lets through") {
    ConfiguredSkills skills({"policy"}, "policy", "{min_explanation_length: 20}");
    require_blocked(skills.verify(request_explaining(quoted("twenty chars exactly"))));
    require_passed(skills.verify(request_explaining(quoted("twenty-one characters"))));
  }
  SECTION("zero still requires a non-empty explanation") {
    ConfiguredSkills skills({"policy"}, "policy", "{min_explanation_length: 0}");
    require_passed(skills.verify(request_explaining(quoted("é"))));
    require_blocked(skills.verify(request_explaining(quoted(""))));
  }
  SECTION("null, or no config at all, means the default of ten") {
    const std::string config = GENERATE(as<std::string>{}, "{min_explanation_length: null}", "{}");
    CAPTURE(config);
    ConfiguredSkills skills({"policy"}, "policy", config);
    require_passed(skills.verify(request_explaining(quoted("12345678901"))));
    require_blocked(skills.verify(request_explaining(quoted("1234567890"))));
  }
}

TEST_CASE("policy refuses to load with a threshold that is not a non-negative integer", "[plugins]") {
  const std::string config = GENERATE(as<std::string>{}, "{min_explanation_length: -1}",
                                      "{min_explanation_length: ten}", "{min_explanation_length: 2.5}");
  CAPTURE(config);
  ConfiguredSkills skills({"policy"}, "policy", config);
  CHECK_THAT(skills.load_errors(),
             Catch::Contains("skill 'policy'") &&
                 Catch::Contains("config min_explanation_length: expected a non-negative integer"));
}
