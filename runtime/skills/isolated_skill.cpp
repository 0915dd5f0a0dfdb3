// ProcessSkillLibrary: the proxy table's hooks (each a request to the worker
// and a strictly checked reply), starting the worker, and the thread that restarts it.
#include "skills/isolated_skill.hpp"

#include <unistd.h>

#include <cstring>
#include <optional>
#include <span>
#include <system_error>
#include <utility>

#include "base/log.hpp"
#include "skills/host_api.hpp"
#include "skills/skill_loader.hpp"
#include "skills/worker_process.hpp"

namespace passepartout {
namespace {

ProcessSkillLibrary& library_of(void* instance) { return *static_cast<ProcessSkillLibrary*>(instance); }

void set_error(pp_call* call, const std::string& text) {
  if (call != nullptr) call->error = text;
}

// A reply's items when it is (status "error" more...) with `count` items in
// all; otherwise the worker broke the protocol: it is killed, and the reason given.
Result<std::span<const Value>> reply_items(ProcessSkillLibrary& library, const Value& reply, std::size_t count,
                                           const char* shape) {
  const auto items = reply.items();
  if (!reply.is_list() || items.size() != count || !items[0].is_integer() || !items[1].is_string()) {
    return fail(ErrorCode::failed, library.protocol_violation(std::string("a reply that is not ") + shape));
  }
  return items;
}

// A failing status: the skill's own error text goes to the call, as in process.
pp_status skill_status(std::span<const Value> items, pp_call* call) {
  if (items[0].as_integer() == PP_OK) return PP_OK;
  if (!items[1].text().empty()) set_error(call, std::string(items[1].text()));
  return PP_ERROR;
}

// A value the worker returned, kept in the call (NULL for NIL, as a skill's NULL reads).
const pp_value* kept(pp_call* call, const Value& value) {
  if (value.is_nil() || call == nullptr) return nullptr;
  return call->keep(value);
}

// --- the proxy hooks: what the synthesized pp_skill_api points at -------------

void* proxy_create(const pp_host_api* /*host*/, pp_self* self, const pp_value* config, pp_call* call) {
  if (self == nullptr || self->proxy == nullptr) {
    set_error(call, "the skill's process is not running");
    return nullptr;
  }
  auto& library = *static_cast<ProcessSkillLibrary*>(self->proxy);
  if (auto ok = library.create(from_handle(config)); !ok) {
    set_error(call, ok.error().message);
    return nullptr;
  }
  return &library;
}

void proxy_destroy(void* instance) { library_of(instance).destroy_instance(); }

pp_status proxy_trigger(void* instance, pp_call* call, const pp_value* signal, int32_t* triggered) {
  auto& library = library_of(instance);
  auto reply = library.call(FrameKind::trigger, Value::list({from_handle(signal)}), library.call_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 3, "(status error triggered)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  if (skill_status(*items, call) != PP_OK) return PP_ERROR;
  *triggered = (*items)[2].is_nil() ? 0 : 1;
  return PP_OK;
}

pp_status proxy_prompt(void* instance, pp_call* call, const pp_value* signal, const pp_value** prompt) {
  auto& library = library_of(instance);
  auto reply = library.call(FrameKind::prompt, Value::list({from_handle(signal)}), library.call_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 3, "(status error prompt)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  if (skill_status(*items, call) != PP_OK) return PP_ERROR;
  *prompt = kept(call, (*items)[2]);
  return PP_OK;
}

pp_status proxy_gate(void* instance, pp_call* call, const pp_value* action, const pp_value* signal,
                     pp_verdict* verdict) {
  auto& library = library_of(instance);
  auto reply =
      library.call(FrameKind::gate, Value::list({from_handle(action), from_handle(signal)}), library.call_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 6, "(status error kind level action reason)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  const auto& kind = (*items)[2];
  const auto& level = (*items)[3];
  if (!kind.is_integer() || kind.as_integer() < 0 || kind.as_integer() > 0xFFFF'FFFFLL || !level.is_integer() ||
      level.as_integer() < INT32_MIN || level.as_integer() > INT32_MAX) {
    set_error(call, library.protocol_violation("a verdict whose kind or level is no 32-bit integer"));
    return PP_ERROR;
  }
  if (skill_status(*items, call) != PP_OK) return PP_ERROR;
  verdict->kind = static_cast<pp_verdict_kind>(kind.as_integer());
  verdict->level = static_cast<pp_log_level>(level.as_integer());
  verdict->action = kept(call, (*items)[4]);
  verdict->reason = kept(call, (*items)[5]);
  return PP_OK;
}

pp_status proxy_self_test(void* instance, pp_call* call) {
  auto& library = library_of(instance);
  auto reply = library.call(FrameKind::self_test, Value::nil(), library.control_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 2, "(status error)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  return skill_status(*items, call);
}

pp_status proxy_export_state(void* instance, pp_call* call, const pp_value** state) {
  auto& library = library_of(instance);
  auto reply = library.call(FrameKind::export_state, Value::nil(), library.control_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 3, "(status error state)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  if (skill_status(*items, call) != PP_OK) return PP_ERROR;
  *state = kept(call, (*items)[2]);
  return PP_OK;
}

pp_status proxy_import_state(void* instance, pp_call* call, const pp_value* state) {
  auto& library = library_of(instance);
  auto reply = library.call(FrameKind::import_state, Value::list({from_handle(state)}), library.control_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 2, "(status error)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  return skill_status(*items, call);
}

pp_status run_indexed(FrameKind kind, void* instance, pp_call* call, size_t index, const pp_value* input,
                      const pp_value* signal, const pp_value** result) {
  auto& library = library_of(instance);
  auto reply = library.call(
      kind, Value::list({Value::integer(static_cast<std::int64_t>(index)), from_handle(input), from_handle(signal)}),
      library.action_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 3, "(status error result)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  if (skill_status(*items, call) != PP_OK) return PP_ERROR;
  *result = kept(call, (*items)[2]);
  return PP_OK;
}

pp_status proxy_call_tool(void* instance, pp_call* call, size_t tool, const pp_value* args, const pp_value* signal,
                          const pp_value** result) {
  return run_indexed(FrameKind::call_tool, instance, call, tool, args, signal, result);
}

pp_status proxy_act(void* instance, pp_call* call, size_t actuator, const pp_value* action, const pp_value* signal,
                    const pp_value** result) {
  return run_indexed(FrameKind::act, instance, call, actuator, action, signal, result);
}

pp_status proxy_observe(void* instance, pp_call* call, const pp_value* signal) {
  auto& library = library_of(instance);
  auto reply = library.call(FrameKind::observe, Value::list({from_handle(signal)}), library.call_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 2, "(status error)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  return skill_status(*items, call);
}

pp_status proxy_mandate(void* instance, pp_call* call, const pp_value* signal, const pp_value** line) {
  auto& library = library_of(instance);
  auto reply = library.call(FrameKind::mandate, Value::list({from_handle(signal)}), library.call_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 3, "(status error line)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  if (skill_status(*items, call) != PP_OK) return PP_ERROR;
  *line = kept(call, (*items)[2]);
  return PP_OK;
}

pp_status proxy_error_policy(void* instance, pp_call* call, const pp_value* signal, const pp_value* error,
                             pp_error_choice* choice) {
  auto& library = library_of(instance);
  auto reply = library.call(FrameKind::error_policy, Value::list({from_handle(signal), from_handle(error)}),
                            library.call_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 4, "(status error kind text)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  const auto& kind = (*items)[2];
  if (!kind.is_integer() || kind.as_integer() < 0 || kind.as_integer() > 0xFFFF'FFFFLL) {
    set_error(call, library.protocol_violation("an error choice whose kind is no 32-bit integer"));
    return PP_ERROR;
  }
  if (skill_status(*items, call) != PP_OK) return PP_ERROR;
  choice->kind = static_cast<std::uint32_t>(kind.as_integer());
  choice->text = kept(call, (*items)[3]);
  return PP_OK;
}

pp_status proxy_select_model(void* instance, pp_call* call, const pp_value* provider, const pp_value* request,
                             pp_model_choice* choice) {
  auto& library = library_of(instance);
  auto reply = library.call(FrameKind::select_model, Value::list({from_handle(provider), from_handle(request)}),
                            library.call_budget());
  if (!reply) return set_error(call, reply.error().message), PP_ERROR;
  auto items = reply_items(library, *reply, 6, "(status error kind flags model reason)");
  if (!items) return set_error(call, items.error().message), PP_ERROR;
  for (std::size_t i : {std::size_t{2}, std::size_t{3}}) {
    const auto& field = (*items)[i];
    if (!field.is_integer() || field.as_integer() < 0 || field.as_integer() > 0xFFFF'FFFFLL) {
      set_error(call, library.protocol_violation("a model choice whose kind or flags are no 32-bit integer"));
      return PP_ERROR;
    }
  }
  if (skill_status(*items, call) != PP_OK) return PP_ERROR;
  choice->kind = static_cast<std::uint32_t>((*items)[2].as_integer());
  choice->flags = static_cast<std::uint32_t>((*items)[3].as_integer());
  choice->model = kept(call, (*items)[4]);
  choice->reason = kept(call, (*items)[5]);
  return PP_OK;
}

void log_from_worker(const std::string& skill, std::int64_t level, const std::string& text) {
  LogLevel at = LogLevel::info;
  if (level == PP_LOG_DEBUG) at = LogLevel::debug;
  if (level == PP_LOG_WARN) at = LogLevel::warn;
  if (level == PP_LOG_ERROR) at = LogLevel::error;
  log_message(at, skill, text);
}

}  // namespace

Result<std::unique_ptr<ProcessSkillLibrary>> ProcessSkillLibrary::start(const SkillManifest& manifest,
                                                                        const std::filesystem::path& source,
                                                                        const std::string& sha256,
                                                                        const LoaderOptions& options) {
  std::unique_ptr<ProcessSkillLibrary> library(new ProcessSkillLibrary());
  library->name_ = manifest.name;
  library->version_text_ = manifest.version.to_string();
  library->source_ = source;
  library->executable_ =
      options.worker_executable.empty() ? std::filesystem::path("/proc/self/exe") : options.worker_executable;
  library->lanes_ = options.worker_lanes == 0 ? 1 : options.worker_lanes;
  library->memory_limit_ = manifest.sandbox.memory_bytes;
  // The skill's own gate budget (gate_timeout) when its manifest sets one.
  library->call_budget_ = manifest.gate_budget(options.call_budget);
  library->control_budget_ = options.control_budget;
  library->action_budget_ = options.action_budget;
  library->clock_ = options.clock;
  library->on_quarantine_ = options.on_quarantine;
  library->worker_arguments_ = {"skill-worker",
                                "--name",
                                manifest.name,
                                "--version",
                                library->version_text_,
                                "--abi",
                                std::to_string(manifest.abi.major) + "." + std::to_string(manifest.abi.minor),
                                "--library",
                                source.string(),
                                "--manifest",
                                manifest.path.string(),
                                "--sha256",
                                sha256,
                                "--lanes",
                                std::to_string(library->lanes_),
                                "--memory",
                                std::to_string(manifest.sandbox.memory_bytes),
                                "--open-files",
                                std::to_string(manifest.sandbox.open_files),
                                "--cpu-seconds",
                                std::to_string(manifest.sandbox.cpu_seconds)};
  std::vector<std::string>& arguments = library->worker_arguments_;
  for (const std::filesystem::path& readable : manifest.sandbox.files) {
    arguments.insert(arguments.end(), {"--read", readable.string()});
  }
  for (const std::string& layer : manifest.sandbox.require) arguments.insert(arguments.end(), {"--require", layer});
  if (manifest.sandbox.network) arguments.emplace_back("--network");
  if (manifest.sandbox.processes) arguments.emplace_back("--processes");
  if (!options.check_permissions) library->worker_arguments_.emplace_back("--no-permission-check");
  if (manifest.never_unload) library->worker_arguments_.emplace_back("--never-unload");

  auto first = library->spawn_worker();
  if (!first) return fail(first.error().code, first.error().message);
  {
    std::lock_guard lock(library->mutex_);
    library->starting_.reset();
    library->worker_ = std::move(*first);
  }
  try {
    library->restarter_ = std::thread([raw = library.get()] { raw->restart_loop(); });
  } catch (const std::system_error& error) {
    return fail(ErrorCode::io_error,
                "skill '" + manifest.name + "': cannot start the thread that restarts its process: " + error.what());
  }
  return library;
}

ProcessSkillLibrary::~ProcessSkillLibrary() {
  std::shared_ptr<WorkerProcess> worker;
  std::shared_ptr<WorkerProcess> starting;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    worker = std::move(worker_);
    starting = starting_;
  }
  restart_wanted_.notify_all();
  // A restart in progress ends at once: its calls to the new worker fail.
  if (starting) starting->kill_for("stopped");
  if (restarter_.joinable()) restarter_.join();
  if (worker) worker->kill_for("stopped");
}

std::chrono::steady_clock::time_point ProcessSkillLibrary::now() const {
  return clock_ ? clock_() : std::chrono::steady_clock::now();
}

Result<std::shared_ptr<WorkerProcess>> ProcessSkillLibrary::spawn_worker() {
  const std::string who = "skill '" + name_ + "'";
  auto spawned = WorkerProcess::spawn({executable_, worker_arguments_, lanes_, memory_limit_,
                                       [this](const std::vector<std::string>& names) { note_denials(names); }});
  if (!spawned) return fail(spawned.error().code, who + ": " + spawned.error().message);
  std::shared_ptr<WorkerProcess> worker = std::move(*spawned);
  bool stopping = false;
  {
    std::lock_guard lock(mutex_);
    stopping = stopping_;
    if (!stopping) starting_ = worker;
  }
  if (stopping) {
    worker->kill_for("stopped");
    return fail(ErrorCode::failed, who + ": stopped while its process started");
  }
  const std::string skill = name_;
  auto reply =
      worker->call(FrameKind::hello, Value::nil(), control_budget_,
                   [&skill](std::int64_t level, const std::string& text) { log_from_worker(skill, level, text); });
  if (!reply) return fail(ErrorCode::failed, who + ": its process did not start: " + reply.error().message);
  const auto items = reply->items();
  if (!reply->is_list() || items.size() < 2 || !items[0].is_integer() || !items[1].is_string()) {
    worker->kill_for("garbage");
    return fail(ErrorCode::failed,
                who + ": its process wrote garbage on its channel: a hello reply of the wrong shape");
  }
  if (items[0].as_integer() != PP_OK) {
    // The worker's loader said why (the same checks and words as in process).
    return fail(ErrorCode::refused, std::string(items[1].text()));
  }
  if (table_.create == nullptr) {
    if (auto ok = read_description(*reply); !ok) {
      worker->kill_for("garbage");
      return fail(ErrorCode::failed, who + ": its process wrote garbage on its channel: " + ok.error().message);
    }
  } else if (items.size() < 7 || !items[6].is_integer() || items[6].as_integer() != hook_mask_) {
    worker->kill_for("garbage");
    return fail(ErrorCode::failed, who + ": its restarted process describes other hooks than before");
  }
  return worker;
}

Result<std::shared_ptr<WorkerProcess>> ProcessSkillLibrary::restart_worker(bool create, const Value& config) {
  auto started = spawn_worker();
  if (!started || !create) return started;
  std::shared_ptr<WorkerProcess> worker = std::move(*started);
  const std::string skill = name_;
  auto log = [&skill](std::int64_t level, const std::string& text) { log_from_worker(skill, level, text); };
  // (status error): the status, and the skill's own words when it gave some.
  auto refusal = [](const Value& reply, const char* what) -> std::optional<std::string> {
    const auto items = reply.items();
    if (reply.is_list() && !items.empty() && items[0].is_integer() && items[0].as_integer() == PP_OK) {
      return std::nullopt;
    }
    std::string reason = std::string(what) + " failed in the restarted process";
    if (items.size() >= 2 && items[1].is_string() && !items[1].text().empty()) {
      reason += ": " + std::string(items[1].text());
    }
    return reason;
  };
  std::optional<std::string> failure;
  auto created = worker->call(FrameKind::create, Value::list({config}), control_budget_, log);
  if (!created) {
    failure = created.error().message;
  } else {
    failure = refusal(*created, "create");
  }
  if (!failure && (hook_mask_ & kHookSelfTest) != 0) {
    auto tested = worker->call(FrameKind::self_test, Value::nil(), control_budget_, log);
    failure = tested ? refusal(*tested, "self-test") : tested.error().message;
  }
  if (failure) {
    // The reason it died, when it did (a crash in create); else what it is killed for.
    worker->kill_for(*failure);
    return fail(ErrorCode::failed, worker->death_reason());
  }
  return worker;
}

constexpr std::size_t kMaxLoggedDenials = 512;

void ProcessSkillLibrary::note_denials(const std::vector<std::string>& names) {
  sandbox_denials_.fetch_add(names.size(), std::memory_order_relaxed);
  for (const std::string& name : names) {
    bool first = false;
    {
      std::lock_guard lock(denials_mutex_);
      // Bounded: a worker gone wrong cannot grow it past the number of system calls there are.
      first = denied_.size() < kMaxLoggedDenials && denied_.insert(name).second;
    }
    if (first) log_message(LogLevel::warn, "sandbox", "skill '{}' tried {} (denied by the sandbox)", name_, name);
  }
}

Result<void> ProcessSkillLibrary::read_description(const Value& description) {
  // (status error name version abi-major abi-minor hooks tools actuators config-keys actuator-specs)
  const auto items = description.items();
  auto text_or_null = [this](const Value& v, const char* what) -> Result<const char*> {
    if (v.is_nil()) return static_cast<const char*>(nullptr);
    if (!v.is_string()) return fail(ErrorCode::invalid_input, std::string(what) + " is not a string");
    if (v.text().find('\0') != std::string_view::npos) {
      return fail(ErrorCode::invalid_input, std::string(what) + " holds a NUL byte");
    }
    strings_.emplace_back(v.text());
    return strings_.back().c_str();
  };
  if (items.size() != 11 || !items[4].is_integer() || !items[5].is_integer() || !items[6].is_integer() ||
      items[4].as_integer() < 0 || items[4].as_integer() > 0xFFFF || items[5].as_integer() < 0 ||
      items[5].as_integer() > 0xFFFF || items[6].as_integer() < 0 || !items[7].is_sequence() ||
      !items[8].is_sequence() || !items[9].is_sequence() || !items[10].is_sequence()) {
    return fail(ErrorCode::invalid_input, "a table description of the wrong shape");
  }
  auto name = text_or_null(items[2], "the name");
  if (!name) return fail(name.error().code, name.error().message);
  auto version = text_or_null(items[3], "the version");
  if (!version) return fail(version.error().code, version.error().message);
  table_.struct_size = sizeof(pp_skill_api);
  table_.abi_major = static_cast<std::uint16_t>(items[4].as_integer());
  table_.abi_minor = static_cast<std::uint16_t>(items[5].as_integer());
  table_.name = *name;
  table_.version = *version;
  hook_mask_ = static_cast<std::uint32_t>(items[6].as_integer());

  for (const Value& tool : items[7].items()) {
    const auto fields = tool.items();
    if (fields.size() != 3) return fail(ErrorCode::invalid_input, "a tool that is not (name description parameters)");
    auto tool_name = text_or_null(fields[0], "a tool's name");
    if (!tool_name) return fail(tool_name.error().code, tool_name.error().message);
    auto tool_description = text_or_null(fields[1], "a tool's description");
    if (!tool_description) return fail(tool_description.error().code, tool_description.error().message);
    auto parameters = text_or_null(fields[2], "a tool's parameters");
    if (!parameters) return fail(parameters.error().code, parameters.error().message);
    tools_.push_back(pp_tool{*tool_name, *tool_description, *parameters});
  }
  for (const Value& actuator : items[8].items()) {
    auto actuator_name = text_or_null(actuator, "an actuator's name");
    if (!actuator_name) return fail(actuator_name.error().code, actuator_name.error().message);
    actuators_.push_back(*actuator_name);
  }
  for (const Value& spec : items[10].items()) {
    const auto fields = spec.items();
    if (fields.size() != 2) return fail(ErrorCode::invalid_input, "an actuator spec that is not (description payload)");
    auto spec_description = text_or_null(fields[0], "an actuator's description");
    if (!spec_description) return fail(spec_description.error().code, spec_description.error().message);
    auto payload = text_or_null(fields[1], "an actuator's payload schema");
    if (!payload) return fail(payload.error().code, payload.error().message);
    actuator_specs_.push_back(pp_actuator_spec{*spec_description, *payload});
  }
  if (!actuator_specs_.empty() && actuator_specs_.size() != actuators_.size()) {
    return fail(ErrorCode::invalid_input, "actuator specs that are not one per actuator");
  }
  for (const Value& key : items[9].items()) {
    const auto fields = key.items();
    if (fields.size() != 4) {
      return fail(ErrorCode::invalid_input, "a config key that is not (name type default description)");
    }
    const char* texts[4] = {};
    for (std::size_t i = 0; i < 4; ++i) {
      auto text = text_or_null(fields[i], "a config key's field");
      if (!text) return fail(text.error().code, text.error().message);
      texts[i] = *text;
    }
    config_keys_.push_back(pp_config_key{texts[0], texts[1], texts[2], texts[3]});
  }

  table_.create = proxy_create;
  table_.destroy = proxy_destroy;
  if ((hook_mask_ & kHookTrigger) != 0) table_.trigger = proxy_trigger;
  if ((hook_mask_ & kHookPrompt) != 0) table_.prompt = proxy_prompt;
  if ((hook_mask_ & kHookGate) != 0) table_.gate = proxy_gate;
  if ((hook_mask_ & kHookSelfTest) != 0) table_.self_test = proxy_self_test;
  if ((hook_mask_ & kHookExportState) != 0) table_.export_state = proxy_export_state;
  if ((hook_mask_ & kHookImportState) != 0) table_.import_state = proxy_import_state;
  if ((hook_mask_ & kHookCallTool) != 0) table_.call_tool = proxy_call_tool;
  if ((hook_mask_ & kHookAct) != 0) table_.act = proxy_act;
  if ((hook_mask_ & kHookObserve) != 0) table_.observe = proxy_observe;
  if ((hook_mask_ & kHookErrorPolicy) != 0) table_.error_policy = proxy_error_policy;
  if ((hook_mask_ & kHookMandate) != 0) table_.mandate = proxy_mandate;
  if ((hook_mask_ & kHookSelectModel) != 0) table_.select_model = proxy_select_model;
  // Counts as the worker gave them; a NULL table with a count is SkillTable::read's to refuse.
  table_.tools = tools_.empty() ? nullptr : tools_.data();
  table_.tool_count = tools_.size();
  table_.actuators = actuators_.empty() ? nullptr : actuators_.data();
  table_.actuator_count = actuators_.size();
  table_.actuator_specs = actuator_specs_.empty() ? nullptr : actuator_specs_.data();
  table_.config_keys = config_keys_.empty() ? nullptr : config_keys_.data();
  table_.config_key_count = config_keys_.size();
  return {};
}

void ProcessSkillLibrary::note_death_locked(const WorkerProcess& worker) {
  if (death_noted_ || worker_.get() != &worker) return;
  death_noted_ = true;
  record_death_locked(worker.death_reason());
}

void ProcessSkillLibrary::record_death_locked(const std::string& reason) {
  const bool quarantined = restarts_.record_death(now(), reason);
  if (quarantined) {
    restart_due_ = false;
    log_message(LogLevel::error, name_, "{}", restarts_.quarantine_reason());
    if (on_quarantine_) on_quarantine_(name_, restarts_.quarantine_reason());
    return;
  }
  log_message(LogLevel::error, name_, "{}; restarting it in {}", reason, human_duration(restarts_.backoff()));
  restart_due_ = true;
  restart_wanted_.notify_all();
}

void ProcessSkillLibrary::restart_loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    restart_wanted_.wait(lock, [this] { return stopping_ || restart_due_; });
    if (stopping_) return;
    if (restarts_.quarantined()) {
      restart_due_ = false;
      continue;
    }
    const auto at = now();
    if (at < restarts_.next_start()) {
      // One wait with the steady clock. An injected clock (tests) that has
      // not moved far enough is looked at again once as long passed.
      restart_wanted_.wait_for(lock, restarts_.next_start() - at);
      continue;
    }
    restart_due_ = false;
    restarting_ = true;
    const bool create = created_;
    const Value config = config_;
    const std::string last = restarts_.last_death();
    lock.unlock();
    auto started = restart_worker(create, config);
    lock.lock();
    restarting_ = false;
    starting_.reset();
    if (stopping_) return;  // `started`, if up, is killed as it goes
    if (!started) {
      // A restart that fails counts as another death: it backs off and, repeated, quarantines.
      record_death_locked(started.error().message);
      continue;
    }
    worker_ = std::move(*started);
    death_noted_ = false;
    restarts_.record_restart();
    log_message(LogLevel::warn, name_, "its process was restarted after it died ({}); the state it held was lost",
                short_death_reason(last));
  }
}

Result<std::shared_ptr<WorkerProcess>> ProcessSkillLibrary::live_worker() {
  std::lock_guard lock(mutex_);
  if (worker_ && !worker_->is_dead()) return worker_;
  if (worker_) note_death_locked(*worker_);
  if (restarts_.quarantined()) {
    return fail(ErrorCode::failed,
                restarts_.quarantine_reason() + "; `passepartout skills reload " + name_ + "` to try again");
  }
  if (restarts_.last_death().empty()) return fail(ErrorCode::failed, "the skill's process is not running");
  // No wait here: the restart thread brings the worker back.
  return fail(ErrorCode::failed,
              "skill process restarting after it died: " + short_death_reason(restarts_.last_death()) +
                  (restarting_ ? " (restart in progress)" : " (restart pending)"));
}

Result<Value> ProcessSkillLibrary::call(FrameKind kind, const Value& request, std::chrono::milliseconds budget) {
  auto worker = live_worker();
  if (!worker) return fail(worker.error().code, worker.error().message);
  const std::string& skill = name_;
  auto reply = (*worker)->call(kind, request, budget, [&skill](std::int64_t level, const std::string& text) {
    log_from_worker(skill, level, text);
  });
  if (!reply && (*worker)->is_dead()) {
    std::lock_guard lock(mutex_);
    note_death_locked(**worker);
  }
  return reply;
}

std::string ProcessSkillLibrary::protocol_violation(const std::string& what) {
  std::shared_ptr<WorkerProcess> worker;
  {
    std::lock_guard lock(mutex_);
    worker = worker_;
  }
  if (!worker) return "skill process wrote garbage on its channel: " + what;
  worker->kill_for("skill process wrote garbage on its channel: " + what);
  std::lock_guard lock(mutex_);
  note_death_locked(*worker);
  return worker->death_reason();
}

Result<void> ProcessSkillLibrary::create(const Value& config) {
  {
    std::lock_guard lock(mutex_);
    config_ = config;
  }
  auto reply = call(FrameKind::create, Value::list({config}), control_budget_);
  if (!reply) return fail(ErrorCode::failed, reply.error().message);
  const auto items = reply->items();
  if (!reply->is_list() || items.size() != 2 || !items[0].is_integer() || !items[1].is_string()) {
    return fail(ErrorCode::failed, protocol_violation("a reply that is not (status error)"));
  }
  if (items[0].as_integer() != PP_OK) {
    if (items[1].text().empty()) return fail(ErrorCode::failed, "it returned no instance and gave no reason");
    return fail(ErrorCode::failed, std::string(items[1].text()));
  }
  std::lock_guard lock(mutex_);
  created_ = true;
  return {};
}

void ProcessSkillLibrary::destroy_instance() {
  std::shared_ptr<WorkerProcess> worker;
  {
    std::lock_guard lock(mutex_);
    created_ = false;
    worker = worker_;
  }
  if (worker && !worker->is_dead()) (void)worker->call(FrameKind::destroy, Value::nil(), control_budget_, {});
}

IsolationStatus ProcessSkillLibrary::isolation_status() const {
  std::lock_guard lock(mutex_);
  IsolationStatus status;
  status.tier = Isolation::process;
  status.pid = worker_ && !worker_->is_dead() ? worker_->pid() : 0;
  status.restarts = restarts_.restarts();
  // A death not counted yet (a call is about to) is the latest; else the policy's (a failed restart's reason).
  status.last_death = worker_ && worker_->is_dead() && !death_noted_ ? worker_->death_reason() : restarts_.last_death();
  status.quarantined = restarts_.quarantined();
  status.quarantine_reason = restarts_.quarantine_reason();
  status.sandbox_denials = sandbox_denials_.load(std::memory_order_relaxed);
  status.call_budget = call_budget_;
  return status;
}

int ProcessSkillLibrary::worker_pid_for_test() const {
  std::lock_guard lock(mutex_);
  return worker_ ? worker_->pid() : 0;
}

}  // namespace passepartout
