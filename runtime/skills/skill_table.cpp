// SkillTable::read: what may be trusted of a skill's table, checked once at
// load; members are read only when the skill's ABI minor and struct_size cover them.
#include "skills/skill_table.hpp"

#include <algorithm>
#include <cstring>
#include <string_view>
#include <utility>

#include "base/ascii.hpp"
#include "base/utf8.hpp"
#include "base/yaml_diagnostics.hpp"
#include "value/json_bridge.hpp"

namespace passepartout {
namespace {

std::string abi_text(unsigned major, unsigned minor) { return std::to_string(major) + "." + std::to_string(minor); }

// Bytes a table of ABI minor `minor` holds at least: every member up to that minor.
std::uint32_t declared_size(unsigned minor) {
  return minor >= 4   ? PP_SKILL_API_SIZE_1_4
         : minor >= 3 ? PP_SKILL_API_SIZE_1_3
         : minor >= 2 ? PP_SKILL_API_SIZE_1_2
         : minor >= 1 ? PP_SKILL_API_SIZE_1_1
                      : PP_SKILL_API_SIZE_1_0;
}

// Bytes of the table the host may read for the skill's declared minor: every
// member up to that minor, and nothing the skill did not promise.
std::size_t readable_size(const pp_skill_api& table) {
  return std::min<std::size_t>({declared_size(table.abi_minor), table.struct_size, sizeof(pp_skill_api)});
}

// The ABI version, size, required hooks, name and version (everything ABI 1.0 has).
Result<void> check_header(const pp_skill_api& table, const SkillManifest& manifest, const std::string& who) {
  if (table.struct_size < offsetof(pp_skill_api, name)) {
    return fail(ErrorCode::abi_mismatch,
                who + ": skill table is " + std::to_string(table.struct_size) +
                    " bytes, too small to hold an ABI version; rebuild the skill against the installed SDK");
  }
  if (table.abi_major != PP_ABI_MAJOR) {
    return fail(ErrorCode::abi_mismatch, who + ": built for ABI " + abi_text(table.abi_major, table.abi_minor) +
                                             ", this host supports " + std::to_string(PP_ABI_MAJOR) +
                                             ".x; rebuild it against the installed SDK");
  }
  if (table.abi_minor > PP_ABI_MINOR) {
    return fail(ErrorCode::abi_mismatch, who + ": needs ABI " + abi_text(table.abi_major, table.abi_minor) +
                                             ", this host provides " + abi_text(PP_ABI_MAJOR, PP_ABI_MINOR) +
                                             "; upgrade passepartout or rebuild the skill against this SDK");
  }
  const std::uint32_t needed = declared_size(table.abi_minor);
  if (table.struct_size < needed) {
    return fail(ErrorCode::abi_mismatch, who + ": skill table is " + std::to_string(table.struct_size) +
                                             " bytes, ABI " + abi_text(table.abi_major, table.abi_minor) +
                                             " needs at least " + std::to_string(needed) +
                                             "; the library is damaged or was built with a broken SDK");
  }
  if (table.create == nullptr || table.destroy == nullptr) {
    return fail(ErrorCode::invalid_input, who + ": skill table lacks create or destroy, which are required");
  }
  if (table.name == nullptr || table.version == nullptr) {
    return fail(ErrorCode::invalid_input, who + ": skill table lacks its name or version");
  }
  std::string_view name = table.name;
  if (name != manifest.name) {
    return fail(ErrorCode::refused, who + ": the library reports name '" + std::string(name) + "', the manifest " +
                                        manifest.path.filename().string() + " says '" + manifest.name +
                                        "'; fix 'name' in the manifest or point 'library' at the right file");
  }
  auto version = SemVer::parse(table.version);
  if (!version || *version != manifest.version) {
    return fail(ErrorCode::refused, who + ": the library reports version '" + std::string(table.version) +
                                        "', the manifest says " + manifest.version.to_string() +
                                        "; rebuild the library or fix 'version' in " +
                                        manifest.path.filename().string());
  }
  if (manifest.abi.major != table.abi_major) {
    return fail(ErrorCode::refused, who + ": the manifest declares ABI " +
                                        abi_text(manifest.abi.major, manifest.abi.minor) +
                                        ", the library was built for " + abi_text(table.abi_major, table.abi_minor) +
                                        "; fix 'abi' in " + manifest.path.filename().string());
  }
  return {};
}

// `text` (up to `limit` bytes) or nullopt when it is longer: a bounded strlen,
// so a string that is not terminated where it should be cannot run away.
std::optional<std::string_view> bounded(const char* text, std::size_t limit) {
  const std::size_t length = ::strnlen(text, limit + 1);
  if (length > limit) return std::nullopt;
  return std::string_view(text, length);
}

bool is_tool_name_char(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'; }
bool is_actuator_name_char(char c) { return is_tool_name_char(c) || (c >= 'A' && c <= 'Z'); }

// `text` as a quoted excerpt for messages: at most 60 bytes, control bytes escaped.
std::string excerpt(std::string_view text) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < 60; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else {
      out += static_cast<char>(c);
    }
  }
  if (text.size() > 60) out += "...";
  return out + "'";
}

// A name checked against `allowed`: 1 to kMaxNameLength characters. `what` is
// "tool" or "actuator", `index` its position, for the message.
Result<std::string> read_name(const char* name, bool (*allowed)(char), const std::string& who, const char* what,
                              std::size_t index, const char* rule) {
  const std::string where = who + ": " + what + " #" + std::to_string(index);
  if (name == nullptr) return fail(ErrorCode::invalid_input, where + " has no name");
  const auto text = bounded(name, SkillTable::kMaxNameLength);
  if (!text) {
    return fail(ErrorCode::invalid_input, where + ": name " + excerpt(name) + " is longer than " +
                                              std::to_string(SkillTable::kMaxNameLength) + " characters");
  }
  if (text->empty() || !std::all_of(text->begin(), text->end(), allowed)) {
    return fail(ErrorCode::invalid_input, where + ": name " + excerpt(*text) + " is not " + rule);
  }
  return std::string(*text);
}

// A description: bounded, valid UTF-8.
Result<std::string> read_description(const char* text, const std::string& where) {
  const auto description = bounded(text, SkillTable::kMaxDescriptionBytes);
  if (!description) {
    return fail(ErrorCode::limit_exceeded, where + ": the description is longer than " +
                                               std::to_string(SkillTable::kMaxDescriptionBytes) + " bytes");
  }
  if (!is_valid_utf8(*description))
    return fail(ErrorCode::invalid_input, where + ": the description is not valid UTF-8");
  return std::string(*description);
}

// A JSON Schema object (a tool's parameters, an actuator's payload): bounded,
// valid JSON, an object; as a Value through the JSON bridge and as the text.
Result<std::pair<Value, std::string>> read_schema(const char* text, const std::string& where, const char* what) {
  const auto json = bounded(text, SkillTable::kMaxParametersBytes);
  if (!json) {
    return fail(ErrorCode::limit_exceeded, where + ": " + what + " JSON is longer than " +
                                               std::to_string(SkillTable::kMaxParametersBytes) + " bytes");
  }
  auto parsed = json_to_value(*json, SkillTable::kMaxParametersDepth);
  if (!parsed)
    return fail(ErrorCode::invalid_input, where + ": " + what + " are not valid JSON: " + parsed.error().message);
  const auto first = json->find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || (*json)[first] != '{') {
    return fail(ErrorCode::invalid_input,
                where + ": " + what + R"( must be a JSON object ({"type": "object", ...}), got )" + excerpt(*json));
  }
  return std::pair<Value, std::string>(std::move(*parsed), std::string(*json));
}

