// Tests of SkillManifest: every field, config conversion, and the located
// message for each kind of mistake an author can make; loading files and directories.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "skills/skill_manifest.hpp"
#include "value/value.hpp"

using passepartout::ErrorCode;
using passepartout::SemVer;
using passepartout::SkillManifest;
using passepartout::TriggerSpec;
using passepartout::Value;
namespace fs = std::filesystem;

namespace {

// The four required keys, on lines 1 to 4; test lines start at line 5.
const std::string kBase =
    "name: shell-guard\n"
    "version: 1.2.0\n"
    "library: libshell-guard.so\n"
    "abi: 1\n";

const std::string kVersionShape = "; expected MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD], e.g. 1.2.0";

SkillManifest parsed(const std::string& yaml) {
  auto manifest = SkillManifest::parse(yaml, "skill.yaml");
  INFO(yaml);
  INFO((manifest ? std::string() : manifest.error().message));
  REQUIRE(manifest.has_value());
  return *manifest;
}

std::string error_of(const std::string& yaml, ErrorCode code = ErrorCode::invalid_input) {
  auto manifest = SkillManifest::parse(yaml, "skill.yaml");
  INFO(yaml);
  REQUIRE_FALSE(manifest.has_value());
  CHECK(manifest.error().code == code);
  return manifest.error().message;
}

Value config_of(const std::string& config_yaml) { return parsed(kBase + "config:\n" + config_yaml).config; }

// A fresh directory under the system temporary directory, removed on scope exit.
class TempDir {
 public:
  TempDir() {
    static std::atomic<unsigned> counter{0};
    std::random_device random;
    path_ = fs::temp_directory_path() /
            ("passepartout-manifest-test-" + std::to_string(random()) + "-" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& text) const {
    fs::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  fs::path path_;
};

std::string manifest_named(const std::string& name) {
  return "name: " + name + "\nversion: 1.0.0\nlibrary: lib" + name + ".so\nabi: 1\n";
}

}  // namespace

// --- fields ----------------------------------------------------------------------

TEST_CASE("manifest parses every field", "[skills]") {
  SkillManifest m = parsed(
      "name: shell-guard\n"
      "version: 1.2.0\n"
      "library: libshell-guard.so\n"
      "abi: 1.0\n"
      "priority: 90\n"
      "depends_on: [policy >=1.0, audit]\n"
      "trigger: { sensors: [user-input, \":chat-message\"] }\n"
      "config: { max_output: 100000, patterns: [a, b] }\n"
      "sha256: 3F5A000000000000000000000000000000000000000000000000000000ABCDEF\n"
      "description: Blocks destructive shell commands.\n"
      "never_unload: true\n");
  CHECK(m.path == fs::path("skill.yaml"));
  CHECK(m.name == "shell-guard");
  CHECK(m.version == SemVer{1, 2, 0, ""});
  CHECK(m.library == "libshell-guard.so");
  CHECK(m.abi == passepartout::AbiVersion{1, 0});
  CHECK(m.priority == 90);
  REQUIRE(m.depends_on.size() == 2);
  CHECK(m.depends_on[0].name == "policy");
  CHECK(m.depends_on[0].text == "policy >=1.0");
  CHECK(m.depends_on[0].constraint.to_string() == ">=1.0");
  CHECK(m.depends_on[1].name == "audit");
  CHECK(m.depends_on[1].text == "audit");
  CHECK(m.depends_on[1].constraint.is_any());
  CHECK(m.trigger.sensors == std::vector<std::string>{"USER-INPUT", "CHAT-MESSAGE"});
  CHECK_FALSE(m.trigger.always);
  CHECK(m.trigger.declared());
  CHECK(m.config == Value::plist({{"MAX_OUTPUT", Value::integer(100000)},
                                  {"PATTERNS", Value::list({Value::string("a"), Value::string("b")})}}));
  REQUIRE(m.sha256.has_value());
  CHECK(*m.sha256 == "3f5a000000000000000000000000000000000000000000000000000000abcdef");
  CHECK(m.description == "Blocks destructive shell commands.");
  CHECK(m.never_unload);
}

TEST_CASE("manifest fills optional fields with their defaults", "[skills]") {
  SkillManifest m = parsed(kBase);
  CHECK(m.priority == 10);
  CHECK(m.depends_on.empty());
  CHECK_FALSE(m.trigger.declared());
  CHECK(m.config.is_nil());
  CHECK_FALSE(m.sha256.has_value());
  CHECK(m.description.empty());
  CHECK_FALSE(m.never_unload);
  SECTION("empty collections count as absent") {
    SkillManifest e = parsed(kBase + "depends_on:\ntrigger:\nconfig:\ndescription:\n");
    CHECK(e.depends_on.empty());
    CHECK_FALSE(e.trigger.declared());
    CHECK(e.config.is_nil());
    CHECK(parsed(kBase + "config: {}\n").config.is_nil());
  }
}

TEST_CASE("manifest reads gate_timeout in ms or s, and the effective budget falls back to the host's", "[skills]") {
  using std::chrono::milliseconds;
  CHECK_FALSE(parsed(kBase).gate_timeout.has_value());
  CHECK(parsed(kBase).gate_budget(milliseconds(1000)) == milliseconds(1000));
  CHECK(parsed(kBase + "gate_timeout: 250ms\n").gate_timeout == milliseconds(250));
  CHECK(parsed(kBase + "gate_timeout: 2s\n").gate_timeout == milliseconds(2000));
  CHECK(parsed(kBase + "gate_timeout: 1ms\n").gate_budget(milliseconds(1000)) == milliseconds(1));
  CHECK(parsed(kBase + "gate_timeout: 3600s\n").gate_timeout == milliseconds(3600000));
}

TEST_CASE("manifest rejects a gate_timeout that is not a duration in range, with its position", "[skills]") {
  const std::string shape = "'gate_timeout' must be a duration in ms or s, such as 250ms or 2s, found ";
  CHECK(error_of(kBase + "gate_timeout: 250\n") == "skill.yaml:5:15: " + shape + "'250'");
  CHECK(error_of(kBase + "gate_timeout: 1.5s\n") == "skill.yaml:5:15: " + shape + "'1.5s'");
  CHECK(error_of(kBase + "gate_timeout: -2s\n") == "skill.yaml:5:15: " + shape + "'-2s'");
  CHECK(error_of(kBase + "gate_timeout: 2 s\n") == "skill.yaml:5:15: " + shape + "'2 s'");
  CHECK(error_of(kBase + "gate_timeout: ms\n") == "skill.yaml:5:15: " + shape + "'ms'");
  CHECK(error_of(kBase + "gate_timeout: [1s]\n") ==
        "skill.yaml:5:15: 'gate_timeout' must be a duration such as 250ms or 2s, found a sequence");
  CHECK(error_of(kBase + "gate_timeout: 0ms\n") ==
        "skill.yaml:5:15: 'gate_timeout' '0ms' is out of range; use 1ms to 3600s");
  CHECK(error_of(kBase + "gate_timeout: 3601s\n") ==
        "skill.yaml:5:15: 'gate_timeout' '3601s' is out of range; use 1ms to 3600s");
  CHECK(error_of(kBase + "gate_timeout: 99999999999999999999999ms\n") ==
        "skill.yaml:5:15: 'gate_timeout' '99999999999999999999999ms' is out of range; use 1ms to 3600s");
}

TEST_CASE("manifest parsed from memory is named <string>", "[skills]") {
  auto m = SkillManifest::parse(kBase, {});
  REQUIRE(m.has_value());
  CHECK(m->path == fs::path("<string>"));
  auto bad = SkillManifest::parse("name: x\n", {});
  REQUIRE_FALSE(bad.has_value());
  CHECK(bad.error().message.rfind("<string>:1:1: missing required key 'version'", 0) == 0);
}

TEST_CASE("manifest accepts priority as a signed or quoted integer", "[skills]") {
  CHECK(parsed(kBase + "priority: -5\n").priority == -5);
  CHECK(parsed(kBase + "priority: +7\n").priority == 7);
  CHECK(parsed(kBase + "priority: \"12\"\n").priority == 12);
}

TEST_CASE("manifest reads dependencies in block style with combined comparators", "[skills]") {
  SkillManifest m = parsed(kBase +
                           "depends_on:\n"
                           "  - policy >=1.0, <2\n"
                           "  - audit>=0.3\n");
  REQUIRE(m.depends_on.size() == 2);
  CHECK(m.depends_on[0].name == "policy");
  CHECK(m.depends_on[0].text == "policy >=1.0, <2");
  CHECK(m.depends_on[0].constraint.to_string() == ">=1.0, <2");
  CHECK(m.depends_on[0].constraint.matches(SemVer{1, 9, 0, ""}));
  CHECK_FALSE(m.depends_on[0].constraint.matches(SemVer{2, 0, 0, ""}));
  CHECK(m.depends_on[1].name == "audit");
  CHECK(m.depends_on[1].constraint.to_string() == ">=0.3");
}

TEST_CASE("manifest trigger upper-cases sensor names and drops a leading colon", "[skills]") {
  SkillManifest m = parsed(kBase +
                           "trigger:\n  sensors: [user-input, ':Chat-Message', user-input]\n"
                           "  always: true\n");
  CHECK(m.trigger.sensors == std::vector<std::string>{"USER-INPUT", "CHAT-MESSAGE"});
  CHECK(m.trigger.always);
}

TEST_CASE("trigger matches a signal whose payload sensor it names", "[skills]") {
  auto signal = [](Value sensor) {
    return Value::plist({{"TYPE", Value::keyword("EVENT")},
                         {"PAYLOAD", Value::plist({{"SENSOR", sensor}, {"TEXT", Value::string("hi")}})}});
  };
  TriggerSpec spec;
  spec.sensors = {"USER-INPUT", "chat-message"};
  CHECK(spec.matches(signal(Value::keyword("user-input"))));
  CHECK(spec.matches(signal(Value::keyword("CHAT-MESSAGE"))));
  CHECK_FALSE(spec.matches(signal(Value::keyword("heartbeat"))));
  CHECK_FALSE(spec.matches(signal(Value::string("USER-INPUT"))));
  CHECK_FALSE(spec.matches(Value::plist({{"TYPE", Value::keyword("EVENT")}})));
  CHECK_FALSE(spec.matches(Value::nil()));

  TriggerSpec always;
  always.always = true;
  CHECK(always.declared());
  CHECK(always.matches(Value::nil()));
  CHECK_FALSE(TriggerSpec{}.matches(signal(Value::keyword("user-input"))));
}

// --- config ----------------------------------------------------------------------

TEST_CASE("manifest config resolves plain scalars as YAML 1.2 core", "[skills]") {
  Value config = config_of(
      "  max_output: 100000\n"
      "  patterns: [a, \"b\"]\n"
      "  tilde: ~\n"
      "  empty:\n"
      "  word_null: null\n"
      "  flag_on: true\n"
      "  flag_off: False\n"
      "  negative: -42\n"
      "  plus: +7\n"
      "  hex: 0x1F\n"
      "  octal: 0o17\n"
      "  ratio: 0.25\n"
      "  exponent: 1e3\n"
      "  dot: .5\n"
      "  minus_infinity: -.inf\n"
      "  yes_word: yes\n"
      "  version_like: 1.2.3\n"
      "  quoted_number: \"42\"\n"
      "  single_quoted: 'true'\n"
      "  quoted_null: \"null\"\n"
      "  tagged: !!str 5\n"
      "  forced: !!int \"7\"\n"
      "  text: |\n"
      "    line one\n"
      "  nested: { inner_key: [1, { deep: x }] }\n"
      "  :colon: 1\n");
  Value expected = Value::plist({
      {"MAX_OUTPUT", Value::integer(100000)},
      {"PATTERNS", Value::list({Value::string("a"), Value::string("b")})},
      {"TILDE", Value::nil()},
      {"EMPTY", Value::nil()},
      {"WORD_NULL", Value::nil()},
      {"FLAG_ON", Value::t()},
      {"FLAG_OFF", Value::nil()},
      {"NEGATIVE", Value::integer(-42)},
      {"PLUS", Value::integer(7)},
      {"HEX", Value::integer(31)},
      {"OCTAL", Value::integer(15)},
      {"RATIO", Value::real(0.25)},
      {"EXPONENT", Value::real(1000.0)},
      {"DOT", Value::real(0.5)},
      {"MINUS_INFINITY", Value::real(-INFINITY)},
      {"YES_WORD", Value::string("yes")},
      {"VERSION_LIKE", Value::string("1.2.3")},
      {"QUOTED_NUMBER", Value::string("42")},
      {"SINGLE_QUOTED", Value::string("true")},
      {"QUOTED_NULL", Value::string("null")},
      {"TAGGED", Value::string("5")},
      {"FORCED", Value::integer(7)},
      {"TEXT", Value::string("line one\n")},
      {"NESTED",
       Value::plist({{"INNER_KEY", Value::list({Value::integer(1), Value::plist({{"DEEP", Value::string("x")}})})}})},
      {"COLON", Value::integer(1)},
  });
  CHECK(config == expected);
  CHECK(config.at("max_output").as_integer() == 100000);

  SECTION("integer limits") {
    Value limits = config_of("  max: 9223372036854775807\n  min: -9223372036854775808\n");
    CHECK(limits.at("MAX").as_integer() == INT64_MAX);
    CHECK(limits.at("MIN").as_integer() == INT64_MIN);
  }
  SECTION("not a number") {
    Value nan = config_of("  x: .nan\n").at("X");
    CHECK(nan.is_float());
    CHECK(std::isnan(nan.as_float()));
  }
}

TEST_CASE("manifest config explains values it cannot convert", "[skills]") {
  CHECK(error_of(kBase + "config: [a]\n") ==
        "skill.yaml:5:9: 'config' must be a map such as { max_output: 100000 }, found a sequence");
  CHECK(error_of(kBase + "config: { big: 99999999999999999999 }\n") ==
        "skill.yaml:5:16: 'config.big': integer '99999999999999999999' does not fit in 64 bits; "
        "quote it to pass a string");
  CHECK(error_of(kBase + "config: { huge: 1e999 }\n") ==
        "skill.yaml:5:17: 'config.huge': number '1e999' is out of range; quote it to pass a string");
  CHECK(error_of(kBase + "config: { limit: 1, LIMIT: 2 }\n") ==
        "skill.yaml:5:21: duplicate key 'LIMIT' in 'config' ('limit' is the same keyword :LIMIT); "
        "keep one");
  CHECK(error_of(kBase + "config: { a: { b: 1, b: 2 } }\n") ==
        "skill.yaml:5:22: duplicate key 'b' in 'config.a'; keep one");
  CHECK(error_of(kBase + "config: { a b: 1 }\n") ==
        "skill.yaml:5:11: invalid key 'a b' in 'config': use a name without spaces or any of "
        "( ) \" ' ; | \\ # ` , :");
  CHECK(error_of(kBase + "config: { x: !custom 1 }\n") ==
        "skill.yaml:5:14: 'config.x': unsupported tag '!custom'; remove it, or quote the value "
        "for a string");
  CHECK(error_of(kBase + "config: { list: [1, !!int x] }\n") ==
        "skill.yaml:5:21: 'config.list[1]': !!int 'x' is not a 64-bit integer");
  CHECK(error_of(kBase + "config: { [a]: 1 }\n") ==
        "skill.yaml:5:11: keys in 'config' must be names, found a sequence");
}

TEST_CASE("manifest config nesting is capped", "[skills]") {
  auto nested = [](int levels) {
    return kBase + "config:\n  a: " + std::string(static_cast<std::size_t>(levels), '[') +
           std::string(static_cast<std::size_t>(levels), ']') + "\n";
  };
  // config itself is one level, `a`'s list the second.
  CHECK_FALSE(parsed(nested(SkillManifest::kMaxConfigDepth - 1)).config.is_nil());
  std::string message = error_of(nested(SkillManifest::kMaxConfigDepth));
  CHECK(message == "skill.yaml:6:" + std::to_string(5 + SkillManifest::kMaxConfigDepth) +
                       ": 'config' nests deeper than 64 levels");
}

TEST_CASE("manifest config counts aliases each time they are used", "[skills]") {
  // Ten times ten times ... : 10^6 values from a few lines.
  std::string yaml = kBase +
                     "config:\n"
                     "  a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                     "  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                     "  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                     "  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                     "  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                     "  f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
  std::string message = error_of(yaml);
  CHECK(message.find(": 'config' holds more than 100000 values (aliases count each time they are "
                     "used)") != std::string::npos);
  CHECK(message.rfind("skill.yaml:", 0) == 0);
}

// --- mistakes --------------------------------------------------------------------

TEST_CASE("manifest names an unknown key and suggests the closest known one", "[skills]") {
  CHECK(error_of(kBase + "priorty: 5\n") == "skill.yaml:5:1: unknown key 'priorty'; did you mean 'priority'?");
  CHECK(error_of(kBase + "descripton: x\n") == "skill.yaml:5:1: unknown key 'descripton'; did you mean 'description'?");
  CHECK(error_of(kBase + "Priority: 5\n") == "skill.yaml:5:1: unknown key 'Priority'; did you mean 'priority'?");
  CHECK(error_of(kBase + "dependencies: [policy]\n") ==
        "skill.yaml:5:1: unknown key 'dependencies'; did you mean 'depends_on'?");
  CHECK(error_of(kBase + "colour: red\n") ==
        "skill.yaml:5:1: unknown key 'colour'; allowed keys are name, version, library, abi, "
        "priority, depends_on, guarded_by, trigger, config, sha256, description, never_unload, gate_timeout, "
        "isolation, sandbox");
  CHECK(error_of(kBase + "trigger: { sensor: [user-input] }\n") ==
        "skill.yaml:5:12: unknown key 'sensor' in 'trigger'; did you mean 'sensors'?");
  CHECK(error_of(kBase + "[a]: 1\n") == "skill.yaml:5:1: keys must be names such as 'name', found a sequence");
}

TEST_CASE("manifest reports a value of the wrong type with what it found", "[skills]") {
  CHECK(error_of(kBase + "priority: [1]\n") == "skill.yaml:5:11: 'priority' must be an integer, found a sequence");
  CHECK(error_of(kBase + "priority: high\n") == "skill.yaml:5:11: 'priority' must be an integer, found 'high'");
  CHECK(error_of(kBase + "priority: 1.5\n") == "skill.yaml:5:11: 'priority' must be an integer, found '1.5'");
  CHECK(error_of(kBase + "priority:\n") == "skill.yaml:5:1: 'priority' must be an integer, found an empty value");
  CHECK(error_of(kBase + "priority: 99999999999\n") ==
        "skill.yaml:5:11: 'priority' '99999999999' is out of range; use a value from -2147483648 "
        "to 2147483647");
  CHECK(error_of(kBase + "never_unload: yes\n") ==
        "skill.yaml:5:15: 'never_unload' must be true or false, found 'yes'");
  CHECK(error_of(kBase + "description: [a]\n") == "skill.yaml:5:14: 'description' must be a string, found a sequence");
  CHECK(error_of(kBase + "depends_on: policy\n") ==
        "skill.yaml:5:13: 'depends_on' must be a list such as [policy >=1.0], found 'policy'");
  CHECK(error_of(kBase + "depends_on: [{ policy: 1 }]\n") ==
        "skill.yaml:5:14: each entry of 'depends_on' must be a string such as 'policy >=1.0', "
        "found a map");
  CHECK(error_of(kBase + "trigger: [user-input]\n") ==
        "skill.yaml:5:10: 'trigger' must be a map such as { sensors: [user-input] }, found a "
        "sequence");
  CHECK(error_of(kBase + "trigger: { sensors: user-input }\n") ==
        "skill.yaml:5:21: 'trigger.sensors' must be a list such as [user-input], found 'user-input'");
  CHECK(error_of(kBase + "trigger: { always: yes }\n") ==
        "skill.yaml:5:20: 'trigger.always' must be true or false, found 'yes'");
  CHECK(error_of("name: { a: 1 }\nversion: 1.0.0\nlibrary: liba.so\nabi: 1\n") ==
        "skill.yaml:1:7: 'name' must be a skill name such as shell-guard, found a map");
}

TEST_CASE("manifest reports each missing required key at the document start", "[skills]") {
  CHECK(error_of("name: policy\nversion: 1.0.0\n") ==
        "skill.yaml:1:1: missing required key 'library'\n"
        "skill.yaml:1:1: missing required key 'abi'");
  CHECK(error_of("priority: 5\n") ==
        "skill.yaml:1:1: missing required key 'name'\n"
        "skill.yaml:1:1: missing required key 'version'\n"
        "skill.yaml:1:1: missing required key 'library'\n"
        "skill.yaml:1:1: missing required key 'abi'");
}

TEST_CASE("manifest rejects a bad name, version, library, abi or sha256", "[skills]") {
  const std::string rest = "version: 1.0.0\nlibrary: liba.so\nabi: 1\n";
  const std::string name_rule =
      ": use lower-case letters, digits and '-', starting with a letter or digit, at most 64 "
      "characters";
  CHECK(error_of("name: Shell_Guard\n" + rest) == "skill.yaml:1:7: invalid skill name 'Shell_Guard'" + name_rule);
  CHECK(error_of("name: -guard\n" + rest) == "skill.yaml:1:7: invalid skill name '-guard'" + name_rule);
  CHECK(parsed("name: " + std::string(64, 'a') + "\n" + rest).name.size() == 64);
  CHECK(error_of("name: " + std::string(65, 'a') + "\n" + rest) ==
        "skill.yaml:1:7: invalid skill name '" + std::string(60, 'a') + "...'" + name_rule);

  CHECK(error_of("name: a\nversion: 1.x\nlibrary: liba.so\nabi: 1\n") ==
        "skill.yaml:2:10: invalid version '1.x': 'x' is not a number" + kVersionShape);
  CHECK(error_of("name: a\nversion: 1.0\nlibrary: lib/a.so\nabi: 1\n") ==
        "skill.yaml:3:10: 'library' must be a plain file name (it is resolved against the plugin "
        "directory), found 'lib/a.so'");
  CHECK(error_of("name: a\nversion: 1.0\nlibrary: liba.dll\nabi: 1\n") ==
        "skill.yaml:3:10: 'library' must be a file name ending in .so, such as libshell-guard.so, "
        "found 'liba.dll'");
  CHECK(error_of("name: a\nversion: 1.0\nlibrary: .so\nabi: 1\n") ==
        "skill.yaml:3:10: 'library' must be a file name ending in .so, such as libshell-guard.so, "
        "found '.so'");
  CHECK(error_of("name: a\nversion: 1.0\nlibrary: liba.so\nabi: 1.0.0\n") ==
        "skill.yaml:4:6: invalid ABI version '1.0.0': expected MAJOR or MAJOR.MINOR, e.g. 1");
  CHECK(error_of(kBase + "sha256: abc\n") ==
        "skill.yaml:5:9: 'sha256' must be 64 hexadecimal digits (as printed by sha256sum), found "
        "'abc' (3 characters)");
  CHECK(error_of(kBase + "sha256: " + std::string(63, 'a') + "g\n").find("(64 characters)") != std::string::npos);
}

TEST_CASE("manifest rejects a bad dependency entry", "[skills]") {
  CHECK(error_of(kBase + "depends_on: [policy >=1.x]\n") ==
        "skill.yaml:5:14: dependency 'policy >=1.x': invalid version constraint '>=1.x': 'x' is "
        "not a number" +
            kVersionShape);
  CHECK(error_of(kBase + "depends_on: [Policy]\n") ==
        "skill.yaml:5:14: invalid dependency 'Policy': 'Policy' is not a skill name (lower-case "
        "letters, digits and '-')");
  SECTION("a flow list splits at the comma, so the second comparator stands alone") {
    CHECK(error_of(kBase + "depends_on: [policy >=1.0, <2]\n") ==
          "skill.yaml:5:28: invalid dependency '<2': it must start with a skill name; to combine "
          "comparators, quote the whole entry: \"policy >=1.0, <2\"");
  }
  SECTION("listed twice") {
    CHECK(error_of(kBase + "depends_on: [policy, policy >=1]\n") ==
          "skill.yaml:5:22: dependency 'policy' is listed twice; merge the entries into one such "
          "as \"policy >=1.0, <2\"");
  }
  SECTION("on itself, wherever the name is given") {
    CHECK(error_of(kBase + "depends_on: [shell-guard]\n") ==
          "skill.yaml:5:14: skill 'shell-guard' depends on itself; remove it from 'depends_on'");
    CHECK(error_of("depends_on: [a >=1]\nname: a\nversion: 1.0.0\nlibrary: liba.so\nabi: 1\n") ==
          "skill.yaml:1:14: skill 'a' depends on itself; remove it from 'depends_on'");
  }
}

TEST_CASE("manifest rejects an invalid sensor name", "[skills]") {
  CHECK(error_of(kBase + "trigger: { sensors: [user input] }\n") ==
        "skill.yaml:5:22: invalid sensor name 'user input' in 'trigger.sensors': use letters, "
        "digits, '-' and '_', such as user-input");
  CHECK(error_of(kBase + "trigger: { sensors: [':'] }\n") ==
        "skill.yaml:5:22: invalid sensor name ':' in 'trigger.sensors': use letters, digits, '-' "
        "and '_', such as user-input");
}

TEST_CASE("manifest rejects a key given twice", "[skills]") {
  CHECK(error_of(kBase + "name: other\n") == "skill.yaml:5:1: duplicate key 'name' (first given at line 1); keep one");
  CHECK(error_of(kBase + "trigger: { always: true, always: false }\n") ==
        "skill.yaml:5:26: duplicate key 'always' in 'trigger'; keep one");
}

TEST_CASE("manifest reports every problem, one per line", "[skills]") {
  CHECK(error_of("name: Bad\nversion: x\nlibrary: a.so\nabi: 1\npriorty: 1\n") ==
        "skill.yaml:1:7: invalid skill name 'Bad': use lower-case letters, digits and '-', "
        "starting with a letter or digit, at most 64 characters\n"
        "skill.yaml:2:10: invalid version 'x': 'x' is not a number" +
            kVersionShape + "\n" + "skill.yaml:5:1: unknown key 'priorty'; did you mean 'priority'?");
}

TEST_CASE("manifest converts YAML syntax errors with their position", "[skills]") {
  CHECK(error_of(kBase + "config: { a: [1, 2 }\n") == "skill.yaml:5:20: YAML syntax error: illegal flow end");
  CHECK(error_of("name: a\n  version: 1\n") == "skill.yaml:2:10: YAML syntax error: illegal map value");
  SECTION("nesting deep enough to exhaust a recursive parser is an error, not a crash") {
    std::string message = error_of("a: " + std::string(100000, '[') + "\n");
    CHECK(message.rfind("skill.yaml:", 0) == 0);
    CHECK(message.find("YAML syntax error") != std::string::npos);
  }
}

TEST_CASE("manifest rejects an empty file and a document that is not a map", "[skills]") {
  const std::string empty = "skill.yaml:1:1: the manifest is empty; it needs at least name, version, library and abi";
  CHECK(error_of("") == empty);
  CHECK(error_of("# nothing yet\n") == empty);
  CHECK(error_of("---\n...\n") == empty);
  CHECK(error_of("- a\n- b\n") ==
        "skill.yaml:1:1: a manifest must be a map of keys such as 'name: shell-guard', found a "
        "sequence");
  CHECK(error_of("just text\n") ==
        "skill.yaml:1:1: a manifest must be a map of keys such as 'name: shell-guard', found "
        "'just text'");
  CHECK(error_of(kBase + "---\nname: other\n") ==
        "skill.yaml:6:1: a manifest holds one YAML document, found 2; one skill per file");
  CHECK(parsed(kBase + "---\n").name == "shell-guard");
}

TEST_CASE("manifest must be UTF-8 and at most 1 MiB", "[skills]") {
  CHECK(error_of(kBase + "description: caf\xE9\n") ==
        "skill.yaml:5:17: the manifest is not valid UTF-8; save it as UTF-8");
  CHECK(parsed(kBase + "description: caf\xC3\xA9\n").description == "caf\xC3\xA9");

  std::string big = kBase + "description: " + std::string(SkillManifest::kMaxFileSize, 'x') + "\n";
  CHECK(
      error_of(big, ErrorCode::limit_exceeded)
          .rfind("skill.yaml:1:1: the manifest is " + std::to_string(big.size()) + " bytes, over the limit of 1048576",
                 0) == 0);
}

// --- files -----------------------------------------------------------------------

TEST_CASE("manifest load reads a file and names it in messages", "[skills]") {
  TempDir dir;
  fs::path good = dir.write("policy.yaml", manifest_named("policy"));
  auto loaded = SkillManifest::load(good);
  REQUIRE(loaded.has_value());
  CHECK(loaded->name == "policy");
  CHECK(loaded->path == good);

  fs::path bad = dir.write("bad.yaml", manifest_named("policy") + "priority: high\n");
  auto failed = SkillManifest::load(bad);
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().message == bad.string() + ":5:11: 'priority' must be an integer, found 'high'");
}

TEST_CASE("manifest load reports a missing, unreadable or oversized file", "[skills]") {
  TempDir dir;
  auto missing = SkillManifest::load(dir.path() / "absent.yaml");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message ==
        (dir.path() / "absent.yaml").string() + ": cannot read the manifest: No such file or directory");

