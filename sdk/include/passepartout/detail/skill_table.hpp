// passepartout/detail/skill_table.hpp: the pp_skill_api table PASSEPARTOUT_SKILL(T) exports,
// and the noexcept trampolines that turn C calls into T's hooks and exceptions into PP_ERROR.
// Boundary plumbing: included by skill.hpp; skill code never includes or names anything here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include "passepartout/abi.h"
#include "passepartout/detail/creation.hpp"
#include "passepartout/detail/text.hpp"
#include "passepartout/skill.hpp"
#include "passepartout/value.hpp"

namespace passepartout::sdk_detail {

/// The trampolines' way to the host table a Skill picked up at construction.
struct SkillAccess {
  static const pp_host_api* host(const Skill& skill) noexcept { return skill.host_; }
};

// --- which ABI 1.1 hooks T overrides ---------------------------------------------
// `&T::hook` names the most derived declaration: while it is still Skill's, T
// did not override the hook and the table leaves it NULL (as for the 1.0 hooks below).

// NOLINTBEGIN(readability-identifier-naming): traits named as the standard library's (is_same_v)
/// Whether T overrides Skill::call_tool.
template <class T>
inline constexpr bool overrides_call_tool =
    !std::is_same_v<decltype(&T::call_tool), ValueRef (Skill::*)(std::string_view, const ValueRef&, const Signal&)>;
/// Whether T overrides Skill::act.
template <class T>
inline constexpr bool overrides_act =
    !std::is_same_v<decltype(&T::act), ValueRef (Skill::*)(std::string_view, const Action&, const Signal&)>;
/// Whether T overrides Skill::observe.
template <class T>
inline constexpr bool overrides_observe = !std::is_same_v<decltype(&T::observe), void (Skill::*)(const Signal&)>;
/// Whether T overrides Skill::on_error.
template <class T>
inline constexpr bool overrides_on_error =
    !std::is_same_v<decltype(&T::on_error), ErrorChoice (Skill::*)(const Signal&, const ValueRef&)>;
/// Whether T overrides Skill::mandate (ABI 1.3).
template <class T>
inline constexpr bool overrides_mandate =
    !std::is_same_v<decltype(&T::mandate), std::optional<std::string> (Skill::*)(const Signal&)>;
/// Whether T overrides Skill::select_model (ABI 1.4).
template <class T>
inline constexpr bool overrides_select_model =
    !std::is_same_v<decltype(&T::select_model), ModelSelection (Skill::*)(const ValueRef&, const ValueRef&)>;
// NOLINTEND(readability-identifier-naming)

// --- checking the class ------------------------------------------------------

/// Whether T declares `kName` as a character array (or pointer).
template <class T, class = void>
struct HasName : std::false_type {};
template <class T>
struct HasName<T, std::void_t<decltype(T::kName)>> : std::is_convertible<decltype((T::kName)), const char*> {};

/// Whether T declares `kVersion` as a character array (or pointer).
template <class T, class = void>
struct HasVersion : std::false_type {};
template <class T>
struct HasVersion<T, std::void_t<decltype(T::kVersion)>> : std::is_convertible<decltype((T::kVersion)), const char*> {};

/// Whether T declares `kTools` (whatever its type; checked below).
template <class T, class = void>
struct HasTools : std::false_type {};
template <class T>
struct HasTools<T, std::void_t<decltype(T::kTools)>> : std::true_type {};

/// Whether T declares `kActuators` (whatever its type; checked below).
template <class T, class = void>
struct HasActuators : std::false_type {};
template <class T>
struct HasActuators<T, std::void_t<decltype(T::kActuators)>> : std::true_type {};

/// Whether T declares `kConfig` (whatever its type; checked below).
template <class T, class = void>
struct HasConfig : std::false_type {};
template <class T>
struct HasConfig<T, std::void_t<decltype(T::kConfig)>> : std::true_type {};

/// Whether T's `kConfig` is an array of ConfigKeySpec (false when T has none).
template <class T>
constexpr bool config_are_key_specs() {
  if constexpr (HasConfig<T>::value) {
    using Array = std::remove_reference_t<decltype(T::kConfig)>;
    return std::is_array_v<Array> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<Array>>, ConfigKeySpec>;
  } else {
    return false;
  }
}

/// Whether T's `kTools` is an array of ToolSpec (false when T has none).
template <class T>
constexpr bool tools_are_tool_specs() {
  if constexpr (HasTools<T>::value) {
    using Array = std::remove_reference_t<decltype(T::kTools)>;
    return std::is_array_v<Array> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<Array>>, ToolSpec>;
  } else {
    return false;
  }
}

/// Whether T's `kActuators` is an array of C strings (false when T has none).
template <class T>
constexpr bool actuators_are_names() {
  if constexpr (HasActuators<T>::value) {
    using Array = std::remove_reference_t<decltype(T::kActuators)>;
    return std::is_array_v<Array> && std::is_same_v<std::remove_cv_t<std::remove_extent_t<Array>>, const char*>;
  } else {
    return false;
  }
}

/// Whether T declares `kActuatorSpecs` (whatever its type; checked below).
template <class T, class = void>
struct HasActuatorSpecs : std::false_type {};
template <class T>
struct HasActuatorSpecs<T, std::void_t<decltype(T::kActuatorSpecs)>> : std::true_type {};

/// Whether T's `kActuatorSpecs` is an array of ActuatorSpec with one entry per
/// kActuators name (false when T has none).
template <class T>
constexpr bool actuator_specs_match() {
  if constexpr (HasActuatorSpecs<T>::value && actuators_are_names<T>()) {
    using Array = std::remove_reference_t<decltype(T::kActuatorSpecs)>;
    if constexpr (std::is_array_v<Array> &&
                  std::is_same_v<std::remove_cv_t<std::remove_extent_t<Array>>, ActuatorSpec>) {
      return std::extent_v<Array> == std::extent_v<std::remove_reference_t<decltype(T::kActuators)>>;
    } else {
      return false;
    }
  } else {
    return false;
  }
}

/// Whether `c` may appear in a tool name (lower-case letters, digits, '-', '_').
constexpr bool is_tool_name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/// Whether `c` may appear in an actuator name (letters, digits, '-', '_').
constexpr bool is_actuator_name_char(char c) noexcept { return is_tool_name_char(c) || (c >= 'A' && c <= 'Z'); }

/// Length of `name` if it is 1 to 64 characters accepted by `allowed`; 0 otherwise.
template <class Allowed>
constexpr std::size_t valid_name_length(const char* name, Allowed allowed) noexcept {
  if (name == nullptr) return 0;
  std::size_t length = 0;
  for (; name[length] != '\0'; ++length) {
    if (length == 64 || !allowed(name[length])) return 0;
  }
  return length;
}

/// Whether `a` and `b` are equal, ignoring ASCII case when `fold` is set.
constexpr bool names_equal(const char* a, const char* b, bool fold) noexcept {
  for (;; ++a, ++b) {
    const char x = fold ? ascii_upper(*a) : *a;
    const char y = fold ? ascii_upper(*b) : *b;
    if (x != y) return false;
    if (x == '\0') return true;
  }
}

/// Whether the `count` names `name_of(i)` are each valid by `allowed` and
/// unique (ignoring ASCII case when `fold`).
template <class NameOf, class Allowed>
constexpr bool names_valid(std::size_t count, NameOf name_of, Allowed allowed, bool fold) {
  for (std::size_t i = 0; i < count; ++i) {
    if (valid_name_length(name_of(i), allowed) == 0) return false;
    for (std::size_t j = 0; j < i; ++j) {
      if (names_equal(name_of(i), name_of(j), fold)) return false;
    }
  }
  return true;
}

/// Whether every kTools name is valid and unique (true when T has no tools).
template <class T>
constexpr bool tool_names_valid() {
  if constexpr (tools_are_tool_specs<T>()) {
    return names_valid(
        std::extent_v<std::remove_reference_t<decltype(T::kTools)>>, [](std::size_t i) { return T::kTools[i].name; },
        is_tool_name_char, false);
  }
  return true;
}

/// Whether every kActuators name is valid and unique ignoring case (true when T has none).
template <class T>
constexpr bool actuator_names_valid() {
  if constexpr (actuators_are_names<T>()) {
    return names_valid(
        std::extent_v<std::remove_reference_t<decltype(T::kActuators)>>, [](std::size_t i) { return T::kActuators[i]; },
        is_actuator_name_char, true);
  }
  return true;
}

/// Whether every kConfig name is valid (as an actuator's) and unique ignoring
/// case (true when T has none).
template <class T>
constexpr bool config_names_valid() {
  if constexpr (config_are_key_specs<T>()) {
    return names_valid(
        std::extent_v<std::remove_reference_t<decltype(T::kConfig)>>, [](std::size_t i) { return T::kConfig[i].name; },
        is_actuator_name_char, true);
  }
  return true;
}

/// Checks what PASSEPARTOUT_SKILL(T) needs of T, one readable message each.
template <class T>
constexpr bool check_skill_class() {
  static_assert(std::is_convertible_v<T*, Skill*>,
                "PASSEPARTOUT_SKILL(T): T must derive publicly from passepartout::Skill");
  static_assert(HasName<T>::value,
                "PASSEPARTOUT_SKILL(T): T must declare its name, equal to the manifest's "
                "`name`: static constexpr const char kName[] = \"my-skill\";");
  static_assert(HasVersion<T>::value,
                "PASSEPARTOUT_SKILL(T): T must declare its version, equal to the manifest's "
                "`version`: static constexpr const char kVersion[] = \"1.0.0\";");
  static_assert(std::is_constructible_v<T, const ValueRef&> || std::is_default_constructible_v<T>,
                "PASSEPARTOUT_SKILL(T): T needs a public constructor "
                "T(const passepartout::ValueRef& config) or T()");
  static_assert(std::is_destructible_v<T>, "PASSEPARTOUT_SKILL(T): T needs a public destructor");
  static_assert(!HasTools<T>::value || tools_are_tool_specs<T>(),
                "PASSEPARTOUT_SKILL(T): T::kTools must be an array of tools: "
                "static constexpr passepartout::ToolSpec kTools[] = {{\"name\", \"description\", "
                "R\"({...})\"}};");
  static_assert(!HasActuators<T>::value || actuators_are_names<T>(),
                "PASSEPARTOUT_SKILL(T): T::kActuators must be an array of names: "
                "static constexpr const char* kActuators[] = {\"shell\"};");
  static_assert(!tools_are_tool_specs<T>() || overrides_call_tool<T>,
                "PASSEPARTOUT_SKILL(T): T declares kTools but does not override "
                "passepartout::ValueRef call_tool(std::string_view tool, const passepartout::ValueRef& "
                "args, const passepartout::Signal& signal)");
  static_assert(!overrides_call_tool<T> || tools_are_tool_specs<T>(),
                "PASSEPARTOUT_SKILL(T): T overrides call_tool but declares no tools: "
                "static constexpr passepartout::ToolSpec kTools[] = {...};");
  static_assert(!actuators_are_names<T>() || overrides_act<T>,
                "PASSEPARTOUT_SKILL(T): T declares kActuators but does not override "
                "passepartout::ValueRef act(std::string_view target, const passepartout::Action& "
                "action, const passepartout::Signal& signal)");
  static_assert(!overrides_act<T> || actuators_are_names<T>(),
                "PASSEPARTOUT_SKILL(T): T overrides act but declares no actuators: "
                "static constexpr const char* kActuators[] = {\"shell\"};");
  static_assert(tool_names_valid<T>(),
                "PASSEPARTOUT_SKILL(T): every kTools name must be 1 to 64 lower-case letters, "
                "digits, '-' and '_', and unique within the skill");
  static_assert(actuator_names_valid<T>(),
                "PASSEPARTOUT_SKILL(T): every kActuators name must be 1 to 64 letters, digits, "
                "'-' and '_', and unique ignoring case");
  static_assert(!HasActuatorSpecs<T>::value || actuator_specs_match<T>(),
                "PASSEPARTOUT_SKILL(T): T::kActuatorSpecs must be an array of actuator specs, one for each "
                "kActuators name in the same order: static constexpr passepartout::ActuatorSpec "
                "kActuatorSpecs[] = {{\"description\", R\"({\"type\":\"object\",...})\"}};");
  static_assert(!HasConfig<T>::value || config_are_key_specs<T>(),
                "PASSEPARTOUT_SKILL(T): T::kConfig must be an array of config keys: "
                "static constexpr passepartout::ConfigKeySpec kConfig[] = {{\"name\", \"type\", "
                "\"default\", \"description\"}};");
  static_assert(config_names_valid<T>(),
                "PASSEPARTOUT_SKILL(T): every kConfig name must be 1 to 64 letters, digits, "
                "'-' and '_', and unique ignoring case");
  return true;
}

// --- which hooks T overrides ---------------------------------------------------
// `&T::hook` names the most derived declaration: while it is still Skill's, T
// did not override the hook and the table leaves it NULL.

// NOLINTBEGIN(readability-identifier-naming): traits named as the standard library's (is_same_v)
/// Whether T overrides Skill::trigger.
template <class T>
inline constexpr bool overrides_trigger = !std::is_same_v<decltype(&T::trigger), bool (Skill::*)(const Signal&)>;
/// Whether T overrides Skill::prompt.
template <class T>
inline constexpr bool overrides_prompt =
    !std::is_same_v<decltype(&T::prompt), std::optional<std::string> (Skill::*)(const Signal&)>;
/// Whether T overrides Skill::gate.
template <class T>
inline constexpr bool overrides_gate =
    !std::is_same_v<decltype(&T::gate), Verdict (Skill::*)(const Action&, const Signal&)>;
/// Whether T overrides Skill::self_test.
template <class T>
inline constexpr bool overrides_self_test = !std::is_same_v<decltype(&T::self_test), void (Skill::*)()>;
/// Whether T overrides Skill::export_state.
template <class T>
inline constexpr bool overrides_export_state =
    !std::is_same_v<decltype(&T::export_state), ValueRef (Skill::*)(Context&)>;
/// Whether T overrides Skill::import_state.
template <class T>
inline constexpr bool overrides_import_state =
    !std::is_same_v<decltype(&T::import_state), void (Skill::*)(const ValueRef&)>;
// NOLINTEND(readability-identifier-naming)

// --- errors --------------------------------------------------------------------

/// Tells the host why the current hook fails (an empty message would say nothing).
inline void report_error(const pp_host_api* host, pp_call* call, const char* message) noexcept {
  if (host == nullptr) return;
  if (message == nullptr || *message == '\0') message = "exception without a message";
  host->set_error(call, message, std::strlen(message));
}

/// Call from inside a catch handler: reports the exception in flight and
/// returns PP_ERROR. Nothing escapes, whatever was thrown.
inline pp_status fail_with_current_exception(const pp_host_api* host, pp_call* call) noexcept {
  try {
    throw;
  } catch (const std::exception& error) {
    report_error(host, call, error.what());
  } catch (...) {
    report_error(host, call, "unknown exception");
  }
  return PP_ERROR;
}

// --- verdicts --------------------------------------------------------------------

/// The level a block is reported at: abi.h knows only warn and error.
constexpr pp_log_level block_level(LogLevel level) noexcept {
  return level == LogLevel::error ? PP_LOG_ERROR : PP_LOG_WARN;
}

/// The reason as a string value in `call`, or NULL when there is none.
inline const pp_value* reason_value(const pp_host_api* host, pp_call* call, const std::string& reason) {
  if (reason.empty()) return nullptr;
  const pp_value* built = host->make_string(call, reason.data(), reason.size());
  if (built == nullptr) throw std::invalid_argument("passepartout: the verdict's reason is not valid UTF-8");
  return built;
}

/// The verdict's action handle: NULL when none was given (a default ref);
/// NIL for a ref that reads as NIL without a handle (a missing key).
inline const pp_value* action_value(const pp_host_api* host, pp_call* call, const ValueRef& action) {
  if (action.handle() != nullptr || action.host() == nullptr) return action.handle();
  const pp_value* nil = host->make_nil(call);
  if (nil == nullptr) throw std::invalid_argument("passepartout: the host could not build NIL");
  return nil;
}

/// Fills `out` for every verdict but pass (which the fast path handles).
inline pp_status write_decision(const pp_host_api* host, pp_call* call, const Verdict& verdict, pp_verdict* out) {
  switch (verdict.kind()) {
    case Verdict::Kind::pass:
      break;
    case Verdict::Kind::rewrite: {
      const pp_value* action = action_value(host, call, verdict.action());
      if (action == nullptr) throw std::logic_error("passepartout: Verdict::rewrite needs an action");
      out->kind = PP_VERDICT_REWRITE;
      out->action = action;
      return PP_OK;
    }
    case Verdict::Kind::block:
      out->reason = reason_value(host, call, verdict.reason());
      out->level = block_level(verdict.level());
      out->kind = PP_VERDICT_BLOCK;
      return PP_OK;
    case Verdict::Kind::approval:
      out->reason = reason_value(host, call, verdict.reason());
      out->action = action_value(host, call, verdict.action());
      out->kind = PP_VERDICT_APPROVAL;
      return PP_OK;
  }
  out->kind = PP_VERDICT_PASS;
  return PP_OK;
}

/// Fills `out` (zero-filled by the host, i.e. already a pass) from `verdict`.
/// A pass touches one field and allocates nothing.
inline pp_status write_verdict(const pp_host_api* host, pp_call* call, const Verdict& verdict, pp_verdict* out) {
  if (verdict.is_pass()) {
    out->kind = PP_VERDICT_PASS;
    return PP_OK;
  }
  return write_decision(host, call, verdict, out);
}

// --- trampolines -----------------------------------------------------------------

/// The C functions in T's table. Each is noexcept and catches everything, and
/// calls T's hook non-virtually (one indirect call from the host, no more).
template <class T>
struct Trampolines {
  /// The instance create returned (a T*, passed through void*).
  static T& skill(void* instance) noexcept { return *static_cast<T*>(instance); }

