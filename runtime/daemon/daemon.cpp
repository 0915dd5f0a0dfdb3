// The daemon: boot in the seed's order, signals, systemd notifications and
// the orderly stop. Requests are routed by DaemonHandler (daemon_handler.hpp).
#include "daemon/daemon.hpp"

#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

// GCC 12 reports a "potential null pointer dereference" inside Asio's
// scheduler once it is inlined here (a false positive, as in server.cpp);
// silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#pragma GCC diagnostic pop

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/crash_context.hpp"
#include "base/digest.hpp"
#include "base/duration_text.hpp"
#include "base/executor.hpp"
#include "base/file_io.hpp"
#include "base/log.hpp"
#include "base/log_fields.hpp"
#include "base/utf8.hpp"
#include "daemon/daemon_handler.hpp"
#include "daemon/decision_shipper.hpp"
#include "daemon/fleet_runner.hpp"
#include "daemon/mcp_hub.hpp"
#include "daemon/metrics.hpp"
#include "daemon/metrics_listener.hpp"
#include "daemon/operator_handler.hpp"
#include "daemon/pg_approvals.hpp"
#include "daemon/pg_budget.hpp"
#include "daemon/provider_status.hpp"
#include "daemon/rollout_agent.hpp"
#include "daemon/server.hpp"
#include "daemon/state_db.hpp"
#include "daemon/systemd_notify.hpp"
#include "daemon/token_file.hpp"
#include "daemon/unattended_approvals.hpp"
#include "memory/memory_store.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/credential_rule.hpp"
#include "pipeline/decision_log.hpp"
#include "pipeline/gate_watchdog.hpp"
#include "pipeline/heartbeat.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/rule_book.hpp"
#include "providers/budget.hpp"
#include "providers/cascade.hpp"
#include "providers/http_client.hpp"
#include "providers/http_provider.hpp"
#include "providers/offline_provider.hpp"
#include "providers/scripted_provider.hpp"
#include "skills/audit_log.hpp"
#include "skills/crash_record.hpp"
#include "skills/sandbox_spec.hpp"
#include "skills/skill_host.hpp"
#include "skills/skill_watcher.hpp"

namespace passepartout {

namespace fs = std::filesystem;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr std::string_view kComponent = "daemon";
constexpr std::size_t kIoThreads = 1;  // signals and the metrics endpoint
// The identity file's text for the prompt's IDENTITY (seed D8): the file
// --identity names (unreadable: the start fails), else the default one when
// it exists. At most kMaxIdentityBytes are kept, cut on a character's
// boundary, with a warning.
constexpr std::size_t kMaxIdentityBytes = std::size_t{16} * 1024;
// How long boot waits for the state database's first answer (the schema's
// version) before it serves without it.
constexpr std::chrono::milliseconds kStateDbWait{10000};
// At shutdown, how long the decisions not shipped yet may take (the rest go on the next start).
constexpr std::chrono::milliseconds kShipOnStop{2000};

// The usage ledger (<state dir>/usage.sqlite3) with the config's caps and
// the prices. A price table that does not read, or a ledger that does not
// open while caps are set, stops the start (the caps would not hold); with no
// caps a ledger that does not open is a warning, and calls go unrecorded.
Result<std::shared_ptr<Budget>> open_budget(const DaemonConfig& c) {
  PriceTable prices = PriceTable::builtin();
  if (!c.price_table.empty()) {
    auto read = PriceTable::read_litellm(c.price_table.string());
    if (!read) return fail(read.error().code, "--price-table " + read.error().message);
    prices = std::move(*read);
    log_message(LogLevel::info, kComponent, "prices: {} models ({})", prices.size(), c.price_table.string());
  }
  const std::size_t caps = c.budget.caps.size();
  BudgetConfig config = c.budget;
  config.unmetered = {"scripted", "offline"};  // in-process answers: no cost, no usage
  auto budget = Budget::open(usage_file(c.state_dir), std::move(config), std::move(prices));
  if (!budget) {
    if (caps > 0) return fail(budget.error().code, "the budget's ledger does not open: " + budget.error().message);
    log_message(LogLevel::warn, kComponent, "usage is not recorded: {}", budget.error().message);
    return std::shared_ptr<Budget>();
  }
  for (const BudgetCap& cap : c.budget.caps) {
    log_message(LogLevel::info, kComponent, "budget: {} at most {}{}", cap.name,
                budget_amount_text(cap.unit, cap.limit),
                cap.provider.empty() ? std::string() : " (" + cap.provider + ")");
  }
  return std::move(*budget);
}

Result<std::string> read_identity(const DaemonConfig& c) {
  std::error_code missing;
  if (!c.identity_explicit && !std::filesystem::exists(c.identity_file, missing)) return std::string();
  auto text = read_bounded_file(c.identity_file, 64 * kMaxIdentityBytes);
  if (!text) {
    return fail(text.error().code, "--identity " + c.identity_file.string() + ": " + text.error().message);
  }
  if (!is_valid_utf8(*text)) {
    return fail(ErrorCode::invalid_input, "--identity " + c.identity_file.string() + ": is not UTF-8 text");
  }
  if (text->size() > kMaxIdentityBytes) {
    std::size_t cut = kMaxIdentityBytes;
    while (cut > 0 && (static_cast<unsigned char>((*text)[cut]) & 0xC0U) == 0x80U) --cut;
    log_message(LogLevel::warn, kComponent, "identity {}: {} bytes, the first {} are used", c.identity_file.string(),
                text->size(), cut);
    text->resize(cut);
  }
  while (!text->empty() && (text->back() == '\n' || text->back() == '\r' || text->back() == ' ')) text->pop_back();
  if (!text->empty()) log_message(LogLevel::info, kComponent, "identity: {}", c.identity_file.string());
  return std::move(*text);
}

// The connections' loop: reading, decoding and writing frames, never a
// pipeline step, so a skill stuck on every pipeline loop cannot keep an
// operator's request from being read and answered (docs/architecture.md).
constexpr std::size_t kConnectionThreads = 1;
constexpr std::size_t kPipelineThreads = 2;
constexpr std::size_t kBlockingThreads = 2;

std::string version_text() { return PASSEPARTOUT_VERSION; }

std::string endpoint_text(const std::string& address, std::uint16_t port) {
  return address.find(':') != std::string::npos ? "[" + address + "]:" + std::to_string(port)
                                                : address + ":" + std::to_string(port);
}

// Descriptors kept for everything but connections: skills' libraries,
// SQLite, the log, commands' pipes, the listeners.
constexpr std::size_t kReservedDescriptors = 128;

// The TCP connection limit the descriptor limit allows: the soft limit is
// raised to the hard one first; an explicit --max-connections it cannot
// serve is an error that says what to raise.
Result<std::size_t> connection_limit(const DaemonConfig& c) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return c.max_connections != 0 ? c.max_connections : 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  const auto descriptors = static_cast<std::size_t>(std::min<rlim_t>(limit.rlim_cur, 1u << 20));
  const std::size_t needed_besides = kReservedDescriptors + c.max_unix_connections;
  const std::size_t room = descriptors > needed_besides ? descriptors - needed_besides : 0;
  if (c.max_connections != 0) {
    if (c.max_connections > room) {
      return fail(ErrorCode::invalid_input, "--max-connections " + std::to_string(c.max_connections) + " needs about " +
                                                std::to_string(c.max_connections + needed_besides) +
                                                " descriptors, but the limit is " + std::to_string(descriptors) +
                                                ": raise it (LimitNOFILE= in the systemd unit, ulimit -n) or "
                                                "lower --max-connections");
    }
    return c.max_connections;
  }
  if (room < 16) {
    return fail(ErrorCode::invalid_input, "the descriptor limit is " + std::to_string(descriptors) +
                                              ", too few to serve connections: raise it (LimitNOFILE=, ulimit -n)");
  }
  const std::size_t chosen = std::min<std::size_t>(1024, room);
  log_message(LogLevel::info, kComponent,
              "connections: up to {} over TCP ({} per peer) and {} on the Unix socket; descriptor limit {}", chosen,
              c.max_connections_per_peer, c.max_unix_connections, descriptors);
  return chosen;
}

}  // namespace

