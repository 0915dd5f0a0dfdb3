// Test support: the bundled skills (manifests/ and the build's plugins) loaded
// into a private registry, so a test can verify actions through real gates.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.hpp"
#include "skills/registry.hpp"
#include "support/skill_fixtures.hpp"
#include "value/value.hpp"

namespace passepartout::testing {

class SkillHarness {
 public:
  // Loads the named bundled skills; REQUIREs that each loads.
  explicit SkillHarness(std::initializer_list<std::string_view> bundled_names);

  // Verifies the action (s-expression text) with every loaded gate and
  // returns the seed-shaped result (Verification::to_value()).
  Value verify(std::string_view action_sexp);
  // Lines logged while the harness lived, "<component>: <message>".
  std::vector<std::string> logs() const { return capture_.lines(); }
  std::shared_ptr<const Snapshot> snapshot() const { return registry_.snapshot(); }

 private:
  LogCapture capture_;
  SkillFixtures fixtures_;
  Registry registry_;
};

}  // namespace passepartout::testing
