// ABI 1.2 config keys: a skill that declares the keys it reads has its
// manifest's config checked against them at load; one that does not is not.
#include <catch2/catch.hpp>

#include <memory>
#include <sstream>
#include <string>
#include <string_view>

#include "skills/skill_loader.hpp"
#include "skills/slot.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::SkillFixtures;

namespace {

// The fixtures that offer tools name a guard; these tests call the loader alone.
constexpr std::string_view kGuarded = "guarded_by: [pass-gate-0]\n";

// The 1-based line of the fixture manifest `SkillFixtures::yaml(name, 10, extra)`
// where `key` first appears (0 when absent).
int line_of(std::string_view name, std::string_view extra, std::string_view key) {
  std::istringstream yaml(SkillFixtures::yaml(name, 10, extra));
  std::string text;
  for (int line = 1; std::getline(yaml, text); ++line) {
    if (text.find(key) != std::string::npos) return line;
  }
  return 0;
}

}  // namespace

TEST_CASE("a skill's declared config keys are read at load", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = fx.loader().load(fx.manifest("toolbox-a", 10, std::string(kGuarded) + "config: {greeting: hi}\n"));
  INFO((slot ? std::string() : slot.error().message));
  REQUIRE(slot.has_value());
  CHECK((*slot)->declares_config());
  REQUIRE((*slot)->config_keys().size() == 2);
  const SkillConfigKey& greeting = (*slot)->config_keys()[0];
  CHECK(greeting.name == "greeting");
  CHECK(greeting.type == "string");
  CHECK(greeting.default_value == "hello");
  CHECK(greeting.description == "A word the fixture does not use");
  const SkillConfigKey& max_items = (*slot)->config_keys()[1];
  CHECK(max_items.name == "max_items");
  CHECK(max_items.default_value.empty());
  CHECK(max_items.description.empty());
}

TEST_CASE("a manifest config key the skill does not declare refuses the load with its line and the nearest key",
          "[skills][loader]") {
  SkillFixtures fx;
  const std::string extra = std::string(kGuarded) + "config:\n  greting: hi\n  MAX_ITEMS: 3\n";
  const SkillManifest manifest = fx.manifest("toolbox-a", 10, extra);
  auto slot = fx.loader().load(manifest);
  REQUIRE_FALSE(slot.has_value());
  CHECK(slot.error().code == ErrorCode::invalid_input);
  const int line = line_of("toolbox-a", extra, "greting");
  REQUIRE(line > 0);
  CHECK(slot.error().message == manifest.path.string() + ":" + std::to_string(line) +
                                    ":3: unknown key 'greting' in 'config' of skill 'toolbox-a'; did you mean "
                                    "'greeting'?");
}

TEST_CASE("a skill that declares no config keys accepts any key, as before ABI 1.2", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = fx.loader().load(fx.manifest("pass-gate-0", 10, "config: {anything: 1, at_all: [x]}\n"));
  INFO((slot ? std::string() : slot.error().message));
  REQUIRE(slot.has_value());
  CHECK_FALSE((*slot)->declares_config());
  CHECK((*slot)->config_keys().empty());
}

TEST_CASE("a manifest config key far from every declared one is refused with the declared keys listed",
          "[skills][loader]") {
  SkillFixtures fx;
  const std::string extra = "config:\n  timeout: 5\n  colour: red\n";
  const SkillManifest manifest = fx.manifest("config-keys", 10, extra);
  auto slot = fx.loader().load(manifest);
  REQUIRE_FALSE(slot.has_value());
  CHECK(slot.error().message == manifest.path.string() + ":" + std::to_string(line_of("config-keys", extra, "colour")) +
                                    ":3: unknown key 'colour' in 'config' of skill 'config-keys'; allowed keys are "
                                    "timeout, labels");
}

TEST_CASE("every undeclared config key of a manifest is reported, one per line", "[skills][loader]") {
  SkillFixtures fx;
  const std::string extra = "config: {timout: 5, label: [a], labels: [b]}\n";
  const SkillManifest manifest = fx.manifest("config-keys", 10, extra);
  auto slot = fx.loader().load(manifest);
  REQUIRE_FALSE(slot.has_value());
  const std::string at = manifest.path.string() + ":" + std::to_string(line_of("config-keys", extra, "timout")) + ":";
  CHECK(slot.error().message ==
        at + "10: unknown key 'timout' in 'config' of skill 'config-keys'; did you mean 'timeout'?\n" + at +
            "21: unknown key 'label' in 'config' of skill 'config-keys'; did you mean 'labels'?");
}

TEST_CASE("a C skill's config keys are read from its ABI 1.2 table, absent parts empty", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = fx.loader().load(fx.manifest("config-keys", 10, "config: {TIMEOUT: 5, labels: [a, b]}\n"));
  INFO((slot ? std::string() : slot.error().message));
  REQUIRE(slot.has_value());
  REQUIRE((*slot)->config_keys().size() == 2);
  CHECK((*slot)->config_keys()[0].name == "timeout");
  CHECK((*slot)->config_keys()[0].type == "number");
  CHECK((*slot)->config_keys()[0].default_value == "30");
  CHECK((*slot)->config_keys()[1].name == "labels");
  CHECK((*slot)->config_keys()[1].type.empty());
}

TEST_CASE("an ABI 1.1 table's config keys are not read: any config key is accepted", "[skills][loader]") {
  SkillFixtures fx;
  auto slot = fx.loader().load(fx.manifest("config-keys-minor-1", 10, "config: {colour: red}\n"));
  INFO((slot ? std::string() : slot.error().message));
  REQUIRE(slot.has_value());
  CHECK((*slot)->api().abi_minor == 1);
  CHECK_FALSE((*slot)->declares_config());
}

TEST_CASE("a skill whose config key table is malformed is refused, naming the fault", "[skills][loader]") {
  SkillFixtures fx;
  auto load_error = [&](std::string_view name) {
    auto slot = fx.loader().load(fx.manifest(name));
    REQUIRE_FALSE(slot.has_value());
    CHECK(slot.error().code == ErrorCode::invalid_input);
    return slot.error().message;
  };
  SECTION("a key declared twice, in two cases") {
    CHECK(load_error("config-keys-duplicate-key") ==
          "skill 'config-keys-duplicate-key': config key 'TIMEOUT' is declared twice (names ignore case)");
  }
  SECTION("a key name with a blank") {
    CHECK(load_error("config-keys-bad-key-name") ==
          "skill 'config-keys-bad-key-name': config key #0: name 'max output' is not 1 to 64 letters, digits, "
          "'-' and '_'");
  }
  SECTION("a count without a table") {
    CHECK(load_error("config-keys-keys-without-table") ==
          "skill 'config-keys-keys-without-table': the skill declares 2 config keys but no table of them");
  }
}