Result<std::vector<SkillTool>> read_tools(const pp_skill_api& table, const std::string& who) {
  std::vector<SkillTool> tools;
  if (table.tool_count == 0) return tools;
  if (table.tool_count > SkillTable::kMaxTools) {
    return fail(ErrorCode::limit_exceeded, who + ": the skill declares " + std::to_string(table.tool_count) +
                                               " tools, more than the limit of " +
                                               std::to_string(SkillTable::kMaxTools));
  }
  if (table.tools == nullptr) {
    return fail(ErrorCode::invalid_input,
                who + ": the skill declares " + std::to_string(table.tool_count) + " tools but no table of them");
  }
  if (table.call_tool == nullptr) {
    return fail(ErrorCode::invalid_input, who + ": the skill declares tools but no call_tool hook to run them");
  }
  tools.reserve(table.tool_count);
  for (std::size_t i = 0; i < table.tool_count; ++i) {
    const pp_tool& spec = table.tools[i];
    auto name =
        read_name(spec.name, is_tool_name_char, who, "tool", i, "1 to 64 lower-case letters, digits, '-' and '_'");
    if (!name) return fail(name.error().code, name.error().message);
    const std::string where = who + ": tool '" + *name + "'";
    for (const SkillTool& earlier : tools) {
      if (earlier.name == *name) return fail(ErrorCode::invalid_input, where + " is declared twice");
    }

    SkillTool tool;
    tool.name = std::move(*name);
    if (spec.description != nullptr) {
      auto description = read_description(spec.description, where);
      if (!description) return fail(description.error().code, description.error().message);
      tool.description = std::move(*description);
    }
    if (spec.parameters != nullptr) {
      auto schema = read_schema(spec.parameters, where, "the parameters");
      if (!schema) return fail(schema.error().code, schema.error().message);
      tool.parameters = std::move(schema->first);
      tool.parameters_json = std::move(schema->second);
    }
    tools.push_back(std::move(tool));
  }
  return tools;
}

