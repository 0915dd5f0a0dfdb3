// McpHub: the servers' lifecycle, their pins and the catalog, all on one
// event loop's thread; other threads reach it by posting there.
#include "daemon/mcp_hub.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <csignal>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <utility>

// GCC 12 reports a "potential null pointer dereference" inside Asio's
// scheduler (a false positive); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#pragma GCC diagnostic pop

#include "base/ascii.hpp"
#include "base/duration_text.hpp"
#include "base/errno_text.hpp"
#include "base/file_io.hpp"
#include "base/log.hpp"
#include "isolation/confine.hpp"
#include "mcp/arguments.hpp"
#include "mcp/mcp_client.hpp"
#include "value/json_bridge.hpp"

namespace passepartout {

namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kComponent = "mcp";
// Deaths within kDeathWindow that quarantine a server (as skill workers are).
constexpr std::size_t kMaxDeaths = 5;
constexpr auto kDeathWindow = std::chrono::minutes(10);
constexpr auto kMaxBackoff = std::chrono::seconds(60);
// A server's stderr lines logged per kStderrWindow; the rest are counted.
constexpr std::size_t kStderrLines = 20;
constexpr auto kStderrWindow = std::chrono::seconds(10);
constexpr std::size_t kLatencySamples = 512;
// The providers' limit on a function's name, and the characters they all accept.
constexpr std::size_t kMaxToolName = 64;

bool provider_safe(std::string_view name) {
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// An account's ids and name, looked up without the non-reentrant getpwnam.
struct Account {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string name;
};

Result<Account> account_named(const std::string& name) {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  const int error = ::getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (found == nullptr) {
    return fail(ErrorCode::invalid_input,
                "user: '" + name + "' is not an account here" + (error != 0 ? " (" + errno_text(error) + ")" : ""));
  }
  return Account{entry.pw_uid, entry.pw_gid, entry.pw_name};
}

std::string own_account_name() {
  passwd entry{};
  passwd* found = nullptr;
  std::vector<char> buffer(16384);
  ::getpwuid_r(::geteuid(), &entry, buffer.data(), buffer.size(), &found);
  return found != nullptr ? std::string(entry.pw_name) : std::to_string(::geteuid());
}

// A stdio server's temporary folder: <temp>/passepartout-mcp-<daemon pid>-<server>-XXXXXX.
constexpr std::string_view kTemporaryPrefix = "passepartout-mcp-";

// The temporary folders of daemons that are gone (killed before they could
// remove them): removed, so that months of restarts leave nothing behind.
void remove_orphaned_temporaries() {
  std::error_code error;
  const fs::path folder = fs::temp_directory_path(error);
  if (error) return;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kTemporaryPrefix)) continue;
    const std::string_view rest = std::string_view(name).substr(kTemporaryPrefix.size());
    pid_t owner = 0;
    const auto [end, parsed] = std::from_chars(rest.data(), rest.data() + rest.size(), owner);
    if (parsed != std::errc() || end == rest.data() || *end != '-' || owner <= 0 || owner == ::getpid()) continue;
    if (::kill(owner, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask about)
    std::error_code ignored;
    fs::remove_all(entry.path(), ignored);
  }
}

std::uint64_t percentile(std::vector<std::uint64_t> samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const auto index = static_cast<std::size_t>(std::lround(p * static_cast<double>(samples.size() - 1)));
  return samples[std::min(index, samples.size() - 1)];
}

}  // namespace

struct McpHub::Impl : std::enable_shared_from_this<McpHub::Impl> {
  struct Server {
    mcp::McpServerConfig config;
    std::shared_ptr<mcp::McpClient> client;
    std::uint64_t epoch = 0;  // a callback of an earlier start is stale
    std::string state = "starting";
    std::string reason;
    mcp::ServerInfo info;
    std::vector<mcp::ToolDefinition> tools;
    std::vector<McpServerStatus::Tool> tool_status;  // one per tool, same order
    std::unique_ptr<asio::steady_timer> restart;
    std::deque<Clock::time_point> deaths;
    std::uint64_t starts = 0;
    std::uint64_t calls = 0;
    std::uint64_t failures = 0;
    std::uint64_t changes = 0;
    std::deque<std::uint64_t> latencies_us;
    Clock::time_point stderr_window{};
    std::size_t stderr_lines = 0;
    std::size_t stderr_dropped = 0;
    std::map<std::string, std::string> audited;  // tool -> the changed digest last written to the audit log
    fs::path temporary;                          // its own temporary folder while it runs (stdio)
    std::string sandbox;                         // what it runs under, one line (stdio)
  };

