#include "providers/provider_config_yaml.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include "base/yaml_scalars.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kKeys[] = {
    "name",           "kind",         "base_url",   "model",       "api_key_env",
    "api_key_file",   "headers",      "max_tokens", "timeouts",    "token_limit_field",
    "stream",         "stream_usage", "tools",      "tool_choice", "parallel_tool_calls",
    "context_window", "local"};
constexpr std::string_view kTimeoutKeys[] = {"connect", "first_byte", "idle"};
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {{"url", "base_url"},
                                                                      {"type", "kind"},
                                                                      {"driver", "kind"},
                                                                      {"key_env", "api_key_env"},
                                                                      {"key_file", "api_key_file"}};

std::string_view default_base_url(std::string_view kind) {
  if (kind == "ollama") return "http://localhost:11434";
  if (kind == "anthropic") return "https://api.anthropic.com";
  return "https://api.openai.com/v1";
}

bool is_name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }

// RFC 9110 token characters, for header names.
bool is_token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// Reads one entry; problems go to `problems`, located.
class EntryReader {
 public:
  EntryReader(YamlProblems& problems, const EnvLookup& env, const std::filesystem::path& base)
      : problems_(problems), env_(env), base_(base) {}

  std::optional<ProviderConfig> read(const YAML::Node& entry, std::size_t number) {
    where_ = " in provider " + std::to_string(number);
    if (!entry.IsMap()) {
      problems_.problem(entry.Mark(), "provider " + std::to_string(number) +
                                          " must be a map such as {name: local, kind: openai, model: m}");
      return std::nullopt;
    }
    const std::size_t before = problems_.count();
    ProviderConfig c;
    c.origin = problems_.origin() + ":" + std::to_string(entry.Mark().line + 1);
    const YAML::Node* base_url = nullptr;
    YAML::Node kind_key;
    for (const auto& field : entry) {
      const YAML::Node& key = field.first;
      const YAML::Node& value = field.second;
      const std::string name = key.IsScalar() ? key.Scalar() : std::string("?");
      if (name == "api_key") {
        problems_.problem(key.Mark(), "api_key" + where_ +
                                          ": a key is never written in the config file; put it in an environment "
                                          "variable and give its name as api_key_env, or in a file only you can "
                                          "read and give api_key_file");
        continue;
      }
      if (std::find(std::begin(kKeys), std::end(kKeys), name) == std::end(kKeys)) {
        problems_.problem(key.Mark(), unknown_key_message(name, kKeys, where_, kAliases));
        continue;
      }
      if (name == "headers") {
        read_headers(key, value, c);
      } else if (name == "timeouts") {
        read_timeouts(key, value, c.timeouts);
      } else if (name == "max_tokens") {
        if (auto n = integer(key, value, 1, 10'000'000)) c.max_tokens = *n;
      } else if (name == "context_window") {
        if (auto n = integer(key, value, 256, 100'000'000)) c.context_window = *n;
      } else if (name == "local") {
        if (auto b = boolean(key, value)) c.local = *b;
      } else if (name == "stream" || name == "stream_usage" || name == "tools" || name == "tool_choice" ||
                 name == "parallel_tool_calls") {
        if (auto b = boolean(key, value)) {
          bool& out = name == "stream"         ? c.stream
                      : name == "stream_usage" ? c.stream_usage
                      : name == "tools"        ? c.tools
                      : name == "tool_choice"  ? c.tool_choice
                                               : c.parallel_tool_calls;
          out = *b;
        }
      } else {
        auto text = string(key, value);
        if (!text) continue;
        if (name == "name") {
          c.name = *text;
          check_name(value, c.name);
        } else if (name == "kind") {
          c.kind = *text;
          kind_key = key;
          if (std::find(std::begin(kProviderKinds), std::end(kProviderKinds), c.kind) == std::end(kProviderKinds)) {
            problems_.problem(value.Mark(), "kind" + where_ + ": '" + c.kind +
                                                "' is not a provider kind (openai, ollama or anthropic)");
          }
        } else if (name == "base_url") {
          base_url = &value;
          c.base_url = *text;
          while (c.base_url.size() > 1 && c.base_url.back() == '/') c.base_url.pop_back();
          if (!c.base_url.starts_with("http://") && !c.base_url.starts_with("https://")) {
            problems_.problem(value.Mark(),
                              "base_url" + where_ + ": '" + *text + "' is not an http:// or https:// URL");
          }
        } else if (name == "model") {
          c.model = *text;
        } else if (name == "token_limit_field") {
          c.token_limit_field = *text;
          if (c.token_limit_field != "max_tokens" && c.token_limit_field != "max_completion_tokens") {
            problems_.problem(value.Mark(),
                              "token_limit_field" + where_ + ": expected max_tokens or max_completion_tokens");
          }
        } else if (name == "api_key_env") {
          if (!c.key_source.empty()) {
            problems_.problem(key.Mark(), "api_key_env" + where_ + ": give api_key_env or api_key_file, not both");
            continue;
          }
          c.key_source = *text;
          if (auto key_text = env_(*text)) {
            c.api_key = *key_text;
          } else {
            c.unusable = *text + " is not set";
          }
        } else if (name == "api_key_file") {
          if (!c.key_source.empty()) {
            problems_.problem(key.Mark(), "api_key_file" + where_ + ": give api_key_env or api_key_file, not both");
            continue;
          }
          std::filesystem::path file = *text;
          if (file.is_relative()) file = base_ / file;
          c.key_source = file.lexically_normal().string();
          auto key_text = read_key_file(c.key_source);
          if (key_text) {
            c.api_key = std::move(*key_text);
          } else {
            problems_.problem(value.Mark(), "api_key_file" + where_ + ": " + key_text.error().message);
          }
        }
      }
    }
    if (c.name.empty()) problems_.problem(entry.Mark(), "provider " + std::to_string(number) + ": missing key 'name'");
    if (c.kind.empty()) {
      problems_.problem(entry.Mark(),
                        "provider " + std::to_string(number) + ": missing key 'kind' (openai, ollama or anthropic)");
    }
    if (c.model.empty())
      problems_.problem(entry.Mark(), "provider " + std::to_string(number) + ": missing key 'model'");
    if (base_url == nullptr) c.base_url = default_base_url(c.kind);
    if (c.token_limit_field != "max_tokens" && c.kind != "openai") {
      problems_.problem(entry.Mark(),
                        "provider " + std::to_string(number) + ": token_limit_field applies to kind openai only");
    }
    if (problems_.count() != before) return std::nullopt;
    return c;
  }

