// The skill worker's serving loop: one thread per lane, each reading a
// request frame, calling the skill's hook, and writing the reply; the
// skill's log lines travel as frames on the lane of the call that wrote them.
// Before any lane thread starts, the worker sandboxes itself
// (isolation/worker_sandbox.hpp); the system calls the sandbox denied during
// a call travel as a denial frame before its reply.
#include "isolation/skill_worker.hpp"

#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/utf8.hpp"
#include "isolation/worker_sandbox.hpp"
#include "skills/host_api.hpp"
#include "skills/isolated_skill.hpp"
#include "skills/skill_loader.hpp"
#include "skills/worker_channel.hpp"
#include "skills/worker_process.hpp"

namespace passepartout {
namespace {

struct WorkerArguments {
  std::string name;
  std::string version;
  std::string abi;
  std::filesystem::path library;
  std::filesystem::path manifest;
  std::string sha256;
  std::size_t lanes = 1;
  SandboxSpec sandbox;
  bool check_permissions = true;
  bool never_unload = false;
};

std::optional<WorkerArguments> parse_arguments(int argc, char** argv) {
  WorkerArguments out;
  for (int i = 2; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--no-permission-check") {
      out.check_permissions = false;
      continue;
    }
    if (flag == "--never-unload") {
      out.never_unload = true;
      continue;
    }
    if (flag == "--network") {
      out.sandbox.network = true;
      continue;
    }
    if (flag == "--processes") {
      out.sandbox.processes = true;
      continue;
    }
    if (i + 1 >= argc) return std::nullopt;
    const std::string value = argv[++i];
    if (flag == "--name") {
      out.name = value;
    } else if (flag == "--version") {
      out.version = value;
    } else if (flag == "--abi") {
      out.abi = value;
    } else if (flag == "--library") {
      out.library = value;
    } else if (flag == "--manifest") {
      out.manifest = value;
    } else if (flag == "--sha256") {
      out.sha256 = value;
    } else if (flag == "--read") {
      out.sandbox.files.emplace_back(value);
    } else if (flag == "--require") {
      out.sandbox.require.push_back(value);
    } else if (flag == "--lanes" || flag == "--memory" || flag == "--open-files" || flag == "--cpu-seconds") {
      std::uint64_t number = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), number);
      if (error != std::errc() || end != value.data() + value.size()) return std::nullopt;
      if (flag == "--lanes") {
        out.lanes = static_cast<std::size_t>(number);
      } else if (flag == "--memory") {
        out.sandbox.memory_bytes = number;
      } else if (flag == "--open-files") {
        out.sandbox.open_files = number;
      } else {
        out.sandbox.cpu_seconds = number;
      }
    } else {
      return std::nullopt;
    }
  }
  if (out.name.empty() || out.library.empty() || out.lanes == 0 || out.lanes > 64) return std::nullopt;
  return out;
}

// What the skill sees; the lane of the call running on this thread, for its log lines.
struct Worker {
  std::string load_error;
  std::optional<SkillLoader> loader;
  std::optional<SkillLoader::MappedLibrary> mapped;
  pp_host_api host{};
  pp_self self;
  Value config;  // what create was given; lives until destroy
  // Set by create on one lane, read by hooks on every lane (the host calls
  // them only after create answered; atomic so that order is visible to tools too).
  std::atomic<void*> instance{nullptr};
  std::string protections;  // the sandbox's report, logged with the hello reply
};

Worker* g_worker = nullptr;
thread_local int t_lane_fd = -1;
thread_local std::uint64_t t_request = 0;

void forward_log(pp_self* /*self*/, pp_log_level level, const char* message, size_t len) {
  const std::string_view text = message == nullptr ? std::string_view() : std::string_view(message, len);
  if (t_lane_fd < 0) return;  // not inside a call: nobody to tell
  Value line = Value::list(
      {Value::integer(level), Value::string(is_valid_utf8(text) ? text : "(log line with invalid UTF-8 dropped)")});
  (void)write_frame(t_lane_fd, FrameKind::log, t_request, line, no_deadline());
}

[[noreturn]] void out_of_memory() {
  static constexpr char kMessage[] = "skill worker: an allocation failed under the memory limit\n";
  (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);
  ::_exit(kWorkerMemoryLimitStatus);
}

// A skill that calls exit(N) ends its worker with status N, at once. Without
// this, exit() would run the static destructors (the worker's, the library's)
// while other lanes still serve calls, and a lane that then found its state
// gone could end the process first, with a status of its own. Registered after
// the library is mapped, so it runs before the handlers registered earlier.
void exit_now(int status, void* /*unused*/) { ::_exit(status); }

