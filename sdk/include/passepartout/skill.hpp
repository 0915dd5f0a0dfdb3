// passepartout/skill.hpp: the C++ way to write a skill: derive from passepartout::Skill,
// override the hooks you need, and export the class with PASSEPARTOUT_SKILL(YourClass).
//
//   class ShellGuard final : public passepartout::Skill {
//    public:
//     static constexpr const char kName[] = "shell-guard";  // the manifest's name
//     static constexpr const char kVersion[] = "1.2.0";     // the manifest's version
//     explicit ShellGuard(const passepartout::ValueRef& config);  // or ShellGuard()
//     passepartout::Verdict gate(const passepartout::Action& action,
//                                const passepartout::Signal& signal) override;
//   };
//   PASSEPARTOUT_SKILL(ShellGuard);
//
// The macro writes the one C entry point the host looks up and a table holding
// only the hooks the class overrides. Every hook is wrapped in `noexcept` and a
// catch-all: an exception never crosses into the host; it fails the hook with
// its what() as the reason, and a gate that fails blocks the action.
//
// Rules every skill follows, because the host unloads the library on hot swap
// and anything of it still alive would then run unmapped code:
//   - do not start threads or timers, and do not register callbacks anywhere
//     that outlive destroy;
//   - do not use `thread_local` objects with destructors (the host's threads
//     outlive the library); plain `thread_local` scalars and pointers are fine;
//   - keep no ValueRef or Context from a hook (trigger, gate, call_tool, ...) past its return;
//   - build with passepartout_add_skill(): it hides every symbol but the entry
//     and turns off GCC's "unique" symbols, either of which can keep an
//     unloaded library mapped so that a reload silently runs the old code.
//
// Threads: the constructor, destructor, self_test, export_state and
// import_state run on the host's control thread, never concurrently with each
// other. trigger, prompt, gate, observe and on_error may run on any pipeline
// thread, concurrently, for the same instance (select_model also on a network
// thread): treat the instance as read-only there, or guard what you mutate (a std::mutex member, std::atomic counters).
// call_tool and act run on the host's blocking-work threads, concurrently too,
// and may block (run a process, read a file) for a bounded time.
//
// Tools and actuators (ABI 1.1): a skill that offers the model tools lists
// them in `kTools` and overrides call_tool; one that carries out actions for a
// target lists the targets in `kActuators` and overrides act. Its manifest
// must then name the gate skills that guard them (`guarded_by:
// [tool-permissions]`): the host refuses it otherwise, and it acts on nothing
// while any of them is not loaded.
//
//   class FileTools final : public passepartout::Skill {
//    public:
//     static constexpr passepartout::ToolSpec kTools[] = {
//         {"read-file", "Reads a file of the workspace",
//          R"({"type":"object","properties":{"filepath":{"type":"string"}},"required":["filepath"]})"}};
//     passepartout::ValueRef call_tool(std::string_view tool, const passepartout::ValueRef& args,
//                                      const passepartout::Signal& signal) override;
//   };
//
// Header-only, C++17 or later; includes only the standard library and abi.h.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "passepartout/abi.h"
#include "passepartout/detail/creation.hpp"
#include "passepartout/value.hpp"

