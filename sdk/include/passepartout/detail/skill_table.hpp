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
#include <type_traits>

#include "passepartout/abi.h"
#include "passepartout/detail/creation.hpp"
#include "passepartout/skill.hpp"
#include "passepartout/value.hpp"

namespace passepartout::sdk_detail {

/// The trampolines' way to the host table a Skill picked up at construction.
struct SkillAccess {
  static const pp_host_api* host(const Skill& skill) noexcept { return skill.host_; }
};

// --- checking the class ------------------------------------------------------

/// Whether T declares `kName` as a character array (or pointer).
template <class T, class = void>
struct HasName : std::false_type {};
template <class T>
struct HasName<T, std::void_t<decltype(T::kName)>>
    : std::is_convertible<decltype((T::kName)), const char*> {};

/// Whether T declares `kVersion` as a character array (or pointer).
template <class T, class = void>
struct HasVersion : std::false_type {};
template <class T>
struct HasVersion<T, std::void_t<decltype(T::kVersion)>>
    : std::is_convertible<decltype((T::kVersion)), const char*> {};

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
  return true;
}

// --- which hooks T overrides ---------------------------------------------------
// `&T::hook` names the most derived declaration: while it is still Skill's, T
// did not override the hook and the table leaves it NULL.

/// Whether T overrides Skill::trigger.
template <class T>
inline constexpr bool overrides_trigger =
    !std::is_same_v<decltype(&T::trigger), bool (Skill::*)(const Signal&)>;
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
inline constexpr bool overrides_self_test =
    !std::is_same_v<decltype(&T::self_test), void (Skill::*)()>;
/// Whether T overrides Skill::export_state.
template <class T>
inline constexpr bool overrides_export_state =
    !std::is_same_v<decltype(&T::export_state), ValueRef (Skill::*)(Context&)>;
/// Whether T overrides Skill::import_state.
template <class T>
inline constexpr bool overrides_import_state =
    !std::is_same_v<decltype(&T::import_state), void (Skill::*)(const ValueRef&)>;

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
inline pp_status write_decision(const pp_host_api* host, pp_call* call, const Verdict& verdict,
                                pp_verdict* out) {
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
inline pp_status write_verdict(const pp_host_api* host, pp_call* call, const Verdict& verdict,
                               pp_verdict* out) {
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
  static void* create(const pp_host_api* host, pp_self* self, const pp_value* config,
                      pp_call* call) noexcept {
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
  static pp_status trigger(void* instance, pp_call* call, const pp_value* signal,
                           std::int32_t* triggered) noexcept {
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
  static pp_status prompt(void* instance, pp_call* call, const pp_value* signal,
                          const pp_value** out) noexcept {
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
      return write_verdict(host, call,
                           self.T::gate(Action(host, call, action), Signal(host, call, signal)),
                           verdict);
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
};

/// T's table: ABI version, name, version, create/destroy, and the hooks T
/// overrides (the others stay NULL, so the host never calls them).
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
  return table;
}

}  // namespace passepartout::sdk_detail
