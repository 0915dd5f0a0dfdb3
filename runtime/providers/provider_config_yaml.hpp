// Reading a config file's `providers:` list. Included only by the config
// reader's .cpp: it brings in yaml-cpp.
#pragma once

#include <filesystem>
#include <vector>

#include "base/yaml_diagnostics.hpp"
#include "providers/provider_config.hpp"

namespace passepartout {

// Appends each entry of `list` (a YAML sequence of maps) to `out`, and each
// problem, located at its line and key, to `problems`:
//   - name: local              # required; [a-z0-9_-], unique, not scripted/offline
//     kind: openai             # required: openai | ollama | anthropic
//     base_url: http://...     # http:// or https://; default: the kind's public endpoint
//     model: qwen2.5           # required
//     api_key_env: LOCAL_KEY   # or api_key_file: (refused when group- or world-readable)
//     headers: {X-Title: x}
//     max_tokens: 1024
//     timeouts: {connect: 10s, first_byte: 120s, idle: 60s}
//     token_limit_field: max_tokens | max_completion_tokens
//     stream, stream_usage, tools, tool_choice, parallel_tool_calls: true | false
//     context_window: 32768
// An entry whose api_key_env names an unset variable is kept, unusable.
// Relative key files are resolved against `base` (the config file's folder).
void read_provider_list(const YAML::Node& list, YamlProblems& problems, const EnvLookup& env,
                        const std::filesystem::path& base, std::vector<ProviderConfig>& out);

}  // namespace passepartout