namespace passepartout {

/// What triggered the pipeline: a plist such as
/// `(:TYPE :EVENT :PAYLOAD (:SENSOR :USER-INPUT :TEXT "...") :DEPTH 0)`.
using Signal = ValueRef;
/// What the model proposes to do, as the pipeline dispatches it: a plist such as
/// `(:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD "ls -la" :EXPLANATION "..."))`, or for a
/// tool call `(:TYPE :REQUEST :TARGET :TOOL :PAYLOAD (:TOOL "read-file" :ARGS (:FILEPATH "notes.txt")
/// :EXPLANATION "..."))`. An action bound for an actuator carries it as its `:TARGET` keyword.
using Action = ValueRef;

/// Severity of a log line, or of a block as the user sees it.
enum class LogLevel { debug, info, warn, error };

/// A tool a skill offers the model: `{name, description, parameters}`, all
/// string literals. `name` is 1 to 64 lower-case letters, digits, '-' and '_',
/// unique within the skill; `description` is one line for the model (may be
/// nullptr); `parameters` is the arguments as JSON text in a JSON-schema-like
/// shape, a JSON object (nullptr: no arguments). Declared by the skill as
/// `static constexpr passepartout::ToolSpec kTools[] = {...};`; the host checks
/// every entry at load (a bad name or JSON refuses the library).
using ToolSpec = pp_tool;

/// A key the skill reads from its manifest's `config:` (ABI 1.2):
/// `{name, type, default_value, description}`, all string literals (any but
/// `name` may be nullptr). Declared beside kTools as
/// `static constexpr passepartout::ConfigKeySpec kConfig[] = {{"max_output",
/// "integer", "100000", "Bytes of output kept"}};`. The host then refuses a
/// manifest whose `config:` holds any other key, with its line and the
/// nearest declared key; a skill without kConfig is not checked.
using ConfigKeySpec = pp_config_key;

/// What an actuator takes (ABI 1.3): `{description, payload}`, string literals
/// (either may be nullptr). `payload` is the action's `:PAYLOAD` as a JSON
/// Schema object whose properties are its keys in lower case; the model is
/// then offered the actuator as a function of its own, named as the actuator
/// in lower case, and a call's arguments become the payload with each key
/// upper-cased. Declared beside kActuators, one entry per actuator in the
/// same order:
///
///     static constexpr const char* kActuators[] = {"shell"};
///     static constexpr passepartout::ActuatorSpec kActuatorSpecs[] = {
///         {"Runs a shell command in the workspace",
///          R"({"type":"object","properties":{"cmd":{"type":"string"},"explanation":{"type":"string"}},
///              "required":["cmd","explanation"]})"}};
///
/// An actuator without a spec is named to the model in the action grammar only.
using ActuatorSpec = pp_actuator_spec;

namespace sdk_detail {
struct SkillAccess;
}  // namespace sdk_detail

/// What a gate decided about an action: pass, rewrite, block or ask a human.
///
/// Made only through the named constructors. A pass verdict holds no text and
/// never allocates, so a gate that lets almost everything through stays cheap.
class Verdict {
 public:
  /// The four decisions a gate can make.
  enum class Kind {
    pass,      ///< let the action through unchanged
    rewrite,   ///< let a replacement action through instead
    block,     ///< stop: the action must not run
    approval,  ///< a human must approve first; later gates still run
  };

  /// Let the action through unchanged.
  static Verdict pass() noexcept { return Verdict(Kind::pass); }
  /// Replace the action with `action` (built in this gate's call, e.g.
  /// `action.with("DRY-RUN", ctx.t())`); the gates after this one see the replacement.
  static Verdict rewrite(const ValueRef& action) {
    Verdict verdict(Kind::rewrite);
    verdict.action_ = action;
    return verdict;
  }
  /// Stop the action, saying why (`reason` is shown to the user and the
  /// operator and fed back to the model). `level` is how the rejection is
  /// reported: LogLevel::error (the default) or LogLevel::warn; debug and info
  /// report as warn, since a block is never less than a warning.
  static Verdict block(std::string reason, LogLevel level = LogLevel::error) {
    Verdict verdict(Kind::block);
    verdict.reason_ = std::move(reason);
    verdict.level_ = level;
    return verdict;
  }
  /// Require a human's approval of the action, saying why.
  static Verdict approval(std::string reason) {
    Verdict verdict(Kind::approval);
    verdict.reason_ = std::move(reason);
    return verdict;
  }
  /// Require a human's approval of `action` (e.g. a safer variant of the
  /// proposed one, built in this gate's call), saying why.
  static Verdict approval(std::string reason, const ValueRef& action) {
    Verdict verdict = approval(std::move(reason));
    verdict.action_ = action;
    return verdict;
  }

  /// The decision.
  Kind kind() const noexcept { return kind_; }
  /// Whether this is a pass.
  bool is_pass() const noexcept { return kind_ == Kind::pass; }
  /// For block: how the rejection is reported.
  LogLevel level() const noexcept { return level_; }
  /// For block and approval: why (may be empty).
  const std::string& reason() const noexcept { return reason_; }
  /// For rewrite: the replacement; for approval: the action to approve (a
  /// default ref when it is the proposed action); otherwise a default ref.
  const ValueRef& action() const noexcept { return action_; }

 private:
  explicit Verdict(Kind kind) noexcept : kind_(kind) {}

  Kind kind_;
  LogLevel level_ = LogLevel::error;
  std::string reason_;
  ValueRef action_;
};

/// What on_error decided about a signal whose processing failed: leave it to
/// the host's error tiers, skip the signal, continue with a fallback text (as a
/// `:LOOP-ERROR` signal carrying it), or abort the signal's chain.
class ErrorChoice {
 public:
  /// The four choices.
  enum class Kind {
    standard,  ///< no opinion: the host's error tiers apply
    skip,      ///< drop the signal
    fallback,  ///< continue with text()
    abort,     ///< stop processing this signal's chain
  };

