// Trigger selection (seed B4–B5): the highest-priority triggered skill with a
// prompt generator shapes the prompt; ties by name; no trigger, no selection.
#include <catch2/catch.hpp>

#include "pipeline/prompt_selector.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;
using passepartout::testing::SkillFixtures;

namespace {

Value signal(std::string_view sensor, std::string_view text) {
  auto v =
      read_sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :" + std::string(sensor) + " :TEXT \"" + std::string(text) + "\"))");
  REQUIRE(v.has_value());
  return *v;
}

std::string selected(const Snapshot& snapshot, const Value& s) {
  const Slot* slot = select_prompt_skill(snapshot, s);
  return slot == nullptr ? "none" : slot->name();
}

struct Prompts {
  SkillFixtures fx;
  Registry registry;
  Prompts(int priority_a, int priority_b, std::string_view trigger_a = "", std::string_view trigger_b = "") {
    auto a = fx.loader().load(fx.manifest("prompt-a", priority_a, trigger_a));
    auto b = fx.loader().load(fx.manifest("prompt-b", priority_b, trigger_b));
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    registry.publish({*a, *b});
  }
};

}  // namespace

TEST_CASE("the highest-priority triggered prompt skill is selected", "[pipeline][trigger]") {
  Prompts p(10, 20);
  CHECK(selected(*p.registry.snapshot(), signal("USER-INPUT", "the weather please")) == "prompt-b");
}

TEST_CASE("prompt skills of equal priority are chosen by name", "[pipeline][trigger]") {
  Prompts p(10, 10);
  CHECK(selected(*p.registry.snapshot(), signal("USER-INPUT", "weather")) == "prompt-a");
}

TEST_CASE("a skill whose trigger hook says no is not selected", "[pipeline][trigger]") {
  Prompts p(10, 20);
  CHECK(selected(*p.registry.snapshot(), signal("USER-INPUT", "tell me a joke")) == "none");
}

TEST_CASE("a declarative sensor list filters before the skill's hook", "[pipeline][trigger]") {
  Prompts p(10, 20, "trigger: { sensors: [user-input] }\n", "trigger: { sensors: [heartbeat] }\n");
  CHECK(selected(*p.registry.snapshot(), signal("USER-INPUT", "weather")) == "prompt-a");
  CHECK(selected(*p.registry.snapshot(), signal("HEARTBEAT", "weather")) == "prompt-b");
  CHECK(selected(*p.registry.snapshot(), signal("CHAT-MESSAGE", "weather")) == "none");
}

TEST_CASE("skills without a prompt generator are never selected", "[pipeline][trigger]") {
  SkillFixtures fx;
  Registry registry;
  auto gate = fx.loader().load(fx.manifest("pass-gate-0", 99, "trigger: { always: true }\n"));
  REQUIRE(gate.has_value());
  registry.publish({*gate});
  CHECK(selected(*registry.snapshot(), signal("USER-INPUT", "weather")) == "none");
}
