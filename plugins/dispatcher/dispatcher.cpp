// dispatcher: the security gate of seed I1 (steps 3-7 and 9; the shell-safety
// steps live in shell-guard). Blocks reads and writes of protected paths,
// content carrying secrets or private material, and sends network access from
// the shell to a human.
#include <passepartout/skill.hpp>

#include <boost/container/small_vector.hpp>

#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pattern_table.hpp"
#include "skill_config.hpp"
#include "skill_text.hpp"

namespace {

using passepartout::Action;
using passepartout::LogLevel;
using passepartout::Signal;
using passepartout::ValueRef;
using passepartout::Verdict;
using passepartout::bundled::ascii_lower;
using passepartout::bundled::decimal;
using passepartout::bundled::is_named;
using passepartout::bundled::is_text;
using passepartout::bundled::lower;
using passepartout::bundled::pattern_options;
using passepartout::bundled::PatternSpec;
using passepartout::bundled::PatternTable;
using passepartout::bundled::string_list;

// The seed's messages (I1), word for word.
constexpr std::string_view kProtectedPath = "Action blocked: Attempted read of protected path '";
constexpr std::string_view kSecretPattern = "Action blocked: Content contains potential secret exposure.";
constexpr std::string_view kVaultExposure = "Action blocked: Potential exposure of '";
constexpr std::string_view kPrivacyTag = "Action blocked: Content tagged with privacy filter.";
constexpr std::string_view kPrivacyText = "Action blocked: Text may reference private content.";

// Vault values this short would match everywhere; the seed ignored them too.
constexpr std::size_t kMinVaultValueLength = 6;
// How deep and how many strings of an action are scanned; more fails closed.
constexpr int kMaxScanDepth = 32;
constexpr std::size_t kMaxScannedStrings = 10000;

// Whether `text` contains `needle` (already lower-case), ignoring ASCII case.
bool contains_folded(std::string_view text, std::string_view needle) {
  if (needle.empty() || needle.size() > text.size()) return false;
  for (std::size_t i = 0; i + needle.size() <= text.size(); ++i) {
    std::size_t j = 0;
    while (j < needle.size() && ascii_lower(text[i + j]) == needle[j]) ++j;
    if (j == needle.size()) return true;
  }
  return false;
}

// --- pattern tables ------------------------------------------------------------------

// A glob over path components as an RE2 fragment: `*` is any run of
// characters within one component, `?` one character; the rest is literal.
std::string glob_regex(std::string_view glob) {
  std::string out;
  for (const char c : glob) {
    if (c == '*') {
      out += "[^/]*";
    } else if (c == '?') {
      out += "[^/]";
    } else {
      out += RE2::QuoteMeta(re2::StringPiece(&c, 1));
    }
  }
  return out;
}

// A glob anchored to whole components: it matches a normalised path when it
// equals one component ("*.pem") or a run of components (".aws/credentials").
PatternSpec protected_glob(std::string_view glob) {
  return {std::string(glob), "(?i)(?:^|/)" + glob_regex(glob) + "(?:/|$)"};
}

// The built-in protected globs, grouped by kind (the README's table).
// One group a line reads better than one glob a line:
// clang-format off
constexpr std::string_view kProtectedGlobs[] = {
    ".env", ".env.*", "*.env", ".envrc",
    ".netrc", ".git-credentials", "auth.json", "kubeconfig", ".htpasswd", ".pgpass", ".npmrc", ".pypirc",
    ".docker/config.json",
    ".aws/credentials", ".aws/config", ".kube/config",
    "private-keys-v1.d", "secring.*", "pubring.*",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.asc", "*.gpg", "*.pgp", "*.cert", "*.crt", "*.csr",
};
// clang-format on

// The protected paths. Each entry is anchored to whole path components, unlike
// the seed's unanchored substring search, which blocked src/tokenizer.py for
// "token*" and incredible.txt for "*cred*".
std::vector<PatternSpec> protected_path_patterns(const std::vector<std::string>& extra) {
  std::vector<PatternSpec> specs;
  for (const std::string_view glob : kProtectedGlobs) {
    specs.push_back(protected_glob(glob));
  }
  // A component naming a credential as a word: the word alone or delimited by
  // '.', '_' or '-' (aws_credentials.json, my-secrets, api.token, passwd).
  specs.push_back({"credential words",
                   "(?i)(?:^|/)(?:[^/]*[._-])?(?:credentials?|creds?|secrets?|tokens?|passwords?|passwd)"
                   "(?:[._-][^/]*)?(?:/|$)"});
  // ... or ending a name's stem (mysecrets.txt, accesstoken), and a password
  // anywhere in it (dbpassword.txt): what the seed's substring search caught
  // and these words rarely mean otherwise (secretary.txt, tokenizer.py pass).
  specs.push_back(
      {"credential word ending a name", "(?i)(?:^|/)[^/]*(?:credentials?|secrets?|tokens?)(?:\\.[^/]*)?(?:/|$)"});
  specs.push_back({"password in a name", "(?i)(?:^|/)[^/]*(?:password|passwd)[^/]*(?:/|$)"});
  for (const std::string& glob : extra) specs.push_back(protected_glob(glob));
  return specs;
}

// Secrets in text (seed I1 step 4): key headers and provider token shapes.
std::vector<PatternSpec> secret_patterns() {
  return {
      {"PEM private key", R"(-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----)"},
      {"PGP private key block", R"(-----BEGIN PGP PRIVATE KEY BLOCK-----)"},
      {"PGP public key block", R"(-----BEGIN PGP PUBLIC KEY BLOCK-----)"},
      {"sk- key", R"(\bsk-[A-Za-z0-9_-]{20,})"},
      {"Google API key", R"(\bAIza[0-9A-Za-z_-]{35})"},
      {"GitHub token", R"(\bgh[pousr]_[A-Za-z0-9]{36,})"},
      {"Slack token", R"(\bxox[baprs]-[A-Za-z0-9-]{24,})"},
      {"upper-case assignment", R"(\b[A-Z][A-Z0-9_]{2,}=['"]?[A-Za-z0-9_-]{20,})"},
      {"keyed secret", R"((?i)\b(?:api|secret|password|token)[A-Za-z0-9_-]*['"]?\s*[:=]\s*['"]?[A-Za-z0-9_-]{16,})"},
  };
}

// --- config --------------------------------------------------------------------------

struct VaultSecret {
  std::string name;
  std::string value;
};

// `config :SECRETS`: a list of {name, value} or {name, env} maps. Values of
// fewer than kMinVaultValueLength characters, and unset variables, are skipped.
std::vector<VaultSecret> vault_secrets(const ValueRef& config, std::vector<std::string>& skipped) {
  std::vector<VaultSecret> out;
  const ValueRef list = config.get("SECRETS");
  if (list.is_nil()) return out;
  if (!list.is_list()) {
    throw std::invalid_argument("config secrets: expected a list of {name, value} or {name, env} maps, got " +
                                list.print());
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const ValueRef entry = list[i];
    const std::string where = "config secrets[" + decimal(i) + "]";
    const ValueRef name = entry.get("NAME");
    if (!entry.is_list() || !is_text(name) || name.text().empty()) {
      throw std::invalid_argument(where + ": expected {name: NAME, value: VALUE} or {name: NAME, env: VARIABLE}, got " +
                                  entry.print());
    }
    const ValueRef value = entry.get("VALUE");
    const ValueRef env = entry.get("ENV");
    std::string text;
    if (value.is_string() && env.is_nil()) {
      text = std::string(value.text());
    } else if (env.is_string() && value.is_nil()) {
      const std::string variable(env.text());
      if (const char* set = std::getenv(variable.c_str()); set != nullptr) text = set;
    } else {
      throw std::invalid_argument(where + " ('" + std::string(name.text()) +
                                  "'): expected exactly one of value or env, as a string");
    }
    if (text.size() < kMinVaultValueLength) {
      skipped.emplace_back(name.text());
      continue;
    }
    out.push_back({std::string(name.text()), std::move(text)});
  }
  return out;
}

// --- what an action carries ----------------------------------------------------------

// The fields the checks read, extracted as seed I1 describes. (Its move copies
// string_views held inline: it never allocates, so never throws.)
struct Fields {  // NOLINT(bugprone-exception-escape)
  // :PAYLOAD :FILEPATH and a tool's :ARGS :FILEPATH and :PATH (list-files
  // and search-files name a folder or file by :PATH): each is checked (the
  // tools read the arguments, so a harmless first must not hide them).
  std::array<ValueRef, 3> filepaths;
  // Every string the action would send or write; a reply's few fit inside.
  boost::container::small_vector<std::string_view, 8> texts;
  ValueRef tags;          // :PAYLOAD :TAGS
  ValueRef command;       // the shell command, for the network check
  bool overflow = false;  // more strings than kMaxScannedStrings, or nested too deep
};

// Appends every string inside `value` to `out`.
void collect_strings(const ValueRef& value, Fields& fields, int depth) {
  if (value.is_string()) {
    if (fields.texts.size() >= kMaxScannedStrings) {
      fields.overflow = true;
      return;
    }
    fields.texts.push_back(value.text());
    return;
  }
  if (!value.is_list()) return;
  if (depth >= kMaxScanDepth) {
    fields.overflow = true;
    return;
  }
  for (const ValueRef item : value) collect_strings(item, fields, depth + 1);
}

Fields extract(const Action& action) {
  Fields fields;
  const ValueRef target = action.get("TARGET");
  const ValueRef payload = action.get("PAYLOAD");
  const bool tool_call = is_named(target, "TOOL");
  ValueRef args = payload.get("ARGS");
  if (args.is_list() && args[0].is_list()) args = args[0];  // the seed unwrapped one level

  // :TEXT from the payload, or at the top level.
  collect_strings(payload.has("TEXT") ? payload.get("TEXT") : action.get("TEXT"), fields, 0);
  fields.filepaths[0] = payload.get("FILEPATH");
  if (tool_call) fields.filepaths[1] = args.get("FILEPATH");
  if (tool_call) fields.filepaths[2] = args.get("PATH");
  if (tool_call) collect_strings(args, fields, 0);  // :CONTENT of write-file, :CMD of shell, any other argument
  fields.command = payload.get("CMD");
  if (fields.command.is_nil() && tool_call && is_named(payload.get("TOOL"), "shell")) {
    fields.command = args.get("CMD");
  }
  if (!tool_call) collect_strings(fields.command, fields, 0);
  fields.tags = payload.get("TAGS");
  return fields;
}

// `path` with "", "." and ".." resolved lexically, joined by '/': what the
// protected patterns are matched against ("a/./b/../.env" is ".env").
std::string normalised_path(std::string_view path) {
  std::vector<std::string_view> parts;
  const bool absolute = !path.empty() && path.front() == '/';
  while (!path.empty()) {
    const std::size_t slash = path.find('/');
    const std::string_view part = path.substr(0, slash);
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!parts.empty() && parts.back() != "..") {
        parts.pop_back();
      } else if (!absolute) {
        parts.push_back(part);
      }
      continue;
    }
    parts.push_back(part);
  }
  std::string out = absolute ? "/" : "";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += '/';
    out += parts[i];
  }
  return out;
}