  /// Constructs T (with the config when it takes one) while the Creation is
  /// published for the Skill base; NULL with the reason if the constructor throws.
  static void* create(const pp_host_api* host, pp_self* self, const pp_value* config, pp_call* call) noexcept {
    if (host == nullptr) return nullptr;
    if (host->abi_major != PP_ABI_MAJOR || host->struct_size < PP_HOST_API_SIZE_1_0) {
      // Only a table of our major with every 1.0 member is safe to call into.
      if (host->struct_size >= offsetof(pp_host_api, set_error) + sizeof(host->set_error)) {
        report_error(host, call, "passepartout SDK: the host table is not ABI 1.x");
      }
      return nullptr;
    }
    const Creation creation{host, self, config};
    const CreationScope scope(&creation);
    try {
      if constexpr (std::is_constructible_v<T, const ValueRef&>) {
        return static_cast<void*>(new T(ValueRef(host, call, config)));
      } else {
        return static_cast<void*>(new T());
      }
    } catch (...) {
      fail_with_current_exception(host, call);
      return nullptr;
    }
  }

  /// Deletes the instance (its destructor may still log).
  static void destroy(void* instance) noexcept {
    try {
      delete static_cast<T*>(instance);
    } catch (...) {
      // A destructor must not fail (abi.h); there is no one left to tell.
    }
  }

