// Test support for the bundled-skill tests: bundled skills loaded with one
// manifest's `config` replaced, reporting load failures instead of failing.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "pipeline/verifier.hpp"
#include "skills/registry.hpp"
#include "skills/skill_boot.hpp"
#include "skills/skill_manifest.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_reader.hpp"
#include "value/value.hpp"

namespace passepartout::testing {

// A YAML flow map naming `folder` under `key`, with `more` entries after it:
// ("workdir", "/tmp/x", "timeout: 5") -> "{workdir: '/tmp/x', timeout: 5}".
inline std::string folder_config(std::string_view key, const std::filesystem::path& folder,
                                 std::string_view more = "") {
  std::string yaml = "{" + std::string(key) + ": '" + folder.string() + "'";
  if (!more.empty()) yaml += ", " + std::string(more);
  return yaml + "}";
}

// The bundled skills `names` (manifests from manifests/, libraries from the
// build's plugin dir) and the skills they need (SkillFixtures::add_bundled_requirements), with the `config` of
// `configured` replaced by `config_yaml` (a YAML flow map such as "{approve_all_shell: false}"). Unlike SkillHarness, a
// skill that fails to load is not a test failure: load_errors() says why, so tests can check how bad config is refused.
class ConfiguredSkills {
 public:
  ConfiguredSkills(std::initializer_list<std::string_view> names, std::string_view configured,
                   std::string_view config_yaml) {
    std::vector<SkillManifest> manifests;
    for (const std::string_view name : names) {
      const std::string file = std::string(name) + ".yaml";
      std::string yaml = read_file(std::filesystem::path(PP_MANIFEST_DIR) / file);
      if (name == configured) yaml = with_config(yaml, config_yaml);
      auto manifest = SkillManifest::parse(yaml, file);
      INFO((manifest ? std::string() : manifest.error().message));
      REQUIRE(manifest.has_value());
      fixtures_.install_library(name, PP_PLUGIN_DIR);
      manifests.push_back(std::move(*manifest));
    }
    fixtures_.add_bundled_requirements(manifests);
    BootResult boot = boot_skills(std::move(manifests), fixtures_.loader());
    for (const Disabled& disabled : boot.disabled) {
      load_errors_ += "skill '" + disabled.name + "': " + disabled.reason + "\n";
    }
    registry_.publish(boot.slots);
  }

  // One line per skill that did not load, "skill '<name>': <reason>"; empty when all loaded.
  const std::string& load_errors() const { return load_errors_; }
  // The published skills (for their tools and actuators); REQUIREs that every skill loaded.
  std::shared_ptr<const Snapshot> snapshot() const {
    INFO(load_errors_);
    REQUIRE(load_errors_.empty());
    return registry_.snapshot();
  }
  // Lines logged while the skills lived, "<component>: <message>".
  std::vector<std::string> logs() const { return capture_.lines(); }

  // As SkillHarness::verify; REQUIREs that every skill loaded.
  Value verify(std::string_view action_sexp) {
    INFO(load_errors_);
    REQUIRE(load_errors_.empty());
    auto action = read_sexp(action_sexp);
    INFO((action ? std::string() : action.error().message));
    REQUIRE(action.has_value());
    const auto signal = read_sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"test\"))");
    REQUIRE(signal.has_value());
    return Verifier::verify(*registry_.snapshot(), *action, *signal).to_value();
  }

 private:
  static std::string read_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    REQUIRE(in.good());
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }

  // `yaml` without its top-level `config:` entry, then `config: <config_yaml>`.
  static std::string with_config(const std::string& yaml, std::string_view config_yaml) {
    std::istringstream lines(yaml);
    std::string out;
    bool in_config = false;
    for (std::string line; std::getline(lines, line);) {
      const bool top_level = !line.empty() && line.front() != ' ' && line.front() != '#';
      if (top_level) in_config = line.rfind("config:", 0) == 0;
      if (!in_config) out += line + "\n";
    }
    return out + "config: " + std::string(config_yaml) + "\n";
  }

  LogCapture capture_;
  SkillFixtures fixtures_;
  Registry registry_;
  std::string load_errors_;
};

}  // namespace passepartout::testing
