// Tests of the bundled protocol-validator skill, loaded from its manifest and
// library through the host: which message types pass and how others are reported.
#include <catch2/catch.hpp>

#include <string>
#include <string_view>

#include "support/skill_harness.hpp"
#include "value/value.hpp"

namespace {

using passepartout::Value;
using passepartout::testing::SkillHarness;

const Value& only_trace_entry(const Value& result) {
  REQUIRE(result.at("GATE-TRACE").size() == 1);
  return result.at("GATE-TRACE").items()[0];
}

// Requires that `action` was blocked with "Protocol Violation: Invalid message type '<printed>'".
void require_invalid_type(SkillHarness& harness, std::string_view action, std::string_view printed) {
  CAPTURE(action);
  const Value result = harness.verify(action);
  const std::string reason = "Protocol Violation: Invalid message type '" + std::string(printed) + "'";
  CHECK(result.at("TYPE").is_keyword("LOG"));
  CHECK(result.path({"PAYLOAD", "LEVEL"}).is_keyword("ERROR"));
  CHECK(result.path({"PAYLOAD", "TEXT"}).text() == reason);
  const Value& entry = only_trace_entry(result);
  CHECK(entry.at("GATE").text() == "protocol-validator");
  CHECK(entry.at("VERSION").text() == "1.0.0");
  CHECK(entry.at("RESULT").is_keyword("BLOCKED"));
  CHECK(entry.at("REASON").text() == reason);
}

}  // namespace

TEST_CASE("protocol-validator passes every protocol message type", "[plugins]") {
  SkillHarness harness{"protocol-validator"};
  const std::string type =
      GENERATE(as<std::string>{}, ":REQUEST", ":EVENT", ":RESPONSE", ":LOG", ":STATUS", ":request", ":Event");
  CAPTURE(type);

  const Value result = harness.verify("(:TYPE " + type + " :TARGET :TUI :PAYLOAD (:TEXT \"hi\"))");
  CHECK(result.at("TARGET").is_keyword("TUI"));
  CHECK(only_trace_entry(result).at("RESULT").is_keyword("PASSED"));
}

TEST_CASE("protocol-validator blocks an unknown or missing message type, printing it", "[plugins]") {
  SkillHarness harness{"protocol-validator"};

  SECTION("no :TYPE") { require_invalid_type(harness, "(:TARGET :TUI :PAYLOAD (:TEXT \"hi\"))", "NIL"); }
  SECTION(":TYPE NIL") { require_invalid_type(harness, "(:TYPE NIL :TARGET :TUI)", "NIL"); }
  SECTION("an unknown keyword") { require_invalid_type(harness, "(:TYPE :COMMAND :TARGET :TUI)", ":COMMAND"); }
  SECTION("a bare symbol, as an unnormalised model reply leaves it") {
    require_invalid_type(harness, "(:TYPE request :PAYLOAD (ACTION MESSAGE))", "REQUEST");
  }
  SECTION("a string") { require_invalid_type(harness, "(:TYPE \"x\" :TARGET :TUI)", "\"x\""); }
  SECTION("an integer") { require_invalid_type(harness, "(:TYPE 42)", "42"); }
  SECTION("a list") { require_invalid_type(harness, "(:TYPE (:REQUEST) :TARGET :TUI)", "(:REQUEST)"); }
}

TEST_CASE("protocol-validator blocks an action that is not a property list", "[plugins]") {
  SkillHarness harness{"protocol-validator"};

  SECTION("a string") { require_invalid_type(harness, "\"rm -rf /\"", "NIL"); }
  SECTION("a keyword") { require_invalid_type(harness, ":REQUEST", "NIL"); }
  SECTION("an integer") { require_invalid_type(harness, "7", "NIL"); }
  SECTION("the empty list") { require_invalid_type(harness, "()", "NIL"); }
  SECTION("a list without keys") { require_invalid_type(harness, "(1 2 3)", "NIL"); }
}
