// Registry and Snapshot: immutable snapshots published atomically; a held
// snapshot keeps its slots (and their libraries) alive.
#include <catch2/catch.hpp>

#include "skills/registry.hpp"
#include "skills/skill_boot.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::SkillFixtures;

TEST_CASE("a new registry publishes an empty snapshot of generation 0", "[skills][registry]") {
  Registry registry;
  auto snapshot = registry.snapshot();
  REQUIRE(snapshot != nullptr);
  CHECK(snapshot->slots().empty());
  CHECK(snapshot->generation() == 0);
}

TEST_CASE("publishing gives a new generation while holders keep the old snapshot", "[skills][registry]") {
  SkillFixtures fx;
  Registry registry;
  auto slot = fx.loader().load(fx.manifest("pass-gate-0"));
  REQUIRE(slot.has_value());
  registry.publish({*slot});
  auto held = registry.snapshot();
  std::weak_ptr<const Slot> weak = *slot;
  slot->reset();
  registry.publish({});
  CHECK(registry.snapshot()->generation() == 2);
  CHECK(registry.snapshot()->slots().empty());
  CHECK(held->find("pass-gate-0") != nullptr);
  CHECK_FALSE(weak.expired());  // the holder keeps the slot alive
  held.reset();
  CHECK(weak.expired());  // the last holder gone: slot destroyed, library unloaded
}

TEST_CASE("boot loads a folder in dependency order and disables what cannot load", "[skills][registry]") {
  SkillFixtures fx;
  for (auto name : {"pass-gate-0", "pass-gate-1", "create-fails"}) fx.install_library(name);
  fx.write_manifest("a.yaml", SkillFixtures::yaml("pass-gate-0", 10, "depends_on: [pass-gate-1 >=1.0]\n"));
  fx.write_manifest("b.yaml", SkillFixtures::yaml("pass-gate-1", 5));
  fx.write_manifest("c.yaml", SkillFixtures::yaml("create-fails", 50));
  fx.write_manifest("d.yaml",
                    "name: needs-broken\nversion: 1.0.0\nlibrary: libpass-gate-2.so\nabi: 1\nisolation: in-process\n"
                    "depends_on: [create-fails]\n");
  fx.write_manifest("e.yaml", "name: [not a name\n");

  auto boot = boot_skill_dir(fx.manifest_dir(), fx.loader());
  REQUIRE(boot.has_value());
  std::vector<std::string> loaded;
  for (const auto& slot : boot->slots) loaded.push_back(slot->name());
  CHECK(loaded == std::vector<std::string>{"pass-gate-1", "pass-gate-0"});
  REQUIRE(boot->disabled.size() == 2);
  CHECK(boot->disabled[0].name == "create-fails");
  CHECK(boot->disabled[0].reason == "skill 'create-fails': create failed: cannot open the rules database");
  CHECK(boot->disabled[1].name == "needs-broken");
  CHECK(boot->disabled[1].reason == "depends on 'create-fails', which failed to load");
  REQUIRE(boot->manifest_errors.size() == 1);
  CHECK_THAT(boot->manifest_errors[0].message, Catch::StartsWith((fx.manifest_dir() / "e.yaml").string() + ":"));
  CHECK_FALSE(boot->all_loaded());
}
