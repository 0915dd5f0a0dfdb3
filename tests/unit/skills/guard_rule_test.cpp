// The guard rule: no loaded set of skills, however it came about, lets an
// actuator or a tool act without the gates its manifest names (guarded_by).
// Unloads, forced unloads, rescans, boots with a broken dependency and
// failed swaps, run on the bundled shell, shell-guard and policy.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "base/log.hpp"
#include "pipeline/verifier.hpp"
#include "skills/skill_host.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;
using passepartout::testing::SkillFixtures;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kUnguarded = ":SHELL is guarded by shell-guard, which is not loaded";

std::string bundled_manifest(std::string_view name) {
  std::ifstream in(fs::path(PP_MANIFEST_DIR) / (std::string(name) + ".yaml"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const Value& signal() {
  static const Value s = *read_sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"free disk space\"))");
  return s;
}

// A command that is harmless whatever happens to it: it is never run here.
const Value& shell_action() {
  static const Value a = *read_sexp(
      "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"echo harmless\" "
      ":EXPLANATION \"Printing a word to check the shell works.\"))");
  return a;
}

// The bundled policy, shell-guard and shell in a manifest folder of their own
// (the libraries from the build), booted through the hot-swap host.
struct ShellWorld {
  TempDir root;
  fs::path manifests = root.path() / "manifests";
  std::unique_ptr<SkillHost> host;

  explicit ShellWorld(const std::function<void(ShellWorld&)>& before_boot = {}) {
    fs::create_directories(manifests);
    for (auto name : {"policy", "shell-guard", "shell"}) write(std::string(name) + ".yaml", bundled_manifest(name));
    if (before_boot) before_boot(*this);
    auto created = SkillHost::create(SkillHostOptions{
        manifests, PP_PLUGIN_DIR, root.path() / "state" / "audit.sqlite3", true, root.path() / "workspace", {}});
    INFO((created ? std::string() : created.error().message));
    REQUIRE(created.has_value());
    host = std::move(*created);
    boot = host->boot("test");
  }

  void write(const std::string& file, std::string_view text) const { std::ofstream(manifests / file) << text; }

  Verification verify() const { return Verifier::verify(*host->snapshot(), shell_action(), signal()); }
  bool loaded(std::string_view name) const { return host->snapshot()->find(name) != nullptr; }

  BootResult boot;
};

// The one trace entry of a verification the guard rule failed.
void check_fails_closed(const Verification& v) {
  CHECK(v.outcome == VerifyOutcome::blocked);
  REQUIRE(v.trace.size() == 1);
  CHECK(v.trace[0].slot == nullptr);
  CHECK(v.trace[0].name() == kGuardRuleName);
  CHECK(v.trace[0].result == GateResult::failed);
  CHECK(v.trace[0].reason.text() == kUnguarded);
  CHECK(to_sexp(v.to_value()).find(":GATE \"guard-rule\" :VERSION \"host\" :RESULT :FAILED") != std::string::npos);
}

}  // namespace

TEST_CASE("with its guard loaded, a shell action asks a human", "[skills][guards]") {
  ShellWorld world;
  REQUIRE(world.boot.all_loaded());
  const Verification v = world.verify();
  CHECK(v.outcome == VerifyOutcome::approval_required);
  CHECK(world.host->snapshot()->find_actuator("SHELL")->unguarded == nullptr);
  CHECK_FALSE(world.host->snapshot()->has_unguarded());
}

TEST_CASE("unloading the shell's guard is refused, naming what it guards", "[skills][guards]") {
  ShellWorld world;
  auto results = world.host->remove("shell-guard", RemoveMode::refuse_if_needed, "test");
  REQUIRE(results.size() == 1);
  CHECK(results[0].change.outcome == "refused");
  CHECK(results[0].change.error ==
        "skill 'shell-guard' guards the actuator :SHELL of 'shell'; unloading it would leave them unguarded. Add "
        "--cascade to unload 'shell' too, or --force to unload it alone (they then refuse to act until a guard is "
        "loaded)");
  CHECK(world.loaded("shell-guard"));
  CHECK(world.verify().outcome == VerifyOutcome::approval_required);

  SECTION("policy, which shell-guard depends on, needs a cascade even with --force") {
    auto forced = world.host->remove("policy", RemoveMode::force, "test");
    REQUIRE(forced.size() == 1);
    CHECK(forced[0].change.outcome == "refused");
    CHECK(forced[0].change.error == "skill 'policy' is needed by 'shell-guard'; remove those first or ask to cascade");
    CHECK(world.loaded("policy"));
  }
}

TEST_CASE("a cascade unloads the shell with its guard", "[skills][guards]") {
  ShellWorld world;
  auto results = world.host->remove("shell-guard", RemoveMode::cascade, "test");
  REQUIRE(results.size() == 2);
  CHECK(results[0].change.skill == "shell");  // what it guards goes first
  CHECK(results[1].change.skill == "shell-guard");
  CHECK_FALSE(world.loaded("shell"));
  CHECK_FALSE(world.loaded("shell-guard"));
  CHECK(world.host->snapshot()->find_actuator("SHELL") == nullptr);
}

TEST_CASE("a forced unload leaves the shell unable to act until its guard is back", "[skills][guards]") {
  LogCapture logs;
  ShellWorld world;
  auto results = world.host->remove("shell-guard", RemoveMode::force, "test");
  REQUIRE(results.size() == 1);
  CHECK(results[0].ok());
  CHECK(results[0].change.action == "force-remove");
  CHECK(
      logs.contains("skills: skill 'shell-guard' was removed with --force: the actuator :SHELL of 'shell' cannot "
                    "act until 'shell-guard' is loaded again"));
  auto history = world.host->history(1);
  REQUIRE(history.has_value());
  REQUIRE(history->size() == 1);
  CHECK(history->front().action == "force-remove");  // audited as forced

  CHECK(world.loaded("shell"));
  const auto snapshot = world.host->snapshot();
  REQUIRE(snapshot->find_actuator("SHELL") != nullptr);
  REQUIRE(snapshot->find_actuator("SHELL")->unguarded != nullptr);
  CHECK(*snapshot->find_actuator("SHELL")->unguarded == kUnguarded);
  check_fails_closed(world.verify());
  CHECK(logs.contains("verifier: guard rule failed: " + std::string(kUnguarded)));

  SECTION("a string target that names the shell is the shell") {
    const Value as_string = shell_action().with("TARGET", Value::string(":shell"));
    check_fails_closed(Verifier::verify(*snapshot, as_string, signal()));
  }
  SECTION("loading the guard again restores the approval") {
    auto manifest = SkillManifest::load(world.manifests / "shell-guard.yaml");
    REQUIRE(manifest.has_value());
    CHECK(world.host->add(*manifest, "test").ok());
    CHECK(world.verify().outcome == VerifyOutcome::approval_required);
    CHECK_FALSE(world.host->snapshot()->has_unguarded());
  }
}

TEST_CASE("a rescan whose folder lost the guard does not take it away", "[skills][guards]") {
  ShellWorld world;
  fs::remove(world.manifests / "shell-guard.yaml");
  RescanResult rescan = world.host->rescan("test");
  REQUIRE(rescan.changes.size() == 1);
  CHECK(rescan.changes[0].change.skill == "shell-guard");
  CHECK(rescan.changes[0].change.outcome == "refused");
  CHECK(rescan.changes[0].change.error.find("guards the actuator :SHELL of 'shell'") != std::string::npos);
  CHECK(world.loaded("shell-guard"));
  CHECK(world.verify().outcome == VerifyOutcome::approval_required);

  SECTION("once the shell's manifest is gone too, both go, the shell first") {
    fs::remove(world.manifests / "shell.yaml");
    RescanResult both = world.host->rescan("test");
    REQUIRE(both.changes.size() == 2);
    CHECK(both.changes[0].change.skill == "shell");
    CHECK(both.changes[1].change.skill == "shell-guard");
    CHECK(both.changes[1].ok());
    CHECK(world.host->snapshot()->find_actuator("SHELL") == nullptr);
  }
}

TEST_CASE("a rescan leaves alone what an operator loaded from elsewhere", "[skills][guards]") {
  ShellWorld world;
  TempDir elsewhere;
  const fs::path validator = elsewhere.path() / "protocol-validator.yaml";
  std::ofstream(validator) << bundled_manifest("protocol-validator");
  auto manifest = SkillManifest::load(validator);
  REQUIRE(manifest.has_value());
  REQUIRE(world.host->add(*manifest, "test").ok());

  SECTION("a gate loaded from another folder stays loaded") {
    RescanResult rescan = world.host->rescan("test");
    CHECK(rescan.changes.empty());
    CHECK(world.loaded("protocol-validator"));
  }
  SECTION("a swap made from another folder is not reverted, and the rescan says so") {
    const fs::path stricter = elsewhere.path() / "policy.yaml";
    std::ofstream(stricter)
        << "name: policy\nversion: 1.0.0\nlibrary: libpolicy.so\nabi: 1\nisolation: in-process\npriority: 500\n"
           "config: {min_explanation_length: 40}\n";
    auto policy = SkillManifest::load(stricter);
    REQUIRE(policy.has_value());
    REQUIRE(world.host->swap(*policy, "test").ok());
    RescanResult rescan = world.host->rescan("test");
    CHECK(rescan.changes.empty());
    REQUIRE(rescan.kept.size() == 1);
    CHECK(rescan.kept[0] == "policy: loaded from " + stricter.string() + ", not from the folder; left as it is");
    CHECK(world.host->snapshot()->find("policy")->manifest().path == stricter);
  }
}

TEST_CASE("a typo in the guard's dependency at boot disables the shell too", "[skills][guards]") {
  ShellWorld world([](ShellWorld& w) {
    std::string policy = bundled_manifest("policy");
    policy.replace(policy.find("priority:"), 9, "prority:");  // one character off
    w.write("policy.yaml", policy);
  });
  CHECK_FALSE(world.loaded("policy"));
  CHECK_FALSE(world.loaded("shell-guard"));
  CHECK_FALSE(world.loaded("shell"));
  CHECK(world.host->snapshot()->find_actuator("SHELL") == nullptr);
  bool shell_disabled = false;
  for (const Disabled& d : world.boot.disabled) {
    if (d.name != "shell") continue;
    shell_disabled = true;
    CHECK(d.reason.rfind("is guarded by 'shell-guard', which is disabled (", 0) == 0);
  }
  CHECK(shell_disabled);
}

TEST_CASE("a failed swap of the guard leaves it guarding", "[skills][guards]") {
  ShellWorld world;
  std::string broken = bundled_manifest("shell-guard");
  broken.replace(broken.find("extra_patterns: []"), 18, "extra_patterns: [{name: BAD, regex: '(unclosed'}]");
  world.write("shell-guard.yaml", broken);
  RescanResult rescan = world.host->rescan("test");
  REQUIRE(rescan.changes.size() == 1);
  CHECK_FALSE(rescan.changes[0].ok());
  CHECK(world.loaded("shell-guard"));
  CHECK(world.verify().outcome == VerifyOutcome::approval_required);
}

TEST_CASE("a skill that offers an actuator or a tool and names no guard is refused at load", "[skills][guards]") {
  SkillFixtures fx;
  fx.install_library("toolbox-a");
  auto slot = fx.loader().open(fx.manifest("toolbox-a"));
  REQUIRE_FALSE(slot.has_value());
  CHECK(slot.error().code == ErrorCode::refused);
  CHECK(slot.error().message ==
        "skill 'toolbox-a' offers the actuator :RECORDER and the tools echo-args, fail and observed but names no "
        "guard; add guarded_by: [<the gate skills that judge them>] to toolbox-a.yaml (the "
        "bundled shell is guarded_by: [shell-guard])");

  SECTION("naming itself needs a gate of its own") {
    auto self = fx.loader().open(fx.manifest("toolbox-a", 10, "guarded_by: [toolbox-a]\n"));
    REQUIRE_FALSE(self.has_value());
    CHECK(self.error().message ==
          "skill 'toolbox-a' names itself in guarded_by but has no gate; name the gate skills that guard it instead");
  }
  SECTION("a gate that guards its own actuators loads, and needs nothing else") {
    fx.install_library("pass-gate-0");
    auto gate = fx.loader().open(fx.manifest("pass-gate-0", 10, "guarded_by: [pass-gate-0]\n"));
    CHECK(gate.has_value());
    CHECK(fx.manifest("pass-gate-0", 10, "guarded_by: [pass-gate-0]\n").requirements().empty());
  }
}

TEST_CASE("a tool named as another skill's actuator is refused at load, naming both skills", "[skills][guards]") {
  SkillFixtures fx;
  for (auto name : {"policy", "shell-guard", "shell"}) fx.install_library(name, PP_PLUGIN_DIR);
  fx.install_library("clash-tool");
  TempDir root;
  const fs::path manifests = root.path() / "manifests";
  fs::create_directories(manifests);
  for (auto name : {"policy", "shell-guard", "shell"}) {
    std::ofstream(manifests / (std::string(name) + ".yaml")) << bundled_manifest(name);
  }
  auto created = SkillHost::create(SkillHostOptions{
      manifests, fx.plugin_dir(), root.path() / "state" / "audit.sqlite3", true, root.path() / "workspace", {}});
  REQUIRE(created.has_value());
  std::unique_ptr<SkillHost> host = std::move(*created);
  const BootResult boot = host->boot("test");
  REQUIRE(boot.disabled.empty());

  const ChangeResult added = host->add(fx.manifest("clash-tool", 10, "guarded_by: [shell-guard]\n"), "test");
  CHECK(added.change.outcome == "refused");
  CHECK(added.change.step == "names");
  CHECK(added.change.error ==
        "the tool 'shell' of skill 'clash-tool' has the name of the actuator :SHELL of skill 'shell', and a model "
        "calls both by it; rename one");
  CHECK(host->snapshot()->find("clash-tool") == nullptr);
  CHECK(host->snapshot()->find("shell") != nullptr);  // what was loaded keeps serving
}
