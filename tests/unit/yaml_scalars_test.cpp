// Both YAML readers, a manifest's config and a scripted-model script's tool
// arguments, type a scalar by the same rule (base/yaml_scalars.hpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>

#include "providers/scripted_provider.hpp"
#include "skills/skill_manifest.hpp"
#include "value/sexp_printer.hpp"
#include "value/value.hpp"

using namespace passepartout;

namespace {

// `scalar` as the value of config key x, on line 6 column 6 of skill.yaml.
Result<Value> manifest_value(const std::string& scalar) {
  auto manifest = SkillManifest::parse(
      "name: s\nversion: 1.0.0\nlibrary: libs.so\nabi: 1\nconfig:\n  x: " + scalar + "\n", "skill.yaml");
  if (!manifest) return fail(manifest.error().code, manifest.error().message);
  return manifest->config.at("X");
}

// `scalar` as the tool argument x, on line 6 column 12 of script.yaml.
Result<Value> script_value(const std::string& scalar) {
  auto script = ScriptedScript::parse(
      "rules:\n  - match: go\n    tool_call:\n      name: t\n      arguments:\n        x: " + scalar + "\n",
      "script.yaml");
  if (!script) return fail(script.error().code, script.error().message);
  return script->rules.at(0).tool_call.path({"ARGUMENTS", "X"});
}

}  // namespace

TEST_CASE("a manifest and a scripted-model script type a scalar alike", "[yaml]") {
  const std::pair<std::string, Value> cases[] = {
      {"0x10", Value::integer(16)},
      {"0o20", Value::integer(16)},
      {"-16", Value::integer(-16)},
      {"+16", Value::integer(16)},
      {"9223372036854775807", Value::integer(INT64_MAX)},
      {"-9223372036854775808", Value::integer(INT64_MIN)},
      {".inf", Value::real(INFINITY)},
      {"-.Inf", Value::real(-INFINITY)},
      {"1.5", Value::real(1.5)},
      {"1e3", Value::real(1000.0)},
      {"true", Value::t()},
      {"~", Value::nil()},
      {"0x", Value::string("0x")},
      {"inf", Value::string("inf")},
      {"1.2.3", Value::string("1.2.3")},
      {"\"0x10\"", Value::string("0x10")},
      {"!!float 0x10", Value::real(16.0)},
      {"!!int \"7\"", Value::integer(7)},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    auto from_manifest = manifest_value(text);
    auto from_script = script_value(text);
    REQUIRE(from_manifest.has_value());
    REQUIRE(from_script.has_value());
    CHECK(to_sexp(*from_manifest) == to_sexp(expected));
    CHECK(to_sexp(*from_script) == to_sexp(expected));
  }

  SECTION(".nan is a float that is not a number") {
    auto from_manifest = manifest_value(".nan");
    auto from_script = script_value(".nan");
    REQUIRE(from_manifest.has_value());
    REQUIRE(from_script.has_value());
    CHECK((from_manifest->is_float() && std::isnan(from_manifest->as_float())));
    CHECK((from_script->is_float() && std::isnan(from_script->as_float())));
  }
}

TEST_CASE("a manifest and a scripted-model script refuse a number out of range at its line", "[yaml]") {
  SECTION("an integer that does not fit in 64 bits") {
    const std::string what = "integer '9223372036854775808' does not fit in 64 bits; quote it to pass a string";
    auto from_manifest = manifest_value("9223372036854775808");
    auto from_script = script_value("9223372036854775808");
    REQUIRE_FALSE(from_manifest.has_value());
    REQUIRE_FALSE(from_script.has_value());
    CHECK(from_manifest.error().message == "skill.yaml:6:6: 'config.x': " + what);
    CHECK(from_script.error().message == "script.yaml:6:12: 'tool_call.arguments.x': " + what);
  }
  SECTION("a hexadecimal integer that does not fit in 64 bits") {
    auto from_manifest = manifest_value("0x10000000000000000");
    auto from_script = script_value("0x10000000000000000");
    REQUIRE_FALSE(from_manifest.has_value());
    REQUIRE_FALSE(from_script.has_value());
    CHECK(from_manifest.error().message.find("skill.yaml:6:6: ") == 0);
    CHECK(from_script.error().message.find("script.yaml:6:12: ") == 0);
  }
  SECTION("a float out of range") {
    auto from_manifest = manifest_value("1e999");
    auto from_script = script_value("1e999");
    REQUIRE_FALSE(from_manifest.has_value());
    REQUIRE_FALSE(from_script.has_value());
    CHECK(from_manifest.error().message ==
          "skill.yaml:6:6: 'config.x': number '1e999' is out of range; quote it to pass a string");
    CHECK(from_script.error().message ==
          "script.yaml:6:12: 'tool_call.arguments.x': number '1e999' is out of range; quote it to pass a string");
  }
}
