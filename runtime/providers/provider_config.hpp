// ProviderConfig: what one real LLM endpoint is (kind, URL, model, key,
// switches, timeouts), where such endpoints come from (the seed's provider
// table as presets, a config file's `providers:` list), and which of them a
// cascade tries in which order (PROVIDER_CASCADE, `provider_cascade:`).
// The YAML reader is in provider_config_yaml.hpp (it brings in yaml-cpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"

namespace passepartout {

// How long a call may wait at each stage. There is deliberately no total cap:
// a healthy long stream is never cut.
struct ProviderTimeouts {
  std::chrono::milliseconds connect{std::chrono::seconds(10)};
  std::chrono::milliseconds first_byte{std::chrono::seconds(60)};  // local models loading need more
  std::chrono::milliseconds idle{std::chrono::seconds(60)};        // between two chunks of a body
};

struct ProviderConfig {
  std::string name;      // what the cascade, logs and status call it: lower case, [a-z0-9_-]
  std::string kind;      // "openai", "ollama" or "anthropic": the API it speaks
  std::string base_url;  // without a trailing '/': https://api.openai.com/v1, http://localhost:11434
  std::string model;     // the default model (a model selector may choose another per call)
  // The credential; empty when the endpoint needs none. Never logged, shown
  // or put in a message: key_source says where it came from instead.
  std::string api_key;
  std::string key_source;  // "OPENAI_API_KEY", "/etc/passepartout/openai.key"; empty: no key
  std::vector<std::pair<std::string, std::string>> headers;  // extra request headers
  std::int64_t max_tokens = 1024;
  ProviderTimeouts timeouts;
  // Per-endpoint switches for the known differences between servers.
  std::string token_limit_field = "max_tokens";  // openai: or "max_completion_tokens"
  bool stream = true;                            // ask for a streamed answer
  bool stream_usage = true;                      // openai: stream_options.include_usage
  bool tools = true;                             // the endpoint takes tools
  bool tool_choice = true;                       // ... and tool_choice
  bool parallel_tool_calls = true;               // ... and parallel_tool_calls
  std::int64_t context_window = 8192;            // tokens (the seed's default, D9)
  // What it is sent stays on this machine (a model served here): only such
  // providers receive private data (the model router's privacy rule). Never
  // guessed from the URL: a loopback address may be a tunnel.
  bool local = false;
  std::string origin;  // "preset" or "<file>:<line>"
  // Why the endpoint cannot be used ("OPENAI_API_KEY is not set"); empty: usable.
  std::string unusable;

  bool usable() const noexcept { return unusable.empty(); }
};

// Looks a variable up in the environment; nullopt when unset or empty.
using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;

// The API kinds a provider may speak, in the order messages list them.
inline constexpr std::string_view kProviderKinds[] = {"openai", "ollama", "anthropic"};
// Names a provider may not take: the built-in ones.
inline constexpr std::string_view kBuiltinProviders[] = {"scripted", "offline"};

// The seed's provider table (D6), every entry whether usable or not, in the
// table's order: ollama (native API at $OLLAMA_HOST, default
// localhost:11434, no key, always usable), openrouter, openai
// ($OPENAI_BASE_URL), anthropic ($ANTHROPIC_BASE_URL), groq, gemini, each
// usable when its key variable is set.
std::vector<ProviderConfig> preset_providers(const EnvLookup& env);

// The presets with the declared providers laid over them: a declared entry
// with a preset's name replaces that preset where it stood; the others follow
// the presets in their declared order.
std::vector<ProviderConfig> merge_providers(std::vector<ProviderConfig> presets, std::vector<ProviderConfig> declared);

// A cascade order as given: names, and where they were given for messages.
struct CascadeOrder {
  std::vector<std::string> names;  // lower-cased, trimmed, duplicates dropped
  std::string where;               // "PROVIDER_CASCADE", "/etc/pp.yaml:12:19: provider_cascade"
};

// "a, B ,c" -> {"a", "b", "c"} (empty items and repeats dropped).
std::vector<std::string> split_cascade(std::string_view text);

// The providers a cascade tries, in order.
struct CascadeSelection {
  std::vector<ProviderConfig> providers;  // usable, in cascade order
  std::vector<std::string> skipped;       // "openai: OPENAI_API_KEY is not set": named but unusable
};

// With an order: its providers, in its order; a name that is no provider is
// an error naming `order.where` and the known names, and a named provider
// that is unusable is skipped with its reason (the seed skips a provider
// without a handler). Without one: the declared providers, then the presets
// that have a key, in table order; ollama only when OLLAMA_HOST is set or
// the config file declares it (the seed always tries it first; a daemon with
// nothing configured answers offline instead of failing every call on a
// refused connection).
Result<CascadeSelection> select_cascade(const std::vector<ProviderConfig>& all,
                                        const std::optional<CascadeOrder>& order, bool ollama_host_set);

// "10s", "1.5s", "250ms", "2m", or a bare number of seconds; nullopt otherwise
// (and for negatives or more than a day).
std::optional<std::chrono::milliseconds> parse_duration(std::string_view text);

// The text of the key in `file`, trimmed; refused when
// the file can be read by its group or others, with the chmod that fixes it.
Result<std::string> read_key_file(const std::string& file);

}  // namespace passepartout
