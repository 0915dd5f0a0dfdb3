// The echo fixtures the hot-swap tests build on: each version loads with its
// name and version, its gate stamps, and the broken 2.0.0 builds are refused.
#include <catch2/catch.hpp>

#include "base/log.hpp"
#include "pipeline/verifier.hpp"
#include "skills/registry.hpp"
#include "skills/skill_loader.hpp"
#include "support/sexp.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;
using passepartout::testing::SkillFixtures;

namespace {

// Installs lib<library>.so and parses a manifest naming it as skill `name` at `version`.
SkillManifest echo_manifest(SkillFixtures& fx, std::string_view library, std::string_view version,
                            std::string_view name = "echo") {
  fx.install_library(library);
  auto manifest =
      SkillManifest::parse("name: " + std::string(name) + "\nversion: " + std::string(version) + "\nlibrary: lib" +
                               std::string(library) + ".so\nabi: 1\nisolation: in-process\n",
                           fx.manifest_dir() / (std::string(name) + ".yaml"));
  INFO((manifest ? std::string() : manifest.error().message));
  REQUIRE(manifest.has_value());
  return std::move(*manifest);
}

using passepartout::testing::sexp;

}  // namespace

TEST_CASE("every echo fixture loads with its name and version", "[skills][fixtures]") {
  struct Expected {
    std::string_view library;
    std::string_view name;
    std::string_view version;
  };
  for (const Expected& expected :
       {Expected{"echo-v1", "echo", "1.0.0"}, Expected{"echo-v2", "echo", "2.0.0"},
        Expected{"echo-v3", "echo", "3.0.0"}, Expected{"echo-v1-pinned", "echo", "1.0.1"},
        Expected{"echo-v1-unique", "echo", "1.0.2"}, Expected{"echo-v2-import-fails", "echo", "2.0.0"},
        Expected{"depends-on-echo", "depends-on-echo", "1.0.0"}}) {
    INFO(expected.library);
    LogCapture capture;  // echo-v1-unique stays mapped after unload, and the loader says so
    SkillFixtures fx;
    auto slot = fx.loader().load(echo_manifest(fx, expected.library, expected.version, expected.name));
    INFO((slot ? std::string() : slot.error().message));
    REQUIRE(slot.has_value());
    CHECK((*slot)->name() == expected.name);
    CHECK((*slot)->version_text() == expected.version);
    CHECK((*slot)->has_gate());
  }
}

TEST_CASE("the echo gate appends its stamp and reports its generation", "[skills][fixtures]") {
  SkillFixtures fx;
  auto v1 = fx.loader().load(echo_manifest(fx, "echo-v1", "1.0.0"));
  REQUIRE(v1.has_value());
  Registry registry;
  registry.publish({*v1});
  const Value signal = sexp("(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"hi\"))");

  SECTION("the first stamp creates the list") {
    Verification v = Verifier::verify(*registry.snapshot(), sexp("(:TOOL \"shell\")"), signal);
    REQUIRE(v.outcome == VerifyOutcome::passed);
    REQUIRE(v.action.at("STAMPS").size() == 1);
    CHECK(v.action.at("STAMPS").items()[0].text() == "echo 1.0.0");
    CHECK(v.action.at("ECHO-GENERATION").as_integer() == 1);
  }
  SECTION("a later stamp is appended") {
    Verification v = Verifier::verify(*registry.snapshot(), sexp("(:TOOL \"shell\" :STAMPS (\"echo 0.9.0\"))"), signal);
    REQUIRE(v.outcome == VerifyOutcome::passed);
    REQUIRE(v.action.at("STAMPS").size() == 2);
    CHECK(v.action.at("STAMPS").items()[0].text() == "echo 0.9.0");
    CHECK(v.action.at("STAMPS").items()[1].text() == "echo 1.0.0");
  }
}

TEST_CASE("the broken echo 2.0.0 builds are refused with their reasons", "[skills][fixtures]") {
  SkillFixtures fx;
  auto refusal = [&](std::string_view library) {
    auto slot = fx.loader().load(echo_manifest(fx, library, "2.0.0"));
    REQUIRE_FALSE(slot.has_value());
    return slot.error().message;
  };
  CHECK(refusal("echo-v2-badabi") ==
        "skill 'echo': built for ABI 2.0, this host supports 1.x; rebuild it against the installed SDK");
  CHECK(refusal("echo-v2-throws") == "skill 'echo': create failed: echo 2.0.0 cannot start: missing stamp file");
  CHECK(refusal("echo-v2-selftest") == "skill 'echo': self-test failed: echo 2.0.0 self-test: stamp table is empty");
}
