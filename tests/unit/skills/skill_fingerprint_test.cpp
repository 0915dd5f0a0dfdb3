// Skill fingerprints and the description of what a swap changed, as the
// audit log records them.
#include <catch2/catch.hpp>

#include "skills/skill_fingerprint.hpp"
#include "skills/skill_manifest.hpp"

using namespace passepartout;

namespace {

SkillManifest manifest(std::string_view yaml) {
  auto m = SkillManifest::parse(yaml, "shell-guard.yaml");
  INFO((m ? std::string() : m.error().message));
  REQUIRE(m.has_value());
  return *m;
}

constexpr std::string_view kBase =
    "name: shell-guard\nversion: 1.0.0\nlibrary: libshell-guard.so\nabi: 1\npriority: 50\n"
    "config: {approve_all_shell: true, max_output: 100, api_token: s3cr3t-one}\n";

}  // namespace

TEST_CASE("the fingerprint is 12 hex digits of the settings and config, not of the file's layout", "[skills][audit]") {
  const SkillManifest a = manifest(kBase);
  const SkillManifest same = manifest(std::string(kBase) + "# a comment\n\n");
  const std::string fingerprint = skill_fingerprint(a, a.config);
  CHECK(fingerprint.size() == 12);
  CHECK(fingerprint.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(skill_fingerprint(same, same.config) == fingerprint);

  const SkillManifest priority = manifest(
      "name: shell-guard\nversion: 1.0.0\nlibrary: libshell-guard.so\nabi: 1\npriority: 60\n"
      "config: {approve_all_shell: true, max_output: 100, api_token: s3cr3t-one}\n");
  CHECK(skill_fingerprint(priority, priority.config) != fingerprint);
  // The resolved config counts, not only what the file says.
  CHECK(skill_fingerprint(a, Value()) != fingerprint);
}

TEST_CASE("what a swap changed names the settings and config keys, and no secret's value", "[skills][audit]") {
  const SkillManifest from = manifest(kBase);
  const SkillManifest to = manifest(
      "name: shell-guard\nversion: 1.0.0\nlibrary: libshell-guard.so\nabi: 1\npriority: 60\n"
      "config: {approve_all_shell: false, api_token: s3cr3t-two, timeout_s: 5}\n");
  const std::string described = describe_settings_change(from, from.config, to, to.config);
  CHECK(described ==
        "priority: 50 -> 60; config: api_token changed; config: approve_all_shell true -> false; "
        "config: max_output 100 -> (none); config: timeout_s (none) -> 5");
  CHECK(described.find("s3cr3t") == std::string::npos);
  CHECK(describe_settings_change(from, from.config, from, from.config).empty());
}

TEST_CASE("config keys that look like secrets are recognised", "[skills][audit]") {
  for (std::string_view key : {"api_token", "API_KEY", "password", "db_passwd", "client_secret", "private_pem",
                               "auth_header", "credentials", "signing_key"}) {
    CHECK(looks_like_secret_key(key));
  }
  for (std::string_view key : {"approve_all_shell", "max_output", "timeout_s", "keyboard_layout"}) {
    CHECK_FALSE(looks_like_secret_key(key));
  }
}