  /// T::trigger; writes 0 first, so a failure reads as not triggered.
  static pp_status trigger(void* instance, pp_call* call, const pp_value* signal, std::int32_t* triggered) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    *triggered = 0;
    try {
      *triggered = self.T::trigger(Signal(host, call, signal)) ? 1 : 0;
      return PP_OK;
    } catch (...) {
      return fail_with_current_exception(host, call);
    }
  }

  /// T::prompt; std::nullopt becomes a NULL prompt, text a string value in `call`.
  static pp_status prompt(void* instance, pp_call* call, const pp_value* signal, const pp_value** out) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    *out = nullptr;
    try {
      const std::optional<std::string> text = self.T::prompt(Signal(host, call, signal));
      if (text.has_value()) {
        const pp_value* built = host->make_string(call, text->data(), text->size());
        if (built == nullptr) throw std::invalid_argument("passepartout: the prompt is not valid UTF-8");
        *out = built;
      }
      return PP_OK;
    } catch (...) {
      return fail_with_current_exception(host, call);
    }
  }

  /// T::gate, the hot path: a pass costs the call and one store.
  static pp_status gate(void* instance, pp_call* call, const pp_value* action, const pp_value* signal,
                        pp_verdict* verdict) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    try {
      return write_verdict(host, call, self.T::gate(Action(host, call, action), Signal(host, call, signal)), verdict);
    } catch (...) {
      return fail_with_current_exception(host, call);
    }
  }

  /// T::self_test; an exception refuses the load.
  static pp_status self_test(void* instance, pp_call* call) noexcept {
    T& self = skill(instance);
    try {
      self.T::self_test();
      return PP_OK;
    } catch (...) {
      return fail_with_current_exception(SkillAccess::host(self), call);
    }
  }

  /// T::export_state with a Context for `call`; a missing value is exported as NIL.
  static pp_status export_state(void* instance, pp_call* call, const pp_value** state) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    *state = nullptr;
    try {
      Context ctx(host, call);
      const ValueRef exported = self.T::export_state(ctx);
      *state = exported.handle() != nullptr ? exported.handle() : ctx.nil().handle();
      return PP_OK;
    } catch (...) {
      return fail_with_current_exception(host, call);
    }
  }

  /// T::import_state with the previous version's state, borrowed for the call.
  static pp_status import_state(void* instance, pp_call* call, const pp_value* state) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    try {
      self.T::import_state(ValueRef(host, call, state));
      return PP_OK;
    } catch (...) {
      return fail_with_current_exception(host, call);
    }
  }

  /// T::call_tool for tool number `tool` of T::kTools; the result handle goes to the host.
  static pp_status call_tool(void* instance, pp_call* call, std::size_t tool, const pp_value* args,
                             const pp_value* signal, const pp_value** result) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    *result = nullptr;
    try {
      constexpr std::size_t kCount = std::extent_v<std::remove_reference_t<decltype(T::kTools)>>;
      if (tool >= kCount) throw std::out_of_range("passepartout: the host asked for a tool the skill does not offer");
      const ValueRef out = self.T::call_tool(std::string_view(T::kTools[tool].name), ValueRef(host, call, args),
                                             Signal(host, call, signal));
      *result = out.handle();
      return PP_OK;
    } catch (...) {
      return fail_with_current_exception(host, call);
    }
  }

  /// T::act for actuator number `actuator` of T::kActuators.
  static pp_status act(void* instance, pp_call* call, std::size_t actuator, const pp_value* action,
                       const pp_value* signal, const pp_value** result) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    *result = nullptr;
    try {
      constexpr std::size_t kCount = std::extent_v<std::remove_reference_t<decltype(T::kActuators)>>;
      if (actuator >= kCount) {
        throw std::out_of_range("passepartout: the host asked for an actuator the skill does not serve");
      }
      const ValueRef out = self.T::act(std::string_view(T::kActuators[actuator]), Action(host, call, action),
                                       Signal(host, call, signal));
      *result = out.handle();
      return PP_OK;
    } catch (...) {
      return fail_with_current_exception(host, call);
    }
  }

  /// T::observe; an exception is reported to the host, which logs it.
  static pp_status observe(void* instance, pp_call* call, const pp_value* signal) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    try {
      self.T::observe(Signal(host, call, signal));
      return PP_OK;
    } catch (...) {
      return fail_with_current_exception(host, call);
    }
  }

  /// T::mandate; std::nullopt becomes a NULL line, text a string value in `call`.
  static pp_status mandate(void* instance, pp_call* call, const pp_value* signal, const pp_value** line) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    *line = nullptr;
    try {
      const std::optional<std::string> text = self.T::mandate(Signal(host, call, signal));
      if (text.has_value()) {
        const pp_value* built = host->make_string(call, text->data(), text->size());
        if (built == nullptr) throw std::invalid_argument("passepartout: the mandate is not valid UTF-8");
        *line = built;
      }
      return PP_OK;
    } catch (...) {
      return fail_with_current_exception(host, call);
    }
  }

  /// T::select_model; `choice` arrives zero-filled (the provider's default).
  static pp_status select_model(void* instance, pp_call* call, const pp_value* provider, const pp_value* request,
                                pp_model_choice* choice) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    try {
      const ModelSelection chosen = self.T::select_model(ValueRef(host, call, provider), ValueRef(host, call, request));
      const auto text = [&](const std::string& bytes, const char* what) {
        const pp_value* built = host->make_string(call, bytes_of(bytes), bytes.size());
        if (built == nullptr)
          throw std::invalid_argument(std::string("passepartout: the ") + what + " is not valid UTF-8");
        return built;
      };
      switch (chosen.kind()) {
        case ModelSelection::Kind::provider_default:
          choice->kind = PP_MODEL_DEFAULT;
          break;
        case ModelSelection::Kind::use:
          if (chosen.model().empty()) throw std::invalid_argument("passepartout: select_model chose an empty model");
          choice->model = text(chosen.model(), "model's name");
          choice->kind = PP_MODEL_USE;
          break;
        case ModelSelection::Kind::skip:
          choice->kind = PP_MODEL_SKIP;
          break;
      }
      if (!chosen.reason().empty()) choice->reason = text(chosen.reason(), "reason");
      if (chosen.is_local_only()) choice->flags |= PP_MODEL_LOCAL_ONLY;
      return PP_OK;
    } catch (...) {
      *choice = pp_model_choice{};
      return fail_with_current_exception(host, call);
    }
  }

  /// T::on_error; `choice` arrives zero-filled (the default), a fallback's text
  /// becomes a string value in `call`.
  static pp_status error_policy(void* instance, pp_call* call, const pp_value* signal, const pp_value* error,
                                pp_error_choice* choice) noexcept {
    T& self = skill(instance);
    const pp_host_api* host = SkillAccess::host(self);
    try {
      const ErrorChoice chosen = self.T::on_error(Signal(host, call, signal), ValueRef(host, call, error));
      switch (chosen.kind()) {
        case ErrorChoice::Kind::standard:
          choice->kind = PP_ERROR_DEFAULT;
          break;
        case ErrorChoice::Kind::skip:
          choice->kind = PP_ERROR_SKIP;
          break;
        case ErrorChoice::Kind::fallback: {
          const std::string& text = chosen.text();
          const pp_value* built = host->make_string(call, bytes_of(text), text.size());
          if (built == nullptr) throw std::invalid_argument("passepartout: the fallback text is not valid UTF-8");
          choice->text = built;
          choice->kind = PP_ERROR_FALLBACK;
          break;
        }
        case ErrorChoice::Kind::abort:
          choice->kind = PP_ERROR_ABORT;
          break;
      }
      return PP_OK;
    } catch (...) {
      choice->kind = PP_ERROR_DEFAULT;
      choice->text = nullptr;
      return fail_with_current_exception(host, call);
    }
  }
};

