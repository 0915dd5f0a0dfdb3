// Provider configuration: the seed's presets from the environment, a config
// file's providers: list (located errors, keys never written in it), and the
// cascade's order.
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "providers/provider_config.hpp"
#include "providers/provider_config_yaml.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::TempDir;
using namespace std::chrono_literals;

namespace {

EnvLookup env_of(std::map<std::string, std::string, std::less<>> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto found = vars.find(name);
    if (found == vars.end() || found->second.empty()) return std::nullopt;
    return found->second;
  };
}

const ProviderConfig& named(const std::vector<ProviderConfig>& all, std::string_view name) {
  for (const ProviderConfig& p : all) {
    if (p.name == name) return p;
  }
  FAIL("no provider named " << name);
  throw;  // unreachable: FAIL throws
}

struct Read {
  std::vector<ProviderConfig> providers;
  std::string errors;
};

Read read_list(std::string_view yaml, const EnvLookup& env = env_of({}), const std::filesystem::path& base = "/") {
  YamlProblems problems("/etc/pp.yaml");
  Read read;
  const YAML::Node root = YAML::Load(std::string(yaml));
  read_provider_list(root["providers"], problems, env, base, read.providers);
  if (!problems.ok()) read.errors = problems.message();
  return read;
}

std::vector<std::string> names_of(const std::vector<ProviderConfig>& providers) {
  std::vector<std::string> names;
  for (const ProviderConfig& p : providers) names.push_back(p.name);
  return names;
}

}  // namespace

TEST_CASE("the seed's providers are presets, usable when their key is set, ollama always", "[providers][config]") {
  const auto presets = preset_providers(env_of({{"OPENAI_API_KEY", "sk-test"}}));
  CHECK(names_of(presets) == std::vector<std::string>{"ollama", "openrouter", "openai", "anthropic", "groq", "gemini"});
  const ProviderConfig& openai = named(presets, "openai");
  CHECK(openai.usable());
  CHECK(openai.kind == "openai");
  CHECK(openai.base_url == "https://api.openai.com/v1");
  CHECK(openai.model == "gpt-4o-mini");
  CHECK(openai.api_key == "sk-test");
  CHECK(openai.key_source == "OPENAI_API_KEY");
  CHECK(named(presets, "ollama").usable());
  CHECK(named(presets, "ollama").kind == "ollama");
  CHECK(named(presets, "ollama").base_url == "http://localhost:11434");
  CHECK(named(presets, "anthropic").unusable == "ANTHROPIC_API_KEY is not set");
  CHECK(named(presets, "anthropic").kind == "anthropic");
  CHECK(named(presets, "openrouter").headers.size() == 2);
  CHECK(named(presets, "gemini").base_url == "https://generativelanguage.googleapis.com/v1beta/openai");
}

TEST_CASE("base URLs follow the official SDKs' variables and OLLAMA_HOST in every form ollama takes",
          "[providers][config]") {
  auto url_of = [](std::string_view name, std::map<std::string, std::string, std::less<>> vars) {
    return named(preset_providers(env_of(std::move(vars))), name).base_url;
  };
  CHECK(url_of("openai", {{"OPENAI_BASE_URL", "http://127.0.0.1:8080/v1/"}}) == "http://127.0.0.1:8080/v1");
  CHECK(url_of("anthropic", {{"ANTHROPIC_BASE_URL", "https://proxy.example"}}) == "https://proxy.example");
  CHECK(url_of("ollama", {{"OLLAMA_HOST", "gpu-box"}}) == "http://gpu-box:11434");
  CHECK(url_of("ollama", {{"OLLAMA_HOST", "gpu-box:8000"}}) == "http://gpu-box:8000");
  CHECK(url_of("ollama", {{"OLLAMA_HOST", "https://ollama.example/"}}) == "https://ollama.example:11434");
  CHECK(url_of("ollama", {{"OLLAMA_HOST", "http://[::1]:9999"}}) == "http://[::1]:9999");
  CHECK(url_of("ollama", {{"OLLAMA_HOST", "http://[::1]"}}) == "http://[::1]:11434");
}

