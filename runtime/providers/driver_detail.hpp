// What the three drivers share: the request's model and URL, tool
// descriptors as JSON, a decoder base that classifies failed statuses, one
// that drives a stream parser, and the checked assembly of tool calls.
// Private to runtime/providers.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "providers/driver.hpp"
#include "providers/stream_parser.hpp"

namespace passepartout::driver_detail {

using Json = nlohmann::ordered_json;  // keeps the order fields are written (and read) in

// The request's model, or the endpoint's default.
const std::string& model_of(const EndpointSettings& settings, const ProviderRequest& request) noexcept;
// base_url without its trailing '/', then `path`.
std::string join_url(std::string_view base_url, std::string_view path);
// The request's tools (:NAME :DESCRIPTION :PARAMETERS plists), each as
// {name, description, parameters}, the parameters as a JSON schema
// ({"type":"object","properties":{}} when the descriptor has none).
// A session offers the same tools (the same Value: Offer::native_tools) in
// every request, and an MCP server's schemas are long JSON texts: each
// thread keeps what it made for the last tools it was given, and makes them
// again only for other ones. Valid until the thread's next call.
struct ToolSpec {
  std::string name;
  std::string description;
  Json parameters;
};
const std::vector<ToolSpec>& tool_specs(const Value& tools);
// The tools as OpenAI's chat completions take them, as Ollama's /api/chat
// does too: [{"type":"function","function":{name, description (when it has
// one), parameters}}]. Kept like tool_specs().
const Json& function_tools(const Value& tools);
// A call's arguments text as a JSON object ({} when it is not one: the
// transcript only holds arguments checked when the reply came).
Json arguments_object(std::string_view arguments);

// The reply for a complete answer: text, or tool calls (with the text beside
// them), each call's arguments checked to be a JSON object and converted to
// a Value; a failure (unparseable) naming the tool and the JSON error
// otherwise. Empty arguments count as {}.
ProviderReply build_reply(std::string content, std::vector<ToolCall> calls, TokenUsage usage);

// The part of every decoder that does not depend on the API: keeps the first
// bytes of the body for classify_failure when the status is not 2xx, and
// stamps the status and request id on every reply.
class DecoderBase : public ReplyDecoder {
 public:
  ProviderReply finish(int status, const HttpHeaders& headers) final;

 protected:
  // Keeps what an error body needs (the first kMaxErrorBody bytes).
  void keep_for_error(std::string_view bytes);
  // The reply for a 2xx response whose body has all been fed.
  virtual ProviderReply complete() = 0;
  // Records the first failure; later ones are ignored, as are later bytes.
  void fail_with(ProviderReply failure);
  bool failed() const noexcept { return failure_.failure != FailureClass::none; }

  static constexpr std::size_t kMaxErrorBody = 64 * 1024;
  ProviderReply failure_{ProviderReply::failed({}, FailureClass::none)};

 private:
  std::string error_body_;
};

// A streamed body read with `Parser` (SseParser, NdjsonParser): the bytes go
// to the parser, each event or line it completes to on_item(), and a parser
// refusing one (over its cap) fails the reply as too_large.
template <class Parser, class Item>
class ParsingDecoder : public DecoderBase {
 public:
  void feed(std::string_view bytes, const OnText& on_text) final {
    keep_for_error(bytes);
    if (failed()) return;
    auto fed = parser_.feed(bytes, [&](Item item) { on_item(item, on_text); });
    if (!fed) fail_with(ProviderReply::failed(fed.error().message, FailureClass::too_large));
  }

 protected:
  // One complete event or line; `on_text` is empty for what the parser's
  // finish() hands over at the end.
  virtual void on_item(Item item, const OnText& on_text) = 0;

  Parser parser_;
};

using SseDecoder = ParsingDecoder<SseParser, const SseEvent&>;
using NdjsonDecoder = ParsingDecoder<NdjsonParser, std::string_view>;

// Reads a whole (not streamed) JSON body, up to kMaxBody bytes; the
// subclass's decode() turns the document into the reply.
class WholeBodyDecoder : public DecoderBase {
 public:
  void feed(std::string_view bytes, const OnText& on_text) final;

 protected:
  ProviderReply complete() final;
  virtual ProviderReply decode(const Json& body) = 0;

  static constexpr std::size_t kMaxBody = 16 * 1024 * 1024;

 private:
  std::string body_;
};

// `json` as compact text; invalid UTF-8 (which a Value never holds) becomes U+FFFD.
inline std::string dump(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

// A string field of `object`, or empty when absent or not a string.
std::string string_field(const Json& object, const char* name);
// The string field `field` of each object in the array `array_name` of the
// JSON document `body` ({"data": [{"id": "gpt-4o"}, ...]}); invalid_input
// naming what is missing when the body has no such array.
Result<std::vector<std::string>> list_field(std::string_view body, const char* array_name, const char* field);
// An integer field of `object`, or -1.
std::int64_t integer_field(const Json& object, const char* name);

}  // namespace passepartout::driver_detail