// The system calls the sandbox denied since the last drain, as a denial
// frame on the lane of the call that just ran (before its reply).
void send_denials(int fd, std::uint64_t request) {
  const std::vector<int> denied = drain_sandbox_denials();
  if (denied.empty()) return;
  std::vector<Value> names;
  names.reserve(denied.size());
  for (const int number : denied) names.push_back(Value::string(syscall_name(number)));
  (void)write_frame(fd, FrameKind::denial, request, Value::list(std::span<const Value>(names)), no_deadline());
}

Value reply(pp_status status, const pp_call& call, std::initializer_list<Value> more = {}) {
  std::vector<Value> items{Value::integer(status), Value::string(status == PP_OK ? std::string() : call.error)};
  items.insert(items.end(), more.begin(), more.end());
  return Value::list(std::span<const Value>(items));
}

Value nullable(const pp_value* handle) { return from_handle(handle); }

Value describe(const Worker& worker) {
  if (!worker.mapped || !worker.load_error.empty())
    return Value::list({Value::integer(PP_ERROR), Value::string(worker.load_error)});
  const SkillTable& table = worker.mapped->table;
  const pp_skill_api& hooks = table.hooks;
  std::uint32_t mask = 0;
  if (hooks.trigger != nullptr) mask |= kHookTrigger;
  if (hooks.prompt != nullptr) mask |= kHookPrompt;
  if (hooks.gate != nullptr) mask |= kHookGate;
  if (hooks.self_test != nullptr) mask |= kHookSelfTest;
  if (hooks.export_state != nullptr) mask |= kHookExportState;
  if (hooks.import_state != nullptr) mask |= kHookImportState;
  if (hooks.call_tool != nullptr) mask |= kHookCallTool;
  if (hooks.act != nullptr) mask |= kHookAct;
  if (hooks.observe != nullptr) mask |= kHookObserve;
  if (hooks.error_policy != nullptr) mask |= kHookErrorPolicy;
  if (hooks.mandate != nullptr) mask |= kHookMandate;
  if (hooks.select_model != nullptr) mask |= kHookSelectModel;
  auto text = [](const std::string& s, bool empty_is_null) {
    return s.empty() && empty_is_null ? Value() : Value::string(s);
  };
  std::vector<Value> tools;
  for (const SkillTool& tool : table.tools) {
    tools.push_back(
        Value::list({Value::string(tool.name), text(tool.description, true), text(tool.parameters_json, true)}));
  }
  std::vector<Value> actuators;
  for (const std::string& actuator : table.actuators) actuators.push_back(Value::string(actuator));
  std::vector<Value> specs;  // (description payload-json) per actuator; NIL when none is described
  bool described = false;
  for (const SkillActuatorSpec& spec : table.actuator_specs) {
    described = described || spec.described() || !spec.description.empty();
    specs.push_back(Value::list({text(spec.description, true), text(spec.payload_json, true)}));
  }
  std::vector<Value> keys;
  for (const SkillConfigKey& key : table.config_keys) {
    keys.push_back(Value::list(
        {Value::string(key.name), text(key.type, true), text(key.default_value, true), text(key.description, true)}));
  }
  return Value::list({Value::integer(PP_OK), Value::string(""), Value::string(hooks.name), Value::string(hooks.version),
                      Value::integer(hooks.abi_major), Value::integer(hooks.abi_minor), Value::integer(mask),
                      Value::list(std::span<const Value>(tools)), Value::list(std::span<const Value>(actuators)),
                      Value::list(std::span<const Value>(keys)),
                      described ? Value::list(std::span<const Value>(specs)) : Value()});
}

// The request's items when it has `count`; nullopt otherwise (a host bug: the worker stops).
std::optional<std::span<const Value>> args(const Value& request, std::size_t count) {
  const auto items = request.items();
  if (items.size() != count) return std::nullopt;
  return items;
}