Result<std::vector<std::string>> read_actuators(const pp_skill_api& table, const std::string& who) {
  std::vector<std::string> actuators;
  if (table.actuator_count == 0) return actuators;
  if (table.actuator_count > SkillTable::kMaxActuators) {
    return fail(ErrorCode::limit_exceeded, who + ": the skill declares " + std::to_string(table.actuator_count) +
                                               " actuators, more than the limit of " +
                                               std::to_string(SkillTable::kMaxActuators));
  }
  if (table.actuators == nullptr) {
    return fail(ErrorCode::invalid_input, who + ": the skill declares " + std::to_string(table.actuator_count) +
                                              " actuators but no table of their names");
  }
  if (table.act == nullptr) {
    return fail(ErrorCode::invalid_input, who + ": the skill declares actuators but no act hook to run them");
  }
  actuators.reserve(table.actuator_count);
  for (std::size_t i = 0; i < table.actuator_count; ++i) {
    auto name = read_name(table.actuators[i], is_actuator_name_char, who, "actuator", i,
                          "1 to 64 letters, digits, '-' and '_'");
    if (!name) return fail(name.error().code, name.error().message);
    std::string upper;
    append_upper_ascii(upper, *name);
    if (std::find(actuators.begin(), actuators.end(), upper) != actuators.end()) {
      return fail(ErrorCode::invalid_input, who + ": actuator '" + *name + "' is declared twice (names ignore case)");
    }
    actuators.push_back(std::move(upper));
  }
  return actuators;
}

// An optional static string of the skill's, bounded; "" when NULL.
Result<std::string> optional_text(const char* text, const std::string& where) {
  if (text == nullptr) return std::string();
  const auto bounded_text = bounded(text, SkillTable::kMaxDescriptionBytes);
  if (!bounded_text) {
    return fail(ErrorCode::invalid_input,
                where + " is longer than " + std::to_string(SkillTable::kMaxDescriptionBytes) + " bytes");
  }
  return std::string(*bounded_text);
}