  /// No opinion: what the host does without a policy.
  static ErrorChoice standard() noexcept { return ErrorChoice(Kind::standard); }
  /// Drop the signal and go on with the next one.
  static ErrorChoice skip() noexcept { return ErrorChoice(Kind::skip); }
  /// Continue with `text` (UTF-8) in place of the failed step's result.
  static ErrorChoice fallback(std::string text) {
    ErrorChoice choice(Kind::fallback);
    choice.text_ = std::move(text);
    return choice;
  }
  /// Stop processing the signal's chain at once.
  static ErrorChoice abort() noexcept { return ErrorChoice(Kind::abort); }

  /// The choice.
  Kind kind() const noexcept { return kind_; }
  /// For fallback: the text to continue with; empty otherwise.
  const std::string& text() const noexcept { return text_; }

 private:
  explicit ErrorChoice(Kind kind) noexcept : kind_(kind) {}

  Kind kind_;
  std::string text_;
};

/// What select_model decided for one provider of a model call (ABI 1.4): its
/// default model, a model of the router's choosing, or skip it, saying why.
/// `local_only()` marks the session private from now on: the host then sends
/// its calls to providers the operator marked `local: true` only, whatever
/// any router says later (sticky, shown in `passepartout status`).
class ModelSelection {
 public:
  /// The three outcomes.
  enum class Kind {
    provider_default,  ///< call the provider with its default model
    use,               ///< call it with model()
    skip,              ///< do not call it
  };

  /// Call the provider with its default model.
  static ModelSelection provider_default() noexcept { return ModelSelection(Kind::provider_default); }
  /// Call the provider with `model` (must not be empty).
  static ModelSelection use(std::string model) {
    ModelSelection selection(Kind::use);
    selection.model_ = std::move(model);
    return selection;
  }
  /// Do not call the provider; `reason` is shown in the trace and the log.
  static ModelSelection skip(std::string reason) {
    ModelSelection selection(Kind::skip);
    selection.reason_ = std::move(reason);
    return selection;
  }
  /// Also marks the session local-only from now on, saying why (`reason`
  /// replaces a skip's reason when it is not empty).
  ModelSelection& local_only(std::string reason = {}) {
    local_only_ = true;
    if (!reason.empty()) reason_ = std::move(reason);
    return *this;
  }

  Kind kind() const noexcept { return kind_; }
  /// For use: the model.
  const std::string& model() const noexcept { return model_; }
  /// For skip and local_only: why (may be empty).
  const std::string& reason() const noexcept { return reason_; }
  bool is_local_only() const noexcept { return local_only_; }

 private:
  explicit ModelSelection(Kind kind) noexcept : kind_(kind) {}

  Kind kind_;
  bool local_only_ = false;
  std::string model_;
  std::string reason_;
};

/// Base class of every C++ skill. Override the hooks the skill implements;
/// PASSEPARTOUT_SKILL puts only the overridden ones in the table the host
/// sees, so the defaults below are never called by the host (a skill without
/// a gate is never consulted as a gate).
///
/// The derived class is constructed by the host's create, either as
/// `T(const passepartout::ValueRef& config)` or `T()`: the constructor may log
/// and read config(), and throwing from it refuses the load with what() as the
/// reason. The `config` argument can also build values (`config.context()`),
/// but they last only until the constructor returns; keep the config itself
/// (config(), read-only, valid for the instance's life) or copies of its text.
///
/// Declare the hooks you override public, with exactly the signatures below.
/// Instances are neither copied nor moved: the host owns them by pointer.
class Skill {
 public:
  /// Picks up the host table, logging handle and config of the create in
  /// progress. Outside create (in a unit test), logging is silent and the
  /// config reads as NIL.
  Skill() noexcept {
    if (const sdk_detail::Creation* creation = sdk_detail::current_creation) {
      host_ = creation->host;
      self_ = creation->self;
      config_ = ValueRef(creation->host, nullptr, creation->config);
    }
  }
  /// Runs when the host destroys the instance (control thread); may still log.
  virtual ~Skill() = default;
  Skill(const Skill&) = delete;
  Skill& operator=(const Skill&) = delete;
  Skill(Skill&&) = delete;
  Skill& operator=(Skill&&) = delete;

