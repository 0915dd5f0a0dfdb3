// The anthropic driver: the Messages API (POST {base_url}/v1/messages), with
// a top-level system prompt, a required max_tokens, tool_use and tool_result
// blocks, strict user/assistant alternation, and named server-sent events.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "providers/driver.hpp"
#include "providers/driver_detail.hpp"
#include "providers/stream_parser.hpp"

namespace passepartout {

namespace {

using driver_detail::Json;

// The transcript as messages whose roles alternate: consecutive turns of one
// role (a tool's results, then the next user text) merge into one message.
class MessageList {
 public:
  void add(const char* role, Json block) {
    if (messages_.empty() || messages_.back()["role"] != role) {
      messages_.push_back({{"role", role}, {"content", Json::array()}});
    }
    messages_.back()["content"].push_back(std::move(block));
  }
  void add_text(const char* role, const std::string& text) {
    if (!text.empty()) add(role, {{"type", "text"}, {"text", text}});  // the API refuses empty text blocks
  }
  // The messages; one holding a single text block carries it as a string.
  Json take() {
    for (Json& message : messages_) {
      Json& content = message["content"];
      if (content.size() == 1 && content[0]["type"] == "text") content = content[0]["text"];
    }
    return std::move(messages_);
  }

 private:
  Json messages_ = Json::array();
};

// Anthropic's input_tokens leaves out what was read from or written to the
// prompt cache; `input` here counts all three, `cached_input` the reads (a
// cache write is counted as plain input, a little under its price).
TokenUsage read_usage(const Json& usage, TokenUsage out) {
  if (const std::int64_t input = driver_detail::integer_field(usage, "input_tokens"); input >= 0) {
    const std::int64_t read = driver_detail::integer_field(usage, "cache_read_input_tokens");
    const std::int64_t written = driver_detail::integer_field(usage, "cache_creation_input_tokens");
    out.input = input + std::max<std::int64_t>(read, 0) + std::max<std::int64_t>(written, 0);
    if (read >= 0) out.cached_input = read;
  }
  if (const std::int64_t output = driver_detail::integer_field(usage, "output_tokens"); output >= 0) {
    out.output = output;
  }
  return out;
}

class StreamDecoder final : public driver_detail::SseDecoder {
 protected:
  ProviderReply complete() override {
    if (!done_) {
      parser_.finish([&](const SseEvent& event) { on_item(event, nullptr); });
      if (failed()) return std::move(failure_);
    }
    if (!done_) return ProviderReply::failed("stream ended without message_stop", FailureClass::truncated);
    std::vector<ToolCall> calls;
    for (auto& [index, block] : tool_blocks_) {
      if (!block.has_deltas) block.call.arguments = std::move(block.input);
      calls.push_back(std::move(block.call));
    }
    return driver_detail::build_reply(std::move(content_), std::move(calls), usage_);
  }

 private:
  struct ToolBlock {
    ToolCall call;
    std::string input;        // the start event's input as JSON text ({} when streamed)
    bool has_deltas = false;  // input_json_delta pieces came: they are the arguments
  };

  void on_item(const SseEvent& event, const OnText& on_text) override {
    if (failed() || done_) return;
    const Json data = Json::parse(event.data, nullptr, false);
    if (data.is_discarded() || !data.is_object()) {
      fail_with(ProviderReply::failed("event '" + event.event + "' is not a JSON object", FailureClass::unparseable));
      return;
    }
    // The event's name, as the SDK reads it; the data's type when a server sent none.
    const std::string type = event.event != "message" ? event.event : driver_detail::string_field(data, "type");
    if (type == "message_start") {
      usage_ = read_usage(data.value("message", Json::object()).value("usage", Json::object()), usage_);
    } else if (type == "content_block_start") {
      const Json block = data.value("content_block", Json::object());
      if (driver_detail::string_field(block, "type") == "tool_use") {
        ToolBlock& tool = tool_blocks_[driver_detail::integer_field(data, "index")];
        tool.call.id = driver_detail::string_field(block, "id");
        tool.call.name = driver_detail::string_field(block, "name");
        tool.input = driver_detail::dump(block.value("input", Json::object()));
      } else if (const std::string text = driver_detail::string_field(block, "text"); !text.empty()) {
        add_text(text, on_text);
      }
    } else if (type == "content_block_delta") {
      const Json delta = data.value("delta", Json::object());
      const std::string delta_type = driver_detail::string_field(delta, "type");
      if (delta_type == "text_delta") {
        add_text(driver_detail::string_field(delta, "text"), on_text);
      } else if (delta_type == "input_json_delta") {
        const auto block = tool_blocks_.find(driver_detail::integer_field(data, "index"));
        if (block == tool_blocks_.end()) {
          fail_with(
              ProviderReply::failed("input_json_delta for a block that is not a tool_use", FailureClass::unparseable));
          return;
        }
        block->second.call.arguments += driver_detail::string_field(delta, "partial_json");
        block->second.has_deltas = true;
      }
    } else if (type == "message_delta") {
      usage_ = read_usage(data.value("usage", Json::object()), usage_);
    } else if (type == "message_stop") {
      done_ = true;
    } else if (type == "error") {
      fail_with(classify_failure(0, event.data, {}));
    }
    // ping, content_block_stop, and events added later (thinking blocks) carry nothing needed here.
  }

  void add_text(const std::string& text, const OnText& on_text) {
    if (text.empty()) return;
    content_ += text;
    if (on_text) on_text(text);
  }

