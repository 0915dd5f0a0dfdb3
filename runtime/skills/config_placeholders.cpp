// expand_config_placeholders: a walk over the config's strings.
#include "skills/config_placeholders.hpp"

#include <vector>

namespace passepartout {
namespace {

std::string known_names(const ConfigPlaceholders& values) {
  if (values.empty()) return "this host defines none";
  std::string text = "known: ";
  bool first = true;
  for (const auto& [name, value] : values) {
    text += (first ? "${" : ", ${") + name + "}";
    first = false;
  }
  return text;
}

Result<std::string> expand_text(std::string_view text, const ConfigPlaceholders& values, std::string_view who,
                                std::set<std::string>& used) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t open = text.find("${", i);
    if (open == std::string_view::npos) {
      out.append(text.substr(i));
      break;
    }
    out.append(text.substr(i, open - i));
    const std::size_t close = text.find('}', open + 2);
    if (close == std::string_view::npos) {
      return fail(ErrorCode::invalid_input, std::string(who) + ": config string \"" + std::string(text) +
                                                "\" opens a placeholder with ${ but never closes it with }");
    }
    const std::string_view name = text.substr(open + 2, close - open - 2);
    const auto found = values.find(name);
    if (found == values.end()) {
      return fail(ErrorCode::invalid_input, std::string(who) + ": config uses ${" + std::string(name) +
                                                "}, which this host does not define (" + known_names(values) + ")");
    }
    out.append(found->second);
    used.insert(found->first);
    i = close + 1;
  }
  return out;
}

Result<Value> expand_value(const Value& value, const ConfigPlaceholders& values, std::string_view who,
                           std::set<std::string>& used) {
  if (value.is_string()) {
    if (value.text().find("${") == std::string_view::npos) return value;
    auto text = expand_text(value.text(), values, who, used);
    if (!text) return fail(text.error().code, text.error().message);
    return Value::string(*text);
  }
  if (!value.is_list()) return value;
  std::vector<Value> items;
  items.reserve(value.size());
  bool changed = false;
  for (const Value& item : value.items()) {
    auto expanded = expand_value(item, values, who, used);
    if (!expanded) return expanded;
    changed = changed || !(*expanded == item);
    items.push_back(std::move(*expanded));
  }
  return changed ? Value::list(items) : value;
}

}  // namespace

Result<ExpandedConfig> expand_config_placeholders(const Value& config, const ConfigPlaceholders& values,
                                                  std::string_view who) {
  ExpandedConfig result;
  auto expanded = expand_value(config, values, who, result.used);
  if (!expanded) return fail(expanded.error().code, expanded.error().message);
  result.config = std::move(*expanded);
  return result;
}

}  // namespace passepartout
