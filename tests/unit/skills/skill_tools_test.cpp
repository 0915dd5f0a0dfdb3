// ABI 1.1 through the host: the loader reads tools and actuators (and refuses
// bad ones, naming them), a 1.0 skill still loads, Slot calls the new hooks,
// and a Snapshot finds tools and actuators by name and orders observers.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/log.hpp"
#include "skills/registry.hpp"
#include "skills/skill_loader.hpp"
#include "support/sexp.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;
using passepartout::testing::SkillFixtures;

namespace {

using passepartout::testing::sexp;

// A skill that offers tools and actuators names a guard (here one that is
// never loaded: these tests call the slot itself, below the guard rule).
constexpr std::string_view kGuarded = "guarded_by: [pass-gate-0]\n";

std::shared_ptr<Slot> load(SkillFixtures& fx, std::string_view name, int priority = 10) {
  auto slot = fx.loader().load(fx.manifest(name, priority, kGuarded));
  INFO((slot ? std::string() : slot.error().message));
  REQUIRE(slot.has_value());
  return *slot;
}

std::string load_error(SkillFixtures& fx, std::string_view name) {
  auto slot = fx.loader().load(fx.manifest(name, 10, kGuarded));
  REQUIRE_FALSE(slot.has_value());
  return slot.error().message;
}

const Value kSignal = *read_sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hello\"))");

}  // namespace

TEST_CASE("an ABI 1.0 skill loads and offers no tools, actuators or 1.1 hooks", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = load(fx, "legacy-1-0");
  CHECK(slot->api().abi_minor == 0);
  CHECK(slot->has_gate());
  CHECK(slot->has_trigger_hook());
  CHECK(slot->tools().empty());
  CHECK(slot->actuators().empty());
  CHECK_FALSE(slot->has_observe());
  CHECK_FALSE(slot->has_error_policy());
  CHECK(slot->api().call_tool == nullptr);
  CHECK(slot->api().act == nullptr);
  CHECK(slot->observe(kSignal).has_value());  // nothing to call: nothing fails
  CHECK_FALSE(slot->error_policy(kSignal, sexp("(:MESSAGE \"skip\")")).has_value());

  auto tool = slot->call_tool(0, Value(), kSignal);
  REQUIRE_FALSE(tool.has_value());
  CHECK(tool.error().code == ErrorCode::not_found);
  CHECK(tool.error().message == "skill 'legacy-1-0' has no tool #0 (it offers 0)");
  auto acted = slot->act(0, Value(), kSignal);
  REQUIRE_FALSE(acted.has_value());
  CHECK(acted.error().message == "skill 'legacy-1-0' has no actuator #0 (it serves 0)");

  Registry registry;
  auto snapshot = registry.publish({slot});
  CHECK(snapshot->gates().size() == 1);
  CHECK(snapshot->tools().empty());
  CHECK(snapshot->observers().empty());
}

TEST_CASE("loader reads an ABI 1.1 skill's tools, with parameters as a Value and as JSON", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = load(fx, "toolbox-a");
  CHECK(slot->api().abi_minor == PP_ABI_MINOR);
  REQUIRE(slot->tools().size() == 3);

  const SkillTool& echo = slot->tools()[0];
  CHECK(echo.name == "echo-args");
  CHECK(echo.description == "Echoes its arguments");
  CHECK(echo.parameters.at("TYPE").text() == "object");
  CHECK(echo.parameters.path({"PROPERTIES", "TEXT", "DESCRIPTION"}).text() == "what to echo");
  CHECK(to_sexp(echo.parameters.at("REQUIRED")) == "(\"text\")");
  CHECK(echo.parameters.get("ADDITIONALPROPERTIES") != nullptr);
  CHECK_THAT(echo.parameters_json,
             Catch::StartsWith("{\"type\": \"object\"") && Catch::Contains("\"additionalProperties\": false"));

  const SkillTool& fail = slot->tools()[1];
  CHECK(fail.name == "fail");
  CHECK(fail.parameters.is_nil());
  CHECK(fail.parameters_json.empty());

  const SkillTool& observed = slot->tools()[2];
  CHECK(observed.name == "observed");
  CHECK(observed.description.empty());
  CHECK(observed.parameters.at("TYPE").text() == "object");

  REQUIRE(slot->actuators().size() == 1);
  CHECK(slot->actuators()[0] == "RECORDER");  // declared "Recorder": upper-cased as a keyword
  CHECK(slot->has_observe());
  CHECK(slot->has_error_policy());
  CHECK_FALSE(slot->has_gate());
}

