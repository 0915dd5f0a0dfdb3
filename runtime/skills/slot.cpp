// Slot: instance creation and self-test, and the calls into a skill's hooks
// (trigger, prompt; tools, actuators, observe, error policy) with their results copied out.
#include "skills/slot.hpp"

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "base/log.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {

const char* to_string(ErrorChoice::Kind kind) noexcept {
  switch (kind) {
    case ErrorChoice::Kind::standard:
      return "standard";
    case ErrorChoice::Kind::skip:
      return "skip";
    case ErrorChoice::Kind::fallback:
      return "fallback";
    case ErrorChoice::Kind::abort:
      return "abort";
  }
  return "standard";
}

Slot::Slot(SkillManifest manifest, std::string sha256, std::unique_ptr<SkillLibrary> library, SkillTable table,
           Value config)
    : manifest_(std::move(manifest)),
      config_(std::move(config)),
      version_text_(manifest_.version.to_string()),
      name_value_(Value::string(manifest_.name)),
      version_value_(Value::string(version_text_)),
      passed_trace_entry_(preprint(Value::list({Value::keyword("GATE"), name_value_, Value::keyword("VERSION"),
                                                version_value_, Value::keyword("RESULT"), Value::keyword("PASSED")}))),
      sha256_(std::move(sha256)),
      library_(std::move(library)),
      table_(std::move(table)) {
  self_.skill_name = manifest_.name;
  self_.proxy = library_->proxy();
  instance_.api = &table_.hooks;
  running_ = RunningSkill{manifest_.name.c_str(), version_text_.c_str(), sha256_.c_str()};
}

Slot::~Slot() {
  if (instance_.ptr == nullptr) return;
  const HookScope hook(running_, "destroy");
  table_.hooks.destroy(instance_.ptr);
  instance_.ptr = nullptr;
}

Result<void> Slot::create_instance() {
  pp_call call;
  const HookScope hook(running_, "create");
  void* instance = table_.hooks.create(&host_api(), &self_, to_handle(config_), &call);
  if (instance == nullptr) {
    return fail(ErrorCode::failed,
                "skill '" + name() + "': create failed: " +
                    (call.error.empty() ? std::string("it returned no instance and gave no reason") : call.error));
  }
  instance_.ptr = instance;
  return {};
}

Result<void> Slot::self_test() {
  if (table_.hooks.self_test == nullptr) return {};
  pp_call call;
  const HookScope hook(running_, "self_test");
  if (table_.hooks.self_test(instance_.ptr, &call) != PP_OK) {
    return fail(ErrorCode::failed, "skill '" + name() + "': self-test failed: " + call.reason());
  }
  return {};
}

Result<Value> Slot::export_state() const {
  pp_call call;
  const pp_value* state = nullptr;
  const HookScope hook(running_, "export_state");
  if (table_.hooks.export_state(instance_.ptr, &call, &state) != PP_OK) return fail(ErrorCode::failed, call.reason());
  return from_handle(state);  // a copy: it outlives `call`, which owns what the skill built
}

Result<void> Slot::import_state(const Value& state) {
  pp_call call;
  const HookScope hook(running_, "import_state");
  if (table_.hooks.import_state(instance_.ptr, &call, to_handle(state)) != PP_OK) {
    return fail(ErrorCode::failed, call.reason());
  }
  return {};
}

std::string Slot::tool_label(std::size_t index) const {
  return "tool '" + table_.tools[index].name + "' of skill '" + name() + "'";
}

std::string Slot::actuator_label(std::size_t index) const {
  return "actuator '" + table_.actuators[index] + "' of skill '" + name() + "'";
}

namespace {

// The skill's own error text, or a sentence saying it gave none.
std::string failure_text(const pp_call& call, const std::string& label) {
  return call.error.empty() ? label + " failed without giving a reason" : call.error;
}

}  // namespace

bool Slot::trigger(const Value& signal) const {
  if (table_.hooks.trigger == nullptr) return false;
  pp_call call;
  std::int32_t triggered = 0;
  const HookScope hook(running_, "trigger");
  return table_.hooks.trigger(instance_.ptr, &call, to_handle(signal), &triggered) == PP_OK && triggered != 0;
}

Result<Value> Slot::prompt(const Value& signal) const {
  if (table_.hooks.prompt == nullptr) return Value();
  pp_call call;
  const pp_value* generated = nullptr;
  const HookScope hook(running_, "prompt");
  if (table_.hooks.prompt(instance_.ptr, &call, to_handle(signal), &generated) != PP_OK) {
    return fail(ErrorCode::failed, call.reason());
  }
  return from_handle(generated);  // a copy: it outlives `call`, which owns what the skill built
}

Result<Value> Slot::call_tool(std::size_t index, const Value& args, const Value& signal) const {
  if (index >= table_.tools.size() || table_.hooks.call_tool == nullptr) {
    return fail(ErrorCode::not_found, "skill '" + name() + "' has no tool #" + std::to_string(index) + " (it offers " +
                                          std::to_string(table_.tools.size()) + ")");
  }
  pp_call call;
  const pp_value* result = nullptr;
  const HookScope hook(running_, "call_tool");
  if (table_.hooks.call_tool(instance_.ptr, &call, index, to_handle(args), to_handle(signal), &result) != PP_OK) {
    return fail(ErrorCode::failed, failure_text(call, tool_label(index)));
  }
  return from_handle(result);  // a copy: it outlives `call`, which owns what the skill built
}

