// tools/list pages and tools/call results, read strictly with nlohmann-json.
#include "mcp/tools.hpp"

#include <nlohmann/json.hpp>

#include "base/digest.hpp"
#include "base/utf8.hpp"

namespace passepartout::mcp {

namespace {

using Json = nlohmann::json;

std::string dump(const Json& json) { return json.dump(-1, ' ', false, Json::error_handler_t::replace); }

// The protocol's rule for a tool's name (2025-11-25, "Tool names").
bool valid_tool_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (const char c : name) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// A string member, "" when absent; an error when present and not a string.
Result<std::string> optional_string(const Json& object, const char* key, std::string_view owner) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string()) return fail(ErrorCode::invalid_input, std::string(owner) + ": \"" + key + "\" is not a string");
  return it->get<std::string>();
}

Result<std::string> optional_object(const Json& object, const char* key, std::string_view owner) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_object()) {
    return fail(ErrorCode::invalid_input, std::string(owner) + ": \"" + key + "\" is not an object");
  }
  return dump(*it);
}

Result<ToolDefinition> read_tool(const Json& tool, std::size_t index) {
  const std::string where = "tool " + std::to_string(index + 1);
  if (!tool.is_object()) return fail(ErrorCode::invalid_input, where + " is not an object");
  const auto name = tool.find("name");
  if (name == tool.end() || !name->is_string()) return fail(ErrorCode::invalid_input, where + " has no name");
  ToolDefinition out;
  out.name = name->get<std::string>();
  const std::string owner = "tool '" + replace_invalid_utf8(out.name.substr(0, 128)) + "'";
  if (!valid_tool_name(out.name)) {
    return fail(ErrorCode::invalid_input, owner + ": a name must be 1 to 128 of A-Z a-z 0-9 _ - .");
  }
  auto title = optional_string(tool, "title", owner);
  if (!title) return fail(ErrorCode::invalid_input, title.error().message);
  out.title = std::move(*title);
  auto description = optional_string(tool, "description", owner);
  if (!description) return fail(ErrorCode::invalid_input, description.error().message);
  out.description = std::move(*description);
  const auto input = tool.find("inputSchema");
  if (input == tool.end() || !input->is_object()) {
    return fail(ErrorCode::invalid_input, owner + ": \"inputSchema\" is missing or not an object");
  }
  out.input_schema_json = dump(*input);
  auto output = optional_object(tool, "outputSchema", owner);
  if (!output) return fail(ErrorCode::invalid_input, output.error().message);
  out.output_schema_json = std::move(*output);
  auto annotations = optional_object(tool, "annotations", owner);
  if (!annotations) return fail(ErrorCode::invalid_input, annotations.error().message);
  out.annotations_json = std::move(*annotations);

  // What the model and the operator are shown; nlohmann keeps members sorted,
  // so the dump is canonical.
  Json pinned = Json::object();
  for (const char* key : {"name", "title", "description", "inputSchema", "outputSchema", "annotations"}) {
    if (const auto it = tool.find(key); it != tool.end() && !it->is_null()) pinned[key] = *it;
  }
  out.canonical_json = dump(pinned);
  out.digest = sha256_hex(out.canonical_json);
  return out;
}

// The decoded size of base64 text.
std::size_t base64_bytes(std::string_view text) {
  std::size_t padding = 0;
  while (!text.empty() && text.back() == '=') {
    text.remove_suffix(1);
    ++padding;
  }
  return text.size() * 3 / 4;
}

std::string string_member(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string describe_item(const Json& item) {
  if (!item.is_object()) return "[content that is not an object]";
  const std::string type = string_member(item, "type");
  if (type == "text") return string_member(item, "text");
  if (type == "image" || type == "audio") {
    return "[" + type + ": " + string_member(item, "mimeType") + ", " +
           std::to_string(base64_bytes(string_member(item, "data"))) + " bytes]";
  }
  if (type == "resource_link") {
    std::string out = "[resource link: " + string_member(item, "uri");
    if (const std::string name = string_member(item, "name"); !name.empty()) out += " (" + name + ")";
    if (const std::string mime = string_member(item, "mimeType"); !mime.empty()) out += ", " + mime;
    return out + "]";
  }
  if (type == "resource") {
    const auto resource = item.find("resource");
    if (resource == item.end() || !resource->is_object()) return "[resource without contents]";
    std::string out = "[resource: " + string_member(*resource, "uri");
    if (const std::string mime = string_member(*resource, "mimeType"); !mime.empty()) out += ", " + mime;
    if (resource->contains("text")) {
      out += ", " + std::to_string(string_member(*resource, "text").size()) + " bytes of text";
    } else if (resource->contains("blob")) {
      out += ", " + std::to_string(base64_bytes(string_member(*resource, "blob"))) + " bytes";
    }
    return out + "]";
  }
  return "[content of type '" + replace_invalid_utf8(type.substr(0, 64)) + "']";
}

}  // namespace

Result<ToolsPage> parse_tools_page(std::string_view result_json) {
  const Json result = Json::parse(result_json, nullptr, false);
  if (result.is_discarded() || !result.is_object()) {
    return fail(ErrorCode::invalid_input, "a tools/list result that is not a JSON object");
  }
  const auto tools = result.find("tools");
  if (tools == result.end() || !tools->is_array()) {
    return fail(ErrorCode::invalid_input, "a tools/list result without a \"tools\" array");
  }
  ToolsPage page;
  page.tools.reserve(tools->size());
  for (std::size_t i = 0; i < tools->size(); ++i) {
    auto tool = read_tool((*tools)[i], i);
    if (!tool) return fail(tool.error().code, "tools/list: " + tool.error().message);
    page.tools.push_back(std::move(*tool));
  }
  auto cursor = optional_string(result, "nextCursor", "tools/list");
  if (!cursor) return fail(ErrorCode::invalid_input, cursor.error().message);
  page.next_cursor = std::move(*cursor);
  return page;
}

Result<ToolResult> render_tool_result(std::string_view result_json, std::size_t max_bytes) {
  const Json result = Json::parse(result_json, nullptr, false);
  if (result.is_discarded() || !result.is_object()) {
    return fail(ErrorCode::invalid_input, "a tools/call result that is not a JSON object");
  }
  const auto content = result.find("content");
  const auto structured = result.find("structuredContent");
  const bool has_content = content != result.end() && content->is_array();
  const bool has_structured = structured != result.end() && !structured->is_null();
  if (!has_content && !has_structured) {
    return fail(ErrorCode::invalid_input, R"(a tools/call result with neither "content" nor "structuredContent")");
  }
  ToolResult out;
  const auto is_error = result.find("isError");
  out.is_error = is_error != result.end() && is_error->is_boolean() && is_error->get<bool>();
  std::string text;
  bool any_text = false;
  if (has_content) {
    for (const Json& item : *content) {
      if (!text.empty()) text += '\n';
      text += describe_item(item);
      any_text = any_text || (item.is_object() && string_member(item, "type") == "text");
    }
  }
  // A tool with structured content also sends it as text, usually: shown once.
  if (has_structured && !any_text) {
    if (!text.empty()) text += '\n';
    text += dump(*structured);
  }
  out.text = bounded_text(replace_invalid_utf8(text), max_bytes);
  out.raw_json = dump(result);
  return out;
}

}  // namespace passepartout::mcp
