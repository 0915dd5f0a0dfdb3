// Plist arguments back to JSON, the tool's schema choosing names and types.
#include "mcp/arguments.hpp"

#include <nlohmann/json.hpp>

#include "base/ascii.hpp"

namespace passepartout::mcp {

namespace {

using Json = nlohmann::json;

const Json& no_schema() {
  static const Json kEmpty = Json::object();
  return kEmpty;
}

// Whether the schema's "type" (a name or a list of names) includes `type`.
bool has_type(const Json& schema, std::string_view type) {
  const auto it = schema.find("type");
  if (it == schema.end()) return false;
  if (it->is_string()) return it->get_ref<const std::string&>() == type;
  if (it->is_array()) {
    for (const Json& item : *it) {
      if (item.is_string() && item.get_ref<const std::string&>() == type) return true;
    }
  }
  return false;
}

bool is_plist(const Value& value) {
  const auto items = value.items();
  if (items.empty() || items.size() % 2 != 0) return false;
  for (std::size_t i = 0; i < items.size(); i += 2) {
    if (!items[i].is_keyword()) return false;
  }
  return true;
}

Json convert(const Value& value, const Json& schema);

Json nil_for(const Json& schema) {
  if (has_type(schema, "null")) return nullptr;
  if (has_type(schema, "boolean")) return false;
  if (has_type(schema, "array")) return Json::array();
  if (has_type(schema, "object")) return Json::object();
  return nullptr;
}

Json object_of(const Value& plist, const Json& schema, bool top = false) {
  Json out = Json::object();
  const Json* properties = nullptr;
  if (const auto it = schema.find("properties"); it != schema.end() && it->is_object()) properties = &*it;
  const auto items = plist.items();
  for (std::size_t i = 0; i < items.size(); i += 2) {
    const std::string_view key = items[i].text();
    std::string name = ascii_lower(key);
    const Json* property = &no_schema();
    if (properties != nullptr) {
      for (const auto& [candidate, candidate_schema] : properties->items()) {
        if (ascii_upper(candidate) == key) {
          name = candidate;
          property = &candidate_schema;
          break;
        }
      }
    }
    // The model's :EXPLANATION is the action's, for the gates, unless the tool itself takes one.
    if (top && property == &no_schema() && key == "EXPLANATION") continue;
    if (out.contains(name)) continue;  // a repeated key keeps its first value, as plist lookup does
    out[name] = convert(items[i + 1], *property);
  }
  return out;
}

Json convert(const Value& value, const Json& schema) {
  switch (value.kind()) {
    case Kind::nil:
      return nil_for(schema);
    case Kind::t:
      return true;
    case Kind::integer:
      return value.as_integer();
    case Kind::real:
      return value.as_float();
    case Kind::string:
    case Kind::symbol:
      return std::string(value.text());
    case Kind::keyword:
      return ascii_lower(value.text());
    case Kind::list:
      break;
  }
  if (is_plist(value) && !has_type(schema, "array")) return object_of(value, schema);
  const Json* items = &no_schema();
  if (const auto it = schema.find("items"); it != schema.end() && it->is_object()) items = &*it;
  Json out = Json::array();
  for (const Value& item : value.items()) out.push_back(convert(item, *items));
  return out;
}

}  // namespace

std::string arguments_json(const Value& args, std::string_view input_schema_json) {
  Json schema = input_schema_json.empty() ? Json::object() : Json::parse(input_schema_json, nullptr, false);
  if (schema.is_discarded() || !schema.is_object()) schema = Json::object();
  Json out = args.is_nil() ? Json::object() : is_plist(args) ? object_of(args, schema, true) : convert(args, schema);
  if (!out.is_object()) out = Json::object();  // the protocol's arguments are an object
  return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace passepartout::mcp