TEST_CASE("a providers: entry is read whole, with its switches and timeouts", "[providers][config]") {
  const Read read = read_list(R"(
providers:
  - name: local
    kind: openai
    base_url: http://127.0.0.1:8080/v1/
    model: qwen2.5-7b-instruct
    api_key_env: LOCAL_KEY
    headers: {X-Title: passepartout}
    max_tokens: 2048
    timeouts: {connect: 2s, first_byte: 120s, idle: 500ms}
    token_limit_field: max_completion_tokens
    stream_usage: false
    parallel_tool_calls: false
    context_window: 32768
)",
                              env_of({{"LOCAL_KEY", "secret-1"}}));
  INFO(read.errors);
  REQUIRE(read.errors.empty());
  REQUIRE(read.providers.size() == 1);
  const ProviderConfig& p = read.providers[0];
  CHECK(p.name == "local");
  CHECK(p.base_url == "http://127.0.0.1:8080/v1");
  CHECK(p.api_key == "secret-1");
  CHECK(p.key_source == "LOCAL_KEY");
  CHECK(p.usable());
  CHECK(p.headers == std::vector<std::pair<std::string, std::string>>{{"X-Title", "passepartout"}});
  CHECK(p.max_tokens == 2048);
  CHECK(p.timeouts.connect == 2s);
  CHECK(p.timeouts.first_byte == 120s);
  CHECK(p.timeouts.idle == 500ms);
  CHECK(p.token_limit_field == "max_completion_tokens");
  CHECK_FALSE(p.stream_usage);
  CHECK(p.tools);
  CHECK_FALSE(p.parallel_tool_calls);
  CHECK(p.context_window == 32768);
  CHECK(p.origin == "/etc/pp.yaml:3");
}

TEST_CASE("a provider whose key variable is unset is kept but unusable, and a kind has a default URL",
          "[providers][config]") {
  const Read read = read_list("providers: [{name: box, kind: ollama, model: llama3.2, api_key_env: BOX_KEY}]");
  INFO(read.errors);
  REQUIRE(read.providers.size() == 1);
  CHECK(read.providers[0].base_url == "http://localhost:11434");
  CHECK(read.providers[0].unusable == "BOX_KEY is not set");
}

