// The model exchanges the integration tests play with the loopback HTTP
// stub (support/http_stub.hpp) standing in for each API the daemon speaks
// (openai, anthropic, ollama): a provider config pointing at it, its answers
// in each API's shape, a chat with the daemon, and what a request sent.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "integration/daemon_process.hpp"
#include "support/http_stub.hpp"
#include "value/value.hpp"

namespace passepartout::testing {

inline constexpr std::string_view kIdentity = "You look after the build machine of team blue.";

// The API `kind` at the stub, non-streamed, in a config file of its own
// (<dir>/passepartout.yaml), followed by `more` (YAML text: mcp_servers:, say).
std::string write_config(const TempDir& dir, const HttpStub& stub, std::string_view kind, bool tools = true,
                         std::string_view more = "");

// The daemon with that provider (the config file), an identity file, and the key.
DaemonProcess::Options with_model(const TempDir& dir, const std::string& config);

// The API's answer: a call of `tool` with `arguments` (a JSON object), or text.
StubResponse call_answer(std::string_view kind, std::string_view id, std::string_view tool,
                         const nlohmann::json& arguments);
StubResponse text_answer(std::string_view kind, std::string_view text);

nlohmann::json shell_arguments(std::string_view command);

// A chat of session `session` with the token; frames until its end.
std::vector<Value> chat(const DaemonProcess& daemon, std::string_view text, std::string_view session,
                        std::string_view id);
// The token of the approval the frames announce ("" when none).
std::string approval_token(const std::vector<Value>& frames);
std::string printed(const std::vector<Value>& frames);

// The system prompt, the offered tools' names and the messages of a request, in the API's shape.
struct Sent {
  std::string system;             // the system prompt (Anthropic's text blocks joined)
  std::size_t cached_prefix = 0;  // anthropic: where its cache_control breakpoint ends the system prompt
  std::vector<std::string> tools;
  nlohmann::json shell_schema;
  nlohmann::json messages;
};
Sent sent(std::string_view kind, const StubRequest& request);

// The result the request sends for the call `id`, in the API's shape ("" when none).
std::string call_result(std::string_view kind, const nlohmann::json& messages, std::string_view id);

}  // namespace passepartout::testing