Result<Value> Slot::act(std::size_t index, const Value& action, const Value& signal) const {
  if (index >= table_.actuators.size() || table_.hooks.act == nullptr) {
    return fail(ErrorCode::not_found, "skill '" + name() + "' has no actuator #" + std::to_string(index) +
                                          " (it serves " + std::to_string(table_.actuators.size()) + ")");
  }
  pp_call call;
  const pp_value* result = nullptr;
  const HookScope hook(running_, "act");
  if (table_.hooks.act(instance_.ptr, &call, index, to_handle(action), to_handle(signal), &result) != PP_OK) {
    return fail(ErrorCode::failed, failure_text(call, actuator_label(index)));
  }
  return from_handle(result);
}

Result<std::string> Slot::mandate(const Value& signal) const {
  if (table_.hooks.mandate == nullptr) return std::string();
  pp_call call;
  const pp_value* line = nullptr;
  const HookScope hook(running_, "mandate");
  if (table_.hooks.mandate(instance_.ptr, &call, to_handle(signal), &line) != PP_OK) {
    return fail(ErrorCode::failed, failure_text(call, "the mandate of skill '" + name() + "'"));
  }
  const Value text = from_handle(line);
  if (text.is_nil()) return std::string();
  if (!text.is_string()) return fail(ErrorCode::failed, "the mandate of skill '" + name() + "' is not a string");
  return std::string(text.text());
}

Result<Slot::ModelRoute> Slot::select_model(const Value& provider, const Value& request) const {
  ModelRoute route;
  if (table_.hooks.select_model == nullptr) return route;
  pp_call call;
  pp_model_choice choice{};
  const HookScope hook(running_, "select_model");
  const auto who = [this] { return "the model router of skill '" + name() + "'"; };  // built only to fail
  if (table_.hooks.select_model(instance_.ptr, &call, to_handle(provider), to_handle(request), &choice) != PP_OK) {
    return fail(ErrorCode::failed, failure_text(call, who()));
  }
  const Value reason = from_handle(choice.reason);
  if (reason.is_string()) route.reason = std::string(reason.text());
  route.local_only = (choice.flags & PP_MODEL_LOCAL_ONLY) != 0;
  switch (choice.kind) {
    case PP_MODEL_DEFAULT:
      return route;
    case PP_MODEL_USE: {
      const Value model = from_handle(choice.model);
      if (!model.is_string() || model.text().empty()) {
        return fail(ErrorCode::failed, who() + " chose to use a model without naming one");
      }
      route.kind = ModelRoute::Kind::use;
      route.model = std::string(model.text());
      return route;
    }
    case PP_MODEL_SKIP:
      route.kind = ModelRoute::Kind::skip;
      return route;
    default:
      return fail(ErrorCode::failed,
                  who() + " answered a kind the host does not know (" + std::to_string(choice.kind) + ")");
  }
}

Result<void> Slot::observe(const Value& signal) const {
  if (table_.hooks.observe == nullptr) return {};
  pp_call call;
  const HookScope hook(running_, "observe");
  if (table_.hooks.observe(instance_.ptr, &call, to_handle(signal)) != PP_OK) {
    return fail(ErrorCode::failed, failure_text(call, "observe of skill '" + name() + "'"));
  }
  return {};
}

std::optional<ErrorChoice> Slot::error_policy(const Value& signal, const Value& error) const {
  if (table_.hooks.error_policy == nullptr) return std::nullopt;
  pp_call call;
  pp_error_choice choice{};
  pp_status answered = PP_OK;
  {
    const HookScope hook(running_, "error_policy");
    answered = table_.hooks.error_policy(instance_.ptr, &call, to_handle(signal), to_handle(error), &choice);
  }
  if (answered != PP_OK) {
    log_message(LogLevel::warn, name(),
                "error policy failed (the default error handling applies): " +
                    failure_text(call, "the error policy of skill '" + name() + "'"));
    return std::nullopt;
  }
  switch (choice.kind) {
    case PP_ERROR_SKIP:
      return ErrorChoice{ErrorChoice::Kind::skip, Value()};
    case PP_ERROR_ABORT:
      return ErrorChoice{ErrorChoice::Kind::abort, Value()};
    case PP_ERROR_FALLBACK: {
      const Value& text = from_handle(choice.text);
      if (text.is_string()) return ErrorChoice{ErrorChoice::Kind::fallback, text};
      log_message(LogLevel::warn, name(), "error policy chose a fallback without a text; the default applies");
      return ErrorChoice{};
    }
    case PP_ERROR_DEFAULT:
      return ErrorChoice{};
    default:
      log_message(LogLevel::warn, name(),
                  "error policy answered an unknown choice (" + std::to_string(choice.kind) + "); the default applies");
      return ErrorChoice{};
  }
}

}  // namespace passepartout
