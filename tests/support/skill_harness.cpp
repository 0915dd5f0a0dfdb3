// SkillHarness: bundled manifests + built plugins, loaded through the real loader.
#include "support/skill_harness.hpp"

#include <catch2/catch.hpp>

#include "pipeline/verifier.hpp"
#include "skills/skill_boot.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout::testing {

SkillHarness::SkillHarness(std::initializer_list<std::string_view> bundled_names) {
  std::vector<SkillManifest> manifests;
  for (std::string_view name : bundled_names) {
    auto manifest = SkillManifest::load(std::filesystem::path(PP_MANIFEST_DIR) / (std::string(name) + ".yaml"));
    INFO((manifest ? std::string() : manifest.error().message));
    REQUIRE(manifest.has_value());
    fixtures_.install_library(name, PP_PLUGIN_DIR);
    manifests.push_back(std::move(*manifest));
  }
  fixtures_.add_bundled_requirements(manifests);
  BootResult boot = boot_skills(std::move(manifests), fixtures_.loader());
  for (const auto& d : boot.disabled) FAIL("skill '" << d.name << "' did not load: " << d.reason);
  registry_.publish(boot.slots);
}

Value SkillHarness::verify(std::string_view action_sexp) {
  auto action = read_sexp(action_sexp);
  INFO((action ? std::string() : action.error().message));
  REQUIRE(action.has_value());
  static const Value signal =
      *read_sexp("(:TYPE :EVENT :META (:SOURCE :TEST) :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"test\"))");
  return Verifier::verify(*registry_.snapshot(), *action, signal).to_value();
}

}  // namespace passepartout::testing