std::optional<Value> serve(Worker& worker, const Frame& request) {
  const pp_skill_api& api = worker.mapped->table.hooks;
  pp_call call;
  switch (request.kind) {
    case FrameKind::create: {
      auto a = args(request.value, 1);
      if (!a || worker.instance.load() != nullptr) return std::nullopt;
      worker.config = (*a)[0];
      void* instance = api.create(&worker.host, &worker.self, to_handle(worker.config), &call);
      if (instance == nullptr) return reply(PP_ERROR, call);
      worker.instance = instance;
      return reply(PP_OK, call);
    }
    case FrameKind::destroy:
      if (void* instance = worker.instance.exchange(nullptr); instance != nullptr) api.destroy(instance);
      return reply(PP_OK, call);
    default:
      break;
  }
  void* self = worker.instance.load();
  if (self == nullptr) return std::nullopt;  // the host calls hooks only after create
  switch (request.kind) {
    case FrameKind::trigger: {
      auto a = args(request.value, 1);
      if (!a || api.trigger == nullptr) return std::nullopt;
      std::int32_t triggered = 0;
      const pp_status status = api.trigger(self, &call, to_handle((*a)[0]), &triggered);
      return reply(status, call, {Value::boolean(triggered != 0)});
    }
    case FrameKind::prompt: {
      auto a = args(request.value, 1);
      if (!a || api.prompt == nullptr) return std::nullopt;
      const pp_value* prompt = nullptr;
      const pp_status status = api.prompt(self, &call, to_handle((*a)[0]), &prompt);
      return reply(status, call, {nullable(prompt)});
    }
    case FrameKind::gate: {
      auto a = args(request.value, 2);
      if (!a || api.gate == nullptr) return std::nullopt;
      pp_verdict verdict{};
      const pp_status status = api.gate(self, &call, to_handle((*a)[0]), to_handle((*a)[1]), &verdict);
      return reply(status, call,
                   {Value::integer(verdict.kind), Value::integer(verdict.level), nullable(verdict.action),
                    nullable(verdict.reason)});
    }
    case FrameKind::self_test: {
      if (api.self_test == nullptr) return std::nullopt;
      return reply(api.self_test(self, &call), call);
    }
    case FrameKind::export_state: {
      if (api.export_state == nullptr) return std::nullopt;
      const pp_value* state = nullptr;
      const pp_status status = api.export_state(self, &call, &state);
      return reply(status, call, {nullable(state)});
    }
    case FrameKind::import_state: {
      auto a = args(request.value, 1);
      if (!a || api.import_state == nullptr) return std::nullopt;
      return reply(api.import_state(self, &call, to_handle((*a)[0])), call);
    }
    case FrameKind::call_tool:
    case FrameKind::act: {
      auto a = args(request.value, 3);
      if (!a || !(*a)[0].is_integer() || (*a)[0].as_integer() < 0) return std::nullopt;
      const auto index = static_cast<std::size_t>((*a)[0].as_integer());
      const pp_value* result = nullptr;
      pp_status status = PP_ERROR;
      if (request.kind == FrameKind::call_tool) {
        if (api.call_tool == nullptr || index >= worker.mapped->table.tools.size()) return std::nullopt;
        status = api.call_tool(self, &call, index, to_handle((*a)[1]), to_handle((*a)[2]), &result);
      } else {
        if (api.act == nullptr || index >= worker.mapped->table.actuators.size()) return std::nullopt;
        status = api.act(self, &call, index, to_handle((*a)[1]), to_handle((*a)[2]), &result);
      }
      return reply(status, call, {nullable(result)});
    }
    case FrameKind::observe: {
      auto a = args(request.value, 1);
      if (!a || api.observe == nullptr) return std::nullopt;
      return reply(api.observe(self, &call, to_handle((*a)[0])), call);
    }
    case FrameKind::mandate: {
      auto a = args(request.value, 1);
      if (!a || api.mandate == nullptr) return std::nullopt;
      const pp_value* line = nullptr;
      const pp_status status = api.mandate(self, &call, to_handle((*a)[0]), &line);
      return reply(status, call, {nullable(line)});
    }
    case FrameKind::select_model: {
      auto a = args(request.value, 2);
      if (!a || api.select_model == nullptr) return std::nullopt;
      pp_model_choice choice{};
      const pp_status status = api.select_model(self, &call, to_handle((*a)[0]), to_handle((*a)[1]), &choice);
      return reply(
          status, call,
          {Value::integer(choice.kind), Value::integer(choice.flags), nullable(choice.model), nullable(choice.reason)});
    }
    case FrameKind::error_policy: {
      auto a = args(request.value, 2);
      if (!a || api.error_policy == nullptr) return std::nullopt;
      pp_error_choice choice{};
      const pp_status status = api.error_policy(self, &call, to_handle((*a)[0]), to_handle((*a)[1]), &choice);
      return reply(status, call, {Value::integer(choice.kind), nullable(choice.text)});
    }
    default:
      return std::nullopt;
  }
}

[[noreturn]] void stop(const char* why) {
  std::fprintf(stderr, "skill worker: %s\n", why);
  std::fflush(stderr);
  ::_exit(why == nullptr ? 0 : 2);
}