  // What a stdio server is started with besides its entry.
  struct Launch {
    Confinement confinement;
    fs::path temporary;
    std::vector<std::pair<std::string, std::string>> env;  // the entry's, with TMPDIR (and HOME) added
    std::string working_dir;
  };

  Impl(asio::io_context& context, const fs::path& state_dir, fs::path launcher_path)
      : io(context), pins_file(state_dir / "mcp-pins.json"), launcher(std::move(launcher_path)) {}

  asio::io_context& io;
  fs::path pins_file;
  fs::path launcher;                                       // the executable whose `confine` starts a stdio server
  std::function<void(SkillChange)> audit;                  // set before the first apply()
  std::map<std::string, std::shared_ptr<Server>> servers;  // the loop's thread only
  Json pins = Json::object();                              // server -> tool -> {sha256, definition, ...}
  std::string pins_error;                                  // why the pins could not be read: then nothing is offered
  std::atomic<bool> stopped{false};
  std::uint64_t generation = 0;

  mutable std::mutex catalog_mutex;  // guards current
  std::shared_ptr<const ToolCatalog> current = std::make_shared<const ToolCatalog>();

  bool on_loop() const { return io.get_executor().running_in_this_thread(); }

  // Runs `work` on the loop and waits for it; inline when already there, or
  // when the loop no longer runs.
  template <class Work>
  auto on_loop_wait(Work work) -> decltype(work()) {
    if (on_loop() || io.stopped()) return work();
    auto task = std::make_shared<std::packaged_task<decltype(work())()>>(std::move(work));
    auto future = task->get_future();
    asio::post(io, [task] { (*task)(); });
    if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      // The loop is stuck or gone: do not touch what it owns.
      throw std::runtime_error("the mcp event loop did not answer within 10 s");
    }
    return future.get();
  }

  void load_pins() {
    std::error_code missing;
    if (!fs::exists(pins_file, missing)) return;
    auto text = read_bounded_file(pins_file, std::size_t{64} << 20);
    if (!text) {
      pins_error = "the tool pins in " + pins_file.string() + " cannot be read: " + text.error().message;
      return;
    }
    Json parsed = Json::parse(*text, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object() || !parsed.contains("servers") || !parsed["servers"].is_object()) {
      pins_error = "the tool pins in " + pins_file.string() +
                   " are not the JSON this daemon writes; move the file away to pin every tool afresh";
      return;
    }
    pins = std::move(parsed["servers"]);
  }

  // Writes the pins (owner-only, replaced whole, synced); an error is logged:
  // the pins in memory still hold for this run.
  void save_pins() {
    const fs::path temporary = pins_file.string() + ".tmp";
    const std::string text = Json{{"version", 1}, {"servers", pins}}.dump(2) + "\n";
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0;
    if (ok) {
      ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(fd) == 0;
      ::close(fd);
    }
    std::error_code error;
    if (ok) fs::rename(temporary, pins_file, error);
    if (!ok || error) {
      log_message(LogLevel::error, kComponent, "cannot write the tool pins to {}: {}", pins_file.string(),
                  error ? error.message() : errno_text(errno));
      return;
    }
    static_cast<void>(sync_path(pins_file.parent_path(), true));
  }

  std::string who(const Server& server) const { return "mcp server '" + server.config.name + "'"; }

  // --- lifecycle (the loop's thread) -------------------------------------------------

  void start(const std::shared_ptr<Server>& server) {
    Server& s = *server;
    release_temporary(s);
    std::optional<Launch> launch;
    if (s.config.kind == mcp::McpServerConfig::Kind::stdio) {
      auto prepared = prepare_launch(s.config);
      if (!prepared) {
        refuse(s, prepared.error().message);  // fail closed: it does not run unconfined instead
        return;
      }
      launch = std::move(*prepared);
      s.temporary = launch->temporary;
      s.sandbox = describe(launch->confinement, sandbox_capabilities());
      log_message(LogLevel::info, kComponent, "{} {}", who(s), s.sandbox);
    }
    const std::uint64_t epoch = ++s.epoch;
    ++s.starts;
    s.state = s.starts == 1 ? "starting" : "restarting";  // its last tools are kept, to say why they are not offered
    mcp::ClientOptions options;
    options.name = s.config.name;
    options.max_result_bytes = s.config.max_result_bytes;
    // An entry's call_timeout bounds every request: initialize and tools/list too.
    options.initialize_timeout = s.config.call_timeout;
    options.request_timeout = s.config.call_timeout;
    mcp::ClientEvents events;
    std::weak_ptr<Impl> weak = weak_from_this();
    events.on_tools_changed = [weak, server, epoch] {
      if (auto self = weak.lock(); self && server->epoch == epoch) self->list(server, epoch);
    };
    events.on_closed = [weak, server, epoch](const std::string& reason) {
      if (auto self = weak.lock(); self && server->epoch == epoch) self->died(server, reason);
    };
    events.on_stderr = [weak, server](const std::string& line) {
      if (auto self = weak.lock()) self->stderr_line(*server, line);
    };
    s.client = mcp::McpClient::create(io, std::move(options), std::move(events));
    const mcp::McpServerConfig config = s.config;
    auto start_transport = [this, config, launch](mcp::TransportEvents transport_events) {
      if (config.kind == mcp::McpServerConfig::Kind::http) {
        mcp::HttpEndpoint endpoint;
        endpoint.name = config.name;
        endpoint.url = config.url;
        endpoint.headers = config.headers;
        return mcp::start_http(io, endpoint, std::move(transport_events));
      }
      mcp::StdioCommand command;
      command.name = config.name;
      command.command = config.command;
      command.args = config.args;
      command.env = launch->env;
      command.working_dir = launch->working_dir;
      command.launcher = {launcher.string()};
      for (std::string& argument : confine_arguments(launch->confinement))
        command.launcher.push_back(std::move(argument));
      return mcp::start_stdio(io, command, std::move(transport_events));
    };
    s.client->start(start_transport, [weak, server, epoch](Result<mcp::ServerInfo> info) {
      auto self = weak.lock();
      if (!self || server->epoch != epoch) return;
      if (!info) {
        if (info.error().code == ErrorCode::refused) {
          self->refuse(*server, info.error().message);
        } else {
          self->died(server, info.error().message);
        }
        return;
      }
      server->info = std::move(*info);
      log_message(LogLevel::info, kComponent, "{}: {} {} speaks MCP {}", self->who(*server), server->info.name,
                  server->info.version, server->info.protocol_version);
      self->list(server, epoch);
    });
  }

  void list(const std::shared_ptr<Server>& server, std::uint64_t epoch) {
    std::weak_ptr<Impl> weak = weak_from_this();
    server->client->list_tools([weak, server, epoch](Result<std::vector<mcp::ToolDefinition>> tools) {
      auto self = weak.lock();
      if (!self || server->epoch != epoch) return;
      if (!tools) {
        self->died(server, tools.error().message);
        return;
      }
      self->listed(*server, std::move(*tools));
    });
  }

  // A server's tools arrived: each is offered under its Claude Code name when
  // that name suits every provider, and when its definition is its pin.
  void listed(Server& s, std::vector<mcp::ToolDefinition> tools) {
    s.tools = std::move(tools);
    s.tool_status.clear();
    Json& server_pins = pins[s.config.name];
    if (!server_pins.is_object()) server_pins = Json::object();
    bool pins_changed = false;
    std::map<std::string, std::size_t> offered_names;  // lower-cased -> count
    for (const mcp::ToolDefinition& tool : s.tools) {
      ++offered_names[ascii_lower("mcp__" + s.config.name + "__" + tool.name)];
    }
    for (const mcp::ToolDefinition& tool : s.tools) {
      McpServerStatus::Tool status;
      status.name = tool.name;
      status.digest = tool.digest;
      status.annotations_json = tool.annotations_json;
      const std::string offered = "mcp__" + s.config.name + "__" + tool.name;
      if (offered.size() > kMaxToolName) {
        status.pin = "left out";
        status.note = "'" + offered + "' is longer than the providers' 64 characters";
      } else if (!provider_safe(offered)) {
        status.pin = "left out";
        status.note = "'" + offered + "' has characters a provider refuses in a function's name (only A-Z a-z 0-9 _ -)";
      } else if (offered_names[ascii_lower(offered)] > 1) {
        status.pin = "left out";
        status.note = "'" + offered + "' collides with another tool of the server (names compared without case)";
      } else {
        status.offered = offered;
      }
      if (!status.note.empty()) {
        log_message(LogLevel::warn, kComponent, "{}: tool '{}' left out: {}", who(s), tool.name, status.note);
      }
      const auto pin = server_pins.find(tool.name);
      if (pin == server_pins.end()) {
        server_pins[tool.name] = {{"sha256", tool.digest},
                                  {"definition", Json::parse(tool.canonical_json, nullptr, false)},
                                  {"pinned_unix_ms", unix_ms_now()},
                                  {"by", "first use"}};
        pins_changed = true;
        if (status.pin.empty()) status.pin = "new";
      } else if ((*pin)["sha256"] != tool.digest) {
        status.pinned_digest = (*pin).value("sha256", "");
        if (status.pin.empty() || status.pin == "left out") {
          ++s.changes;
          audit_change(s, tool, status.pinned_digest);
          log_message(LogLevel::warn, kComponent,
                      "{}: the definition of tool '{}' changed since it was pinned (sha256 {} -> {}); it is not "
                      "offered until an operator accepts it: passepartout mcp trust {} {}",
                      who(s), tool.name, status.pinned_digest.substr(0, 12), tool.digest.substr(0, 12), s.config.name,
                      tool.name);
        }
        status.pin = "changed";
        status.offered.clear();
      } else if (status.pin.empty()) {
        status.pin = "pinned";
      }
      s.tool_status.push_back(std::move(status));
    }
    if (pins_changed) save_pins();
    const bool was_ready = s.state == "ready";
    s.state = "ready";
    s.reason.clear();
    if (!was_ready) {
      log_message(LogLevel::info, kComponent, "{} is ready: {} tools ({} offered)", who(s), s.tools.size(),
                  std::count_if(s.tool_status.begin(), s.tool_status.end(),
                                [](const McpServerStatus::Tool& t) { return !t.offered.empty(); }));
    }
    publish();
  }

  void refuse(Server& s, const std::string& reason) {
    log_message(LogLevel::error, kComponent, "{} refused: {}", who(s), reason);
    s.state = "refused";
    s.reason = reason;
    if (s.client) s.client->close();
    release_temporary(s);
    ++s.epoch;
    publish();
  }

  void died(const std::shared_ptr<Server>& server, const std::string& reason) {
    Server& s = *server;
    ++s.epoch;  // whatever the old session still says is stale
    if (s.client) s.client->close();
    report_dropped_stderr(s);
    release_temporary(s);
    const auto now = Clock::now();
    s.deaths.push_back(now);
    while (!s.deaths.empty() && now - s.deaths.front() > kDeathWindow) s.deaths.pop_front();
    s.reason = reason;
    if (s.deaths.size() >= kMaxDeaths) {
      s.state = "quarantined";
      s.reason = "ended " + std::to_string(s.deaths.size()) + " times in 10 minutes, last: " + reason +
                 "; fix it and run passepartout mcp reload";
      log_message(LogLevel::error, kComponent, "{} quarantined: {}", who(s), s.reason);
      publish();
      return;
    }
    const auto backoff =
        std::min<std::chrono::milliseconds>(std::chrono::seconds(1) * (1U << (s.deaths.size() - 1)), kMaxBackoff);
    s.state = "restarting";
    // Reasons from the client and the transport already name the server.
    const std::string what = reason.starts_with(who(s)) ? reason : who(s) + ": " + reason;
    log_message(LogLevel::error, kComponent, "{}; starting it again in {} ms", what, backoff.count());
    publish();
    s.restart = std::make_unique<asio::steady_timer>(io, backoff);
    const std::uint64_t epoch = s.epoch;
    s.restart->async_wait([weak = weak_from_this(), server, epoch](const boost::system::error_code& error) {
      auto self = weak.lock();
      if (error || !self || self->stopped || server->epoch != epoch) return;
      self->start(server);
    });
  }

  void stop_server(Server& s) {
    ++s.epoch;
    if (s.restart) s.restart->cancel();
    if (s.client) s.client->close();
    s.client.reset();
    report_dropped_stderr(s);
    release_temporary(s);
  }

  // The confinement of a stdio server, its temporary folder (created here),
  // and what its process gets besides its entry. Errors say what in the entry
  // cannot be honoured; the server is then refused, not run unconfined.
  Result<Launch> prepare_launch(const mcp::McpServerConfig& config) const {
    Launch launch;
    Confinement& c = launch.confinement;
    c.network = config.network;
    c.open_files = config.open_files;
    c.memory_bytes = config.memory_bytes;
    c.cpu_seconds = config.cpu_seconds;
    c.parent = ::getpid();
    std::string home;
    if (::geteuid() == 0) {
      const std::string name = config.user.empty() ? "nobody" : config.user;
      if (name != "root") {
        auto account = account_named(name);
        if (!account) return fail(account.error().code, account.error().message);
        c.switch_user = account->uid != 0;
        c.uid = account->uid;
        c.gid = account->gid;
      }
    } else if (!config.user.empty() && config.user != own_account_name()) {
      return fail(ErrorCode::refused, "user: the daemon runs as '" + own_account_name() +
                                          "', not root, so it cannot run the server as '" + config.user +
                                          "'; remove user: from its entry");
    }
    for (const fs::path& folder : config.writable) {
      std::error_code error;
      if (!fs::is_directory(folder, error)) {
        return fail(ErrorCode::invalid_input, "writable: '" + folder.string() +
                                                  "' is not an existing folder; create it or remove it from the entry");
      }
      c.writable.push_back(folder);
    }
    std::error_code error;
    std::string pattern = (fs::temp_directory_path(error) /
                           (std::string(kTemporaryPrefix) + std::to_string(::getpid()) + "-" + config.name + "-XXXXXX"))
                              .string();
    if (error || ::mkdtemp(pattern.data()) == nullptr) {
      return fail(ErrorCode::io_error, "cannot create its temporary folder " + pattern + ": " +
                                           (error ? error.message() : errno_text(errno)));
    }
    launch.temporary = pattern;
    if (c.switch_user && ::chown(pattern.c_str(), c.uid, c.gid) != 0) {
      const int why = errno;
      fs::remove_all(launch.temporary, error);
      return fail(ErrorCode::io_error, "cannot hand its temporary folder " + pattern + " over to uid " +
                                           std::to_string(c.uid) + ": " + errno_text(why));
    }
    c.writable.push_back(launch.temporary);
    launch.env = config.env;
    auto given = [&](std::string_view name) {
      return std::any_of(config.env.begin(), config.env.end(), [&](const auto& entry) { return entry.first == name; });
    };
    if (!given("TMPDIR")) launch.env.emplace_back("TMPDIR", pattern);
    // Another user's HOME (the daemon's) is of no use to it: its own folder is.
    if (c.switch_user && !given("HOME")) launch.env.emplace_back("HOME", pattern);
    launch.working_dir = config.cwd.empty() ? pattern : config.cwd;
    return launch;
  }

  // A tool found changed goes to the audit log once per new definition (a
  // restarting server lists it again and again).
  void audit_change(Server& s, const mcp::ToolDefinition& tool, const std::string& pinned) {
    if (!audit) return;
    std::string& last = s.audited[tool.name];
    if (last == tool.digest) return;
    last = tool.digest;
    SkillChange entry;
    entry.at_unix_ms = unix_ms_now();
    entry.requester = "mcp server '" + s.config.name + "'";
    entry.action = "mcp-tool-changed";
    entry.skill = "mcp__" + s.config.name + "__" + tool.name;
    entry.from_sha256 = pinned;
    entry.to_sha256 = tool.digest;
    entry.outcome = "refused";
    entry.step = "pin";
    entry.error = "the definition of tool '" + tool.name + "' changed since it was pinned; it is not offered until " +
                  "an operator accepts it: passepartout mcp trust " + s.config.name + " " + tool.name;
    audit(std::move(entry));
  }

  static void release_temporary(Server& s) {
    if (s.temporary.empty()) return;
    std::error_code error;
    fs::remove_all(s.temporary, error);
    if (error) {
      log_message(LogLevel::warn, kComponent, "mcp server '{}': cannot remove its temporary folder {}: {}",
                  s.config.name, s.temporary.string(), error.message());
    }
    s.temporary.clear();
  }

  // The stderr lines of the last window that were not logged, said once.
  void report_dropped_stderr(Server& s) {
    if (s.stderr_dropped == 0) return;
    log_message(LogLevel::warn, kComponent, "{}: {} more lines of its stderr were not logged", who(s),
                s.stderr_dropped);
    s.stderr_dropped = 0;
  }

  void stderr_line(Server& s, const std::string& line) {
    const auto now = Clock::now();
    if (now - s.stderr_window > kStderrWindow) {
      report_dropped_stderr(s);
      s.stderr_window = now;
      s.stderr_lines = 0;
    }
    if (s.stderr_lines++ < kStderrLines) {
      log_message(LogLevel::info, kComponent, "{}: {}", who(s), line);
    } else {
      ++s.stderr_dropped;
    }
  }

  // A new catalog: every offered tool of every ready server.
  void publish() {
    std::vector<ExternalTool> tools;
    std::vector<std::pair<std::string, std::string>> unavailable;
    for (const auto& [name, server] : servers) {
      for (std::size_t i = 0; i < server->tools.size() && i < server->tool_status.size(); ++i) {
        const McpServerStatus::Tool& status = server->tool_status[i];
        const std::string offered = "mcp__" + name + "__" + status.name;
        if (!pins_error.empty()) {
          unavailable.emplace_back(offered, pins_error);
        } else if (server->state != "ready") {
          unavailable.emplace_back(
              offered, who(*server) + " is " + server->state + (server->reason.empty() ? "" : ": " + server->reason));
        } else if (status.pin == "changed") {
          std::string why = "the definition of '" + offered +
                            "' changed since it was pinned; it waits for an operator: passepartout mcp trust ";
          why.append(name).append(" ").append(status.name);
          unavailable.emplace_back(offered, std::move(why));
        }
      }
    }
    if (pins_error.empty()) {
      for (const auto& [name, server] : servers) {
        if (server->state != "ready") continue;
        for (std::size_t i = 0; i < server->tools.size(); ++i) {
          const McpServerStatus::Tool& status = server->tool_status[i];
          if (status.offered.empty()) continue;
          const mcp::ToolDefinition& definition = server->tools[i];
          ExternalTool tool;
          tool.name = status.offered;
          tool.server = name;
          tool.server_tool = definition.name;
          tool.description = definition.description.empty() ? definition.title : definition.description;
          tool.parameters_json = definition.input_schema_json;
          if (auto parameters = json_to_value(definition.input_schema_json, 64))
            tool.parameters = std::move(*parameters);
          tool.digest = definition.digest;
          tool.guards = server->config.guards;
          tools.push_back(std::move(tool));
        }
      }
    }
    auto next = std::make_shared<const ToolCatalog>(++generation, std::move(tools), std::move(unavailable));
    const std::lock_guard lock(catalog_mutex);
    current = std::move(next);
  }

  // --- calls (the loop's thread) ------------------------------------------------------

  struct CallRequest {
    std::string name;
    std::string server;
    std::string server_tool;
    std::string digest;
    Value args;
    std::function<void(Result<ExternalResult>)> done;
  };

  void call(CallRequest request) {
    auto refuse_call = [&](const std::string& why) { request.done(fail(ErrorCode::refused, why)); };
    const auto it = servers.find(request.server);
    if (stopped || it == servers.end()) return refuse_call("mcp server '" + request.server + "' is not configured");
    const std::shared_ptr<Server> server = it->second;
    Server& s = *server;
    if (s.state != "ready" || !s.client) {
      return refuse_call(who(s) + " is " + s.state + (s.reason.empty() ? "" : ": " + s.reason));
    }
    const auto found = std::find_if(s.tools.begin(), s.tools.end(),
                                    [&](const mcp::ToolDefinition& t) { return t.name == request.server_tool; });
    if (found == s.tools.end()) return refuse_call(who(s) + " no longer offers the tool '" + request.server_tool + "'");
    const McpServerStatus::Tool& status = s.tool_status[static_cast<std::size_t>(found - s.tools.begin())];
    if (status.pin == "changed") {
      return refuse_call("the definition of '" + request.name +
                         "' changed since it was pinned; it waits for an operator: passepartout mcp trust " +
                         s.config.name + " " + request.server_tool);
    }
    if (found->digest != request.digest) {
      return refuse_call("the definition of '" + request.name + "' changed while the call was being decided");
    }
    const std::string arguments = mcp::arguments_json(request.args, found->input_schema_json);
    const auto started = Clock::now();
    ++s.calls;
    s.client->call_tool(request.server_tool, arguments, s.config.call_timeout,
                        [server, started, done = std::move(request.done)](Result<mcp::ToolResult> result) {
                          const auto us = static_cast<std::uint64_t>(
                              std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count());
                          server->latencies_us.push_back(us);
                          if (server->latencies_us.size() > kLatencySamples) server->latencies_us.pop_front();
                          if (!result) {
                            ++server->failures;
                            done(fail(result.error().code, result.error().message));
                            return;
                          }
                          if (result->is_error) ++server->failures;
                          done(ExternalResult{result->is_error, std::move(result->text)});
                        });
  }

  // --- status -------------------------------------------------------------------------

  McpServerStatus status_of(const Server& s) const {
    McpServerStatus status;
    status.name = s.config.name;
    status.transport = s.config.kind == mcp::McpServerConfig::Kind::http ? "http" : "stdio";
    status.state = pins_error.empty() || s.state != "ready" ? s.state : "refused";
    status.reason = pins_error.empty() ? s.reason : pins_error;
    status.protocol_version = s.info.protocol_version;
    status.pid = s.client && s.state == "ready" ? s.client->pid() : 0;
    status.starts = s.starts;
    status.calls = s.calls;
    status.failures = s.failures;
    const std::vector<std::uint64_t> samples(s.latencies_us.begin(), s.latencies_us.end());
    status.latency_p50_us = percentile(samples, 0.50);
    status.latency_p99_us = percentile(samples, 0.99);
    status.tools = s.tool_status;
    status.definition_changes = s.changes;
    status.sandbox = s.sandbox;
    return status;
  }
};

