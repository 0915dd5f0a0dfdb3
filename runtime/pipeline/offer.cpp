// The Offer of a snapshot: its functions, the drivers' descriptors, and the
// prompt's text about them.
#include "pipeline/offer.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

#include "base/ascii.hpp"
#include "pipeline/prompt_builder.hpp"
#include "pipeline/response_parser.hpp"
#include "skills/registry.hpp"
#include "skills/slot.hpp"

namespace passepartout {

namespace {

using namespace key_literals;
using OrderedJson = nlohmann::ordered_json;

// The properties of a JSON Schema object in their written order, each with
// whether "required" lists it.
std::vector<OfferedFunction::Argument> arguments_of(std::string_view schema_json) {
  std::vector<OfferedFunction::Argument> arguments;
  if (schema_json.empty()) return arguments;
  const OrderedJson schema = OrderedJson::parse(schema_json, nullptr, false);
  if (!schema.is_object()) return arguments;
  const auto properties = schema.find("properties");
  if (properties == schema.end() || !properties->is_object()) return arguments;
  std::vector<std::string> required;
  if (const auto listed = schema.find("required"); listed != schema.end() && listed->is_array()) {
    for (const auto& name : *listed) {
      if (name.is_string()) required.push_back(name.get<std::string>());
    }
  }
  for (const auto& [name, unused] : properties->items()) {
    const bool needed = std::find(required.begin(), required.end(), name) != required.end();
    arguments.push_back({name, needed});
  }
  return arguments;
}

// "(:CMD \"<cmd>\" :EXPLANATION \"<explanation>\" [:TIMEOUT <timeout>])": the
// payload's keys as the grammar writes them, the optional ones bracketed.
std::string payload_template(const OfferedFunction& function) {
  std::string text = "(";
  bool first = true;
  for (const OfferedFunction::Argument& argument : function.arguments) {
    if (!first) text += ' ';
    first = false;
    const std::string key = ":" + ascii_upper(argument.name) + " <" + argument.name + ">";
    text += argument.required ? key : "[" + key + "]";
  }
  if (function.arguments.empty()) text += "...";
  return text + ")";
}

Value descriptor(const OfferedFunction& function) {
  return Value::plist({{"NAME", Value::string(function.name)},
                       {"DESCRIPTION", Value::string(function.description)},
                       {"PARAMETERS", function.parameters},
                       {"PARAMETERS-JSON", Value::string(function.parameters_json)}});
}

std::string grammar_of(std::span<const OfferedFunction> functions) {
  std::string text =
      "\n\nHow to answer. Reply to the user in plain text, or as the plist\n"
      "(:TYPE :REQUEST :PAYLOAD (:ACTION :MESSAGE :TEXT \"<your answer>\")).\n"
      "To act, call one of the functions your API offers, or answer with exactly one plist and nothing else:";
  bool tools = false;
  for (const OfferedFunction& function : functions) tools = tools || function.kind == OfferedFunction::Kind::tool;
  if (tools) {
    text +=
        "\n- a tool (see TOOLS): (:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL \"<name>\" :ARGS (:<ARGUMENT> "
        "<value> ...) :EXPLANATION \"<why>\"))";
  }
  for (const OfferedFunction& function : functions) {
    if (function.kind != OfferedFunction::Kind::actuator) continue;
    text += "\n- :" + function.target;
    if (!function.description.empty()) text += " (" + function.description + ")";
    text += ": (:TYPE :REQUEST :TARGET :" + function.target + " :PAYLOAD " + payload_template(function) + ")";
  }
  if (functions.empty()) text += "\n- nothing: no tool or actuator is loaded, so only answer in text.";
  text +=
      "\nEvery action is judged by the security gates before it runs: one may be blocked (you are told why) or wait "
      "for a human's approval.";
  return text;
}

}  // namespace

Offer::Offer(const Snapshot& snapshot, std::shared_ptr<const ToolCatalog> catalog)
    : snapshot_id_(snapshot.id()), catalog_(std::move(catalog)) {
  std::vector<ToolListing> belt;
  for (const Snapshot::ToolEntry& entry : snapshot.tools()) {
    if (entry.unguarded != nullptr) continue;
    const SkillTool& tool = entry.tool();
    OfferedFunction function;
    function.kind = OfferedFunction::Kind::tool;
    function.name = tool.name;
    function.description = tool.description;
    function.parameters_json = tool.parameters_json;
    function.parameters = tool.parameters;
    function.arguments = arguments_of(tool.parameters_json);
    function.slot = entry.slot;
    belt.push_back(ToolListing{tool.name, tool.description, tool.parameters_json});
    functions_.push_back(std::move(function));
  }
  if (catalog_ != nullptr) {
    for (const ExternalTool& tool : catalog_->tools()) {
      if (snapshot.find_tool(tool.name) != nullptr || !missing_guard(snapshot, tool).empty()) continue;
      OfferedFunction function;
      function.kind = OfferedFunction::Kind::tool;
      function.name = tool.name;
      function.description = tool.description;
      function.parameters_json = tool.parameters_json;
      function.parameters = tool.parameters;
      function.arguments = arguments_of(tool.parameters_json);
      function.external = &tool;
      belt.push_back(ToolListing{tool.name, tool.description, tool.parameters_json});
      functions_.push_back(std::move(function));
    }
    // Tools sorted by name, the skills' and the servers' together.
    std::sort(functions_.begin(), functions_.end(),
              [](const OfferedFunction& a, const OfferedFunction& b) { return a.name < b.name; });
    std::sort(belt.begin(), belt.end(), [](const ToolListing& a, const ToolListing& b) { return a.name < b.name; });
  }
  for (const Snapshot::ActuatorEntry& entry : snapshot.actuators()) {
    if (entry.unguarded != nullptr || entry.name() == "TUI") continue;
    const SkillActuatorSpec& spec = entry.slot->actuator_specs()[entry.index];
    OfferedFunction function;
    function.kind = OfferedFunction::Kind::actuator;
    function.name = ascii_lower(entry.name());
    function.target = entry.name();
    function.description = spec.description;
    function.parameters_json = spec.payload_json;
    function.parameters = spec.payload;
    function.arguments = arguments_of(spec.payload_json);
    function.native = spec.described();
    function.slot = entry.slot;
    functions_.push_back(std::move(function));
  }
  std::vector<Value> natives;
  for (const OfferedFunction& function : functions_) {
    if (function.native) natives.push_back(descriptor(function));
  }
  native_tools_ = Value::list(std::span<const Value>(natives));
  tool_belt_ = passepartout::tool_belt(std::move(belt));
  grammar_ = grammar_of(functions_);
}

const OfferedFunction* Offer::find_native(std::string_view name) const noexcept {
  for (const OfferedFunction& function : functions_) {
    if (function.native && function.name.size() == name.size() &&
        std::equal(name.begin(), name.end(), function.name.begin(),
                   [](char a, char b) { return ascii_lower(a) == ascii_lower(b); })) {
      return &function;
    }
  }
  return nullptr;
}

Value Offer::action_for_call(const OfferedFunction& function, const Value& args) {
  if (function.kind == OfferedFunction::Kind::actuator) {
    // The payload is the arguments, exactly: its :EXPLANATION is the
    // model's own, which the policy gate judges.
    return Value::plist(
        {{"TYPE", Value::keyword("REQUEST"_key)}, {"TARGET", Value::keyword(function.target)}, {"PAYLOAD", args}});
  }
  const Value& explanation = args.at("EXPLANATION"_key);
  Value payload = Value::plist(
      {{"TOOL", Value::string(function.name)},
       {"ARGS", args},
       {"EXPLANATION", explanation.is_string() ? explanation : Value::string(kFunctionCallingExplanation)}});
  if (function.external != nullptr) {
    payload = std::move(payload)
                  .with("SERVER"_key, Value::string(function.external->server))
                  .with("DIGEST"_key, Value::string(function.external->digest));
  }
  return Value::plist({{"TYPE", Value::keyword("REQUEST"_key)},
                       {"TARGET", Value::keyword("TOOL"_key)},
                       {"PAYLOAD", std::move(payload)}});
}

Value Offer::stamp(Value action) const {
  if (catalog_ == nullptr || catalog_->tools().empty()) return action;
  if (!action.is_list() || !action.at("TARGET"_key).is_keyword("TOOL"_key)) return action;
  const Value& payload = action.at("PAYLOAD"_key);
  const Value& tool = payload.at("TOOL"_key);
  if (!tool.is_string() && !tool.is_symbol() && !tool.is_keyword()) return action;
  const ExternalTool* external = catalog_->find(tool.text());
  if (external == nullptr) return action;
  Value stamped =
      payload.with("SERVER"_key, Value::string(external->server)).with("DIGEST"_key, Value::string(external->digest));
  return std::move(action).with("PAYLOAD"_key, std::move(stamped));
}

std::shared_ptr<const Offer> offer_of(const Snapshot& snapshot, const std::shared_ptr<const ToolCatalog>& catalog) {
  const std::uint64_t generation = catalog != nullptr ? catalog->generation() : 0;
  auto current = [&](const std::shared_ptr<const Offer>& offer) {
    return offer != nullptr && offer->snapshot_id() == snapshot.id() && offer->catalog_generation() == generation;
  };
  thread_local std::shared_ptr<const Offer> mine;
  if (current(mine)) return mine;
  static std::mutex mutex;
  static std::shared_ptr<const Offer> shared;  // the one built last
  {
    const std::lock_guard lock(mutex);
    if (!current(shared)) shared = std::make_shared<const Offer>(snapshot, catalog);
    mine = shared;
  }
  return mine;
}

}  // namespace passepartout