TEST_CASE("a bad providers: entry names the file, the line and the key, and nothing of it is kept",
          "[providers][config]") {
  SECTION("an unknown key, with the key meant") {
    const Read read = read_list("providers:\n  - name: a\n    kind: openai\n    model: m\n    base_ulr: http://x\n");
    CHECK(read.errors == "/etc/pp.yaml:5:5: unknown key 'base_ulr' in provider 1; did you mean 'base_url'?");
    CHECK(read.providers.empty());
  }
  SECTION("a kind that does not exist") {
    const Read read = read_list("providers:\n  - {name: a, kind: gpt, model: m}\n");
    CHECK(read.errors.find("/etc/pp.yaml:2:") == 0);
    CHECK(read.errors.find("'gpt' is not a provider kind (openai, ollama or anthropic)") != std::string::npos);
  }
  SECTION("a key written in the file is refused, and says where keys go") {
    const Read read = read_list("providers:\n  - {name: a, kind: openai, model: m, api_key: sk-live-1}\n");
    CHECK(read.errors.find("api_key in provider 1: a key is never written in the config file") != std::string::npos);
    CHECK(read.errors.find("sk-live-1") == std::string::npos);
  }
  SECTION("required keys, names and values") {
    const Read read = read_list(R"(
providers:
  - {name: Bad Name, kind: openai}
  - {name: scripted, kind: openai, model: m, base_url: ftp://x, max_tokens: lots, stream: maybe}
  - {name: c, kind: ollama, model: m, timeouts: {conect: 1s}, headers: {"bad header": x}}
  - {name: d, kind: ollama, model: m, token_limit_field: max_completion_tokens}
)");
    for (const char* expected :
         {"/etc/pp.yaml:3:12: name in provider 1: 'Bad Name' is not a provider name",
          "/etc/pp.yaml:3:5: provider 1: missing key 'model'", "name in provider 2: 'scripted' is a built-in provider",
          "base_url in provider 2: 'ftp://x' is not an http:// or https:// URL",
          "max_tokens in provider 2: expected a whole number from 1 to 10000000",
          "stream in provider 2: expected true or false",
          "unknown key 'conect' in timeouts in provider 3; did you mean 'connect'?",
          "headers in provider 3: 'bad header' is not a header name",
          "provider 4: token_limit_field applies to kind openai only"}) {
      INFO(read.errors);
      CHECK(read.errors.find(expected) != std::string::npos);
    }
    CHECK(read.providers.empty());
  }
  SECTION("a name given twice") {
    const Read read =
        read_list("providers:\n  - {name: a, kind: openai, model: m}\n  - {name: a, kind: ollama, model: m}\n");
    CHECK(read.errors == "/etc/pp.yaml:3:5: provider 2: the name 'a' is already given at /etc/pp.yaml:2");
    CHECK(read.providers.size() == 1);
  }
  SECTION("not a list") {
    const Read read = read_list("providers: {name: a}\n");
    CHECK(read.errors.find("/etc/pp.yaml:1:12: providers: expected a list of providers") == 0);
  }
}

TEST_CASE("a key file is read when only its owner can read it, and refused otherwise", "[providers][config]") {
  TempDir dir;
  const auto file = dir.path() / "openai.key";
  std::ofstream(file) << "  sk-from-file\n";
  ::chmod(file.c_str(), 0600);
  const Read ok =
      read_list("providers: [{name: a, kind: openai, model: m, api_key_file: openai.key}]", env_of({}), dir.path());
  INFO(ok.errors);
  REQUIRE(ok.providers.size() == 1);
  CHECK(ok.providers[0].api_key == "sk-from-file");
  CHECK(ok.providers[0].key_source == file.string());

  ::chmod(file.c_str(), 0640);
  const Read refused =
      read_list("providers: [{name: a, kind: openai, model: m, api_key_file: openai.key}]", env_of({}), dir.path());
  CHECK(refused.errors.find("readable by others than its owner; run 'chmod 600 " + file.string() + "'") !=
        std::string::npos);
  CHECK(refused.errors.find("sk-from-file") == std::string::npos);
  CHECK(refused.providers.empty());

  const Read missing =
      read_list("providers: [{name: a, kind: openai, model: m, api_key_file: nope.key}]", env_of({}), dir.path());
  CHECK(missing.errors.find("api_key_file in provider 1: key file " + (dir.path() / "nope.key").string()) !=
        std::string::npos);
}

TEST_CASE("a declared provider replaces the preset of its name where it stood", "[providers][config]") {
  const Read read = read_list(
      "providers: [{name: openai, kind: openai, model: gpt-4.1-mini}, "
      "{name: local, kind: ollama, model: qwen3}]");
  REQUIRE(read.errors.empty());
  const auto merged = merge_providers(preset_providers(env_of({})), read.providers);
  CHECK(names_of(merged) ==
        std::vector<std::string>{"ollama", "openrouter", "openai", "anthropic", "groq", "gemini", "local"});
  CHECK(named(merged, "openai").model == "gpt-4.1-mini");
  CHECK(named(merged, "openai").usable());  // declared without a key: a compatible server that needs none
}

TEST_CASE("the cascade follows the order given, skipping what has no key, and refuses an unknown name",
          "[providers][config]") {
  const auto all = preset_providers(env_of({{"OPENAI_API_KEY", "k1"}, {"GROQ_API_KEY", "k2"}}));
  SECTION("an order given") {
    const auto selection =
        select_cascade(all, CascadeOrder{split_cascade(" groq, :ANTHROPIC ,openai,groq"), "PROVIDER_CASCADE"}, false);
    REQUIRE(selection.has_value());
    CHECK(names_of(selection->providers) == std::vector<std::string>{"groq", "openai"});
    CHECK(selection->skipped == std::vector<std::string>{"anthropic: ANTHROPIC_API_KEY is not set"});
  }
  SECTION("an unknown name") {
    const auto selection = select_cascade(all, CascadeOrder{{"opneai"}, "PROVIDER_CASCADE"}, false);
    REQUIRE_FALSE(selection.has_value());
    CHECK(selection.error().message.find("PROVIDER_CASCADE: names an unknown provider 'opneai' (known: ollama,") == 0);
  }
  SECTION("no order: declared providers, then presets with a key in table order, ollama only when its host is set") {
    const Read read = read_list("providers: [{name: local, kind: openai, model: m}]");
    const auto merged = merge_providers(all, read.providers);
    auto selection = select_cascade(merged, std::nullopt, false);
    REQUIRE(selection.has_value());
    CHECK(names_of(selection->providers) == std::vector<std::string>{"local", "openai", "groq"});
    selection = select_cascade(merged, std::nullopt, true);
    CHECK(names_of(selection->providers) == std::vector<std::string>{"local", "ollama", "openai", "groq"});
  }
  SECTION("nothing configured: no provider, so the daemon answers offline") {
    const auto selection = select_cascade(preset_providers(env_of({})), std::nullopt, false);
    REQUIRE(selection.has_value());
    CHECK(selection->providers.empty());
  }
}

TEST_CASE("durations are seconds, milliseconds or minutes, bounded", "[providers][config]") {
  CHECK(parse_duration("10s") == 10s);
  CHECK(parse_duration("1.5s") == 1500ms);
  CHECK(parse_duration("250ms") == 250ms);
  CHECK(parse_duration("2m") == 120s);
  CHECK(parse_duration("30") == 30s);
  CHECK_FALSE(parse_duration("").has_value());
  CHECK_FALSE(parse_duration("-1s").has_value());
  CHECK_FALSE(parse_duration("10 s").has_value());
  CHECK_FALSE(parse_duration("2h").has_value());
  CHECK_FALSE(parse_duration("2d").has_value());
  CHECK_FALSE(parse_duration("25h").has_value());
  CHECK_FALSE(parse_duration("1e300").has_value());
}