McpHub::McpHub(asio::io_context& io, const fs::path& state_dir, const fs::path& launcher)
    : impl_(std::make_shared<Impl>(io, state_dir, launcher.empty() ? fs::path("/proc/self/exe") : launcher)) {
  remove_orphaned_temporaries();
  impl_->load_pins();
  if (!impl_->pins_error.empty()) {
    log_message(LogLevel::error, kComponent, "{}; no MCP tool is offered until that is fixed", impl_->pins_error);
  }
}

McpHub::~McpHub() {
  try {
    stop();
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; stop() logs what it can
  }
}

void McpHub::set_audit(std::function<void(SkillChange)> audit) { impl_->audit = std::move(audit); }

void McpHub::apply(std::vector<mcp::McpServerConfig> servers) {
  asio::post(impl_->io, [impl = impl_, servers = std::move(servers)]() mutable {
    if (impl->stopped) return;
    std::map<std::string, std::shared_ptr<Impl::Server>> next;
    for (mcp::McpServerConfig& config : servers) {
      const auto existing = impl->servers.find(config.name);
      if (existing != impl->servers.end() && existing->second->config.same_as(config) &&
          existing->second->state != "quarantined" && existing->second->state != "refused") {
        next.emplace(config.name, existing->second);  // unchanged: its calls go on
        continue;
      }
      if (existing != impl->servers.end()) {
        log_message(LogLevel::info, kComponent, "mcp server '{}' changed: starting it again", config.name);
        impl->stop_server(*existing->second);
      }
      auto server = std::make_shared<Impl::Server>();
      server->config = std::move(config);
      next.emplace(server->config.name, server);
      if (server->config.disabled) {
        server->state = "disabled";
        continue;
      }
      impl->start(server);
    }
    for (auto& [name, server] : impl->servers) {
      if (next.find(name) == next.end()) {
        log_message(LogLevel::info, kComponent, "mcp server '{}' removed: stopping it", name);
        impl->stop_server(*server);
      }
    }
    impl->servers = std::move(next);
    impl->publish();
  });
}

