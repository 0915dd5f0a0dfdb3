// What the three drivers share, and make_driver.
#include "providers/driver.hpp"

#include <optional>
#include <string>

#include <fmt/format.h>

#include "providers/driver_detail.hpp"
#include "value/json_bridge.hpp"
#include "value/json_bridge_detail.hpp"

namespace passepartout {

std::unique_ptr<Driver> make_driver(std::string_view kind) {
  if (kind == "openai") return make_openai_driver();
  if (kind == "ollama") return make_ollama_driver();
  if (kind == "anthropic") return make_anthropic_driver();
  return nullptr;
}

namespace driver_detail {

const std::string& model_of(const EndpointSettings& settings, const ProviderRequest& request) noexcept {
  return request.model.empty() ? settings.model : request.model;
}

std::string join_url(std::string_view base_url, std::string_view path) {
  while (!base_url.empty() && base_url.back() == '/') base_url.remove_suffix(1);
  return std::string(base_url) + std::string(path);
}

namespace {

std::vector<ToolSpec> make_tool_specs(const Value& tools) {
  std::vector<ToolSpec> specs;
  for (const Value& tool : tools.items()) {
    ToolSpec spec;
    spec.name = std::string(tool.at("NAME").text());
    spec.description = std::string(tool.at("DESCRIPTION").text());
    // The schema as the skill wrote it, where the descriptor carries it: its
    // keys keep their case (additionalProperties, minLength), which the
    // keyword plist of :PARAMETERS does not.
    const Value& written = tool.at("PARAMETERS-JSON");
    Json schema = written.is_string() ? Json::parse(written.text(), nullptr, false) : Json();
    const Value& parameters = tool.at("PARAMETERS");
    if (schema.is_object()) {
      spec.parameters = std::move(schema);
    } else {
      spec.parameters = parameters.is_nil() ? Json{{"type", "object"}, {"properties", Json::object()}}
                                            : Json(value_to_json_dom(parameters));
    }
    if (!spec.name.empty()) specs.push_back(std::move(spec));
  }
  return specs;
}

Json make_function_tools(const std::vector<ToolSpec>& specs) {
  Json tools = Json::array();
  for (const ToolSpec& spec : specs) {
    Json function = {{"name", spec.name}};
    if (!spec.description.empty()) function["description"] = spec.description;
    function["parameters"] = spec.parameters;
    tools.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return tools;
}

// What this thread made for the last tools it was given (compared as
// Values: the same list is one pointer comparison).
struct EncodedTools {
  Value tools;
  std::vector<ToolSpec> specs;
  std::optional<Json> functions;
};

EncodedTools& encoded(const Value& tools) {
  thread_local EncodedTools cache;
  if (!(cache.tools == tools)) {
    cache.specs = make_tool_specs(tools);
    cache.functions.reset();
    cache.tools = tools;
  }
  return cache;
}

}  // namespace

const std::vector<ToolSpec>& tool_specs(const Value& tools) { return encoded(tools).specs; }

const Json& function_tools(const Value& tools) {
  EncodedTools& cache = encoded(tools);
  if (!cache.functions) cache.functions = make_function_tools(cache.specs);
  return *cache.functions;
}

Json arguments_object(std::string_view arguments) {
  Json json = Json::parse(arguments, nullptr, false);
  return json.is_object() ? json : Json::object();
}

ProviderReply build_reply(std::string content, std::vector<ToolCall> calls, TokenUsage usage) {
  if (calls.empty()) {
    ProviderReply reply = ProviderReply::text(std::move(content));
    reply.usage = usage;
    return reply;
  }
  std::vector<Value> values;
  values.reserve(calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    ToolCall& call = calls[i];
    // A server that gives a call no id (Ollama's API never does; some
    // OpenAI-compatible ones do not either): the result must still name the
    // call it answers, and an empty id is refused by the APIs that check.
    if (call.id.empty()) call.id = "call_" + std::to_string(i);
    if (call.name.empty()) {
      return ProviderReply::failed("tool call " + std::to_string(i) + " (id '" + call.id + "') has no name",
                                   FailureClass::unparseable);
    }
    const std::size_t first = call.arguments.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) call.arguments = "{}";
    auto arguments = json_to_value(call.arguments);
    if (!arguments) {
      return ProviderReply::failed(
          "tool '" + call.name + "' (call " + call.id + "): arguments are not valid JSON: " + arguments.error().message,
          FailureClass::unparseable);
    }
    if (call.arguments[call.arguments.find_first_not_of(" \t\r\n")] != '{') {
      return ProviderReply::failed("tool '" + call.name + "' (call " + call.id + "): arguments are not a JSON object",
                                   FailureClass::unparseable);
    }
    values.push_back(Value::plist(
        {{"ID", Value::string(call.id)}, {"NAME", Value::string(call.name)}, {"ARGUMENTS", std::move(*arguments)}}));
  }
  ProviderReply reply = ProviderReply::calls(Value::list(values));
  reply.content = std::move(content);
  reply.wire_calls = std::move(calls);
  reply.usage = usage;
  return reply;
}

ProviderReply DecoderBase::finish(int status, const HttpHeaders& headers) {
  ProviderReply reply;
  if (status < 200 || status >= 300) {
    reply = classify_failure(status, error_body_, headers);
  } else {
    reply = failed() ? std::move(failure_) : complete();
    if (reply.request_id.empty()) {
      if (const std::string* id = find_header(headers, "x-request-id"))
        reply.request_id = *id;
      else if (const std::string* other = find_header(headers, "request-id"))
        reply.request_id = *other;
    }
  }
  reply.http_status = status;
  return reply;
}

void DecoderBase::keep_for_error(std::string_view bytes) {
  if (error_body_.size() < kMaxErrorBody) error_body_.append(bytes.substr(0, kMaxErrorBody - error_body_.size()));
}

void DecoderBase::fail_with(ProviderReply failure) {
  if (!failed()) failure_ = std::move(failure);
}

void WholeBodyDecoder::feed(std::string_view bytes, const OnText& /*on_text*/) {
  keep_for_error(bytes);
  if (failed()) return;
  if (body_.size() + bytes.size() > kMaxBody) {
    body_.clear();
    fail_with(ProviderReply::failed("response body larger than " + std::to_string(kMaxBody) + " bytes",
                                    FailureClass::too_large));
    return;
  }
  body_.append(bytes);
}

ProviderReply WholeBodyDecoder::complete() {
  Json json = Json::parse(body_, nullptr, false);
  if (json.is_discarded() || !json.is_object()) {
    return ProviderReply::failed("response body is not a JSON object", FailureClass::unparseable);
  }
  return decode(json);
}

std::string string_field(const Json& object, const char* name) {
  if (!object.is_object()) return {};
  const auto found = object.find(name);
  return found != object.end() && found->is_string() ? found->get<std::string>() : std::string();
}

Result<std::vector<std::string>> list_field(std::string_view body, const char* array_name, const char* field) {
  const Json document = Json::parse(body, nullptr, false);
  if (document.is_discarded()) return fail(ErrorCode::invalid_input, "the model list is not JSON");
  const auto array = document.is_object() ? document.find(array_name) : document.end();
  if (array == document.end() || !array->is_array()) {
    return fail(ErrorCode::invalid_input, fmt::format("the model list has no \"{}\" array", array_name));
  }
  std::vector<std::string> names;
  for (const Json& entry : *array) {
    if (std::string name = string_field(entry, field); !name.empty()) names.push_back(std::move(name));
  }
  return names;
}

std::int64_t integer_field(const Json& object, const char* name) {
  if (!object.is_object()) return -1;
  const auto found = object.find(name);
  return found != object.end() && found->is_number_integer() ? found->get<std::int64_t>() : -1;
}

}  // namespace driver_detail

}  // namespace passepartout