 private:
  std::optional<std::string> string(const YAML::Node& key, const YAML::Node& value) {
    if (!value.IsScalar() || value.Scalar().empty()) {
      problems_.problem_at(key, value, key.Scalar() + where_ + ": expected a text value");
      return std::nullopt;
    }
    return value.Scalar();
  }

  std::optional<std::int64_t> integer(const YAML::Node& key, const YAML::Node& value, std::int64_t min,
                                      std::int64_t max) {
    auto typed = value.IsScalar() ? type_scalar(value) : Result<YamlScalar>(fail(ErrorCode::invalid_input, ""));
    if (!typed || typed->type != YamlScalar::Type::integer || typed->integer < min || typed->integer > max) {
      problems_.problem_at(key, value,
                           key.Scalar() + where_ + ": expected a whole number from " + std::to_string(min) + " to " +
                               std::to_string(max));
      return std::nullopt;
    }
    return typed->integer;
  }

  std::optional<bool> boolean(const YAML::Node& key, const YAML::Node& value) {
    auto typed = value.IsScalar() ? type_scalar(value) : Result<YamlScalar>(fail(ErrorCode::invalid_input, ""));
    if (!typed || typed->type != YamlScalar::Type::boolean) {
      problems_.problem_at(key, value, key.Scalar() + where_ + ": expected true or false");
      return std::nullopt;
    }
    return typed->boolean;
  }