  /// Whether this skill wants to shape the prompt for `signal`. Asked when the
  /// manifest's declarative `trigger` matched, or when it declares none. Any thread,
  /// concurrently. `signal` is valid until the hook returns. Throwing counts as
  /// not triggered. Not overriding it leaves the decision to the manifest.
  virtual bool trigger(const Signal& signal) {
    static_cast<void>(signal);
    return true;
  }

  /// The prompt text for `signal` (copied into the host before the hook
  /// returns), or std::nullopt to fall back to the user's own text. Any
  /// thread, concurrently. `signal` is valid until the hook returns. Throwing
  /// fails the hook, with what() as the reason.
  virtual std::optional<std::string> prompt(const Signal& signal) {
    static_cast<void>(signal);
    return std::nullopt;
  }

  /// Judges `action`, which the model proposed in response to `signal`. Any
  /// thread, concurrently, on the hot path of every action: keep it lean (a
  /// pass costs nothing beyond the call). Both arguments are valid until the
  /// hook returns; values put in the verdict must be built in this call
  /// (`action.context()`, `action.with(...)`). Throwing blocks the action with
  /// what() as the reason: gates fail closed.
  virtual Verdict gate(const Action& action, const Signal& signal) {
    static_cast<void>(action);
    static_cast<void>(signal);
    return Verdict::pass();
  }

  /// Checks the instance works before the host publishes it (on load and hot
  /// swap). Control thread. Throw to refuse the load; what() says why.
  virtual void self_test() {}

  /// Hands state to the next version during a hot swap: returns a value built
  /// with `ctx` (valid until the hook returns; the host copies what it keeps).
  /// Control thread, on the old instance, before import_state on the new one.
  /// Throwing fails the hook, with what() as the reason.
  virtual ValueRef export_state(Context& ctx) { return ctx.nil(); }

  /// Receives what the previous version's export_state returned (NIL unless
  /// it overrode export_state; not called at all when the previous version is
  /// a C skill without the hook). `state` is valid until the hook returns: copy what you keep.
  /// Control thread. Throwing refuses the swap and the old version keeps serving.
  virtual void import_state(const ValueRef& state) { static_cast<void>(state); }

  /// Runs the tool named `tool` (the `name` of one of the class's kTools
  /// entries) with `args`, the arguments the model gave (a property list such
  /// as `(:FILEPATH "notes.txt")`, or NIL), for an action proposed in response
  /// to `signal`. Returns the result, built with `args.context()` (or one of
  /// the arguments themselves); a default ValueRef reads as NIL. Runs on one
  /// of the host's blocking-work threads, concurrently, only after every gate
  /// let the call through; it may block for the bounded time the tool needs.
  /// Both arguments are valid until the hook returns. Throwing fails the tool
  /// with what() as the error the model sees. Override it exactly when the
  /// class declares kTools.
  virtual ValueRef call_tool(std::string_view tool, const ValueRef& args, const Signal& signal) {
    static_cast<void>(tool);
    static_cast<void>(args);
    static_cast<void>(signal);
    throw std::logic_error("passepartout: this skill offers no tools");
  }

  /// Carries out `action`, an approved action whose `:TARGET` is `target` (one
  /// of the class's kActuators, as declared), proposed in response to
  /// `signal`. Returns what happened, built with `action.context()`, or a
  /// default ValueRef (NIL) when there is nothing to report. Runs on one of the
  /// host's blocking-work threads, concurrently, only after every gate and the
  /// last-mile check passed; it may block for its bounded time. Both arguments
  /// are valid until the hook returns. Throwing fails the action with what()
  /// as the error. Override it exactly when the class declares kActuators.
  virtual ValueRef act(std::string_view target, const Action& action, const Signal& signal) {
    static_cast<void>(target);
    static_cast<void>(action);
    static_cast<void>(signal);
    throw std::logic_error("passepartout: this skill serves no actuator");
  }

  /// Receives every signal the manifest's `trigger` matches, as it is
  /// perceived (user input and heartbeats alike), before it is reasoned about:
  /// background work. Only for a manifest that declares a trigger. Any pipeline thread,
  /// concurrently; keep it short. `signal` is valid until the hook returns.
  /// Throwing is logged and changes nothing else.
  virtual void observe(const Signal& signal) { static_cast<void>(signal); }