// The hosts of the http, https and ftp URLs in `command`, lower-case, read
// as the shell will pass them on: its quoting characters (\ ' ") are dropped
// first, so `https://openai.com\.evil.com` and `"https://openai.com"".evil.com"`
// name the host openai.com.evil.com, as they do to curl.
std::vector<std::string> url_hosts(std::string_view command, const RE2& url) {
  std::string unquoted;
  unquoted.reserve(command.size());
  for (const char c : command) {
    if (c != '\\' && c != '\'' && c != '"') unquoted += c;
  }
  std::vector<std::string> hosts;
  re2::StringPiece input(unquoted.data(), unquoted.size());
  std::string host;
  while (RE2::FindAndConsume(&input, url, &host)) hosts.push_back(lower(host));
  return hosts;
}

// Whether `host` is `domain` or one of its subdomains.
bool within_domain(std::string_view host, std::string_view domain) {
  if (host == domain) return true;
  return host.size() > domain.size() && host.substr(host.size() - domain.size()) == domain &&
         host[host.size() - domain.size() - 1] == '.';
}

// Immutable after construction: RE2 and RE2::Set match from any number of
// threads at once, so gate() needs no lock.
class Dispatcher final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "dispatcher";
  static constexpr const char kVersion[] = "1.0.0";
  static constexpr passepartout::ConfigKeySpec kConfig[] = {
      {"extra_protected_paths", "list", "[]", "More path globs to protect, anchored to whole path components"},
      {"secrets", "list", "[]", "Values never to be sent or written (at least 6 characters)"},
      {"privacy_tags", "list", "[\"@personal\"]", "Text or :TAGS mentioning one is blocked (ignoring case)"},
      {"network_allowlist", "list", "[api.telegram.org, matrix.org, googleapis.com, openai.com, anthropic.com]",
       "Domains (and their subdomains) shell commands may reach without approval"}};

  explicit Dispatcher(const ValueRef& config)
      : protected_paths_(
            protected_path_patterns(string_list(config, "EXTRA_PROTECTED_PATHS", "extra_protected_paths", {}))),
        secret_patterns_(secret_patterns()),
        privacy_tags_(string_list(config, "PRIVACY_TAGS", "privacy_tags", {"@personal"})),
        network_allowlist_(
            string_list(config, "NETWORK_ALLOWLIST", "network_allowlist",
                        {"api.telegram.org", "matrix.org", "googleapis.com", "openai.com", "anthropic.com"})),
        url_(R"((?i)\b(?:https?|ftp)://(?:[^\s/?#@'"]*@)?(\[[^\]\s]*\]|[^\s/:?#'"\\]+))", pattern_options()) {
    for (std::string& tag : privacy_tags_) tag = lower(tag);
    for (std::string& domain : network_allowlist_) domain = lower(domain);
    std::vector<std::string> skipped;
    vault_ = vault_secrets(config, skipped);
    for (const std::string& name : skipped) {
      log_debug("secret '" + name + "' has no value of at least 6 characters; not scanned for");
    }
    if (!url_.ok()) throw std::runtime_error("the URL pattern does not compile: " + url_.error());
  }

  // Seed I1 steps 3-7 and 9, in order; the first that applies decides.
  passepartout::Verdict gate(const Action& action, const Signal& /*signal*/) override {
    const Fields fields = extract(action);

    // 3. Protected paths, read or write.
    for (const ValueRef& filepath : fields.filepaths) {
      if (filepath.is_nil()) continue;
      if (!filepath.is_string()) return Verdict::block(std::string(kProtectedPath) + filepath.print() + "'");
      const std::string path = normalised_path(filepath.text());
      if (const std::string_view rule = protected_paths_.first_match(path); !rule.empty()) {
        log_info("protected path matched '" + std::string(rule) + "'");
        return Verdict::block(std::string(kProtectedPath) + std::string(filepath.text()) + "'");
      }
    }
    // Too much to scan cannot be shown to be clean.
    if (fields.overflow) return Verdict::block(std::string(kSecretPattern));

    // 4. Secret patterns.
    for (const std::string_view text : fields.texts) {
      if (const std::string_view rule = secret_patterns_.first_match(text); !rule.empty()) {
        log_info("secret pattern matched: " + std::string(rule));
        return Verdict::block(std::string(kSecretPattern));
      }
    }
    // 5. Vault values.
    for (const VaultSecret& secret : vault_) {
      for (const std::string_view text : fields.texts) {
        if (text.find(secret.value) != std::string_view::npos) {
          return Verdict::block(std::string(kVaultExposure) + secret.name + "'");
        }
      }
    }
    // 6. Privacy tags.
    for (const ValueRef tag : tag_list(fields.tags)) {
      if (is_text(tag) && mentions_privacy_tag(tag.text())) {
        return Verdict::block(std::string(kPrivacyTag), LogLevel::warn);
      }
    }
    // 7. Privacy text.
    for (const std::string_view text : fields.texts) {
      if (mentions_privacy_tag(text)) return Verdict::block(std::string(kPrivacyText), LogLevel::warn);
    }
    // 9. Network access from the shell to a host outside the allowlist.
    if (fields.command.is_string()) {
      for (const std::string& host : url_hosts(fields.command.text(), url_)) {
        if (!allowed_host(host)) {
          return Verdict::approval("Network access to '" + host + "' requires approval");
        }
      }
    }
    return Verdict::pass();
  }

  void self_test() override {
    if (protected_paths_.first_match(normalised_path("project/.env")).empty() ||
        !protected_paths_.first_match("src/tokenizer.py").empty()) {
      throw std::runtime_error("self-test: the protected-path table does not match as documented");
    }
    if (secret_patterns_.first_match("-----BEGIN RSA PRIVATE KEY-----").empty()) {
      throw std::runtime_error("self-test: a PEM private key header is not recognised");
    }
  }

 private:
  // :TAGS as a list of tags (a single tag counts as a list of one).
  static std::vector<ValueRef> tag_list(const ValueRef& tags) {
    std::vector<ValueRef> out;
    if (tags.is_list()) {
      for (const ValueRef tag : tags) out.push_back(tag);
    } else if (!tags.is_nil()) {
      out.push_back(tags);
    }
    return out;
  }

  bool mentions_privacy_tag(std::string_view text) const {
    return std::any_of(privacy_tags_.begin(), privacy_tags_.end(),
                       [&](const std::string& tag) { return contains_folded(text, tag); });
  }

  bool allowed_host(std::string_view host) const {
    return std::any_of(network_allowlist_.begin(), network_allowlist_.end(),
                       [&](const std::string& domain) { return within_domain(host, domain); });
  }

  PatternTable protected_paths_;
  PatternTable secret_patterns_;
  std::vector<std::string> privacy_tags_;       // lower-case
  std::vector<std::string> network_allowlist_;  // lower-case domains
  std::vector<VaultSecret> vault_;
  RE2 url_;
};

}  // namespace

PASSEPARTOUT_SKILL(Dispatcher);
