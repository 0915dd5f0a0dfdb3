// The model exchanges the integration tests play with the loopback HTTP
// stub: a provider config pointing at it, its answers in each API's shape,
// a chat with the daemon, and what a request sent.
#include "integration/model_exchange.hpp"

#include <fstream>

#include "value/sexp_printer.hpp"

namespace passepartout::testing {

using nlohmann::json;

// The API `kind` at the stub, non-streamed, in a config file of its own.
std::string write_config(const TempDir& dir, const HttpStub& stub, std::string_view kind, bool tools,
                         std::string_view more) {
  const auto file = dir.path() / "passepartout.yaml";
  const std::string base = kind == "openai" ? stub.url("/v1") : stub.url("");
  std::ofstream(file) << "providers:\n"
                         "  - name: model\n"
                         "    kind: "
                      << kind << "\n    base_url: " << base
                      << "\n    model: stub-model\n"
                         "    stream: false\n"
                         "    context_window: 64000\n"
                      << (tools ? "" : "    tools: false\n") << (kind == "ollama" ? "" : "    api_key_env: MODEL_KEY\n")
                      << more;
  return file.string();
}

DaemonProcess::Options with_model(const TempDir& dir, const std::string& config) {
  std::ofstream(dir.path() / "identity.md") << kIdentity << "\n";
  DaemonProcess::Options options;
  options.script = "rules: []\n";
  options.provider = "model";
  options.extra_args = {"--config", config, "--identity", (dir.path() / "identity.md").string()};
  options.extra_env = {"MODEL_KEY=sk-model-key-0123456789"};
  return options;
}

// The API's answer: a call of `tool` with `arguments` (a JSON object), or text.
StubResponse call_answer(std::string_view kind, std::string_view id, std::string_view tool, const json& arguments) {
  json body;
  if (kind == "openai") {
    body = {
        {"id", "chatcmpl-1"},
        {"object", "chat.completion"},
        {"choices",
         {{{"index", 0},
           {"message",
            {{"role", "assistant"},
             {"content", nullptr},
             {"tool_calls",
              {{{"id", id}, {"type", "function"}, {"function", {{"name", tool}, {"arguments", arguments.dump()}}}}}}}},
           {"finish_reason", "tool_calls"}}}},
        {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 5}}}};
  } else if (kind == "anthropic") {
    body = {{"id", "msg_1"},
            {"type", "message"},
            {"role", "assistant"},
            {"content", {{{"type", "tool_use"}, {"id", id}, {"name", tool}, {"input", arguments}}}},
            {"stop_reason", "tool_use"},
            {"usage", {{"input_tokens", 10}, {"output_tokens", 5}}}};
  } else {
    body = {{"model", "stub-model"},
            {"message",
             {{"role", "assistant"},
              {"content", ""},
              {"tool_calls", {{{"function", {{"name", tool}, {"arguments", arguments}}}}}}}},
            {"done", true}};
  }
  StubResponse response = StubResponse::text(body.dump());
  response.headers = {{"content-type", "application/json"}};
  return response;
}

StubResponse text_answer(std::string_view kind, std::string_view text) {
  json body;
  if (kind == "openai") {
    body = {{"id", "chatcmpl-2"},
            {"object", "chat.completion"},
            {"choices",
             {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", text}}}, {"finish_reason", "stop"}}}},
            {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 5}}}};
  } else if (kind == "anthropic") {
    body = {{"id", "msg_2"},
            {"type", "message"},
            {"role", "assistant"},
            {"content", {{{"type", "text"}, {"text", text}}}},
            {"stop_reason", "end_turn"},
            {"usage", {{"input_tokens", 10}, {"output_tokens", 5}}}};
  } else {
    body = {{"model", "stub-model"}, {"message", {{"role", "assistant"}, {"content", text}}}, {"done", true}};
  }
  StubResponse response = StubResponse::text(body.dump());
  response.headers = {{"content-type", "application/json"}};
  return response;
}

json shell_arguments(std::string_view command) {
  return {{"cmd", command}, {"explanation", "Running a harmless command the user asked for."}};
}

// A chat of session `session` with the token; frames until its end.
std::vector<Value> chat(const DaemonProcess& daemon, std::string_view text, std::string_view session,
                        std::string_view id) {
  WireClient client = WireClient::tcp(daemon.port());
  client.expect_handshake();
  client.send("(:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID \"" + std::string(session) + "\") :AUTH \"" +
              daemon.token() + "\" :REQUEST-ID \"" + std::string(id) + "\" :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"" +
              std::string(text) + "\"))");
  std::vector<Value> frames;
  for (int i = 0; i < 64; ++i) {
    frames.push_back(client.expect_frame());
    if (frames.back().at("REQUEST-ID").text() == id) break;
  }
  return frames;
}

std::string approval_token(const std::vector<Value>& frames) {
  for (const Value& frame : frames) {
    if (frame.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED")) {
      return std::string(frame.path({"PAYLOAD", "TOKEN"}).text());
    }
  }
  return {};
}

std::string printed(const std::vector<Value>& frames) {
  std::string text;
  for (const Value& frame : frames) text += to_sexp(frame) + "\n";
  return text;
}

Sent sent(std::string_view kind, const StubRequest& request) {
  const json body = json::parse(request.body);
  Sent out;
  out.messages = body.at("messages");
  if (kind == "anthropic") {
    // A string, or text blocks, the first ending at the prompt cache's breakpoint.
    const json system = body.value("system", json(""));
    if (system.is_string()) {
      out.system = system.get<std::string>();
    } else {
      for (const json& block : system) {
        out.system += block.at("text").get<std::string>();
        if (block.contains("cache_control")) out.cached_prefix = out.system.size();
      }
    }
  } else {
    for (const json& message : out.messages) {
      if (message.at("role") == "system") out.system = message.at("content").get<std::string>();
    }
  }
  for (const json& tool : body.value("tools", json::array())) {
    const json& described = kind == "anthropic" ? tool : tool.at("function");
    out.tools.push_back(described.at("name").get<std::string>());
    if (out.tools.back() == "shell") {
      out.shell_schema = kind == "anthropic" ? described.at("input_schema") : described.at("parameters");
    }
  }
  return out;
}

// The result the request sends for the call `id`, in the API's shape ("" when none).
std::string call_result(std::string_view kind, const json& messages, std::string_view id) {
  for (const json& message : messages) {
    if (kind == "anthropic") {
      if (message.at("role") != "user" || !message.at("content").is_array()) continue;
      for (const json& part : message.at("content")) {
        if (part.value("type", "") == "tool_result" && part.value("tool_use_id", "") == id) {
          const json& content = part.at("content");
          return content.is_string() ? content.get<std::string>() : content.dump();
        }
      }
    } else if (message.at("role") == "tool") {
      if (kind == "openai" && message.value("tool_call_id", "") != id) continue;
      return message.at("content").get<std::string>();
    }
  }
  return {};
}

}  // namespace passepartout::testing
