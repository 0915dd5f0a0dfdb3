// The ollama driver: Ollama's native POST {base_url}/api/chat, streamed as
// NDJSON; tool-call arguments arrive as a JSON object and calls carry no id
// (the driver numbers them call_0, call_1, ...); token counts come in the
// final done:true line (prompt_eval_count, eval_count).
#include <string>
#include <vector>

#include "providers/driver.hpp"
#include "providers/driver_detail.hpp"
#include "providers/stream_parser.hpp"

namespace passepartout {

namespace {

using driver_detail::Json;

// Reads the lines of one answer, streamed (many lines) or not (one object):
// text, tool calls, usage, the done flag and an error line.
class LineReader {
 public:
  // An error line is recorded in `failure`.
  void read(const Json& line, const ReplyDecoder::OnText& on_text) {
    if (const auto error = line.find("error"); error != line.end()) {
      failure = classify_failure(0, driver_detail::dump(line), {});
      return;
    }
    const Json message = line.value("message", Json::object());
    if (const std::string text = driver_detail::string_field(message, "content"); !text.empty()) {
      content += text;
      if (on_text) on_text(text);
    }
    if (const auto calls = message.find("tool_calls"); calls != message.end() && calls->is_array()) {
      for (const Json& call : *calls) {
        const Json function = call.is_object() ? call.value("function", Json::object()) : Json::object();
        std::string id = driver_detail::string_field(call, "id");
        if (id.empty()) id = "call_" + std::to_string(tool_calls.size());
        const auto arguments = function.find("arguments");
        // Arguments are an object; a server that sends them as text (as the
        // OpenAI API does) is taken at its word and checked at the end.
        std::string text = arguments == function.end() ? std::string("{}")
                           : arguments->is_string()    ? arguments->get<std::string>()
                                                       : driver_detail::dump(*arguments);
        tool_calls.push_back({std::move(id), driver_detail::string_field(function, "name"), std::move(text)});
      }
    }
    if (const auto found = line.find("done"); found != line.end() && found->is_boolean() && found->get<bool>()) {
      done = true;
      usage.input = driver_detail::integer_field(line, "prompt_eval_count");
      usage.output = driver_detail::integer_field(line, "eval_count");
    }
  }

  std::string content;
  std::vector<ToolCall> tool_calls;
  TokenUsage usage;
  bool done = false;
  ProviderReply failure{ProviderReply::failed({}, FailureClass::none)};
};

class StreamDecoder final : public driver_detail::NdjsonDecoder {
 protected:
  ProviderReply complete() override {
    if (!reader_.done) {
      // A last line without its newline: read it, unless it is cut short.
      parser_.finish([&](std::string_view line) {
        if (!Json::accept(line)) return;
        on_item(line, nullptr);
      });
      if (failed()) return std::move(failure_);
    }
    if (!reader_.done) return ProviderReply::failed("stream ended without done:true", FailureClass::truncated);
    return driver_detail::build_reply(std::move(reader_.content), std::move(reader_.tool_calls), reader_.usage);
  }

 private:
  void on_item(std::string_view text, const OnText& on_text) override {
    if (failed() || reader_.done) return;
    const Json line = Json::parse(text, nullptr, false);
    if (line.is_discarded() || !line.is_object()) {
      fail_with(ProviderReply::failed("stream line " + std::to_string(lines_) + " is not a JSON object",
                                      FailureClass::unparseable));
      return;
    }
    ++lines_;
    reader_.read(line, on_text);
    if (reader_.failure.failure != FailureClass::none) fail_with(std::move(reader_.failure));
  }

  LineReader reader_;
  std::size_t lines_ = 0;
};

class WholeDecoder final : public driver_detail::WholeBodyDecoder {
 protected:
  ProviderReply decode(const Json& body) override {
    LineReader reader;
    reader.read(body, nullptr);
    if (reader.failure.failure != FailureClass::none) return std::move(reader.failure);
    if (!reader.done) return ProviderReply::failed("response without done:true", FailureClass::truncated);
    return driver_detail::build_reply(std::move(reader.content), std::move(reader.tool_calls), reader.usage);
  }
};

class OllamaDriver final : public Driver {
 public:
  HttpCall encode(const EndpointSettings& settings, const ProviderRequest& request, bool stream) const override {
    Json messages = Json::array();
    if (!request.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", request.system_prompt}});
    for (const Turn& turn : request.transcript) {
      switch (turn.role) {
        case Turn::Role::user:
          messages.push_back({{"role", "user"}, {"content", turn.text}});
          break;
        case Turn::Role::assistant: {
          Json message = {{"role", "assistant"}, {"content", turn.text}};
          if (!turn.tool_calls.empty()) {
            Json calls = Json::array();
            for (const ToolCall& call : turn.tool_calls) {
              calls.push_back(
                  {{"function",
                    {{"name", call.name}, {"arguments", driver_detail::arguments_object(call.arguments)}}}});
            }
            message["tool_calls"] = std::move(calls);
          }
          messages.push_back(std::move(message));
          break;
        }
        case Turn::Role::tool:
          messages.push_back({{"role", "tool"}, {"content", turn.text}, {"tool_name", turn.tool_name}});
          break;
      }
    }
    if (!request.prompt_in_transcript) messages.push_back({{"role", "user"}, {"content", request.prompt}});

    Json body = {{"model", driver_detail::model_of(settings, request)}, {"messages", std::move(messages)}};
    body["stream"] = stream;
    body["options"] = {{"num_predict", settings.max_tokens}};
    if (settings.tools && !driver_detail::tool_specs(request.tools).empty()) {
      body["tools"] = driver_detail::function_tools(request.tools);
    }

    HttpCall call{"POST", driver_detail::join_url(settings.base_url, "/api/chat"), {}, driver_detail::dump(body)};
    call.headers.emplace_back("content-type", "application/json");
    // Ollama needs no key; one set is sent as a bearer token (a proxy in front may want it).
    if (!settings.api_key.empty()) call.headers.emplace_back("authorization", "Bearer " + settings.api_key);
    call.headers.insert(call.headers.end(), settings.headers.begin(), settings.headers.end());
    return call;
  }

  std::unique_ptr<ReplyDecoder> decoder(bool stream) const override {
    if (stream) return std::make_unique<StreamDecoder>();
    return std::make_unique<WholeDecoder>();
  }

  HttpCall encode_model_list(const EndpointSettings& settings) const override {
    HttpCall call{"GET", driver_detail::join_url(settings.base_url, "/api/tags"), {}, {}};
    if (!settings.api_key.empty()) call.headers.emplace_back("authorization", "Bearer " + settings.api_key);
    call.headers.insert(call.headers.end(), settings.headers.begin(), settings.headers.end());
    return call;
  }

  Result<std::vector<std::string>> decode_model_list(std::string_view body) const override {
    return driver_detail::list_field(body, "models", "name");
  }

  const char* kind() const noexcept override { return "ollama"; }
};

}  // namespace

std::unique_ptr<Driver> make_ollama_driver() { return std::make_unique<OllamaDriver>(); }

}  // namespace passepartout
