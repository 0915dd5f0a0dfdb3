// DependencyGraph: the order skills load in (dependencies first), and which
// skills cannot load because of a cycle, a duplicate, or a missing or unsatisfied dependency.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "skills/skill_manifest.hpp"
#include "skills/version.hpp"

namespace passepartout {

// A skill that will not be loaded, and why (one line an operator can act on).
struct Disabled {
  std::string name;
  std::string reason;
};

// `order` points into the manifests given to plan(), which must outlive it.
struct LoadPlan {
  std::vector<const SkillManifest*> order;  // dependencies before their dependents
  std::vector<Disabled> disabled;           // sorted by name; one entry per name
};

// Plans a load. Pure function of its inputs; call from any thread.
class DependencyGraph {
 public:
  // Orders `manifests` so that every skill comes after the skills it depends
  // on. Among skills whose dependencies are all placed, the highest priority
  // goes first, then the smaller name, so the order never depends on input order.
  //
  // `available` lists skills already loaded elsewhere (name -> version) that a
  // dependency may resolve to when no manifest of that name is given; a
  // manifest of the same name takes precedence.
  //
  // Disabled, with the reason as written here:
  //   two manifests of one name    duplicate skill name 'x' (a.yaml and b.yaml)
  //   each member of a cycle       dependency cycle: a -> b -> a
  //                                (a cycle through the member, starting at its
  //                                smallest name, dependencies taken in name order)
  //   a dependency nobody provides depends on 'x', which is not installed
  //   a guard nobody provides      is guarded by 'x', which is not installed
  //                                (guards, manifest `guarded_by`, count as
  //                                dependencies throughout, with this verb)
  //   a version that does not fit  requires 'policy >=2.0', but policy is 1.2.0
  //   a dependency that is disabled depends on 'x', which is disabled (<x's reason>)
  // A chain of disabled dependents more than a few links long quotes only the
  // first link and where the chain starts:
  //   depends on 'x', which is disabled (... depends on 'r', which is disabled (<r's reason>))
  // A member of a cycle reports the cycle; any other skill reports its first
  // failing dependency in the order of depends_on, then guarded_by. Everything else is in `order`.
  static LoadPlan plan(std::span<const SkillManifest> manifests, const std::map<std::string, SemVer>& available = {});
};

}  // namespace passepartout