void serve_lane(Worker& worker, int fd) {
  t_lane_fd = fd;
  for (;;) {
    FrameOrError read = read_frame(fd, no_deadline());
    // The host closed the channel: it is done with us (or gone). Leave at
    // once: the library's destructors are not worth the host's wait. Always
    // _exit() once sandboxed: LeakSanitizer's exit check cannot stop the
    // world in the sandbox (it would end an ASan build's worker with status 1).
    if (!read.frame && read.error.fault == ChannelFault::closed) ::_exit(0);
    if (!read.frame) stop(("the host wrote garbage on the channel: " + read.error.message).c_str());
    t_request = read.frame->id;
    std::optional<Value> answer;
    if (read.frame->kind == FrameKind::hello) {
      if (!worker.protections.empty()) {
        forward_log(&worker.self, PP_LOG_INFO, worker.protections.data(), worker.protections.size());
      }
      answer = describe(worker);
    } else if (worker.mapped && worker.load_error.empty()) {
      answer = serve(worker, *read.frame);
      send_denials(fd, read.frame->id);
    }
    if (!answer) stop("the host sent a request out of order or of the wrong shape");
    if (auto error = write_frame(fd, FrameKind::reply, read.frame->id, *answer, no_deadline())) ::_exit(0);
  }
}

}  // namespace

int run_skill_worker(int argc, char** argv) {
  auto parsed = parse_arguments(argc, argv);
  if (!parsed) {
    std::fprintf(stderr,
                 "skill-worker: not meant to be run by hand; the daemon starts it for skills whose manifest says "
                 "'isolation: process' or nothing (the default)\n");
    return 2;
  }
  for (std::size_t i = 0; i < parsed->lanes; ++i) {
    struct stat info {};
    if (::fstat(static_cast<int>(3 + i), &info) != 0 || !S_ISSOCK(info.st_mode)) {
      std::fprintf(stderr, "skill-worker: fd %zu is not a channel; not meant to be run by hand\n", 3 + i);
      return 2;
    }
  }
  std::signal(SIGPIPE, SIG_IGN);

  static Worker worker;
  g_worker = &worker;
  worker.self.skill_name = parsed->name;
  worker.host = host_api();
  worker.host.log = forward_log;

  // The manifest as far as loading needs it, pinned to the bytes the host checked.
  SkillManifest manifest;
  manifest.path = parsed->manifest;
  manifest.name = parsed->name;
  manifest.library = parsed->library.filename().string();
  manifest.never_unload = parsed->never_unload;
  manifest.sha256 = parsed->sha256;
  manifest.isolation = Isolation::in_process;
  auto version = SemVer::parse(parsed->version);
  auto abi = AbiVersion::parse(parsed->abi);
  if (!version || !abi) {
    worker.load_error = "skill '" + parsed->name + "': the worker was given a bad version or ABI";
  } else {
    manifest.version = *version;
    manifest.abi = *abi;
    LoaderOptions options;
    options.plugin_dir = parsed->library.parent_path();
    options.check_permissions = parsed->check_permissions;
    auto loader = SkillLoader::create(std::move(options));
    if (!loader) {
      worker.load_error = loader.error().message;
    } else {
      worker.loader.emplace(std::move(*loader));
      auto mapped = worker.loader->map(manifest);
      if (mapped) {
        worker.mapped.emplace(std::move(*mapped));
      } else {
        worker.load_error = mapped.error().message;
      }
    }
  }
  ::on_exit(exit_now, nullptr);

  // The sandbox, while this is the process's one thread (Landlock binds only
  // the calling thread) and after the dynamic loader opened what it needed.
  // A worker whose sandbox failed serves nothing: its hello reply carries the
  // failure, and the host refuses the load with it.
  std::set_new_handler(out_of_memory);
  if (worker.mapped) {
    auto sandboxed = apply_worker_sandbox(parsed->sandbox);
    if (sandboxed) {
      worker.protections = sandboxed->description;
    } else {
      worker.load_error =
          "skill '" + parsed->name + "': its process could not be sandboxed: " + sandboxed.error().message;
    }
  }

  // Lane 0 is this thread; the others are named "lane N" (what `top -H` and
  // /proc/PID/task/TID/comm show), the name set by each thread itself, which
  // the sandbox allows.
  std::vector<std::thread> lanes;
  for (std::size_t i = 1; i < parsed->lanes; ++i) {
    lanes.emplace_back([i, fd = static_cast<int>(3 + i)] {
      const std::string name = "lane " + std::to_string(i);
      ::pthread_setname_np(::pthread_self(), name.c_str());
      serve_lane(*g_worker, fd);
    });
  }
  serve_lane(worker, 3);
  return 0;  // not reached: serve_lane leaves with _exit
}

}  // namespace passepartout
