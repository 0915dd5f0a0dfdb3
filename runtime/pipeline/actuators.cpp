// Actuators: the one lookup of what serves a target, the :SYSTEM actuator,
// and how a :TOOL action and a tool's result read.
#include "pipeline/actuators.hpp"

#include "base/ascii.hpp"
#include "base/log.hpp"
#include "pipeline/pipeline.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {

using namespace key_literals;

Actuator find_actuator(const Snapshot& snapshot, std::string_view target, const Value& action) {
  Actuator found;
  if (is_named(target, "TUI")) {
    found.kind = Actuator::Kind::reply;
  } else if (is_named(target, "SYSTEM")) {
    found.kind = Actuator::Kind::system;
  } else if (is_named(target, "TOOL")) {
    found.kind = Actuator::Kind::tool;
    found.tool_name = tool_name_of(action);
    found.tool = snapshot.find_tool(found.tool_name);
  } else if (!target.empty()) {
    found.actuator = snapshot.find_actuator(target);
    if (found.actuator != nullptr) found.kind = Actuator::Kind::skill;
  }
  return found;
}

void append_target_name(std::string& out, const Value& target) {
  if (!target.is_keyword() && !target.is_string() && !target.is_symbol()) return;
  std::string_view name = target.text();
  if (!name.empty() && name.front() == ':') name.remove_prefix(1);
  if (target.is_keyword()) {
    out.append(name);  // a keyword's name is kept upper-case
  } else {
    append_upper_ascii(out, name);
  }
}

std::string target_name(const Value& target) {
  std::string name;
  append_target_name(name, target);
  return name;
}

std::string tool_name_of(const Value& action) {
  const Value& tool = action.path("PAYLOAD"_key, "TOOL"_key);
  return tool.is_string() || tool.is_keyword() || tool.is_symbol() ? ascii_lower(tool.text()) : std::string();
}

Value tool_args_of(const Value& action) {
  const Value& args = action.path("PAYLOAD"_key, "ARGS"_key);
  return args.is_list() && args.items()[0].is_list() ? args.items()[0] : args;
}

void system_actuator(const Value& action) {
  const Value& command = action.path("PAYLOAD"_key, "ACTION"_key);
  if (command.is_keyword("MESSAGE"_key)) {
    const Value& text = action.path("PAYLOAD"_key, "TEXT"_key);
    log_message(LogLevel::info, "system", "ACT [System]: {}",
                text.is_string() ? std::string(text.text()) : to_sexp(text));
  } else if (command.is_keyword("EVAL"_key)) {
    log_message(LogLevel::error, "system",
                "ACT ERROR [System]: :EVAL is refused: Passepartout has no evaluator (use a skill's tool instead)");
  } else {
    log_message(LogLevel::error, "system", "ACT ERROR [System]: Unknown command '{}'", to_sexp(command));
  }
}

std::string tool_result_format(std::string_view tool, const Value& result) {
  if (result.is_list()) {
    const Value& status = result.at("STATUS"_key);
    if (status.is_keyword("SUCCESS"_key) && result.get("CONTENT"_key) != nullptr) {
      const Value& content = result.at("CONTENT"_key);
      return content.is_string() ? std::string(content.text()) : to_sexp(content);
    }
    if (status.is_keyword("ERROR"_key)) {
      const Value& message = result.at("MESSAGE"_key);
      return "ERROR [" + std::string(tool) +
             "]: " + (message.is_string() ? std::string(message.text()) : to_sexp(message));
    }
    return "TOOL [" + std::string(tool) + "] RESULT: " + to_sexp(result);
  }
  return "TOOL [" + std::string(tool) +
         "] RESULT: " + (result.is_string() ? std::string(result.text()) : to_sexp(result));
}

}  // namespace passepartout
