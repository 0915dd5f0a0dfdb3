// The openai driver: chat completions (POST {base_url}/chat/completions), for
// OpenAI and the servers that speak its API (OpenRouter, Groq, Gemini's
// OpenAI endpoint, vLLM, llama.cpp, LM Studio, Ollama's /v1).
#include <algorithm>
#include <string>
#include <vector>

#include "providers/driver.hpp"
#include "providers/driver_detail.hpp"
#include "providers/stream_parser.hpp"

namespace passepartout {

namespace {

using driver_detail::Json;

Json assistant_message(const Turn& turn) {
  Json message = {{"role", "assistant"}};
  if (turn.tool_calls.empty()) {
    message["content"] = turn.text;
    return message;
  }
  message["content"] = turn.text.empty() ? Json(nullptr) : Json(turn.text);
  Json calls = Json::array();
  for (const ToolCall& call : turn.tool_calls) {
    calls.push_back(
        {{"id", call.id},
         {"type", "function"},
         {"function", {{"name", call.name}, {"arguments", call.arguments.empty() ? "{}" : call.arguments}}}});
  }
  message["tool_calls"] = std::move(calls);
  return message;
}

TokenUsage read_usage(const Json& usage) {
  TokenUsage out;
  out.input = driver_detail::integer_field(usage, "prompt_tokens");
  out.output = driver_detail::integer_field(usage, "completion_tokens");
  // Part of prompt_tokens (OpenAI caches a prompt's prefix from 1,024 tokens on).
  if (const auto details = usage.find("prompt_tokens_details"); details != usage.end()) {
    out.cached_input = driver_detail::integer_field(*details, "cached_tokens");
  }
  return out;
}

// An error a 200 carried: OpenAI's {"error":{...}}, vLLM's {"object":"error"}.
bool is_error_object(const Json& json) {
  return json.is_object() && (json.contains("error") || driver_detail::string_field(json, "object") == "error");
}

// Streamed tool calls, assembled from their deltas by index: the id and name
// come first, the arguments in pieces. A delta without an index belongs to
// the call at its position in the delta's list; a new id at an index already
// used starts a new call (some servers number every call 0).
class ToolCallAssembler {
 public:
  void add(const Json& deltas) {
    if (!deltas.is_array()) return;
    for (std::size_t position = 0; position < deltas.size(); ++position) {
      const Json& delta = deltas[position];
      if (!delta.is_object()) continue;
      const auto index_field = delta.find("index");
      const std::int64_t index = index_field != delta.end() && index_field->is_number_integer()
                                     ? index_field->get<std::int64_t>()
                                     : static_cast<std::int64_t>(position);
      const std::string id = driver_detail::string_field(delta, "id");
      Slot* slot = latest(index);
      if (slot == nullptr || (!id.empty() && !slot->call.id.empty() && id != slot->call.id)) {
        slots_.push_back({index, {}});
        slot = &slots_.back();
      }
      if (slot->call.id.empty()) slot->call.id = id;
      const auto function = delta.find("function");
      if (function == delta.end() || !function->is_object()) continue;
      const std::string name = driver_detail::string_field(*function, "name");
      if (slot->call.name.empty()) {
        slot->call.name = name;
      } else if (name != slot->call.name) {
        slot->call.name += name;
      }
      slot->call.arguments += driver_detail::string_field(*function, "arguments");
    }
  }

  std::vector<ToolCall> take() {
    std::vector<ToolCall> calls;
    calls.reserve(slots_.size());
    for (Slot& slot : slots_) calls.push_back(std::move(slot.call));
    return calls;
  }

 private:
  struct Slot {
    std::int64_t index;
    ToolCall call;
  };
  Slot* latest(std::int64_t index) {
    const auto found =
        std::find_if(slots_.rbegin(), slots_.rend(), [&](const Slot& slot) { return slot.index == index; });
    return found == slots_.rend() ? nullptr : &*found;
  }
  std::vector<Slot> slots_;
};

class StreamDecoder final : public driver_detail::SseDecoder {
 protected:
  ProviderReply complete() override {
    if (!done_) {
      parser_.finish([&](const SseEvent& event) { on_item(event, nullptr); });
      if (failed()) return std::move(failure_);
    }
    if (!done_) return ProviderReply::failed("stream ended without [DONE]", FailureClass::truncated);
    return driver_detail::build_reply(std::move(content_), calls_.take(), usage_);
  }