  auto directory = SkillManifest::load(dir.path());
  REQUIRE_FALSE(directory.has_value());
  CHECK(directory.error().code == ErrorCode::io_error);
  CHECK(directory.error().message == dir.path().string() + ": cannot read the manifest: not a regular file");

  fs::path big = dir.write("big.yaml", std::string(SkillManifest::kMaxFileSize + 1, '#'));
  auto oversized = SkillManifest::load(big);
  REQUIRE_FALSE(oversized.has_value());
  CHECK(oversized.error().code == ErrorCode::limit_exceeded);
  CHECK(oversized.error().message == big.string() +
                                         ": the manifest is larger than 1048576 bytes; a manifest describes a "
                                         "skill, large data belongs in a file it reads");
}

TEST_CASE("manifest directory loads yaml files in name order and collects errors", "[skills]") {
  TempDir dir;
  dir.write("b-second.yml", manifest_named("second"));
  dir.write("a-first.yaml", manifest_named("first"));
  dir.write("c-broken.yaml", "name: broken\n");
  dir.write("notes.txt", manifest_named("ignored"));
  dir.write(".hidden.yaml", manifest_named("hidden"));
  fs::create_directories(dir.path() / "nested.yaml");
  fs::create_directories(dir.path() / "sub");
  dir.write("sub/deep.yaml", manifest_named("deep"));

  auto set = passepartout::load_manifest_dir(dir.path());
  REQUIRE(set.has_value());
  REQUIRE(set->manifests.size() == 2);
  CHECK(set->manifests[0].name == "first");
  CHECK(set->manifests[1].name == "second");
  REQUIRE(set->errors.size() == 1);
  CHECK(set->errors[0].message == (dir.path() / "c-broken.yaml").string() + ":1:1: missing required key 'version'\n" +
                                      (dir.path() / "c-broken.yaml").string() +
                                      ":1:1: missing required key 'library'\n" +
                                      (dir.path() / "c-broken.yaml").string() + ":1:1: missing required key 'abi'");
}

TEST_CASE("manifest directory that cannot be read is an error", "[skills]") {
  TempDir dir;
  auto missing = passepartout::load_manifest_dir(dir.path() / "absent");
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::not_found);
  CHECK(missing.error().message == (dir.path() / "absent").string() +
                                       ": cannot read the manifest directory: No such file or "
                                       "directory");
  auto empty = passepartout::load_manifest_dir(dir.path());
  REQUIRE(empty.has_value());
  CHECK(empty->manifests.empty());
  CHECK(empty->errors.empty());
}

TEST_CASE("bundled manifests parse", "[skills]") {
  auto set = passepartout::load_manifest_dir(PP_MANIFEST_DIR);
  REQUIRE(set.has_value());
  for (const passepartout::Error& error : set->errors) FAIL_CHECK(error.message);
}