// ABI 1.3: what each actuator takes, parallel to `actuators` (upper-case
// names). NULL: none is described. A payload's properties are the payload's
// keys, each a name a keyword can take.
Result<std::vector<SkillActuatorSpec>> read_actuator_specs(const pp_skill_api& table,
                                                           const std::vector<std::string>& actuators,
                                                           const std::string& who) {
  std::vector<SkillActuatorSpec> specs(actuators.size());
  if (table.actuator_specs == nullptr) return specs;
  for (std::size_t i = 0; i < actuators.size(); ++i) {
    const pp_actuator_spec& spec = table.actuator_specs[i];
    const std::string where = who + ": actuator :" + actuators[i];
    if (spec.description != nullptr) {
      auto description = read_description(spec.description, where);
      if (!description) return fail(description.error().code, description.error().message);
      specs[i].description = std::move(*description);
    }
    if (spec.payload == nullptr) continue;
    auto schema = read_schema(spec.payload, where, "the payload schema");
    if (!schema) return fail(schema.error().code, schema.error().message);
    const Value& properties = schema->first.at("PROPERTIES");
    if (!properties.is_nil() && !properties.is_list()) {
      return fail(ErrorCode::invalid_input, where + ": the payload schema's \"properties\" must be an object");
    }
    const std::span<const Value> items = properties.items();
    for (std::size_t k = 0; k < items.size(); k += 2) {
      const std::string_view key = items[k].text();
      if (key.empty() || key.size() > SkillTable::kMaxNameLength ||
          !std::all_of(key.begin(), key.end(), is_actuator_name_char)) {
        return fail(ErrorCode::invalid_input, where + ": payload key " + excerpt(key) +
                                                  " is not 1 to 64 letters, digits, '-' and '_' (a keyword's name)");
      }
    }
    specs[i].payload = std::move(schema->first);
    specs[i].payload_json = std::move(schema->second);
  }
  return specs;
}

// The config keys the skill declares (ABI 1.2), copied; none when it does not
// say. Names follow the actuators' rule and are unique ignoring ASCII case, as
// each becomes a keyword.
Result<std::vector<SkillConfigKey>> read_config_keys(const pp_skill_api& table, const std::string& who) {
  std::vector<SkillConfigKey> keys;
  if (table.config_key_count == 0) return keys;
  if (table.config_key_count > SkillTable::kMaxConfigKeys) {
    return fail(ErrorCode::limit_exceeded, who + ": the skill declares " + std::to_string(table.config_key_count) +
                                               " config keys, more than the limit of " +
                                               std::to_string(SkillTable::kMaxConfigKeys));
  }
  if (table.config_keys == nullptr) {
    return fail(ErrorCode::invalid_input, who + ": the skill declares " + std::to_string(table.config_key_count) +
                                              " config keys but no table of them");
  }
  keys.reserve(table.config_key_count);
  std::vector<std::string> seen;  // upper-cased, parallel to keys
  for (std::size_t i = 0; i < table.config_key_count; ++i) {
    const pp_config_key& key = table.config_keys[i];
    auto name =
        read_name(key.name, is_actuator_name_char, who, "config key", i, "1 to 64 letters, digits, '-' and '_'");
    if (!name) return fail(name.error().code, name.error().message);
    std::string upper;
    append_upper_ascii(upper, *name);
    if (std::find(seen.begin(), seen.end(), upper) != seen.end()) {
      return fail(ErrorCode::invalid_input, who + ": config key '" + *name + "' is declared twice (names ignore case)");
    }
    seen.push_back(std::move(upper));
    const std::string where = who + ": config key '" + *name + "'";
    auto type = optional_text(key.type, where + "'s type");
    if (!type) return fail(type.error().code, type.error().message);
    auto default_value = optional_text(key.default_value, where + "'s default");
    if (!default_value) return fail(default_value.error().code, default_value.error().message);
    auto description = optional_text(key.description, where + "'s description");
    if (!description) return fail(description.error().code, description.error().message);
    keys.push_back({std::move(*name), std::move(*type), std::move(*default_value), std::move(*description)});
  }
  return keys;
}