TEST_CASE("a tool's result is copied out of the call, a throwing tool fails with its what()", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = load(fx, "toolbox-a");

  auto echoed = slot->call_tool(0, sexp("(:TEXT \"hi\")"), kSignal);
  REQUIRE(echoed.has_value());
  CHECK(to_sexp(*echoed) == "(:ECHO (:TEXT \"hi\") :TEXT \"hello\" :SKILL \"toolbox-a\")");

  auto failed = slot->call_tool(1, Value(), kSignal);
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().code == ErrorCode::failed);
  CHECK(failed.error().message == "the toolbox tool failed on purpose");

  auto missing = slot->call_tool(3, Value(), kSignal);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message == "skill 'toolbox-a' has no tool #3 (it offers 3)");
}

TEST_CASE("an actuator carries out the action it is given, and its failure has the skill's text", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = load(fx, "toolbox-a");
  const Value action = sexp("(:TYPE :REQUEST :TARGET :RECORDER :PAYLOAD (:TEXT \"x\"))");

  auto acted = slot->act(0, action, kSignal);
  REQUIRE(acted.has_value());
  CHECK(acted->at("RECORDED") == action);
  CHECK(acted->at("TARGET").text() == "Recorder");  // the name as the skill declared it

  auto jammed = slot->act(0, action.with("JAM", Value::t()), kSignal);
  REQUIRE_FALSE(jammed.has_value());
  CHECK(jammed.error().code == ErrorCode::failed);
  CHECK(jammed.error().message == "the recorder jammed");
}

TEST_CASE("observe reaches the skill, and a failing observe reports the skill's text", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = load(fx, "toolbox-a");
  const Value heartbeat = sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :HEARTBEAT :UNIX-TIME 3900000000))");
  REQUIRE(slot->observe(heartbeat).has_value());
  REQUIRE(slot->observe(heartbeat).has_value());
  auto count = slot->call_tool(2, Value(), kSignal);
  REQUIRE(count.has_value());
  CHECK(count->as_integer() == 2);

  auto choked = slot->observe(sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :HEARTBEAT :TEXT \"boom\"))"));
  REQUIRE_FALSE(choked.has_value());
  CHECK(choked.error().code == ErrorCode::failed);
  CHECK(choked.error().message == "observe choked");
}

TEST_CASE("an error policy can skip, fall back, abort or leave the default", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = load(fx, "toolbox-a");
  auto choose = [&](std::string_view message) {
    return slot->error_policy(kSignal, Value::plist({{"MESSAGE", Value::string(message)}}));
  };

  auto skip = choose("skip");
  REQUIRE(skip.has_value());
  CHECK(skip->kind == ErrorChoice::Kind::skip);
  CHECK(skip->text.is_nil());

  auto fallback = choose("fallback");
  REQUIRE(fallback.has_value());
  CHECK(fallback->kind == ErrorChoice::Kind::fallback);
  CHECK(fallback->text == Value::string("carry on"));

  auto abort = choose("abort");
  REQUIRE(abort.has_value());
  CHECK(abort->kind == ErrorChoice::Kind::abort);

  auto standard = choose("anything else");
  REQUIRE(standard.has_value());
  CHECK(standard->kind == ErrorChoice::Kind::standard);
  CHECK(std::string(to_string(standard->kind)) == "standard");

  LogCapture capture;
  CHECK_FALSE(choose("throw").has_value());
  CHECK(capture.contains("toolbox-a: error policy failed (the default error handling applies): policy exploded"));
}

TEST_CASE("loader refuses ABI 1.1 tables with bad tools or actuators, naming them", "[skills][loader]") {
  SkillFixtures fx;
  SECTION("parameters that are not JSON name the skill, the tool and the JSON error") {
    CHECK_THAT(
        load_error(fx, "bad-tools-bad-json"),
        Catch::StartsWith("skill 'bad-tools-bad-json': tool 'read-file': the parameters are not valid JSON: byte ") &&
            Catch::Contains("invalid JSON"));
  }
  SECTION("parameters that are not a JSON object") {
    CHECK(load_error(fx, "bad-tools-not-object") ==
          "skill 'bad-tools-not-object': tool 'read-file': the parameters must be a JSON object "
          "({\"type\": \"object\", ...}), got '[\"filepath\"]'");
  }
  SECTION("a tool declared twice") {
    CHECK(load_error(fx, "bad-tools-duplicate-tool") ==
          "skill 'bad-tools-duplicate-tool': tool 'read-file' is declared twice");
  }
  SECTION("a tool name that is not lower-case letters, digits, '-' and '_'") {
    CHECK(load_error(fx, "bad-tools-bad-tool-name") ==
          "skill 'bad-tools-bad-tool-name': tool #0: name 'Read File' is not 1 to 64 lower-case letters, "
          "digits, '-' and '_'");
  }
  SECTION("tools without call_tool") {
    CHECK(load_error(fx, "bad-tools-tools-without-hook") ==
          "skill 'bad-tools-tools-without-hook': the skill declares tools but no call_tool hook to run them");
  }
  SECTION("actuators without act") {
    CHECK(load_error(fx, "bad-tools-actuators-without-hook") ==
          "skill 'bad-tools-actuators-without-hook': the skill declares actuators but no act hook to run them");
  }
  SECTION("an actuator name with a blank") {
    CHECK(load_error(fx, "bad-tools-bad-actuator-name") ==
          "skill 'bad-tools-bad-actuator-name': actuator #0: name 'sh ell' is not 1 to 64 letters, digits, "
          "'-' and '_'");
  }
  SECTION("an actuator declared twice, in two cases") {
    CHECK(load_error(fx, "bad-tools-duplicate-actuator") ==
          "skill 'bad-tools-duplicate-actuator': actuator 'SHELL' is declared twice (names ignore case)");
  }
  SECTION("a minor-1 table only as large as ABI 1.0's") {
    CHECK(load_error(fx, "bad-tools-short-1-1") ==
          "skill 'bad-tools-short-1-1': skill table is " + std::to_string(PP_SKILL_API_SIZE_1_0) +
              " bytes, ABI 1.1 needs at least " + std::to_string(PP_SKILL_API_SIZE_1_1) +
              "; the library is damaged or was built with a broken SDK");
  }
}

