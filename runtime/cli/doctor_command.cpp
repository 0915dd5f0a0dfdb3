// `passepartout doctor`: whether Passepartout can run here (tools, the state
// folder, the bundled skills, the daemon and its health, each model provider,
// each MCP server).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

// GCC 12 reports a "potential null pointer dereference" inside Asio's
// scheduler (a false positive); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#pragma GCC diagnostic pop

#include "cli/cli11.hpp"

#include "base/state_paths.hpp"
#include "cli/client_commands.hpp"
#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"
#include "cli/terminal_text.hpp"
#include "daemon/daemon_config.hpp"
#include "daemon/decision_shipper.hpp"
#include "daemon/mcp_hub.hpp"
#include "daemon/protocol.hpp"
#include "pipeline/decision_log.hpp"
#include "providers/provider_probe.hpp"
#include "skills/bundled_skills.hpp"
#include "skills/skill_boot.hpp"
#include "skills/skill_loader.hpp"
#include "store/pg_client.hpp"
#include "store/pg_schema.hpp"

namespace passepartout::cli {
namespace fs = std::filesystem;

namespace {

enum class Verdict { ok, warn, fail, info };

const char* to_label(Verdict verdict) {
  switch (verdict) {
    case Verdict::ok:
      return "OK";
    case Verdict::fail:
      return "FAIL";
    case Verdict::info:
      return "INFO";
    case Verdict::warn:
      return "WARN";
  }
  return "FAIL";
}

struct Check {
  std::string name;
  Verdict verdict = Verdict::fail;
  std::string detail;
  std::string hint;  // what to do; empty when there is nothing to do
};

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// The first executable `tool` on $PATH, or empty.
fs::path find_on_path(const std::string& tool) {
  std::string path = env("PATH");
  if (path.empty()) path = "/usr/bin:/bin";
  std::size_t from = 0;
  while (from <= path.size()) {
    const std::size_t end = std::min(path.find(':', from), path.size());
    const fs::path dir = end == from ? fs::path(".") : fs::path(path.substr(from, end - from));
    fs::path candidate = dir / tool;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    from = end + 1;
  }
  return {};
}

Check check_tool(const std::string& tool) {
  const fs::path found = find_on_path(tool);
  if (!found.empty()) return {"tool " + tool, Verdict::ok, found.string(), ""};
  return {"tool " + tool, Verdict::fail, "not found on $PATH",
          "install it (the shell skill runs commands with `sh -c`), or add its folder to PATH"};
}

Check check_state_dir(const fs::path& dir) {
  Check check{"state folder", Verdict::fail, dir.string(), ""};
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    check.detail += " does not exist";
    check.hint = "create it with `mkdir -p -m 700 " + dir.string() +
                 "` (the daemon keeps its audit log, approvals, memory and token there), or set PASSEPARTOUT_STATE_DIR";
    return check;
  }
  if (!fs::is_directory(dir, ec)) {
    check.detail += " is not a folder";
    check.hint = "move it away or set PASSEPARTOUT_STATE_DIR to a folder";
    return check;
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    check.detail += " is not writable";
    check.hint = "give this user write access to it, or set PASSEPARTOUT_STATE_DIR";
    return check;
  }
  check.verdict = Verdict::ok;
  check.detail += " (writable)";
  return check;
}

Check check_skills(const fs::path& manifest_dir, const fs::path& plugin_dir) {
  Check check{"bundled skills", Verdict::fail, "", ""};
  const std::string details = "see the details with `passepartout skills check " + manifest_dir.string() +
                              " --plugins " + plugin_dir.string() + "`";
  std::error_code ec;
  if (!fs::is_directory(manifest_dir, ec)) {
    check.detail = "no manifest folder at " + manifest_dir.string();
    check.hint = "pass --manifests DIR or set PASSEPARTOUT_MANIFEST_DIR";
    return check;
  }
  auto loader = SkillLoader::create(loader_options(plugin_dir, true, default_state_dir() / "workspace"));
  if (!loader) {
    check.detail = loader.error().message;
    return check;
  }
  auto booted = boot_skill_dir(manifest_dir, *loader);
  if (!booted) {
    check.detail = booted.error().message;
    return check;
  }
  const std::size_t total = booted->manifests.size() + booted->manifest_errors.size();
  if (total == 0) {
    check.detail = "no manifests in " + manifest_dir.string();
    check.hint = "pass --manifests DIR or set PASSEPARTOUT_MANIFEST_DIR";
    return check;
  }
  check.detail =
      std::to_string(booted->slots.size()) + " of " + std::to_string(total) + " load from " + manifest_dir.string();
  if (booted->all_loaded()) {
    check.verdict = Verdict::ok;
    return check;
  }
  std::string problems;
  for (const auto& e : booted->manifest_errors) problems += (problems.empty() ? "" : "; ") + e.message;
  for (const auto& d : booted->disabled) problems += (problems.empty() ? "" : "; ") + d.name + ": " + d.reason;
  check.detail += " (" + printable(problems) + ")";
  check.hint = details;
  return check;
}

Check check_daemon(const Target& target) {
  Check check{"daemon", Verdict::fail, target.endpoint.describe(), ""};
  Client client;
  ClientError error;
  if (!client.open(target.endpoint, target.connect_timeout, error)) {
    check.detail = error.message;
    check.hint = "start it with `passepartout daemon`, or name where it listens with --socket PATH or --port N";
    return check;
  }
  const std::string version = client.daemon_version();
  if (!version.empty()) check.detail += ", version " + printable(version);
  const auto deadline = Client::Clock::now() + target.reply_timeout;
  Value health_check = Value::plist({{"TYPE", Value::keyword("HEALTH-CHECK")}});
  if (target.endpoint.is_tcp() && !target.token.empty()) {
    health_check = health_check.with("AUTH", Value::string(target.token));
  }
  if (!client.send(health_check, deadline, error)) {
    check.detail += ": " + error.message;
    return check;
  }
  for (;;) {
    Value frame;
    if (!client.read(frame, deadline, error)) {
      check.detail += ": no health response (" + error.message + ")";
      check.hint = "see the daemon's log";
      return check;
    }
    if (!is_health_response(frame)) continue;
    const Value& status = frame.at("STATUS");
    const std::string health = status.is_keyword() ? std::string(status.text()) : std::string("UNKNOWN");
    const bool checked = !frame.at("CHECKED-P").is_nil();
    check.detail += ", health " + printable(health);
    if (health == "HEALTHY") {
      check.verdict = Verdict::ok;
    } else if (health == "UNKNOWN" && !checked) {
      check.verdict = Verdict::ok;
      check.detail += " (no health check has run yet)";
    } else {
      check.hint = "the daemon's log says which of its checks failed";
    }
    return check;
  }
}

// One provider's row, for the table and for --json's `providers`.
struct ProviderCheck {
  Check check;
  std::string name;
  std::string kind;
  std::string base_url;
  std::string model;
  int http_status = 0;
  std::int64_t elapsed_ms = -1;  // -1: no request was made
  bool left_out = false;         // known, but not in the cascade (detail: why)
};

// A row about no provider in particular (the settings are refused): the table only.
ProviderCheck settings_row(const std::string& detail, std::string hint) {
  ProviderCheck row;
  row.check = {"model providers", Verdict::fail, printable(detail), std::move(hint)};
  return row;
}

// The built-in scripted or offline provider's row.
ProviderCheck builtin_row(const std::string& name, std::string detail, std::string hint) {
  ProviderCheck row;
  row.check = {"provider " + name, Verdict::info, std::move(detail), std::move(hint)};
  row.name = name;
  row.kind = name;
  return row;
}

ProviderCheck configured(const ProviderConfig& p, Verdict verdict, std::string detail, std::string hint) {
  ProviderCheck row;
  row.check = {"provider " + p.name, verdict, std::move(detail), std::move(hint)};
  row.name = p.name;
  row.kind = p.kind;
  row.base_url = p.base_url;
  row.model = p.model;
  return row;
}

// Why a known provider is not in the cascade.
std::string left_out_reason(const ProviderConfig& p, bool order_given) {
  if (!p.usable()) return p.unusable;
  if (order_given) return "not named in the provider cascade";
  if (p.name == "ollama") return "OLLAMA_HOST is not set and no providers: entry declares it";
  return "not in the cascade";
}

constexpr const char* kConfigureHint =
    "set OPENAI_API_KEY, ANTHROPIC_API_KEY (or another preset's key), OLLAMA_HOST for a local Ollama, "
    "or declare providers: in the config file (docs/operating.md#models)";

// The providers the daemon would try, in its cascade order, each probed for
// real (all at once, bounded by options.probe_limits) unless options.network
// is off; then those left out, with why. One that cannot be used is a
// failure when none can, else a warning (the cascade moves on to the next).
std::vector<ProviderCheck> check_providers(const DoctorOptions& options) {
  std::vector<ProviderCheck> rows;
  const EnvLookup env = options.env ? options.env : EnvLookup([](std::string_view) { return std::nullopt; });
  if (!options.env_file_error.empty()) {
    rows.push_back(settings_row(options.env_file_error, "fix that line: the daemon refuses to start with it too"));
    return rows;
  }
  // Exactly what `passepartout daemon` resolves, from the same sources.
  SettingSources sources;
  sources.config_file = options.config_file;
  sources.env = env;
  auto config = resolve_daemon_config(sources);
  if (!config) {
    rows.push_back(settings_row(config.error().message,
                                "the daemon refuses these settings too: fix them (passepartout daemon --help)"));
    return rows;
  }
  const std::optional<std::string> chosen = env("PASSEPARTOUT_PROVIDER");
  const std::string given = chosen ? "PASSEPARTOUT_PROVIDER=" + printable(*chosen) + ": " : "";

  std::vector<ProbeResult> probes;
  if (options.network && !config->endpoints.empty()) probes = probe_providers(config->endpoints, options.probe_limits);
  const bool any_usable = std::any_of(probes.begin(), probes.end(), [](const ProbeResult& r) { return r.usable; });
  std::string first_usable;
  for (std::size_t i = 0; i < probes.size() && first_usable.empty(); ++i) {
    if (probes[i].usable) first_usable = config->endpoints[i].name;
  }

  std::size_t endpoint = 0;
  for (const std::string& name : config->providers) {
    if (name == "scripted") {
      rows.push_back(builtin_row(
          "scripted",
          given + "the scripted provider answers from its rules in " + config->script.string() + " (no request made)",
          ""));
      continue;
    }
    if (name == "offline") {
      // Alone and not chosen: nothing is configured, and the daemon falls back to it.
      const bool fallback = config->providers.size() == 1 && !chosen;
      const std::string detail = (fallback ? "no model provider is configured: " : given) +
                                 "the offline provider answers that no model is reachable";
      rows.push_back(builtin_row("offline", detail, fallback ? kConfigureHint : ""));
      continue;
    }
    const ProviderConfig& p = config->endpoints.at(endpoint);
    const std::string what = p.kind + " " + p.model + " at " + p.base_url;
    if (!options.network) {
      rows.push_back(configured(p, Verdict::info, what + " (not checked: --no-network)", ""));
      ++endpoint;
      continue;
    }
    const ProbeResult& probe = probes.at(endpoint);
    Verdict verdict = probe.usable ? Verdict::ok : (any_usable ? Verdict::warn : Verdict::fail);
    std::string hint = probe.hint;
    if (verdict == Verdict::warn) {
      hint += (hint.empty() ? "" : "; ") + std::string("meanwhile the cascade answers from ") + first_usable;
    }
    ProviderCheck row = configured(p, verdict, probe.detail, hint);
    row.http_status = probe.http_status;
    row.elapsed_ms = probe.elapsed.count();
    rows.push_back(std::move(row));
    ++endpoint;
  }
  // Those left out: all of them when the daemon would use only scripted or
  // offline because PASSEPARTOUT_PROVIDER says so is not news.
  if (!chosen) {
    const bool order_given = env("PROVIDER_CASCADE").has_value() || !config->skipped_providers.empty();
    for (const ProviderConfig& p : config->known_providers) {
      if (std::find(config->providers.begin(), config->providers.end(), p.name) != config->providers.end()) continue;
      ProviderCheck row = configured(p, Verdict::info, left_out_reason(p, order_given), "");
      row.left_out = true;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

// How long doctor gives the state database to connect and to answer.
constexpr std::chrono::milliseconds kStateDbWait{5000};

// The state database the daemon would share (--state-db), asked for the
// schema's version: reachable, and a schema this build can serve (older is
// fine: the daemon migrates it). No row when none is configured, or when
// the settings do not resolve (the providers' check says why).
std::optional<Check> check_state_db(const DoctorOptions& options) {
  if (!options.env_file_error.empty()) return std::nullopt;
  SettingSources sources;
  sources.config_file = options.config_file;
  sources.env = options.env ? options.env : EnvLookup([](std::string_view) { return std::nullopt; });
  const auto config = resolve_daemon_config(sources);
  if (!config || config->state_db.empty()) return std::nullopt;
  Check check{"state database", Verdict::info, config->state_db_shown + ", node " + config->node_id, ""};
  if (!options.network) {
    check.detail += " (not checked: --no-network)";
    return check;
  }
  // Whether the version table is there first: a query naming a table that
  // is not fails as a whole.
  PgOutcome asked = pg_run_once(
      config->state_db, {{"SELECT to_regclass('passepartout_schema') IS NOT NULL AS present", {}}}, kStateDbWait);
  if (asked.ok() && asked.results[0].at(0, "present") == std::optional<std::string_view>("t")) {
    asked = pg_run_once(config->state_db,
                        {{"SELECT coalesce(max(version), 0) AS version FROM passepartout_schema", {}}}, kStateDbWait);
  } else if (asked.ok()) {
    asked.results[0] = PgRows{{"version"}, {{std::string("0")}}, 0};
  }
  const int target = static_cast<int>(state_schema().migrations.size());
  if (!asked.ok()) {
    check.verdict = Verdict::fail;
    check.detail += ": " + asked.error->message;
    check.hint =
        "check the address, that the server runs and lets this user in, and the password in PGPASSWORD or "
        "a password file (~/.pgpass, mode 0600); the daemon serves without it, refusing what needs it";
    return check;
  }
  const int version = static_cast<int>(asked.results[0].integer(0, "version"));
  if (version > target) {
    check.verdict = Verdict::fail;
    check.detail +=
        ": schema version " + std::to_string(version) + ", newer than this build's " + std::to_string(target);
    check.hint = "a newer passepartout migrated it: upgrade this one, or the daemon refuses to start";
    return check;
  }
  check.verdict = Verdict::ok;
  check.detail += version == target ? ": schema version " + std::to_string(version)
                                    : ": schema version " + std::to_string(version) + ", the daemon migrates it to " +
                                          std::to_string(target);
  // What of this node's decision log has not reached the fleet's yet.
  if (version >= 4 && config->decision_log) {
    const PgOutcome marks = pg_run_once(
        config->state_db,
        {{"SELECT file, shipped FROM passepartout_decision_files WHERE node = $1", {config->node_id}}}, kStateDbWait);
    if (marks.ok()) {
      std::map<std::string, std::uint64_t> shipped;
      for (std::size_t i = 0; i < marks.results[0].rows.size(); ++i) {
        shipped[std::string(marks.results[0].at(i, "file").value_or(""))] =
            static_cast<std::uint64_t>(marks.results[0].integer(i, "shipped"));
      }
      const SpoolBacklog backlog = spool_backlog(decisions_folder(options.state_dir), shipped);
      check.detail += backlog.bytes == 0
                          ? "; every decision of this node shipped"
                          : "; decisions not shipped yet: " + std::to_string(backlog.bytes) + " bytes in " +
                                std::to_string(backlog.files) + " files, the oldest " +
                                std::to_string(static_cast<std::int64_t>(backlog.oldest_seconds)) + " s old";
    }
  }
  return check;
}

// How long doctor gives the MCP servers to start and list their tools.
constexpr std::chrono::seconds kMcpWait{20};

bool settled(const McpServerStatus& status) {
  return status.state != "starting";  // ready, or it failed once (restarting), or refused, quarantined, disabled
}

// One row for an MCP server, from what the hub saw of it.
Check mcp_row(const McpServerStatus& status, const mcp::McpServerConfig& config, bool timed_out) {
  Check check{"mcp server '" + status.name + "'", Verdict::ok, "", ""};
  const bool http = config.kind == mcp::McpServerConfig::Kind::http;
  std::string probe = "passepartout mcp probe ";
  if (http) {
    probe += config.url;
  } else {
    probe += "-- " + config.command;
    for (const std::string& arg : config.args) probe += " " + arg;
  }
  if (status.state == "disabled") {
    check.verdict = Verdict::info;
    check.detail = "disabled in its entry (" + config.where + ")";
    return check;
  }
  if (status.state != "ready") {
    check.verdict = Verdict::fail;
    check.detail = status.state == "starting" && timed_out
                       ? "did not answer initialize and tools/list within " + std::to_string(kMcpWait.count()) + " s"
                       : status.state + ": " + status.reason;
    check.hint = status.state == "refused" && status.reason.find("protocol") == std::string::npos
                     ? "fix its entry (" + config.where + ")"
                     : "try it by hand, to see what it says: " + probe;
    return check;
  }
  std::size_t offered = 0;
  std::vector<std::string> changed;
  std::vector<std::string> left_out;
  for (const McpServerStatus::Tool& tool : status.tools) {
    if (!tool.offered.empty()) ++offered;
    if (tool.pin == "changed") changed.push_back(tool.name);
    if (tool.pin == "left out") left_out.push_back(tool.name + " (" + tool.note + ")");
  }
  check.detail = (http ? "http" : "stdio") + std::string(", MCP ") + status.protocol_version + ", " +
                 std::to_string(status.tools.size()) + " tools (" + std::to_string(offered) + " offered)";
  if (!status.sandbox.empty()) check.detail += "; " + status.sandbox;
  auto joined = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
    return out;
  };
  if (!changed.empty()) {
    check.verdict = Verdict::warn;
    check.detail += "; changed since they were pinned, so not offered: " + joined(changed);
    check.hint = "review the difference and accept it: passepartout mcp trust " + status.name;
  }
  if (!left_out.empty()) {
    check.verdict = Verdict::warn;
    check.detail += "; left out: " + joined(left_out);
  }
  return check;
}

// Each MCP server the daemon would run, started (or reached) the way the
// daemon does it, sandbox included, and listed; then stopped. Pins are
// compared with the state folder's but never written there.
std::vector<Check> check_mcp_servers(const DoctorOptions& options) {
  SettingSources sources;
  sources.config_file = options.config_file;
  sources.env = options.env ? options.env : EnvLookup([](std::string_view) { return std::nullopt; });
  if (!options.mcp_config_file.empty()) sources.command_line["mcp-config"] = options.mcp_config_file.string();
  auto config = resolve_daemon_config(sources);
  if (!config) return {};  // the settings' row says why
  std::vector<mcp::McpServerConfig> servers;
  std::vector<Check> checks;
  std::map<std::string, mcp::McpServerConfig> by_name;
  for (const mcp::McpServerConfig& server : config->mcp_servers) {
    if (!options.network && server.kind == mcp::McpServerConfig::Kind::http) {
      checks.push_back(
          {"mcp server '" + server.name + "'", Verdict::info, server.url + " (not checked: --no-network)", ""});
      continue;
    }
    by_name.emplace(server.name, server);
    servers.push_back(server);
  }
  if (servers.empty()) return checks;

  std::error_code error;
  std::string folder = (fs::temp_directory_path(error) / "passepartout-doctor-XXXXXX").string();
  if (error || ::mkdtemp(folder.data()) == nullptr) {
    checks.push_back({"mcp servers", Verdict::fail, "cannot create a temporary folder " + folder, ""});
    return checks;
  }
  fs::copy_file(options.state_dir / "mcp-pins.json", fs::path(folder) / "mcp-pins.json", error);  // none: all new

  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread loop([&io] { io.run(); });
  std::vector<McpServerStatus> statuses;
  bool timed_out = false;
  {
    McpHub hub(io, folder);
    hub.apply(servers);
    const auto deadline = std::chrono::steady_clock::now() + kMcpWait;
    while (true) {
      statuses = hub.status();
      const bool all = statuses.size() == servers.size() && std::all_of(statuses.begin(), statuses.end(), settled);
      if (all) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        timed_out = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    hub.stop();
  }
  // The servers stopping (their grace, their last reads) run to their end,
  // so that nothing is left pending when the loop goes; bounded.
  work.reset();
  const auto drained = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!io.stopped() && std::chrono::steady_clock::now() < drained) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  io.stop();
  loop.join();
  fs::remove_all(folder, error);
  for (const McpServerStatus& status : statuses) checks.push_back(mcp_row(status, by_name.at(status.name), timed_out));
  return checks;
}

// Which user the daemon runs as: the owner of its Unix socket, else (over
// TCP, or with no daemon) the user running this command, who would start it.
Check check_user(const Target& target) {
  Check check{"daemon user", Verdict::ok, "", ""};
  uid_t uid = ::geteuid();
  std::string whose = "this user (uid " + std::to_string(uid) + ")";
  struct stat st {};
  if (!target.endpoint.is_tcp() && ::stat(target.endpoint.socket_path.c_str(), &st) == 0) {
    uid = st.st_uid;
    whose = "the daemon (uid " + std::to_string(uid) + ", the owner of its socket)";
  }
  check.detail = whose;
  if (uid == 0) {
    check.verdict = Verdict::warn;
    check.detail += " runs as root: every skill runs with root's privileges";
    check.hint =
        "run the daemon as an unprivileged user: scripts/passepartout.service does (User=passepartout, "
        "scripts/passepartout.sysusers creates it); as root the shell skill runs commands as `nobody` "
        "unless its manifest says allow_root: true";
  }
  return check;
}

}  // namespace

int run_doctor(const Target& target, const DoctorOptions& options, const Output& output) {
  std::vector<Check> checks;
  for (const auto& tool : options.tools) checks.push_back(check_tool(tool));
  checks.push_back(check_state_dir(options.state_dir));
  checks.push_back(check_skills(options.manifest_dir, options.plugin_dir));
  checks.push_back(check_daemon(target));
  checks.push_back(check_user(target));
  if (options.check_provider) {
    if (auto db = check_state_db(options)) checks.push_back(std::move(*db));
  }
  std::vector<ProviderCheck> providers;
  if (options.check_provider) providers = check_providers(options);
  // Left-out providers share one row in the table; --json lists each.
  std::string left_out;
  for (const auto& p : providers) {
    if (p.left_out) {
      left_out += (left_out.empty() ? "" : ", ") + p.name + " (" + p.check.detail + ")";
    } else {
      checks.push_back(p.check);
    }
  }
  if (!left_out.empty()) checks.push_back({"providers left out", Verdict::info, left_out, ""});
  if (options.check_provider) {
    for (Check& check : check_mcp_servers(options)) checks.push_back(std::move(check));
  }

  std::size_t failed = 0;
  for (const auto& check : checks) failed += check.verdict == Verdict::fail ? 1 : 0;
  const bool healthy = failed == 0;

  if (output.json) {
    OrderedJson list = OrderedJson::array();
    for (const auto& check : checks) {
      OrderedJson entry{{"name", check.name}, {"status", json_key(to_label(check.verdict))}, {"detail", check.detail}};
      if (!check.hint.empty()) entry["hint"] = check.hint;
      list.push_back(std::move(entry));
    }
    OrderedJson provider_list = OrderedJson::array();
    for (const auto& p : providers) {
      if (p.name.empty()) continue;  // the settings' row: in `checks` only
      OrderedJson entry{{"name", p.name},
                        {"kind", p.kind},
                        {"base_url", p.base_url},
                        {"model", p.model},
                        {"verdict", json_key(to_label(p.check.verdict))},
                        {"detail", p.check.detail},
                        {"hint", p.check.hint},
                        {"http_status", p.http_status}};
      entry["elapsed_ms"] = p.elapsed_ms >= 0 ? OrderedJson(p.elapsed_ms) : OrderedJson(nullptr);
      provider_list.push_back(std::move(entry));
    }
    print_json(output.out,
               OrderedJson{{"ok", healthy}, {"failed", failed}, {"checks", list}, {"providers", provider_list}});
    return healthy ? kExitOk : kExitProblem;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& check : checks) {
    std::string label = to_label(check.verdict);
    label.resize(4, ' ');  // the same column whichever labels occur
    rows.push_back({label, check.name, check.detail});
  }
  const std::string table = render_table(rows, {}, "");
  // Each check's hint goes on the line after it.
  std::size_t line_start = 0;
  for (const auto& check : checks) {
    const std::size_t line_end = table.find('\n', line_start);
    output.out << table.substr(line_start, line_end - line_start + 1);
    line_start = line_end + 1;
    if (!check.hint.empty()) output.out << "      hint: " << check.hint << '\n';
  }
  if (healthy) {
    output.out << "\nHealthy.\n";
  } else {
    output.out << "\n" << failed << " check" << (failed == 1 ? "" : "s") << " failed.\n";
  }
  return healthy ? kExitOk : kExitProblem;
}

void add_doctor_command(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen) {
  // doctor
  auto no_network = std::make_shared<bool>(false);
  auto* doctor = app.add_subcommand(
      "doctor",
      "Check that Passepartout can run here: the tools the bundled skills need, the state folder,\n"
      "the bundled skills, the running daemon and its health, each model provider the daemon would\n"
      "use (a real request to each), and each MCP server it would run (started, listed and stopped).\n"
      "Prints each check with OK, WARN, FAIL or INFO and a hint.");
  doctor
      ->add_option("--manifests", parsed->doctor.manifest_dir,
                   "Folder of the manifests to check (default: the bundled ones; env PASSEPARTOUT_MANIFEST_DIR)")
      ->type_name("DIR");
  doctor
      ->add_option("--plugins", parsed->doctor.plugin_dir,
                   "Plugin folder (default: the bundled skills; env PASSEPARTOUT_PLUGIN_DIR)")
      ->type_name("DIR");
  doctor
      ->add_option("--state-dir", parsed->doctor.state_dir,
                   "The state folder to check (default: " + default_state_dir().string() + ")")
      ->type_name("DIR");
  doctor
      ->add_option("--config", parsed->doctor.config_file,
                   "The daemon's config file (as `passepartout daemon --config FILE`), for its providers:\n"
                   "list and provider_cascade")
      ->type_name("FILE");
  doctor
      ->add_option("--mcp-config", parsed->doctor.mcp_config_file,
                   "An .mcp.json or mcp.json the daemon takes MCP servers from (as `daemon --mcp-config`)")
      ->type_name("FILE");
  doctor->add_flag("--no-network", *no_network,
                   "Report the model providers and HTTP MCP servers the daemon would use without sending them\n"
                   "any request (stdio MCP servers are still started)");
  add_connection_options(*doctor, *parsed, kReplyTimeoutS);
  doctor->footer(
      "Each model provider the daemon would use (the same settings: the environment, the .env file,\n"
      "--config) is asked for its list of models, all at once, each within 5 s (connect: 3 s), and the\n"
      "configured model is looked for there; where a server has no list, it is asked for one token.\n"
      "A provider that does not work is a warning when another one does, a failure when none does.\n"
      "PASSEPARTOUT_PROVIDER=scripted or offline: no request is made.\n"
      "Each MCP server of the config's mcp_servers: and of --mcp-config is started (or reached) as the\n"
      "daemon would, sandbox included, given 20 s to list its tools, and stopped; a tool whose definition\n"
      "changed since it was pinned is a warning (passepartout mcp trust); the pins are not written.\n"
      "Exit status: 0 every required check passed; 1 a check failed; 2 bad usage.");
  doctor->callback([parsed, &chosen, no_network] {
    choose(chosen, parsed, kReplyTimeoutS, [parsed, no_network](const Target& target, const Output& output) {
      DoctorOptions options = parsed->doctor;
      options.network = !*no_network;
      options.env = process_env;
      // As the daemon does: .env fills what the environment leaves unset.
      if (auto loaded = load_env_file(default_env_file()); !loaded) options.env_file_error = loaded.error().message;
      if (options.manifest_dir.empty()) options.manifest_dir = default_manifest_dir();
      if (options.plugin_dir.empty()) options.plugin_dir = default_plugin_dir();
      if (options.state_dir.empty()) options.state_dir = default_state_dir();
      return run_doctor(target, options, output);
    });
  });
}

}  // namespace passepartout::cli