 private:
  void on_item(const SseEvent& event, const OnText& on_text) override {
    if (failed() || done_) return;
    if (event.data == "[DONE]") {
      done_ = true;
      return;
    }
    const Json chunk = Json::parse(event.data, nullptr, false);
    if (chunk.is_discarded() || !chunk.is_object()) {
      fail_with(ProviderReply::failed("stream event " + std::to_string(events_) + " is not a JSON object",
                                      FailureClass::unparseable));
      return;
    }
    ++events_;
    if (is_error_object(chunk)) {
      fail_with(classify_failure(0, event.data, {}));
      return;
    }
    if (const auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
      usage_ = read_usage(*usage);
    }
    const auto choices = chunk.find("choices");
    if (choices == chunk.end() || !choices->is_array()) return;
    for (const Json& choice : *choices) {
      if (!choice.is_object() || driver_detail::integer_field(choice, "index") > 0) continue;
      const auto delta = choice.find("delta");
      if (delta == choice.end() || !delta->is_object()) continue;
      const std::string text = driver_detail::string_field(*delta, "content");
      if (!text.empty()) {
        content_ += text;
        if (on_text) on_text(text);
      }
      if (const auto calls = delta->find("tool_calls"); calls != delta->end()) calls_.add(*calls);
    }
  }

  std::string content_;
  ToolCallAssembler calls_;
  TokenUsage usage_;
  std::size_t events_ = 0;
  bool done_ = false;
};

class WholeDecoder final : public driver_detail::WholeBodyDecoder {
 protected:
  ProviderReply decode(const Json& body) override {
    if (is_error_object(body)) return classify_failure(0, body.dump(), {});
    const auto choices = body.find("choices");
    if (choices == body.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) {
      return ProviderReply::failed("response has no choices", FailureClass::unparseable);
    }
    const auto message = (*choices)[0].find("message");
    if (message == (*choices)[0].end() || !message->is_object()) {
      return ProviderReply::failed("response's first choice has no message", FailureClass::unparseable);
    }
    std::vector<ToolCall> calls;
    if (const auto wire = message->find("tool_calls"); wire != message->end() && wire->is_array()) {
      for (const Json& call : *wire) {
        const Json function = call.is_object() ? call.value("function", Json::object()) : Json::object();
        calls.push_back({driver_detail::string_field(call, "id"), driver_detail::string_field(function, "name"),
                         driver_detail::string_field(function, "arguments")});
      }
    }
    TokenUsage usage;
    if (const auto found = body.find("usage"); found != body.end()) usage = read_usage(*found);
    return driver_detail::build_reply(driver_detail::string_field(*message, "content"), std::move(calls), usage);
  }
};

class OpenAiDriver final : public Driver {
 public:
  HttpCall encode(const EndpointSettings& settings, const ProviderRequest& request, bool stream) const override {
    Json messages = Json::array();
    if (!request.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", request.system_prompt}});
    for (const Turn& turn : request.transcript) {
      switch (turn.role) {
        case Turn::Role::user:
          messages.push_back({{"role", "user"}, {"content", turn.text}});
          break;
        case Turn::Role::assistant:
          messages.push_back(assistant_message(turn));
          break;
        case Turn::Role::tool:
          messages.push_back({{"role", "tool"}, {"tool_call_id", turn.tool_call_id}, {"content", turn.text}});
          break;
      }
    }
    if (!request.prompt_in_transcript) messages.push_back({{"role", "user"}, {"content", request.prompt}});

    Json body = {{"model", driver_detail::model_of(settings, request)}, {"messages", std::move(messages)}};
    body[settings.token_limit_field.empty() ? "max_tokens" : settings.token_limit_field] = settings.max_tokens;
    body["stream"] = stream;
    if (stream && settings.stream_usage) body["stream_options"] = {{"include_usage", true}};
    if (settings.tools && !driver_detail::tool_specs(request.tools).empty()) {
      body["tools"] = driver_detail::function_tools(request.tools);
      if (settings.tool_choice) body["tool_choice"] = "auto";
      if (settings.parallel_tool_calls) body["parallel_tool_calls"] = true;
    }

    HttpCall call{
        "POST", driver_detail::join_url(settings.base_url, "/chat/completions"), {}, driver_detail::dump(body)};
    call.headers.emplace_back("content-type", "application/json");
    if (stream) call.headers.emplace_back("accept", "text/event-stream");
    if (!settings.api_key.empty()) call.headers.emplace_back("authorization", "Bearer " + settings.api_key);
    call.headers.insert(call.headers.end(), settings.headers.begin(), settings.headers.end());
    return call;
  }

  std::unique_ptr<ReplyDecoder> decoder(bool stream) const override {
    if (stream) return std::make_unique<StreamDecoder>();
    return std::make_unique<WholeDecoder>();
  }

  HttpCall encode_model_list(const EndpointSettings& settings) const override {
    HttpCall call{"GET", driver_detail::join_url(settings.base_url, "/models"), {}, {}};
    if (!settings.api_key.empty()) call.headers.emplace_back("authorization", "Bearer " + settings.api_key);
    call.headers.insert(call.headers.end(), settings.headers.begin(), settings.headers.end());
    return call;
  }

  Result<std::vector<std::string>> decode_model_list(std::string_view body) const override {
    return driver_detail::list_field(body, "data", "id");
  }

  const char* kind() const noexcept override { return "openai"; }
};

}  // namespace

std::unique_ptr<Driver> make_openai_driver() { return std::make_unique<OpenAiDriver>(); }

}  // namespace passepartout