TEST_CASE("a snapshot finds tools and actuators ignoring case, the higher priority keeps a duplicate name",
          "[skills][registry]") {
  SkillFixtures fx;
  LogCapture capture;
  auto low = load(fx, "toolbox-b", 10);
  auto high = load(fx, "toolbox-a", 20);
  auto legacy = load(fx, "legacy-1-0", 30);
  Registry registry;
  auto snapshot = registry.publish({low, high, legacy});

  std::vector<std::string> names;
  for (const auto& entry : snapshot->tools()) names.push_back(entry.name());
  CHECK(names == std::vector<std::string>{"echo-args", "fail", "observed"});
  for (const auto& entry : snapshot->tools()) CHECK(entry.slot == high.get());
  CHECK(
      capture.contains("registry: tool 'echo-args' of skill 'toolbox-b' (priority 10) is hidden by skill "
                       "'toolbox-a' (priority 20), which offers the same name"));
  CHECK(
      capture.contains("registry: actuator 'RECORDER' of skill 'toolbox-b' (priority 10) is hidden by skill "
                       "'toolbox-a' (priority 20), which offers the same name"));

  const auto* echo = snapshot->find_tool("ECHO-Args");
  REQUIRE(echo != nullptr);
  CHECK(echo->slot == high.get());
  CHECK(echo->tool().description == "Echoes its arguments");
  auto echoed = echo->call(sexp("(:TEXT \"x\")"), kSignal);
  REQUIRE(echoed.has_value());
  CHECK(echoed->at("SKILL").text() == "toolbox-a");
  CHECK(snapshot->find_tool("observed") != nullptr);
  CHECK(snapshot->find_tool("echo") == nullptr);
  CHECK(snapshot->find_tool("echo-args-x") == nullptr);
  CHECK(snapshot->find_tool("") == nullptr);

  for (std::string_view target : {"recorder", "RECORDER", ":Recorder"}) {
    CAPTURE(target);
    const auto* actuator = snapshot->find_actuator(target);
    REQUIRE(actuator != nullptr);
    CHECK(actuator->slot == high.get());
    CHECK(actuator->name() == "RECORDER");
  }
  CHECK(snapshot->find_actuator("shell") == nullptr);
  auto acted = snapshot->find_actuator("recorder")->act(sexp("(:TARGET :RECORDER)"), kSignal);
  REQUIRE(acted.has_value());
  CHECK(acted->at("SKILL").text() == "toolbox-a");

  // Observers and error policies in gate order: priority first; the 1.0 skill has neither.
  CHECK(std::vector<const Slot*>(snapshot->observers().begin(), snapshot->observers().end()) ==
        std::vector<const Slot*>{high.get(), low.get()});
  CHECK(std::vector<const Slot*>(snapshot->error_policies().begin(), snapshot->error_policies().end()) ==
        std::vector<const Slot*>{high.get(), low.get()});
}

TEST_CASE("between two skills of equal priority, the first by name keeps a duplicate tool", "[skills][registry]") {
  SkillFixtures fx;
  auto b = load(fx, "toolbox-b", 10);
  auto a = load(fx, "toolbox-a", 10);
  Registry registry;
  auto snapshot = registry.publish({b, a});
  const auto* fail = snapshot->find_tool("fail");
  REQUIRE(fail != nullptr);
  CHECK(fail->slot == a.get());
  CHECK(snapshot->find_actuator("recorder")->slot == a.get());
  CHECK(snapshot->tools().size() == 3);
}