  std::string content_;
  std::map<std::int64_t, ToolBlock> tool_blocks_;  // by content block index, so in the message's order
  TokenUsage usage_;
  bool done_ = false;
};

class WholeDecoder final : public driver_detail::WholeBodyDecoder {
 protected:
  ProviderReply decode(const Json& body) override {
    if (driver_detail::string_field(body, "type") == "error") return classify_failure(0, body.dump(), {});
    const auto content = body.find("content");
    if (content == body.end() || !content->is_array()) {
      return ProviderReply::failed("response has no content list", FailureClass::unparseable);
    }
    std::string text;
    std::vector<ToolCall> calls;
    for (const Json& block : *content) {
      const std::string type = driver_detail::string_field(block, "type");
      if (type == "text") {
        text += driver_detail::string_field(block, "text");
      } else if (type == "tool_use") {
        calls.push_back({driver_detail::string_field(block, "id"), driver_detail::string_field(block, "name"),
                         driver_detail::dump(block.value("input", Json::object()))});
      }
    }
    return driver_detail::build_reply(std::move(text), std::move(calls),
                                      read_usage(body.value("usage", Json::object()), {}));
  }
};

class AnthropicDriver final : public Driver {
 public:
  HttpCall encode(const EndpointSettings& settings, const ProviderRequest& request, bool stream) const override {
    MessageList messages;
    for (const Turn& turn : request.transcript) {
      switch (turn.role) {
        case Turn::Role::user:
          messages.add_text("user", turn.text);
          break;
        case Turn::Role::assistant:
          messages.add_text("assistant", turn.text);
          for (const ToolCall& call : turn.tool_calls) {
            messages.add("assistant", {{"type", "tool_use"},
                                       {"id", call.id},
                                       {"name", call.name},
                                       {"input", driver_detail::arguments_object(call.arguments)}});
          }
          break;
        case Turn::Role::tool:
          messages.add("user", {{"type", "tool_result"}, {"tool_use_id", turn.tool_call_id}, {"content", turn.text}});
          break;
      }
    }
    if (!request.prompt_in_transcript) messages.add_text("user", request.prompt);

    Json body = {{"model", driver_detail::model_of(settings, request)}, {"max_tokens", settings.max_tokens}};
    if (request.system_stable > 0 && request.system_stable <= request.system_prompt.size()) {
      // The part that stays the same for the session ends at a cache
      // breakpoint: later calls read it from the prompt cache (tools included,
      // which come before it), at a tenth of the input price.
      const std::string_view system = request.system_prompt;
      Json blocks = Json::array();
      blocks.push_back({{"type", "text"},
                        {"text", system.substr(0, request.system_stable)},
                        {"cache_control", {{"type", "ephemeral"}}}});
      if (request.system_stable < system.size()) {
        blocks.push_back({{"type", "text"}, {"text", system.substr(request.system_stable)}});
      }
      body["system"] = std::move(blocks);
    } else if (!request.system_prompt.empty()) {
      body["system"] = request.system_prompt;
    }
    body["messages"] = messages.take();
    if (stream) body["stream"] = true;
    static const std::vector<driver_detail::ToolSpec> kNoTools;
    const std::vector<driver_detail::ToolSpec>& specs =
        settings.tools ? driver_detail::tool_specs(request.tools) : kNoTools;
    if (!specs.empty()) {
      Json tools = Json::array();
      for (const auto& spec : specs) {
        Json tool = {{"name", spec.name}};
        if (!spec.description.empty()) tool["description"] = spec.description;
        tool["input_schema"] = spec.parameters;
        tools.push_back(std::move(tool));
      }
      body["tools"] = std::move(tools);
      if (settings.tool_choice) {
        body["tool_choice"] = {{"type", "auto"}};
        if (!settings.parallel_tool_calls) body["tool_choice"]["disable_parallel_tool_use"] = true;
      }
    }

    HttpCall call{"POST", driver_detail::join_url(settings.base_url, "/v1/messages"), {}, driver_detail::dump(body)};
    call.headers.emplace_back("content-type", "application/json");
    call.headers.emplace_back("anthropic-version", "2023-06-01");
    if (stream) call.headers.emplace_back("accept", "text/event-stream");
    if (!settings.api_key.empty()) call.headers.emplace_back("x-api-key", settings.api_key);
    call.headers.insert(call.headers.end(), settings.headers.begin(), settings.headers.end());
    return call;
  }

  std::unique_ptr<ReplyDecoder> decoder(bool stream) const override {
    if (stream) return std::make_unique<StreamDecoder>();
    return std::make_unique<WholeDecoder>();
  }

  // limit=1000: the API pages its list (20 by default); one page holds them all.
  HttpCall encode_model_list(const EndpointSettings& settings) const override {
    HttpCall call{"GET", driver_detail::join_url(settings.base_url, "/v1/models?limit=1000"), {}, {}};
    call.headers.emplace_back("anthropic-version", "2023-06-01");
    if (!settings.api_key.empty()) call.headers.emplace_back("x-api-key", settings.api_key);
    call.headers.insert(call.headers.end(), settings.headers.begin(), settings.headers.end());
    return call;
  }

  Result<std::vector<std::string>> decode_model_list(std::string_view body) const override {
    return driver_detail::list_field(body, "data", "id");
  }

  const char* kind() const noexcept override { return "anthropic"; }
};

}  // namespace

std::unique_ptr<Driver> make_anthropic_driver() { return std::make_unique<AnthropicDriver>(); }

}  // namespace passepartout