// Every key of the manifest's `config:` is one the skill declares (ignoring
// ASCII case, as config keys become keywords); a skill that declares none is
// not checked.
Result<void> check_config_keys(const SkillTable& table, const SkillManifest& manifest, const std::string& who) {
  if (table.config_keys.empty()) return {};
  std::vector<std::string_view> known;
  known.reserve(table.config_keys.size());
  for (const SkillConfigKey& key : table.config_keys) known.push_back(key.name);
  std::string problems;
  for (const SkillManifest::ConfigKeyAt& entry : manifest.config_keys) {
    std::string_view key = entry.key;
    if (!key.empty() && key[0] == ':') key.remove_prefix(1);
    const bool declared = std::any_of(known.begin(), known.end(), [&](std::string_view name) {
      return name.size() == key.size() && std::equal(name.begin(), name.end(), key.begin(),
                                                     [](char a, char b) { return ascii_upper(a) == ascii_upper(b); });
    });
    if (declared) continue;
    if (!problems.empty()) problems += '\n';
    problems += manifest.path.string() + ":" + std::to_string(entry.line) + ":" + std::to_string(entry.column) + ": " +
                unknown_key_message(key, known, " in 'config' of " + who);
  }
  if (problems.empty()) return {};
  return fail(ErrorCode::invalid_input, problems);
}

}  // namespace

Result<SkillTable> SkillTable::read(const pp_skill_api& table, const SkillManifest& manifest) {
  const std::string who = "skill '" + manifest.name + "'";
  if (auto ok = check_header(table, manifest, who); !ok) return fail(ok.error().code, ok.error().message);

  SkillTable out;
  std::memcpy(&out.hooks, &table, readable_size(table));
  out.hooks.struct_size = static_cast<std::uint32_t>(sizeof(pp_skill_api));

  auto tools = read_tools(out.hooks, who);
  if (!tools) return fail(tools.error().code, tools.error().message);
  out.tools = std::move(*tools);
  auto actuators = read_actuators(out.hooks, who);
  if (!actuators) return fail(actuators.error().code, actuators.error().message);
  out.actuators = std::move(*actuators);
  auto actuator_specs = read_actuator_specs(out.hooks, out.actuators, who);
  if (!actuator_specs) return fail(actuator_specs.error().code, actuator_specs.error().message);
  out.actuator_specs = std::move(*actuator_specs);
  auto config_keys = read_config_keys(out.hooks, who);
  if (!config_keys) return fail(config_keys.error().code, config_keys.error().message);
  out.config_keys = std::move(*config_keys);
  if (auto keys = check_config_keys(out, manifest, who); !keys) return fail(keys.error().code, keys.error().message);
  return out;
}

namespace {

// "a", "a and b", "a, b and c".
std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += i + 1 == items.size() ? " and " : ", ";
    text += items[i];
  }
  return text;
}

}  // namespace

std::string SkillTable::offers_text() const {
  std::vector<std::string> parts;
  if (!actuators.empty()) {
    std::vector<std::string> names;
    for (const std::string& a : actuators) names.push_back(":" + a);
    parts.push_back((names.size() == 1 ? "the actuator " : "the actuators ") + joined(names));
  }
  if (!tools.empty()) {
    std::vector<std::string> names;
    for (const SkillTool& t : tools) names.push_back(t.name);
    parts.push_back((names.size() == 1 ? "the tool " : "the tools ") + joined(names));
  }
  return joined(parts);
}

Result<void> SkillTable::check_guards(const SkillManifest& manifest) const {
  const bool guards_itself = std::any_of(manifest.guarded_by.begin(), manifest.guarded_by.end(),
                                         [&](const Dependency& g) { return g.name == manifest.name; });
  if (guards_itself && hooks.gate == nullptr) {
    return fail(ErrorCode::refused, "skill '" + manifest.name + "' names itself in guarded_by but has no gate; name " +
                                        "the gate skills that guard it instead");
  }
  if (!acts() || !manifest.guarded_by.empty()) return {};
  const std::string file = manifest.path.empty() ? std::string("its manifest") : manifest.path.filename().string();
  return fail(ErrorCode::refused, "skill '" + manifest.name + "' offers " + offers_text() +
                                      " but names no guard; add guarded_by: [<the gate skills that judge them>] to " +
                                      file + " (the bundled shell is guarded_by: [shell-guard])");
}

}  // namespace passepartout