  void check_name(const YAML::Node& value, const std::string& name) {
    const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), is_name_char);
    if (!ok) {
      problems_.problem(value.Mark(), "name" + where_ + ": '" + name +
                                          "' is not a provider name (lower-case letters, digits, '-' and '_')");
    } else if (std::find(std::begin(kBuiltinProviders), std::end(kBuiltinProviders), name) !=
               std::end(kBuiltinProviders)) {
      problems_.problem(value.Mark(), "name" + where_ + ": '" + name + "' is a built-in provider; choose another");
    }
  }

  void read_headers(const YAML::Node& key, const YAML::Node& value, ProviderConfig& c) {
    if (!value.IsMap()) {
      problems_.problem_at(key, value, "headers" + where_ + ": expected a map such as {X-Title: passepartout}");
      return;
    }
    for (const auto& header : value) {
      const std::string name = header.first.IsScalar() ? header.first.Scalar() : std::string();
      if (name.empty() || !std::all_of(name.begin(), name.end(), is_token_char)) {
        problems_.problem(header.first.Mark(), "headers" + where_ + ": '" + name + "' is not a header name");
        continue;
      }
      if (!header.second.IsScalar() || header.second.Scalar().find_first_of("\r\n") != std::string::npos) {
        problems_.problem_at(header.first, header.second,
                             "headers" + where_ + ": " + name + " needs a one-line text value");
        continue;
      }
      c.headers.emplace_back(name, header.second.Scalar());
    }
  }

  void read_timeouts(const YAML::Node& key, const YAML::Node& value, ProviderTimeouts& timeouts) {
    if (!value.IsMap()) {
      problems_.problem_at(key, value, "timeouts" + where_ + ": expected a map such as {connect: 10s, idle: 60s}");
      return;
    }
    for (const auto& entry : value) {
      const std::string name = entry.first.IsScalar() ? entry.first.Scalar() : std::string("?");
      if (std::find(std::begin(kTimeoutKeys), std::end(kTimeoutKeys), name) == std::end(kTimeoutKeys)) {
        problems_.problem(entry.first.Mark(), unknown_key_message(name, kTimeoutKeys, " in timeouts" + where_));
        continue;
      }
      const auto duration = entry.second.IsScalar() ? parse_duration(entry.second.Scalar()) : std::nullopt;
      if (!duration || duration->count() == 0) {
        problems_.problem_at(entry.first, entry.second,
                             "timeouts" + where_ + ": " + name + " is not a duration above zero (10s, 500ms, 2m)");
        continue;
      }
      (name == "connect" ? timeouts.connect : name == "first_byte" ? timeouts.first_byte : timeouts.idle) = *duration;
    }
  }

  YamlProblems& problems_;
  const EnvLookup& env_;
  const std::filesystem::path& base_;
  std::string where_;
};

}  // namespace

void read_provider_list(const YAML::Node& list, YamlProblems& problems, const EnvLookup& env,
                        const std::filesystem::path& base, std::vector<ProviderConfig>& out) {
  if (!list.IsSequence()) {
    problems.problem(list.Mark(),
                     "providers: expected a list of providers such as "
                     "[{name: local, kind: openai, base_url: 'http://127.0.0.1:8080/v1', model: m}]");
    return;
  }
  EntryReader reader(problems, env, base);
  std::size_t number = 0;
  const std::size_t first = out.size();
  for (const YAML::Node& entry : list) {
    ++number;
    auto config = reader.read(entry, number);
    if (!config) continue;
    auto same = std::find_if(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                             [&](const ProviderConfig& p) { return p.name == config->name; });
    if (same != out.end()) {
      problems.problem(entry.Mark(), "provider " + std::to_string(number) + ": the name '" + config->name +
                                         "' is already given at " + same->origin);
      continue;
    }
    out.push_back(std::move(*config));
  }
}

}  // namespace passepartout