  /// Chooses what happens to `signal` after processing it failed with `error`
  /// (a property list with at least `:MESSAGE`, the error text). Any pipeline
  /// thread, concurrently. Both are valid until the hook returns. Throwing
  /// counts as ErrorChoice::standard().
  virtual ErrorChoice on_error(const Signal& signal, const ValueRef& error) {
    static_cast<void>(signal);
    static_cast<void>(error);
    return ErrorChoice::standard();
  }

  /// A standing mandate for `signal` (ABI 1.3, seed D8): one line the system
  /// prompt carries while the skill is loaded, such as "Every action carries
  /// an explanation.", or std::nullopt for none. Any pipeline thread,
  /// concurrently, once per model call; keep it short: it is bounded by the
  /// gate budget, and a mandate that throws or is late is left out (and
  /// logged). `signal` is valid until the hook returns.
  virtual std::optional<std::string> mandate(const Signal& signal) {
    static_cast<void>(signal);
    return std::nullopt;
  }

  /// The model router (ABI 1.4, seed D3): chooses the model `provider` is
  /// called with for one model call, or skips it. `provider` is
  /// `(:NAME "openai" :LOCAL NIL :MODEL "gpt-4o-mini")`; `request` is
  /// `(:SIGNAL <signal> :SESSION "id" :SENSOR :USER-INPUT :PROMPT "..."
  /// :SYSTEM "..." :PROMPT-TOKENS n :TOOLS n [:MODEL "asked by the client"])`.
  /// The host asks the loaded skill of highest priority that overrides it,
  /// once per provider the cascade tries. Any pipeline or network thread,
  /// concurrently; keep it short (it is bounded by the gate budget). Throwing,
  /// or answering late, counts as that provider's failure: the cascade goes
  /// on to the next provider. Both are valid until the hook returns.
  virtual ModelSelection select_model(const ValueRef& provider, const ValueRef& request) {
    static_cast<void>(provider);
    static_cast<void>(request);
    return ModelSelection::provider_default();
  }

 protected:
  /// Logs `message` (UTF-8, copied) through the host, attributed to this
  /// skill. Any thread; works in the constructor and destructor too.
  void log(LogLevel level, std::string_view message) const noexcept {
    if (host_ == nullptr) return;
    host_->log(self_, to_pp_level(level), sdk_detail::bytes_of(message), message.size());
  }
  /// Logs `message` at debug level.
  void log_debug(std::string_view message) const noexcept { log(LogLevel::debug, message); }
  /// Logs `message` at info level.
  void log_info(std::string_view message) const noexcept { log(LogLevel::info, message); }
  /// Logs `message` at warn level.
  void log_warn(std::string_view message) const noexcept { log(LogLevel::warn, message); }
  /// Logs `message` at error level.
  void log_error(std::string_view message) const noexcept { log(LogLevel::error, message); }

  /// The manifest's `config` (a property list, or NIL when absent), valid for
  /// the instance's whole life, also in the constructor. Read-only: it has no
  /// call to build in. Keys compare ignoring case: `config().get("max-lines")`.
  const ValueRef& config() const noexcept { return config_; }

 private:
  friend struct sdk_detail::SkillAccess;

  static pp_log_level to_pp_level(LogLevel level) noexcept {
    switch (level) {
      case LogLevel::debug:
        return PP_LOG_DEBUG;
      case LogLevel::info:
        return PP_LOG_INFO;
      case LogLevel::warn:
        return PP_LOG_WARN;
      case LogLevel::error:
        return PP_LOG_ERROR;
    }
    return PP_LOG_INFO;
  }

  const pp_host_api* host_ = nullptr;
  pp_self* self_ = nullptr;
  ValueRef config_;
};

}  // namespace passepartout

#include "passepartout/detail/skill_table.hpp"

/// Exports skill class `T` (derived from passepartout::Skill, with `kName`,
/// `kVersion`, and `kTools`/`kActuators` when it offers them): defines the library's one exported symbol,
/// `passepartout_skill_entry`, returning a static table of T's hooks. Use it
/// exactly once per library, at namespace scope, followed by `;`.
#define PASSEPARTOUT_SKILL(T)                                                            \
  extern "C" PP_EXPORT const pp_skill_api* passepartout_skill_entry() {                  \
    static constexpr pp_skill_api kTable = ::passepartout::sdk_detail::skill_table<T>(); \
    return &kTable;                                                                      \
  }                                                                                      \
  static_assert(::passepartout::sdk_detail::check_skill_class<T>(), "PASSEPARTOUT_SKILL(" #T ")")
