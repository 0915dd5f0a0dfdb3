// Tests of DependencyGraph::plan: dependencies first, priority then name among
// the ready, and the exact reason for every skill that cannot load.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "skills/dependency_graph.hpp"

using passepartout::Dependency;
using passepartout::DependencyGraph;
using passepartout::LoadPlan;
using passepartout::SemVer;
using passepartout::SkillManifest;
using passepartout::VersionConstraint;

namespace {

SemVer version(const std::string& text) {
  auto parsed = SemVer::parse(text);
  REQUIRE(parsed.has_value());
  return *parsed;
}

// A manifest as the parser would produce it; each dependency is "name" or
// "name <constraint>".
SkillManifest skill(const std::string& name, const std::vector<std::string>& deps = {}, int priority = 10,
                    const std::string& ver = "1.0.0") {
  SkillManifest m;
  m.path = name + ".yaml";
  m.name = name;
  m.version = version(ver);
  m.library = "lib" + name + ".so";
  m.priority = priority;
  for (const std::string& dep : deps) {
    std::size_t space = dep.find(' ');
    auto constraint = VersionConstraint::parse(space == std::string::npos ? "" : dep.substr(space + 1));
    REQUIRE(constraint.has_value());
    m.depends_on.push_back(Dependency{dep.substr(0, space), *constraint, dep});
  }
  return m;
}

std::vector<std::string> order_of(const LoadPlan& plan) {
  std::vector<std::string> names;
  for (const SkillManifest* m : plan.order) names.push_back(m->name);
  return names;
}

using Reasons = std::vector<std::pair<std::string, std::string>>;

Reasons disabled_of(const LoadPlan& plan) {
  Reasons reasons;
  for (const auto& d : plan.disabled) reasons.emplace_back(d.name, d.reason);
  return reasons;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("dependency graph puts a dependency before its dependent", "[skills]") {
  // The Lisp test-topological-sort-basic: a depends on b, so b loads first,
  // whatever their priorities and the order they were found in.
  std::vector<SkillManifest> skills = {skill("a", {"b"}, 90), skill("b", {}, 10)};
  LoadPlan plan = DependencyGraph::plan(skills);
  CHECK(order_of(plan) == Names{"b", "a"});
  CHECK(plan.disabled.empty());
  CHECK(plan.order[0] == &skills[1]);
  CHECK(plan.order[1] == &skills[0]);
}

TEST_CASE("dependency graph orders ready skills by priority, then by name", "[skills]") {
  std::vector<SkillManifest> skills = {skill("low", {}, 5), skill("high", {}, 90), skill("mid-b", {}, 50),
                                       skill("mid-a", {}, 50), skill("plain")};
  const Names expected = {"high", "mid-a", "mid-b", "plain", "low"};
  std::sort(skills.begin(), skills.end(),
            [](const SkillManifest& a, const SkillManifest& b) { return a.name < b.name; });
  do {
    CHECK(order_of(DependencyGraph::plan(skills)) == expected);
  } while (std::next_permutation(skills.begin(), skills.end(),
                                 [](const SkillManifest& a, const SkillManifest& b) { return a.name < b.name; }));
}

TEST_CASE("dependency graph places a skill as soon as its dependencies are placed", "[skills]") {
  // Kahn's algorithm: zeta (1000) waits for logger, then jumps ahead of core (10);
  // policy (500) waits for core, shell-guard for policy.
  std::vector<SkillManifest> skills = {
      skill("shell-guard", {"policy >=1.0"}, 90),
      skill("policy", {"core"}, 500),
      skill("core", {}, 10),
      skill("zeta", {"logger"}, 1000),
      skill("logger", {}, 90),
      skill("audit", {}, 90),
  };
  LoadPlan plan = DependencyGraph::plan(skills);
  CHECK(order_of(plan) == Names{"audit", "logger", "zeta", "core", "policy", "shell-guard"});
  CHECK(plan.disabled.empty());
  std::reverse(skills.begin(), skills.end());
  CHECK(order_of(DependencyGraph::plan(skills)) == Names{"audit", "logger", "zeta", "core", "policy", "shell-guard"});
}

TEST_CASE("dependency graph loads a diamond once, base first", "[skills]") {
  std::vector<SkillManifest> skills = {skill("app", {"left", "right"}, 100), skill("left", {"base"}, 10),
                                       skill("right", {"base"}, 20), skill("base", {}, 0)};
  auto by_name = [](const SkillManifest& a, const SkillManifest& b) { return a.name < b.name; };
  std::sort(skills.begin(), skills.end(), by_name);
  do {
    LoadPlan plan = DependencyGraph::plan(skills);
    CHECK(order_of(plan) == Names{"base", "right", "left", "app"});
    CHECK(plan.disabled.empty());
  } while (std::next_permutation(skills.begin(), skills.end(), by_name));
}

TEST_CASE("dependency graph reports a cycle with its path", "[skills]") {
  std::vector<SkillManifest> skills = {skill("b", {"a"}), skill("a", {"b"})};
  LoadPlan plan = DependencyGraph::plan(skills);
  CHECK(plan.order.empty());
  CHECK(disabled_of(plan) == Reasons{{"a", "dependency cycle: a -> b -> a"}, {"b", "dependency cycle: a -> b -> a"}});
  SECTION("the path starts at the smallest name and follows the dependencies") {
    std::vector<SkillManifest> three = {skill("c", {"a"}), skill("b", {"c"}), skill("a", {"b"})};
    CHECK(disabled_of(DependencyGraph::plan(three)) == Reasons{{"a", "dependency cycle: a -> b -> c -> a"},
                                                               {"b", "dependency cycle: a -> b -> c -> a"},
                                                               {"c", "dependency cycle: a -> b -> c -> a"}});
  }
  SECTION("a skill depending on itself is a cycle of one") {
    std::vector<SkillManifest> self = {skill("a", {"a"}), skill("b")};
    LoadPlan p = DependencyGraph::plan(self);
    CHECK(order_of(p) == Names{"b"});
    CHECK(disabled_of(p) == Reasons{{"a", "dependency cycle: a -> a"}});
  }
  SECTION("each member of a tangle names a cycle it is on") {
    std::vector<SkillManifest> tangle = {skill("a", {"b"}), skill("b", {"c", "a"}), skill("c", {"b"})};
    CHECK(disabled_of(DependencyGraph::plan(tangle)) == Reasons{{"a", "dependency cycle: a -> b -> a"},
                                                                {"b", "dependency cycle: a -> b -> a"},
                                                                {"c", "dependency cycle: b -> c -> b"}});
  }
}

TEST_CASE("dependency graph disables a cycle and its dependents, and loads the rest", "[skills]") {
  std::vector<SkillManifest> skills = {skill("d", {"c"}), skill("unrelated"), skill("c", {"a"}),
                                       skill("a", {"b"}), skill("b", {"a"}),  skill("uses-unrelated", {"unrelated"})};
  LoadPlan plan = DependencyGraph::plan(skills);
  CHECK(order_of(plan) == Names{"unrelated", "uses-unrelated"});
  CHECK(disabled_of(plan) == Reasons{{"a", "dependency cycle: a -> b -> a"},
                                     {"b", "dependency cycle: a -> b -> a"},
                                     {"c", "depends on 'a', which is disabled (dependency cycle: a -> b -> a)"},
                                     {"d",
                                      "depends on 'c', which is disabled (depends on 'a', which is disabled "
                                      "(dependency cycle: a -> b -> a))"}});
}

TEST_CASE("dependency graph disables a skill whose dependency is not installed", "[skills]") {
  std::vector<SkillManifest> skills = {skill("app", {"ghost"}), skill("user", {"app"}), skill("fine")};
  LoadPlan plan = DependencyGraph::plan(skills);
  CHECK(order_of(plan) == Names{"fine"});
  CHECK(disabled_of(plan) == Reasons{{"app", "depends on 'ghost', which is not installed"},
                                     {"user",
                                      "depends on 'app', which is disabled (depends on 'ghost', which is not "
                                      "installed)"}});
}

TEST_CASE("dependency graph disables a skill whose dependency has the wrong version", "[skills]") {
  std::vector<SkillManifest> skills = {skill("shell-guard", {"policy >=2.0"}, 90), skill("policy", {}, 500, "1.2.0"),
                                       skill("audit", {"policy >=1.0, <2"})};
  LoadPlan plan = DependencyGraph::plan(skills);
  CHECK(order_of(plan) == Names{"policy", "audit"});
  CHECK(disabled_of(plan) == Reasons{{"shell-guard", "requires 'policy >=2.0', but policy is 1.2.0"}});
  SECTION("a dependency built without its text is written from its parts") {
    SkillManifest bare = skill("bare");
    bare.depends_on.push_back(Dependency{"policy", *VersionConstraint::parse("^2"), ""});
    std::vector<SkillManifest> two = {bare, skill("policy", {}, 10, "1.2.0")};
    CHECK(disabled_of(DependencyGraph::plan(two)) == Reasons{{"bare", "requires 'policy ^2', but policy is 1.2.0"}});
  }
}

TEST_CASE("dependency graph reports the first failing dependency in the order written", "[skills]") {
  std::vector<SkillManifest> skills = {skill("app", {"fine", "ghost", "policy >=9"}), skill("fine"), skill("policy")};
  CHECK(disabled_of(DependencyGraph::plan(skills)) == Reasons{{"app", "depends on 'ghost', which is not installed"}});
}

TEST_CASE("dependency graph disables every manifest of a duplicated name", "[skills]") {
  SkillManifest first = skill("policy", {}, 10, "1.0.0");
  first.path = "/etc/passepartout/manifests/b.yaml";
  SkillManifest second = skill("policy", {}, 10, "2.0.0");
  second.path = "/etc/passepartout/manifests/a.yaml";
  std::vector<SkillManifest> skills = {first, skill("guard", {"policy"}), second, skill("other")};
  LoadPlan plan = DependencyGraph::plan(skills);
  CHECK(order_of(plan) == Names{"other"});
  CHECK(disabled_of(plan) == Reasons{{"guard",
                                      "depends on 'policy', which is disabled (duplicate skill name 'policy' "
                                      "(a.yaml and b.yaml))"},
                                     {"policy", "duplicate skill name 'policy' (a.yaml and b.yaml)"}});

  SECTION("three copies") {
    SkillManifest third = skill("policy");
    third.path = "c.yaml";
    std::vector<SkillManifest> three = {first, second, third};
    CHECK(disabled_of(DependencyGraph::plan(three)) ==
          Reasons{{"policy", "duplicate skill name 'policy' (a.yaml, b.yaml and c.yaml)"}});
  }
  SECTION("files of the same name in different folders are told apart by path") {
    SkillManifest elsewhere = skill("policy");
    elsewhere.path = "/opt/more/b.yaml";
    std::vector<SkillManifest> two = {first, elsewhere};
    CHECK(disabled_of(DependencyGraph::plan(two)) ==
          Reasons{{"policy",
                   "duplicate skill name 'policy' (/etc/passepartout/manifests/b.yaml "
                   "and /opt/more/b.yaml)"}});
  }
}

TEST_CASE("dependency graph resolves dependencies to skills already available", "[skills]") {
  std::vector<SkillManifest> skills = {skill("shell-guard", {"policy >=1.0"})};
  SECTION("a matching version loads") {
    LoadPlan plan = DependencyGraph::plan(skills, {{"policy", version("1.2.0")}});
    CHECK(order_of(plan) == Names{"shell-guard"});
    CHECK(plan.disabled.empty());
  }
  SECTION("a version that does not fit disables") {
    LoadPlan plan = DependencyGraph::plan(skills, {{"policy", version("0.9.0")}});
    CHECK(plan.order.empty());
    CHECK(disabled_of(plan) == Reasons{{"shell-guard", "requires 'policy >=1.0', but policy is 0.9.0"}});
  }
  SECTION("a manifest of the same name takes precedence") {
    std::vector<SkillManifest> with_policy = {skills[0], skill("policy", {}, 10, "0.5.0")};
    LoadPlan plan = DependencyGraph::plan(with_policy, {{"policy", version("2.0.0")}});
    CHECK(order_of(plan) == Names{"policy"});
    CHECK(disabled_of(plan) == Reasons{{"shell-guard", "requires 'policy >=1.0', but policy is 0.5.0"}});
  }
  SECTION("an available skill that nothing depends on is not planned") {
    LoadPlan plan = DependencyGraph::plan({}, {{"policy", version("1.0.0")}});
    CHECK(plan.order.empty());
    CHECK(plan.disabled.empty());
  }
}

TEST_CASE("dependency graph sorts disabled skills by name", "[skills]") {
  std::vector<SkillManifest> skills = {skill("zz", {"ghost"}), skill("mm", {"ghost"}), skill("aa", {"ghost"})};
  LoadPlan plan = DependencyGraph::plan(skills);
  REQUIRE(plan.disabled.size() == 3);
  CHECK(plan.disabled[0].name == "aa");
  CHECK(plan.disabled[1].name == "mm");
  CHECK(plan.disabled[2].name == "zz");
}

TEST_CASE("dependency graph handles long chains without deep recursion", "[skills]") {
  constexpr int kLength = 5000;
  auto name = [](int i) {
    std::string digits = std::to_string(i);
    return "n" + std::string(4 - digits.size(), '0') + digits;
  };
  std::vector<SkillManifest> skills;
  for (int i = kLength - 1; i >= 0; --i) {
    skills.push_back(skill(name(i), i == 0 ? std::vector<std::string>{} : std::vector<std::string>{name(i - 1)}, i));
  }
  LoadPlan plan = DependencyGraph::plan(skills);
  REQUIRE(plan.order.size() == kLength);
  for (int i = 0; i < kLength; ++i) CHECK(plan.order[static_cast<std::size_t>(i)]->name == name(i));

  SECTION("a broken root abbreviates the reasons far down the chain") {
    skills.back().depends_on.push_back(Dependency{"ghost", {}, "ghost"});  // n0000
    LoadPlan broken = DependencyGraph::plan(skills);
    CHECK(broken.order.empty());
    REQUIRE(broken.disabled.size() == kLength);
    CHECK(broken.disabled[3].reason ==
          "depends on 'n0002', which is disabled (depends on 'n0001', which is disabled "
          "(depends on 'n0000', which is disabled (depends on 'ghost', which is not installed)))");
    CHECK(broken.disabled[4].reason ==
          "depends on 'n0003', which is disabled (... depends on 'n0000', which is disabled "
          "(depends on 'ghost', which is not installed))");
    CHECK(broken.disabled.back().reason ==
          "depends on 'n4998', which is disabled (... depends on 'n0000', which is disabled "
          "(depends on 'ghost', which is not installed))");
    for (const auto& d : broken.disabled) CHECK(d.reason.size() < 200);
  }
  SECTION("a long cycle is reported once per member") {
    skills.back().depends_on.push_back(Dependency{name(kLength - 1), {}, name(kLength - 1)});
    LoadPlan cycle = DependencyGraph::plan(skills);
    CHECK(cycle.order.empty());
    REQUIRE(cycle.disabled.size() == kLength);
    CHECK(cycle.disabled[0].reason ==
          "dependency cycle: n0000 -> n4999 -> n4998 -> n4997 -> n4996 -> n4995 -> n4994 -> "
          "n4993 -> ... -> n0002 -> n0001 -> n0000 (5000 skills)");
    CHECK(cycle.disabled[4999].reason == cycle.disabled[0].reason);
  }
}

TEST_CASE("dependency graph of nothing is an empty plan", "[skills]") {
  LoadPlan plan = DependencyGraph::plan({});
  CHECK(plan.order.empty());
  CHECK(plan.disabled.empty());
}