bool is_loopback_address(std::string_view address) {
  if (address == "localhost") return true;
  const std::string text(address);
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

// Members are declared in the order they are built; the destructor's
// explicit teardown (shutdown()) runs first, then members go in reverse.
// NOLINTNEXTLINE(clang-analyzer-optin.performance.Padding): build order over size, and there is one Impl
struct Daemon::Impl {
  DaemonConfig config;
  SystemdNotifier notifier;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  asio::signal_set signals{io};

  MemoryStore memory;
  bool memory_saves = true;  // false after a load failure: never overwrite a file we could not read
  bool memory_ok = true;
  std::unique_ptr<ApprovalStore> approvals;
  std::unique_ptr<RuleBook> rules;  // the operator's rules; outlives the pipeline, which reads them
  std::string config_digest;        // of the config files' text, last read for their MCP servers
  // With a state database: ships the decision log's files; outlives the log, which nudges it.
  std::unique_ptr<DecisionShipper> shipper;
  // Outlives the pipeline: a signal's run may still hand it a record as it ends.
  std::unique_ptr<DecisionLog> decisions;
  std::unique_ptr<SkillHost> skills;
  bool audit_ok = true;
  SkillProblems problems;
  std::size_t tcp_connection_limit = 0;  // from the settings and the descriptor limit (boot)

  // Before the pipeline (it holds references to them); stopped explicitly.
  EventLoops pool{kPipelineThreads, config.idle_poll};
  // The server's connections; stopped after the server.
  EventLoops connection_loops{kConnectionThreads, config.idle_poll};
  std::unique_ptr<HttpClients> http;  // the real providers' transfers, on the loops; stopped before them
  ThreadPool blocking{kBlockingThreads};
  ThreadPool control{1};
  Cascade cascade;
  std::shared_ptr<Budget> budget;  // the usage ledger and the caps; null when the ledger would not open
  // The MCP servers, on a loop of their own: a gate that holds every pipeline
  // loop holds no server, and `mcp list` is answered meanwhile. The hub
  // outlives the pipeline, which calls it.
  EventLoops mcp_loop{1, config.idle_poll};
  std::unique_ptr<McpHub> mcp;
  // The state database a fleet shares (--state-db); null without one.
  std::unique_ptr<StateDb> state_db;
  std::unique_ptr<FleetRunner> fleet;      // with state_db: runs the fleet's approved actions that are this node's
  std::unique_ptr<RolloutAgent> rollouts;  // with state_db: makes this node what the fleet's skill rollouts ask
  std::unique_ptr<Pipeline> pipeline;
  std::unique_ptr<Heartbeat> heartbeat;
  std::unique_ptr<SkillWatcher> watcher;
  std::unique_ptr<OperatorHandler> operators;
  // What the wire asks for; set before the server starts (which is when the
  // operator requests that ask it whether a session is open can come).
  std::shared_ptr<DaemonHandler> wire_handler;
  // Set once `operators` exists: SIGHUP can arrive while boot() still runs.
  std::atomic<OperatorHandler*> operators_ready{nullptr};
  std::unique_ptr<Server> server;
  // Set once `server` is. The metrics endpoint starts before the server, and
  // an operator request can arrive on its socket before Server::start has
  // returned: both read the server through this, never `server` itself.
  std::atomic<Server*> server_ready{nullptr};
  // GET /metrics, /healthz, /readyz, on `io` (signals only: nothing of a
  // request's path); after what they read, so they go first.
  std::unique_ptr<DaemonMetrics> metrics;
  std::unique_ptr<MetricsListener> metrics_listener;
  std::atomic<std::uint16_t> metrics_port{0};                     // 0: no endpoint
  std::atomic<MetricsListener*> metrics_listener_ready{nullptr};  // set once `metrics_listener` is
  std::atomic<bool> stopping{false};

  mutable std::mutex health_mutex;  // guards health
  HealthReport health;

  std::mutex stop_mutex;  // guards stop_requested, stop_reason
  std::condition_variable stop_wanted;
  bool stop_requested = false;
  std::string stop_reason;
  bool shut_down = false;  // serve()'s thread only

  explicit Impl(DaemonConfig c) : config(std::move(c)) {}
  // A destructor must not throw: what shutdown() throws is logged instead.
  ~Impl() {
    try {
      shutdown();
    } catch (const std::exception& error) {
      log_message(LogLevel::error, kComponent, "stopping the daemon failed: {}", error.what());
    } catch (...) {
      log_message(LogLevel::error, kComponent, "stopping the daemon failed");
    }
  }

  void run_io() {
    work.emplace(io.get_executor());
    for (std::size_t i = 0; i < kIoThreads; ++i) {
      io_threads.emplace_back([this] {
        for (;;) {
          try {
            io.run();
            return;
          } catch (const std::exception& e) {
            log_message(LogLevel::error, kComponent, "io thread: {}", e.what());
          }
        }
      });
    }
  }

  void watch_signals() {
    signals.add(SIGTERM);
    signals.add(SIGINT);
    signals.add(SIGHUP);
    wait_signal();
  }

  void wait_signal() {
    signals.async_wait([this](const boost::system::error_code& error, int number) {
      if (error) return;  // cancelled at shutdown
      if (number == SIGHUP) {
        log_message(LogLevel::info, kComponent, "SIGHUP: rescanning {}", config.manifest_dir.string());
        rescan("sighup");
        reload_rules("sighup");
        if (auto reloaded = reload_mcp(); !reloaded) {
          log_message(LogLevel::error, kComponent, "SIGHUP: MCP servers not reloaded: {}", reloaded.error().message);
        }
      } else {
        request_stop(number == SIGTERM ? "SIGTERM received" : "SIGINT received");
      }
      wait_signal();
    });
  }

  void rescan(std::string requester) {
    OperatorHandler* handler = operators_ready.load(std::memory_order_acquire);
    if (handler == nullptr) {
      log_message(LogLevel::warn, kComponent, "rescan ignored: the skills are still booting");
      return;
    }
    handler->handle(Value::plist({{"TYPE", Value::keyword("OPERATOR")}, {"COMMAND", Value::keyword("RESCAN")}}),
                    std::move(requester), [](const Value& response) {
                      const Value& message = response.path({"PAYLOAD", "MESSAGE"});
                      log_message(is_ok_response(response) ? LogLevel::info : LogLevel::warn, kComponent, "rescan: {}",
                                  message.text());
                    });
  }

  // Reads the MCP servers' configuration again and applies it: servers that
  // did not change keep serving. Returns how many are configured.
  Result<std::size_t> reload_mcp() {
    if (!mcp) return fail(ErrorCode::refused, "the daemon is still starting");
    auto servers = read_mcp_configuration(config.config_file, config.mcp_config_file, config.env);
    if (!servers) return fail(servers.error().code, servers.error().message);
    const std::size_t count = servers->size();
    mcp->apply(std::move(*servers));
    return count;
  }

  // Reads the rules file again (the watcher, SIGHUP); a change is logged and
  // audited, a file that no longer reads keeps the rules in force.
  void reload_rules(const std::string& requester) {
    if (!rules) return;
    auto reloaded = rules->reload();
    SkillChange entry;
    entry.requester = requester;
    entry.action = "rules-reload";
    entry.skill = rules->file().string();
    if (!reloaded) {
      log_message(LogLevel::error, kComponent, "rules: {} not reloaded, the rules in force stay: {}",
                  rules->file().string(), reloaded.error().message);
      entry.outcome = "failed";
      entry.error = reloaded.error().message;
    } else if (!*reloaded) {
      return;  // unchanged (our own write, say)
    } else {
      const RuleBook::Counts counts = rules->counts();
      entry.outcome = "ok";
      entry.details = std::to_string(counts.deny) + " deny, " + std::to_string(counts.ask) + " ask, " +
                      std::to_string(counts.allow) + " allow";
      log_message(LogLevel::info, kComponent, "rules: {} reloaded ({})", rules->file().string(), entry.details);
    }
    if (skills) skills->record_external(std::move(entry));
  }

  // The text of the config files that name MCP servers, digested: the
  // watcher reloads the servers only when it changed.
  std::string config_files_digest() const {
    std::string text;
    for (const fs::path& file : {config.config_file, config.mcp_config_file}) {
      if (file.empty()) continue;
      auto read = read_bounded_file(file, std::size_t{16} * 1024 * 1024);
      text += read ? sha256_hex(*read) : std::string("unreadable");
    }
    return sha256_hex(text);
  }

  // --unattended-approvals deny-after: every second, approvals whose time
  // has come undecided are denied, each once: its session and the decision
  // log are told. Stops with the pool.
  void schedule_unattended_sweep() {
    pool.post_after(std::chrono::seconds(1), [this] {
      blocking.post([this] {
        deny_unattended(*approvals, *pipeline, decisions.get(), config.deny_unattended_after);
        schedule_unattended_sweep();
      });
    });
  }
  void request_stop(std::string_view why) {
    std::lock_guard lock(stop_mutex);
    if (stop_requested) return;
    stop_requested = true;
    stop_reason = std::string(why);
    stop_wanted.notify_all();
  }

  // A probe on every event loop; the last to run it tells systemd all is
  // well and schedules the next round. A loop that is stuck never runs its
  // probe, the notifications stop, and systemd restarts the daemon, even
  // while the other loops still serve. Ends when the pool stops.
  void tick_watchdog(std::chrono::microseconds period) {
    auto left = std::make_shared<std::atomic<std::size_t>>(pool.size());
    pool.post_to_each([this, left, period] {
      if (left->fetch_sub(1, std::memory_order_acq_rel) != 1) return;
      notifier.notify("WATCHDOG=1");
      pool.post_after(period, [this, period] { tick_watchdog(period); });
    });
  }

  // Seed H2/H3: UNHEALTHY when nothing can verify an action (no gate loaded,
  // or the manifest folder unreadable); DEGRADED when a skill is disabled, a
  // manifest did not parse, or memory, approvals or the audit log are not
  // usable; HEALTHY otherwise.
  HealthReport evaluate_health() const {
    const auto snapshot = skills->snapshot();
    HealthReport report;
    report.checked = true;
    if (snapshot->gates().empty()) {
      report.status = "UNHEALTHY";
    } else if (!problems.empty() || !memory_ok || approvals == nullptr || !audit_ok) {
      report.status = "DEGRADED";
    } else {
      report.status = "HEALTHY";
    }
    return report;
  }

  void refresh_health() {
    HealthReport next = evaluate_health();
    std::lock_guard lock(health_mutex);
    if (next.status != health.status && health.checked) {
      log_message(next.status == "HEALTHY" ? LogLevel::info : LogLevel::warn, kComponent, "health is now {} (was {})",
                  next.status, health.status);
    }
    health = std::move(next);
  }

  HealthReport current_health() const {
    std::lock_guard lock(health_mutex);
    return health;
  }

  // /readyz: "" when ready (skills loaded, and a model provider configured
  // or offline chosen on purpose), else why not, in one line.
  std::string not_ready() const {
    if (stopping.load(std::memory_order_relaxed)) return "not ready: the daemon is stopping";
    if (skills->snapshot()->slots().empty()) {
      return "not ready: no skill is loaded from " + config.manifest_dir.string() +
             " (see `passepartout skills check`)";
    }
    if (config.offline_by_default) {
      return "not ready: no model provider is configured (set one up, or choose --provider offline)";
    }
    return {};
  }

  ServerCounters server_counters() const {
    const Server* s = server_ready.load(std::memory_order_acquire);
    return s != nullptr ? s->counters() : ServerCounters{};
  }

  MetricsListenerCounters metrics_counters() const {
    const MetricsListener* listener = metrics_listener_ready.load(std::memory_order_acquire);
    return listener != nullptr ? listener->counters() : MetricsListenerCounters{};
  }

  std::string metrics_url() const {
    const std::uint16_t port = metrics_port.load(std::memory_order_relaxed);
    return port == 0 ? std::string() : "http://127.0.0.1:" + std::to_string(port) + "/metrics";
  }

  Result<void> serve_metrics();

  Result<void> boot();
  void diagnostics();
  Result<void> listen();
  bool save_memory(std::string_view why);
  int shutdown();
  [[noreturn]] void exit_with_stuck_hooks(const std::vector<RunningHookOf>& stuck);
};

Result<void> Daemon::Impl::boot() {
  const DaemonConfig& c = config;
  if (c.listen_tcp && !is_loopback_address(c.listen_address) && c.tcp_auth != DaemonConfig::TcpAuth::all) {
    return fail(ErrorCode::invalid_input, "refusing to listen on " + c.listen_address +
                                              ", which is not a loopback address, with --tcp-auth user-input: "
                                              "beyond loopback every TCP request needs the token (--tcp-auth all)");
  }
  // Before anything is loaded: a limit the descriptors cannot serve stops the start at once.
  auto connections = connection_limit(c);
  if (!connections) return fail(connections.error().code, connections.error().message);
  tcp_connection_limit = *connections;
  if (c.listen_tcp && c.tcp_auth == DaemonConfig::TcpAuth::user_input) {
    log_message(LogLevel::warn, kComponent,
                "--tcp-auth user-input: any local user may send user input over TCP without the token (raw "
                "actions, approvals and operator requests still need it)");
  }
  std::error_code ec;
  fs::create_directories(c.state_dir, ec);
  if (ec || !fs::is_directory(c.state_dir, ec)) {
    return fail(ErrorCode::io_error, "cannot create the state folder " + c.state_dir.string() + ": " + ec.message());
  }
  ::chmod(c.state_dir.c_str(), 0700);
  log_message(LogLevel::info, kComponent, "passepartout {} starting; state in {}", version_text(),
              c.state_dir.string());
  if (::geteuid() == 0) {
    log_message(LogLevel::warn, kComponent,
                "running as root: every skill runs with root's privileges (the shell runs its commands as an "
                "unprivileged user unless its manifest says allow_root: true); run the daemon as its own user, as "
                "scripts/passepartout.service does");
  }
  // Which protections a skill process gets on this machine (a layer the
  // kernel or the container refuses is named, with why).
  const SandboxCapabilities& sandbox = sandbox_capabilities();
  log_message(sandbox.seccomp && sandbox.landlock_abi > 0 ? LogLevel::info : LogLevel::warn, kComponent, "{}",
              describe(sandbox));

  // H6 (2): memory.
  memory.set_history_limit(c.memory_history_limit);
  if (auto loaded = memory.load(c.memory_file); !loaded) {
    memory_ok = false;
    memory_saves = false;
    log_message(LogLevel::error, kComponent,
                "memory not loaded, starting empty; it will not be saved over {} until that file is fixed or moved: {}",
                c.memory_file.string(), loaded.error().message);
  } else if (*loaded) {
    log_message(LogLevel::info, kComponent, "memory loaded from {} ({} objects)", c.memory_file.string(),
                memory.size());
  } else {
    log_message(LogLevel::info, kComponent, "no memory saved yet at {}", c.memory_file.string());
  }

  // deny-after: an approval lives no longer than that; the sweep tells it.
  const std::chrono::milliseconds lifetime = c.deny_unattended_after.count() > 0
                                                 ? std::min(c.approval_lifetime, c.deny_unattended_after)
                                                 : c.approval_lifetime;
  // With a state database the fleet shares its approvals; else they are the state folder's.
  if (!c.state_db.empty()) {
    state_db = std::make_unique<StateDb>(
        StateDb::Settings{c.state_db, c.state_db_shown, c.node_id, version_text(), c.fleet_lease / 3});
    if (auto connected = state_db->start(kStateDbWait); !connected)
      return fail(connected.error().code, connected.error().message);
  }
  const ApprovalOptions approval_options{
      lifetime, c.approval_retention, {}, c.max_pending_approvals, c.max_pending_approvals_per_session};
  if (auto store = state_db ? open_pg_approvals(state_db->client(), {c.node_id, c.fleet_lease}, approval_options)
                            : ApprovalStore::open(approvals_file(c.state_dir), approval_options);
      store) {
    approvals = std::move(*store);
  } else {
    log_message(LogLevel::error, kComponent, "approvals unavailable (actions that need one are refused): {}",
                store.error().message);
  }

  // The operator's rules: a file that does not read stops the start (its
  // deny rules would not be in force).
  auto book = RuleBook::open(c.rules_file);
  if (!book) {
    return fail(book.error().code,
                "the rules file does not read; fix it, or move it away to start without its "
                "rules: " +
                    book.error().message);
  }
  rules = std::move(*book);
  {
    const RuleBook::Counts counts = rules->counts();
    log_message(LogLevel::info, kComponent, "rules: {} ({} deny, {} ask, {} standing approvals)", c.rules_file.string(),
                counts.deny, counts.ask, counts.allow);
  }

  if (c.decision_log) {
    DecisionLogOptions log_options;
    log_options.folder = decisions_folder(c.state_dir);
    log_options.max_file_bytes = c.decision_log_file_bytes;
    log_options.max_files = c.decision_log_files;
    log_options.max_age = std::chrono::duration_cast<std::chrono::seconds>(c.decision_log_rotate);
    log_options.sample_passed = static_cast<std::uint32_t>(c.decision_log_sample);
    log_options.time_gates_every = static_cast<std::uint32_t>(c.decision_log_time_gates);
    log_options.buffer = c.decision_log_buffer;
    // In a fleet the files are a spool: shipped to the state database, kept until they are.
    if (state_db) {
      shipper = std::make_unique<DecisionShipper>(
          DecisionShipper::Options{.conninfo = c.state_db, .node = c.node_id, .folder = log_options.folder});
      log_options.unshipped = [s = shipper.get()](const std::filesystem::path& file) { return s->unshipped(file); };
      log_options.written = [s = shipper.get()] { s->nudge(); };
    }
    if (auto log = DecisionLog::open(std::move(log_options)); log) {
      decisions = std::move(*log);
      if (shipper) shipper->start();
    } else {
      log_message(LogLevel::error, kComponent, "decisions are not recorded: {}", log.error().message);
      shipper.reset();
    }
  }

  // H6 (3, 4): actuators and skills.
  SkillHostOptions host_options{
      c.manifest_dir,    c.plugin_dir, audit_file(c.state_dir), true, c.workspace, held_skills_file(c.state_dir),
      c.gate_timeout_max};
  GateWatchdog::set_budget(c.gate_timeout);
  host_options.call_budget = c.gate_timeout;  // a worker's pipeline hooks get the gates' default budget
  auto host = SkillHost::create(host_options);
  if (!host) {
    audit_ok = false;
    log_message(LogLevel::error, kComponent, "the audit log is unusable, skill changes are kept in memory only: {}",
                host.error().message);
    host_options.audit_file.clear();
    host = SkillHost::create(host_options);
    if (!host) return fail(host.error().code, host.error().message);
  }
  skills = std::move(*host);
  // The skill whose hook ended the previous run (crash_record.hpp), read
  // before this run's record replaces it; then this run's is armed, so a
  // crash in a skill's create or self-test at boot is recorded too.
  const fs::path crash_file = crash_record_file(c.state_dir);
  const std::optional<CrashRecord> crashed = read_crash_record(crash_file);
  if (crashed) {
    log_message(LogLevel::warn, kComponent, "the previous run ended in skill '{}' {}: {}", crashed->skill,
                crashed->version, crashed->what());
  }
  if (auto armed = record_crashes_in(crash_file); !armed) {
    log_message(LogLevel::warn, kComponent, "a crash in a skill will not be recorded: {}", armed.error().message);
  }
  const BootResult booted = skills->boot("boot", crashed ? &*crashed : nullptr);
  problems.record(booted);
  std::string loaded;
  for (const auto& slot : booted.slots)
    loaded += (loaded.empty() ? "" : ", ") + slot->name() + " " + slot->version_text();
  log_message(LogLevel::info, kComponent, "skills from {}: {} loaded{}{}{}", c.manifest_dir.string(),
              booted.slots.size(), loaded.empty() ? "" : " (", loaded, loaded.empty() ? "" : ")");
  for (const auto& d : booted.disabled) {
    log_message(LogLevel::warn, kComponent, "skill '{}' disabled: {}", d.name, d.reason);
  }
  for (const auto& e : booted.manifest_errors) log_message(LogLevel::warn, kComponent, e.message);

  // Providers, in cascade order.
  std::vector<std::shared_ptr<Provider>> providers;
  for (const std::string& name : c.providers) {
    if (name == "scripted") {
      auto script = ScriptedScript::load(c.script);
      if (!script) return fail(ErrorCode::invalid_input, script.error().message);
      log_message(LogLevel::info, kComponent, "provider scripted: {} rules from {}", script->rules.size(),
                  c.script.string());
      providers.push_back(std::make_shared<ScriptedProvider>(std::move(*script), &pool));
    } else if (auto endpoint = std::find_if(c.endpoints.begin(), c.endpoints.end(),
                                            [&](const ProviderConfig& p) { return p.name == name; });
               endpoint != c.endpoints.end()) {
      if (!http) http = std::make_unique<HttpClients>(pool);
      // The key's source, never the key.
      log_message(LogLevel::info, kComponent, "provider {}: {} at {}, model {}{}", endpoint->name, endpoint->kind,
                  endpoint->base_url, endpoint->model,
                  endpoint->key_source.empty() ? std::string(", no key") : ", key from " + endpoint->key_source);
      providers.push_back(std::make_shared<HttpProvider>(*endpoint, *http));
    } else {
      log_message(LogLevel::warn, kComponent,
                  "provider offline: no language model is configured; replies explain how to configure one");
      providers.push_back(std::make_shared<OfflineProvider>());
    }
  }
  for (const std::string& skipped : c.skipped_providers) {
    log_message(LogLevel::warn, kComponent, "provider {} (left out of the cascade)", skipped);
  }
  cascade.set_providers(std::move(providers));
  // The host's credential rule knows every configured key (never a skill).
  std::vector<KnownCredential> keys;
  for (const ProviderConfig& endpoint : c.endpoints) {
    if (!endpoint.api_key.empty()) keys.push_back({endpoint.api_key, endpoint.key_source});
  }
  KnownCredentials::set(std::move(keys));
  cascade.set_retry_policy(RetryPolicy{}, &pool);
  if (auto opened = open_budget(c); opened) {
    budget = std::move(*opened);
    // In a fleet the caps hold for every node together.
    if (budget && state_db && !c.budget.caps.empty()) budget->share(make_pg_shared_caps(state_db->client(), c.node_id));
    cascade.set_budget(budget);
  } else {
    return fail(opened.error().code, opened.error().message);
  }

  PipelineOptions options;
  options.version = version_text();
  options.default_actuator = c.default_actuator;
  options.silent_actuators = c.silent_actuators;
  options.assistant_name = c.assistant_name;
  options.log_lines = c.context_log_limit;
  options.transcript_tokens = c.transcript_tokens;
  options.privacy_tags = c.privacy_tags;
  auto identity = read_identity(c);
  if (!identity) return fail(identity.error().code, identity.error().message);
  options.identity = std::move(*identity);
  options.consensus = c.consensus;
  if (c.consensus.enabled()) {
    log_message(LogLevel::info, kComponent, "consensus on {}: {}",
                c.consensus.when == ConsensusConfig::When::always ? "every proposal" : "proposals that act",
                c.consensus.describe());
  }
  mcp = std::make_unique<McpHub>(*mcp_loop.contexts().front(), c.state_dir);
  mcp->set_audit([host = skills.get()](SkillChange change) { host->record_external(std::move(change)); });
  if (!c.mcp_servers.empty()) {
    log_message(LogLevel::info, kComponent, "starting {} MCP server(s)", c.mcp_servers.size());
    mcp->apply(c.mcp_servers);
  }
  pipeline = std::make_unique<Pipeline>(
      Pipeline::Services{skills->registry(), cascade, pool, blocking, &memory, approvals.get(),
                         [this] { request_stop("Interrupt flag set"); },  // seed H7
                         decisions.get(), mcp.get(), rules.get()},
      std::move(options));
  if (state_db && approvals) {  // the fleet's approved runs that are this node's
    fleet = std::make_unique<FleetRunner>(state_db->client(), *approvals, *pipeline, blocking, c.fleet_lease / 3);
    fleet->start();
  }
  if (state_db) {  // the fleet's skill rollouts, on this node's skills
    rollouts =
        std::make_unique<RolloutAgent>(state_db->client(), *skills,
                                       RolloutAgent::Options{c.node_id, c.state_dir / "releases", c.fleet_trusted_key,
                                                             c.fleet_lease, c.fleet_lease / 3});
    rollouts->start();
  }
  if (c.deny_unattended_after.count() > 0 && approvals) {
    log_message(LogLevel::info, kComponent, "unattended approvals: denied after {}",
                span_text(c.deny_unattended_after));
    schedule_unattended_sweep();
  }

  operators = std::make_unique<OperatorHandler>(OperatorHandler::Services{
      *skills,
      *pipeline,
      approvals.get(),
      control,
      problems,
      version_text(),
      started,
      [this] { return current_health(); },
      [this]() -> std::uint64_t { return server_counters().connections_open; },
      [this] { request_stop("shutdown requested by an operator"); },
      [this] { refresh_health(); },
      [this] { return provider_status(cascade, config.endpoints, config.skipped_providers); },
      [this] { return budget != nullptr ? budget_status(*budget) : Value(); },
      decisions.get(),
      [this] { return metrics_url(); },
      [this] {
        const ServerCounters counted = server_counters();
        return OperatorHandler::ConnectionFigures{counted.connections_rejected, counted.connections_evicted,
                                                  metrics_counters().evicted};
      },
      [this] { return not_ready(); },
      mcp.get(),
      [this] { return reload_mcp(); },
      rules.get(),
      [this](std::string_view session) { return wire_handler != nullptr && wire_handler->session_open(session); },
      [this] {
        if (state_db == nullptr) return Value();
        return state_db_status(state_db->figures(),
                               shipper != nullptr ? decision_shipping_status(shipper->figures()) : Value());
      }});
  operators_ready.store(operators.get(), std::memory_order_release);

  // H6 (5): startup diagnostics (fail open).
  diagnostics();

  // H6 (6): heartbeat; then the watcher.
  if (c.heartbeat_interval.count() > 0) {
    heartbeat =
        std::make_unique<Heartbeat>(pool, *pipeline, HeartbeatOptions{c.heartbeat_interval, c.auto_save_interval},
                                    [this] { save_memory("auto-save"); });
    heartbeat->start();
  }
  if (c.watch) {
    // The config files too, for their MCP servers (`mcp reload` when they change).
    SkillWatcher::WatchedFiles files;
    for (const fs::path& file : {c.config_file, c.mcp_config_file, c.rules_file}) {
      if (!file.empty()) files.files.push_back(file);
    }
    config_digest = config_files_digest();
    files.files_changed = [this] {
      reload_rules("watcher");
      const std::string digest = config_files_digest();
      if (digest == config_digest) return;
      config_digest = digest;
      if (auto reloaded = reload_mcp(); reloaded) {
        log_message(LogLevel::info, kComponent, "watcher: the config changed: {} MCP server(s) configured", *reloaded);
      } else {
        log_message(LogLevel::error, kComponent, "watcher: the config changed, MCP servers not reloaded: {}",
                    reloaded.error().message);
      }
    };
    auto started_watcher = SkillWatcher::start(*skills, std::chrono::milliseconds(250), std::move(files));
    if (started_watcher) {
      watcher = std::move(*started_watcher);
    } else {
      log_message(LogLevel::warn, kComponent, "not watching for skill changes: {}", started_watcher.error().message);
    }
  }
  return {};
}

void Daemon::Impl::diagnostics() {
  log_message(LogLevel::info, kComponent, "DOCTOR: Running Startup Health Check");
  refresh_health();
  const HealthReport report = current_health();
  if (report.status == "HEALTHY") {
    log_message(LogLevel::info, kComponent, "DAEMON: Health check passed. Starting services.");
    return;
  }
  log_message(LogLevel::warn, kComponent, "DAEMON: Health check found issues (health {}).", report.status);
  if (skills->snapshot()->gates().empty()) {
    log_message(LogLevel::error, kComponent, "no gate is loaded: nothing verifies the model's proposals");
  }
  for (const auto& [name, entry] : problems.disabled()) {
    log_message(LogLevel::warn, kComponent, "  skill '{}' disabled: {}", name, entry.reason);
  }
  log_message(LogLevel::warn, kComponent, "  see `passepartout skills check {}` for the skills",
              config.manifest_dir.string());
}

// The metrics endpoint: started before the protocol listeners, so that its
// line comes before the `listening on` lines scripts wait for. A default
// port that is taken is a warning (monitoring must not stop the daemon); a
// port the operator chose, an error.
Result<void> Daemon::Impl::serve_metrics() {
  const DaemonConfig& c = config;
  if (!c.metrics) {
    log_message(LogLevel::info, kComponent, "metrics: off (--metrics-port off)");
    return {};
  }
  metrics = std::make_unique<DaemonMetrics>(MetricsSources{
      skills.get(), pipeline.get(), &cascade, approvals.get(), [this] { return server_counters(); }, version_text(),
      [this] { return metrics_counters(); }, mcp.get(), rules.get(), budget.get(), state_db.get(), shipper.get()});
  if (decisions) {
    metrics->set_decisions_dropped([log = decisions.get()] { return log->dropped(); });
  }
  MetricsListenerOptions options;
  options.port = c.metrics_port;
  auto listening = MetricsListener::start(
      io, options, MetricsEndpoints{[this] { return metrics->scrape(); }, [this] { return not_ready(); }});
  if (!listening) {
    if (c.metrics_port_explicit) {
      return fail(listening.error().code, "metrics endpoint: " + listening.error().message +
                                              " (--metrics-port, PASSEPARTOUT_METRICS_PORT: another port, 0 for any "
                                              "free one, or off)");
    }
    log_message(LogLevel::warn, kComponent,
                "metrics endpoint not served: {} (the default port {}; set --metrics-port or "
                "PASSEPARTOUT_METRICS_PORT to another port, 0 for any free one, or off)",
                listening.error().message, c.metrics_port);
    return {};
  }
  metrics_listener = std::move(*listening);
  metrics_listener_ready.store(metrics_listener.get(), std::memory_order_release);
  metrics_port.store(metrics_listener->port(), std::memory_order_relaxed);
  std::printf("metrics on 127.0.0.1:%u\n", static_cast<unsigned>(metrics_listener->port()));
  log_message(LogLevel::info, kComponent, "metrics: {} (also /healthz, /readyz)", metrics_url());
  return {};
}

Result<void> Daemon::Impl::listen() {
  const DaemonConfig& c = config;
  auto token = load_or_create_token(token_file(c.state_dir));
  if (!token) return fail(token.error().code, token.error().message);
  if (auto served = serve_metrics(); !served) return served;

  ServerOptions options;
  options.unix_socket_path = c.socket_path;
  options.listen_tcp = c.listen_tcp;
  options.tcp_address = c.listen_address == "localhost" ? "127.0.0.1" : c.listen_address;
  options.tcp_port = c.port;
  options.auth_token = *token;
  // Requesters name the token by its file and a fingerprint, never by itself.
  options.auth_token_label = token_file(c.state_dir).filename().string() + "#" + sha256_hex(*token).substr(0, 8);
  options.version = version_text();
  options.frame_limits.max_payload_code_points = c.max_frame;
  options.idle_timeout = c.idle_timeout;
  options.read_timeout = c.read_timeout;
  options.max_connections = tcp_connection_limit;
  options.max_unix_connections = c.max_unix_connections;
  options.max_connections_per_peer = c.max_connections_per_peer;
  options.handshake_timeout = c.handshake_timeout;
  options.max_total_queued_write_bytes = c.max_queued_reply_bytes;
  std::error_code ec;
  fs::create_directories(c.socket_path.parent_path(), ec);
  auto handler = std::make_shared<DaemonHandler>(*pipeline, *operators, c.tcp_auth);
  // A session's standing approvals end when the last connection that carried it closes.
  handler->on_session_ended([this](std::string_view session) {
    if (const std::size_t ended = rules->end_session(session); ended > 0) {
      log_fields(LogLevel::info, kComponent, {{"session", session}}, "rules: session {} ended: {} rule(s) of its own",
                 session, ended);
    }
  });
  wire_handler = handler;
  // The connections have a loop of their own: a request is read there and
  // handed to the pipeline's loops (chat) or the operator thread, so no
  // skill holding the pipeline's loops keeps a request from being read.
  auto started_server =
      Server::start(connection_loops.contexts(), std::move(options), handler, [this] { return current_health(); });
  if (!started_server) return fail(started_server.error().code, started_server.error().message);
  server = std::move(*started_server);
  server_ready.store(server.get(), std::memory_order_release);

  // The lines scripts and tests wait for.
  std::printf("listening on unix:%s\n", server->unix_socket_path().c_str());
  const std::string tcp_where = c.listen_tcp ? endpoint_text(c.listen_address, server->tcp_port()) : std::string();
  if (c.listen_tcp) std::printf("listening on %s\n", tcp_where.c_str());
  std::fflush(stdout);
  log_message(LogLevel::info, kComponent, "serving: unix {}{}{}; health {}", server->unix_socket_path().string(),
              c.listen_tcp ? ", tcp " : "", tcp_where, current_health().status);

  std::string status = "STATUS=serving; health " + current_health().status;
  notifier.notify("READY=1\n" + status);
  if (auto period = notifier.watchdog_period()) {
    pool.post([this, period = *period] { tick_watchdog(period); });
  }
  return {};
}

bool Daemon::Impl::save_memory(std::string_view why) {
  if (!memory_saves) return true;
  auto saved = memory.save_if_dirty(config.memory_file);
  if (!saved) {
    log_message(LogLevel::error, kComponent, "{}: memory not saved: {}", why, saved.error().message);
    return false;
  }
  if (*saved) log_message(LogLevel::info, kComponent, "{}: memory saved to {}", why, config.memory_file.string());
  return true;
}

// The stop (seed H7, without its abrupt exit): stop accepting, cancel the
// model calls in flight (nobody is to wait on a model's timeout), let signals
// in flight finish within the grace, save memory, stop every thread.
int Daemon::Impl::shutdown() {
  if (shut_down) return 0;
  shut_down = true;
  notifier.notify("STOPPING=1\nSTATUS=stopping");
  stopping.store(true, std::memory_order_relaxed);
  if (heartbeat) heartbeat->stop();
  if (fleet) fleet->stop();        // no approved run of the fleet starts here from now on
  if (rollouts) rollouts->stop();  // nor a rollout's change of the skills
  // Asked now, joined below: a rescan of its may be waiting on the control thread.
  if (watcher) watcher->request_stop();
  const auto deadline = std::chrono::steady_clock::now() + config.shutdown_grace;
  if (server) server->begin_stop();
  bool in_flight = false;
  if (pipeline) {
    // Before the loops and pools stop: each call ends as cancelled, its
    // transfer removed, and its signal's loop ends.
    pipeline->cancel_calls();
    // Poll: the pipeline reports only a count, and the wait is bounded.
    while (pipeline->in_flight() > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    in_flight = pipeline->in_flight() > 0;
  }
  // A change in progress (a reload's create, self-test, state export or
  // import) has the same grace: the control pool and the watcher are joined below.
  const bool control_busy = skills && !skills->control().wait_idle_until(deadline);
  if (in_flight || control_busy) {
    // A skill's hook that has not returned cannot be interrupted, and its
    // thread cannot be joined: save what matters from this thread and end
    // the process now, rather than wait on it past the grace.
    if (std::vector<RunningHookOf> stuck = running_hooks(); !stuck.empty()) exit_with_stuck_hooks(stuck);
  }
  if (in_flight) {
    log_message(LogLevel::warn, kComponent, "{} signal(s) still in flight after the grace; interrupting",
                pipeline->in_flight());
    pipeline->interrupt();
  }
  watcher.reset();
  if (server) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    server->stop(std::max<std::chrono::milliseconds>(left, 500ms));
  }
  connection_loops.stop();
  if (metrics_listener) metrics_listener->stop();  // before what it reads stops
  control.stop();
  if (http) http->stop();  // transfers in flight end as cancelled; their completions run on the loops
  if (mcp) mcp->stop();    // the servers' processes end; calls in flight fail as closed
  mcp_loop.stop();
  if (state_db) state_db->stop();
  pool.stop();
  blocking.stop();
  if (decisions) decisions->flush();        // what the signals recorded, on disk before the process ends
  if (shipper) shipper->stop(kShipOnStop);  // and shipped, if the database takes it soon enough
  const bool saved = save_memory("shutdown");
  boost::system::error_code ignored;
  signals.cancel(ignored);
  work.reset();
  io.stop();
  for (auto& thread : io_threads) {
    if (thread.joinable()) thread.join();
  }
  log_message(LogLevel::info, kComponent, "stopped");
  return saved ? 0 : 1;
}

// The grace is over and skills' hooks still run: each is named, what the
// signals recorded and memory are saved from this thread (which no skill
// holds), and the process ends without joining the threads the hooks hold.
void Daemon::Impl::exit_with_stuck_hooks(const std::vector<RunningHookOf>& stuck) {
  for (const RunningHookOf& hook : stuck) {
    log_fields(LogLevel::error, kComponent, {{"skill", hook.running.skill->name}, {"hook", hook.running.hook}},
               "shutdown: skill '{}' {} is stuck in its {} hook on {} thread after the {} ms grace; it cannot be "
               "interrupted",
               hook.running.skill->name, hook.running.skill->version, hook.running.hook, hook.role,
               config.shutdown_grace.count());
  }
  const bool saved = save_memory("shutdown");  // first: the writer's flush below is a wait of its own
  if (decisions) decisions->flush();
  log_message(LogLevel::warn, kComponent, "stopped, leaving {} stuck hook(s) behind (exit status 1)", stuck.size());
  notifier.notify("STATUS=stopped with stuck skill hooks");
  (void)saved;  // the status is 1 either way: the stop was not clean
  std::fflush(nullptr);
  ::_exit(1);
}

// --- Daemon --------------------------------------------------------------------------------

Result<std::unique_ptr<Daemon>> Daemon::start(DaemonConfig config) {
  std::signal(SIGPIPE, SIG_IGN);
  // Before Impl starts the pools' threads: it unsets the variables it reads.
  SystemdNotifier notifier = SystemdNotifier::from_environment();
  auto impl = std::make_unique<Impl>(std::move(config));
  impl->notifier = std::move(notifier);
  // Signals are watched from the start, so a SIGTERM during boot stops cleanly.
  impl->watch_signals();
  impl->run_io();
  if (auto booted = impl->boot(); !booted) return fail(booted.error().code, booted.error().message);
  if (auto listening = impl->listen(); !listening) return fail(listening.error().code, listening.error().message);
  return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Daemon::~Daemon() = default;

int Daemon::serve() {
  std::string reason;
  {
    std::unique_lock lock(impl_->stop_mutex);
    impl_->stop_wanted.wait(lock, [&] { return impl_->stop_requested; });
    reason = impl_->stop_reason;
  }
  log_message(LogLevel::info, kComponent, "SHUTDOWN: {}. Saving memory...", reason);
  return impl_->shutdown();
}

void Daemon::request_stop(std::string_view why) { impl_->request_stop(why); }

std::uint16_t Daemon::tcp_port() const noexcept { return impl_->server ? impl_->server->tcp_port() : 0; }

const fs::path& Daemon::socket_path() const noexcept { return impl_->config.socket_path; }

HealthReport Daemon::health() const { return impl_->current_health(); }

}  // namespace passepartout