/// T's table: ABI version, name, version, create/destroy, and the hooks T
/// overrides (the others stay NULL, so the host never calls them); tools and
/// actuators only when T declares them and overrides call_tool or act; the
/// config keys when T declares kConfig.
template <class T>
constexpr pp_skill_api skill_table() noexcept {
  static_assert(check_skill_class<T>(), "PASSEPARTOUT_SKILL(T)");
  using Hooks = Trampolines<T>;
  pp_skill_api table{};
  table.struct_size = static_cast<std::uint32_t>(sizeof(pp_skill_api));
  table.abi_major = PP_ABI_MAJOR;
  table.abi_minor = PP_ABI_MINOR;
  table.name = T::kName;
  table.version = T::kVersion;
  table.create = &Hooks::create;
  table.destroy = &Hooks::destroy;
  if constexpr (overrides_trigger<T>) table.trigger = &Hooks::trigger;
  if constexpr (overrides_prompt<T>) table.prompt = &Hooks::prompt;
  if constexpr (overrides_gate<T>) table.gate = &Hooks::gate;
  if constexpr (overrides_self_test<T>) table.self_test = &Hooks::self_test;
  if constexpr (overrides_export_state<T>) table.export_state = &Hooks::export_state;
  if constexpr (overrides_import_state<T>) table.import_state = &Hooks::import_state;
  if constexpr (tools_are_tool_specs<T>() && overrides_call_tool<T>) {
    table.tools = T::kTools;
    table.tool_count = std::extent_v<std::remove_reference_t<decltype(T::kTools)>>;
    table.call_tool = &Hooks::call_tool;
  }
  if constexpr (actuators_are_names<T>() && overrides_act<T>) {
    table.actuators = T::kActuators;
    table.actuator_count = std::extent_v<std::remove_reference_t<decltype(T::kActuators)>>;
    table.act = &Hooks::act;
    if constexpr (actuator_specs_match<T>()) table.actuator_specs = T::kActuatorSpecs;
  }
  if constexpr (overrides_observe<T>) table.observe = &Hooks::observe;
  if constexpr (overrides_on_error<T>) table.error_policy = &Hooks::error_policy;
  if constexpr (overrides_mandate<T>) table.mandate = &Hooks::mandate;
  if constexpr (overrides_select_model<T>) table.select_model = &Hooks::select_model;
  if constexpr (config_are_key_specs<T>()) {
    table.config_keys = T::kConfig;
    table.config_key_count = std::extent_v<std::remove_reference_t<decltype(T::kConfig)>>;
  }
  return table;
}

}  // namespace passepartout::sdk_detail