void McpHub::stop() {
  auto stop_all = [impl = impl_] {
    impl->stopped = true;
    for (auto& [name, server] : impl->servers) impl->stop_server(*server);
    impl->servers.clear();
    impl->publish();
  };
  try {
    impl_->on_loop_wait(stop_all);
  } catch (const std::exception& error) {
    log_message(LogLevel::error, kComponent, "stopping the mcp servers: {}", error.what());
  }
}

std::vector<McpServerStatus> McpHub::status() const {
  return impl_->on_loop_wait([impl = impl_] {
    std::vector<McpServerStatus> out;
    for (const auto& [name, server] : impl->servers) out.push_back(impl->status_of(*server));
    return out;
  });
}

Result<McpTrustReport> McpHub::trust(const std::string& server, const std::string& tool, const std::string& requester) {
  return impl_->on_loop_wait([impl = impl_, server, tool, requester]() -> Result<McpTrustReport> {
    const auto it = impl->servers.find(server);
    if (it == impl->servers.end()) return fail(ErrorCode::not_found, "no mcp server '" + server + "' is configured");
    Impl::Server& s = *it->second;
    if (s.state != "ready") {
      return fail(ErrorCode::refused,
                  "mcp server '" + server + "' is " + s.state + ": its tools can be trusted once it has listed them");
    }
    McpTrustReport report;
    Json& server_pins = impl->pins[server];
    bool found = false;
    for (std::size_t i = 0; i < s.tools.size(); ++i) {
      const mcp::ToolDefinition& definition = s.tools[i];
      McpServerStatus::Tool& status = s.tool_status[i];
      if (!tool.empty() && definition.name != tool) continue;
      found = true;
      if (status.pin != "changed") continue;
      McpTrustReport::Change change;
      change.tool = definition.name;
      change.from_digest = status.pinned_digest;
      change.to_digest = definition.digest;
      if (const auto pin = server_pins.find(definition.name); pin != server_pins.end() && pin->contains("definition")) {
        change.from_definition = (*pin)["definition"].dump();
      }
      change.to_definition = definition.canonical_json;
      server_pins[definition.name] = {{"sha256", definition.digest},
                                      {"definition", Json::parse(definition.canonical_json, nullptr, false)},
                                      {"pinned_unix_ms", unix_ms_now()},
                                      {"by", requester}};
      status.pin = "pinned";
      status.pinned_digest.clear();
      const std::string offered = "mcp__" + server + "__" + definition.name;
      status.offered = status.note.empty() ? offered : std::string();
      log_message(LogLevel::warn, kComponent, "mcp trust by {}: tool '{}' of mcp server '{}' now pinned at sha256 {}",
                  requester, definition.name, server, definition.digest.substr(0, 12));
      if (impl->audit) {
        SkillChange entry;
        entry.at_unix_ms = unix_ms_now();
        entry.requester = requester;
        entry.action = "mcp-trust";
        entry.skill = offered;
        entry.from_sha256 = change.from_digest;
        entry.to_sha256 = change.to_digest;
        entry.details = "mcp server '" + server + "', tool '" + definition.name + "': the changed definition accepted";
        entry.outcome = "ok";
        impl->audit(std::move(entry));
      }
      s.audited.erase(definition.name);
      report.changes.push_back(std::move(change));
    }
    if (!found) return fail(ErrorCode::not_found, "mcp server '" + server + "' has no tool '" + tool + "'");
    if (!report.changes.empty()) {
      impl->save_pins();
      impl->publish();
    }
    return report;
  });
}

std::shared_ptr<const ToolCatalog> McpHub::catalog() const {
  const std::lock_guard lock(impl_->catalog_mutex);
  return impl_->current;
}

void McpHub::call(const ExternalTool& tool, const Value& args, std::function<void(Result<ExternalResult>)> done) {
  if (impl_->stopped.load()) {
    done(fail(ErrorCode::refused, "the mcp servers are stopping"));
    return;
  }
  Impl::CallRequest request{tool.name, tool.server, tool.server_tool, tool.digest, args, std::move(done)};
  asio::post(impl_->io, [impl = impl_, request = std::move(request)]() mutable { impl->call(std::move(request)); });
}

}  // namespace passepartout
