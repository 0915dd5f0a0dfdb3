// Resolving the daemon's settings: command line over config file over
// environment over .env, each value checked with a message naming its source.
#include "daemon/daemon_config.hpp"

#include <yaml-cpp/yaml.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <system_error>

#include "base/ascii.hpp"
#include "base/duration_text.hpp"
#include "base/errno_text.hpp"
#include "base/state_paths.hpp"
#include "base/yaml_diagnostics.hpp"
#include "daemon/frame_codec.hpp"
#include "pipeline/consensus_yaml.hpp"
#include "providers/budget_yaml.hpp"
#include "providers/provider_config_yaml.hpp"
#include "skills/audit_log.hpp"
#include "skills/bundled_skills.hpp"
#include "store/pg_client.hpp"

namespace passepartout {
namespace fs = std::filesystem;
namespace {

constexpr std::array kSettings{
    DaemonSetting{"state-dir", "PASSEPARTOUT_STATE_DIR", "DIR",
                  "Folder for durable state: audit.sqlite3 (skill changes), approvals.sqlite3, memory.sexp and\n"
                  "the operator token file `token` (default $XDG_STATE_HOME/passepartout, else\n"
                  "~/.local/state/passepartout)"},
    DaemonSetting{"workspace", "PASSEPARTOUT_WORKSPACE", "DIR",
                  "The folder `${workspace}` in a manifest's config stands for: where the bundled shell runs\n"
                  "commands and file-tools reads and writes (default <state dir>/workspace, created mode 0700)"},
    DaemonSetting{"socket", "PASSEPARTOUT_SOCKET", "PATH",
                  "The Unix socket, created mode 0600 (default $XDG_RUNTIME_DIR/passepartout.sock, else\n"
                  "<state dir>/passepartout.sock)"},
    DaemonSetting{"listen", "PASSEPARTOUT_LISTEN", "ADDR",
                  "The TCP address (default 127.0.0.1); anything but loopback needs --tcp-auth all (the default)"},
    DaemonSetting{"port", "PASSEPARTOUT_PORT", "N",
                  "The TCP port (default 9105); 0 picks a free one. The daemon prints\n"
                  "`listening on <addr>:<port>` on standard output once it serves"},
    DaemonSetting{"no-tcp", "PASSEPARTOUT_NO_TCP", "", "Serve on the Unix socket only"},
    DaemonSetting{"metrics-port", "PASSEPARTOUT_METRICS_PORT", "N",
                  "The loopback HTTP port of GET /metrics (Prometheus), /healthz and /readyz on 127.0.0.1\n"
                  "(default 9106: when it is taken the daemon warns and serves without it; a port given here\n"
                  "that is taken stops the start); 0 picks a free one (logged, and shown by `status`); off: none"},
    DaemonSetting{"tcp-auth", "PASSEPARTOUT_TCP_AUTH", "MODE",
                  "Which TCP requests must carry :AUTH \"<token>\" (the contents of <state dir>/token); the Unix\n"
                  "socket is authenticated by its mode. all (default): every request. user-input: on loopback\n"
                  "only, plain user input may come without it (clients of the tokenless Lisp protocol); raw\n"
                  "actions, anything that would create an approval and operator requests still need it"},
    DaemonSetting{"require-auth", "PASSEPARTOUT_REQUIRE_AUTH", "",
                  "The same as --tcp-auth all, the default (kept for existing configurations)"},
    DaemonSetting{"manifests", "PASSEPARTOUT_MANIFEST_DIR", "DIR",
                  "Folder of skill manifests (default: the bundled ones)"},
    DaemonSetting{"plugins", "PASSEPARTOUT_PLUGIN_DIR", "DIR",
                  "Folder the manifests' libraries are found in (default: the bundled skills)"},
    DaemonSetting{"watch", "PASSEPARTOUT_WATCH", "",
                  "Rescan when a manifest or library in those folders changes (inotify), and reload the MCP\n"
                  "servers when the config file or the --mcp-config file changes"},
    DaemonSetting{"provider", "PASSEPARTOUT_PROVIDER", "NAMES",
                  "Model providers to try, in order, separated by commas: scripted, offline, or the name of\n"
                  "a real one (default: scripted when --script is given, else the --provider-cascade, else\n"
                  "offline, which says that no model is reachable)"},
    DaemonSetting{"provider-cascade", "PROVIDER_CASCADE", "NAMES",
                  "Real providers to try, in order, separated by commas (the config file's providers: and the\n"
                  "presets ollama, openrouter, openai, anthropic, groq, gemini); default: those the config\n"
                  "file declares, then the presets whose key is set, ollama when OLLAMA_HOST is set.\n"
                  "The environment variable wins over the config file's provider_cascade:"},
    DaemonSetting{"mcp-config", "PASSEPARTOUT_MCP_CONFIG", "FILE",
                  "An .mcp.json or mcp.json to take Model Context Protocol servers from, unchanged (its\n"
                  "mcpServers, or VS Code's servers), besides the config file's mcp_servers:"},
    DaemonSetting{"script", "PASSEPARTOUT_SCRIPT", "FILE",
                  "The scripted provider's YAML rules (match / reply / delay_ms / stream / fail / tool_call)"},
    DaemonSetting{"memory-file", "MEMORY_SNAPSHOT_PATH", "FILE",
                  "Where memory is loaded from at start and saved to (default <state dir>/memory.sexp)"},
    DaemonSetting{"memory-history-limit", "PASSEPARTOUT_MEMORY_HISTORY_LIMIT", "N",
                  "Versions of memory objects kept in the history; past it the oldest that neither the live\n"
                  "memory nor a snapshot holds are dropped (default 100000; 0: no limit)"},
    DaemonSetting{"heartbeat-interval", "HEARTBEAT_INTERVAL", "SECONDS",
                  "Seconds between heartbeat signals (default 60; 0: no heartbeat)"},
    DaemonSetting{"memory-auto-save-interval", "MEMORY_AUTO_SAVE_INTERVAL", "SECONDS",
                  "Seconds between saves of changed memory, on heartbeats (default 300)"},
    DaemonSetting{"default-actuator", "DEFAULT_ACTUATOR", "NAME",
                  "Actuator for actions that name no target and whose signal has no source (default cli)"},
    DaemonSetting{"silent-actuators", "SILENT_ACTUATORS", "LIST",
                  "Actuators whose results are not fed back as signals, separated by commas\n"
                  "(default cli,system-message,emacs)"},
    DaemonSetting{"assistant-name", "MEMEX_ASSISTANT", "NAME", "The assistant's name in prompts (default Agent)"},
    DaemonSetting{"price-table", "PASSEPARTOUT_PRICE_TABLE", "FILE",
                  "Model prices in LiteLLM's model_prices_and_context_window.json format, over the built-in\n"
                  "ones of the presets' models: what the usage ledger and the budget: caps count calls at"},
    DaemonSetting{"state-db", "PASSEPARTOUT_STATE_DB", "URL",
                  "The state database a fleet of daemons shares: PostgreSQL, as a postgresql:// URL or a libpq\n"
                  "connection string, its password from PGPASSWORD or a password file (never in the URL);\n"
                  "without it the state stays in the state folder"},
    DaemonSetting{"node-id", "PASSEPARTOUT_NODE_ID", "NAME",
                  "This daemon's name in the fleet, on what it records in the state database (default the host name)"},
    DaemonSetting{"fleet-lease", "PASSEPARTOUT_FLEET_LEASE", "SECONDS",
                  "In a fleet: how long a node holds a claimed approved run before another may take it over, and\n"
                  "how long a node not heard from is taken for alive (default 10; polled every third of it)"},
    DaemonSetting{"fleet-trusted-key", "PASSEPARTOUT_FLEET_TRUSTED_KEY", "HEX",
                  "In a fleet: the Ed25519 public key (64 hex digits, `passepartout fleet keygen`) whose signature\n"
                  "a skill release must carry before this node loads it (default: none; releases are checked by\n"
                  "their digests alone)"},
    DaemonSetting{"identity", "PASSEPARTOUT_IDENTITY", "FILE",
                  "Who the agent is, in the words of this file, added to the prompt's IDENTITY (at most 16 KiB;\n"
                  "default ~/.config/passepartout/identity.md when it exists)"},
    DaemonSetting{"prompt-log-lines", "PASSEPARTOUT_PROMPT_LOG_LINES", "N",
                  "The session's own recent log lines shown to the model in LOGS, masked (default 20; 0: none;\n"
                  "also --context-log-limit, CONTEXT_LOG_LIMIT)"},
    DaemonSetting{"context-log-limit", "CONTEXT_LOG_LIMIT", "N", "The same as --prompt-log-lines (the seed's name)"},
    DaemonSetting{"transcript-tokens", "PASSEPARTOUT_TRANSCRIPT_TOKENS", "N",
                  "Estimated tokens of a session's conversation sent to a real model; past it the oldest\n"
                  "exchanges are dropped (default 0: a quarter of the providers' smallest context_window)"},
    DaemonSetting{"approval-lifetime", "PASSEPARTOUT_APPROVAL_LIFETIME", "SECONDS",
                  "How long an action waits for a human's approval before it expires (default 86400: 24 h)"},
    DaemonSetting{"approval-retention", "PASSEPARTOUT_APPROVAL_RETENTION", "SECONDS",
                  "How long approvals.sqlite3 keeps an approval once it is decided or has expired; older ones\n"
                  "are deleted (default 2592000: 30 days; 0: kept for ever)"},
    DaemonSetting{"unattended-approvals", "PASSEPARTOUT_UNATTENDED_APPROVALS", "POLICY",
                  "What becomes of an approval nobody decides: wait (the default: it waits until\n"
                  "--approval-lifetime ends it) or deny-after DURATION (10m, 2h, 1d): denied at that time,\n"
                  "recorded as expired: denied unattended, its session and the decision log told; for a\n"
                  "daemon nobody watches",
                  2},
    DaemonSetting{"rules", "PASSEPARTOUT_RULES", "FILE",
                  "The operator's rules and standing approvals: deny, ask and allow rules on targets, tools,\n"
                  "commands and arguments (default <state dir>/rules.yaml; `passepartout rules`, docs/rules.md);\n"
                  "a file that does not read stops the start"},
    DaemonSetting{"max-pending-approvals", "PASSEPARTOUT_MAX_PENDING_APPROVALS", "N",
                  "Approvals that may wait at once, all sessions together; past it a new request is refused\n"
                  "(the action does not run; the user is told why; `status` counts it) (default 1000)"},
    DaemonSetting{"max-pending-approvals-per-session", "PASSEPARTOUT_MAX_PENDING_APPROVALS_PER_SESSION", "N",
                  "Approvals that may wait at once in one session (:META :SESSION-ID); past it the session's\n"
                  "new requests are refused the same way (default 20)"},
    DaemonSetting{"no-decision-log", "PASSEPARTOUT_NO_DECISION_LOG", "",
                  "Do not record verifications in <state dir>/decisions/ (the decision log, on by default;\n"
                  "`passepartout decisions` reads it)"},
    DaemonSetting{"decision-log-file-size", "PASSEPARTOUT_DECISION_LOG_FILE_SIZE", "MIB",
                  "The decision log's current file is rotated before it grows past this (default 64)"},
    DaemonSetting{"decision-log-files", "PASSEPARTOUT_DECISION_LOG_FILES", "N",
                  "Decision log files kept, the current one included; the oldest rotated ones are deleted\n"
                  "(default 8: with the default size at most 512 MiB)"},
    DaemonSetting{"decision-log-rotate", "PASSEPARTOUT_DECISION_LOG_ROTATE", "SECONDS",
                  "The decision log's current file is rotated once this old (default 86400: daily; 0: by size only)"},
    DaemonSetting{"decision-log-sample", "PASSEPARTOUT_DECISION_LOG_SAMPLE", "N",
                  "Record 1 in N verifications that passed (default 1: all); blocks, failures and approvals\n"
                  "are always recorded"},
    DaemonSetting{"decision-log-time-gates", "PASSEPARTOUT_DECISION_LOG_TIME_GATES", "N",
                  "Time each gate in 1 of every N verifications (default 8; 1: every one): a clock reading per\n"
                  "gate costs the loop about a tenth at saturation; the whole verification is always timed"},
    DaemonSetting{"decision-log-buffer", "PASSEPARTOUT_DECISION_LOG_BUFFER", "N",
                  "Decisions each pipeline thread may have waiting for the writer; past it they are dropped and\n"
                  "counted (`status`, and a warning once a minute), never waited for (default 1024)"},
    DaemonSetting{"privacy-tags", "PRIVACY_FILTER_TAGS", "LIST",
                  "Memory projects tagged with one of these stay out of the model's prompt, separated by commas\n"
                  "(default @personal; the dispatcher skill's privacy_tags, which block actions, are its own)"},
    DaemonSetting{"max-frame", "PASSEPARTOUT_MAX_FRAME", "N",
                  "Largest frame, in code points, either direction (default 1048576; at most 16777215)"},
    DaemonSetting{"max-connections", "PASSEPARTOUT_MAX_CONNECTIONS", "N",
                  "Open TCP connections. At the limit a new one is served and the open one that has done least\n"
                  "for longest (not authenticated, not busy) is closed to make room; when none may be, the new\n"
                  "one gets BUSY (default: what the descriptor limit leaves room for, at most 1024; a value the\n"
                  "limit cannot serve stops the start)"},
    DaemonSetting{"max-unix-connections", "PASSEPARTOUT_MAX_UNIX_CONNECTIONS", "N",
                  "Open connections on the Unix socket, counted apart from TCP's so that no number of TCP\n"
                  "clients locks the operator out (default 64)"},
    DaemonSetting{"max-connections-per-peer", "PASSEPARTOUT_MAX_CONNECTIONS_PER_PEER", "N",
                  "Open TCP connections from one peer: one local user on loopback (the kernel names the owner\n"
                  "of the other end), else one address; at the limit, as --max-connections (default 64)"},
    DaemonSetting{"handshake-timeout", "PASSEPARTOUT_HANDSHAKE_TIMEOUT", "SECONDS",
                  "Close a connection that has not sent a complete request this long after it opened\n"
                  "(default 10; 0: never); once it has, --idle-timeout applies"},
    DaemonSetting{"max-queued-replies", "PASSEPARTOUT_MAX_QUEUED_REPLIES", "MIB",
                  "Reply bytes waiting for slow readers, all connections together (default 256): past it the\n"
                  "connection holding the most is closed, with a logged reason, and the others are served"},
    DaemonSetting{"idle-timeout", "PASSEPARTOUT_IDLE_TIMEOUT", "SECONDS",
                  "Close a connection idle this long (default 1800; 0: never)"},
    DaemonSetting{"read-timeout", "PASSEPARTOUT_READ_TIMEOUT", "SECONDS",
                  "A frame begun must be complete within this (default 30)"},
    DaemonSetting{"shutdown-grace", "PASSEPARTOUT_SHUTDOWN_GRACE", "SECONDS",
                  "On SIGTERM, SIGINT or :SHUTDOWN, how long signals in flight may take to finish (default 10)"},
    DaemonSetting{"gate-timeout", "PASSEPARTOUT_GATE_TIMEOUT", "SECONDS",
                  "A gate's time budget per call when its manifest sets no gate_timeout (default 1); a gate past\n"
                  "its budget fails closed (the action is blocked, the trace says :FAILED)"},
    DaemonSetting{"gate-timeout-max", "PASSEPARTOUT_GATE_TIMEOUT_MAX", "SECONDS",
                  "The largest gate_timeout a manifest may set (default 10; at most 3600); a skill asking for\n"
                  "more is refused at load"},
    DaemonSetting{"idle-poll", "PASSEPARTOUT_IDLE_POLL", "MICROSECONDS",
                  "After its last piece of work, each of the two event loops keeps polling this long before it\n"
                  "sleeps, and polls while the other is busy, so a request arriving meanwhile is taken up\n"
                  "without waking a thread and a local client is answered on a CPU that has not halted; costs\n"
                  "CPU only during and right after activity (default 200; at most 100000; 0: sleep at once)"},
    DaemonSetting{"log-level", "PASSEPARTOUT_LOG_LEVEL", "LEVEL", "debug, info, warn or error (default info)"},
    DaemonSetting{"log-json", "PASSEPARTOUT_LOG_JSON", "", "Log JSON lines instead of text (standard error)"},
};

// A setting's text and where it came from, for messages.
struct Raw {
  std::string text;
  std::string where;  // "--port", "PASSEPARTOUT_PORT", "/etc/pp.yaml:3:7: port"
  fs::path base;      // relative paths are resolved against it (the config file's folder)
};

using RawMap = std::map<std::string, Raw, std::less<>>;

// This machine's name: a node's default name in the fleet.
std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

Unexpected<Error> bad(const Raw& raw, const std::string& what) {
  return fail(ErrorCode::invalid_input, raw.where + ": " + in_quotes(raw.text) + " " + what);
}

std::string scalar_text(const YAML::Node& node) {
  if (node.IsSequence()) {
    std::string joined;
    for (const auto& item : node) joined += (joined.empty() ? "" : ",") + (item.IsScalar() ? item.Scalar() : "?");
    return joined;
  }
  return node.Scalar();
}

// Reads the config file: a map whose keys are settings' keys.
// Reads the config file: a map whose keys are settings' keys, and the
// providers: list (into `declared`).
Result<void> read_config_file(const fs::path& file, RawMap& raws, std::vector<ProviderConfig>& declared,
                              BudgetConfig& budget, DaemonConfig& settled, const EnvLookup& env) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    return fail(ErrorCode::io_error, "config file " + file.string() + ": cannot be read (" + errno_text(errno) + ")");
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string origin = file.string();
  YamlProblems problems(origin);
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::invalid_input, located(origin, e.mark, e.msg));
  }
  if (root.IsNull()) return {};  // an empty file sets nothing
  if (!root.IsMap()) {
    return fail(ErrorCode::invalid_input,
                located(origin, root.Mark(), "expected a map of settings (key: value), one per line"));
  }
  std::vector<std::string_view> known;
  known.reserve(kSettings.size() + 1);
  for (const DaemonSetting& s : kSettings) known.push_back(s.key);
  known.emplace_back("providers");
  known.emplace_back("mcp_servers");
  known.emplace_back("budget");
  known.emplace_back("consensus");
  const fs::path base = file.parent_path();
  for (const auto& entry : root) {
    const YAML::Node& key = entry.first;
    const YAML::Node& value = entry.second;
    std::string name = key.IsScalar() ? key.Scalar() : std::string("?");
    if (name == "providers") {
      read_provider_list(value, problems, env, base, declared);
      continue;
    }
    if (name == "budget") {
      read_budget(value, problems, budget);
      continue;
    }
    if (name == "consensus") {
      read_consensus(value, problems, settled.consensus, settled.consensus_origins);
      continue;
    }
    if (name == "mcp_servers") continue;                        // read_mcp_configuration's
    if (name == "provider_cascade") name = "provider-cascade";  // as the providers: list spells its keys
    if (name == "state_db") name = "state-db";
    if (name == "node_id") name = "node-id";
    if (name == "fleet_lease") name = "fleet-lease";
    if (name == "fleet_trusted_key") name = "fleet-trusted-key";
    auto setting =
        std::find_if(kSettings.begin(), kSettings.end(), [&](const DaemonSetting& s) { return s.key == name; });
    if (setting == kSettings.end()) {
      problems.problem(key.Mark(), unknown_key_message(name, known, ""));
      continue;
    }
    const bool list_ok =
        name == "silent-actuators" || name == "provider" || name == "privacy-tags" || name == "provider-cascade";
    if (value.IsNull() || !value.IsDefined()) {
      problems.problem_at(key, value, name + ": needs a value");
      continue;
    }
    if (!value.IsScalar() && !(list_ok && value.IsSequence())) {
      problems.problem_at(key, value,
                          name + (list_ok ? ": expected a value or a list of values" : ": expected a single value"));
      continue;
    }
    const std::string where = located(origin, value.Mark(), name);
    raws[name] = Raw{scalar_text(value), where, base};
  }
  if (!problems.ok()) return fail(ErrorCode::invalid_input, problems.message());
  return {};
}

std::optional<bool> parse_bool(std::string_view text) {
  const std::string folded = ascii_lower(text);
  if (folded == "true" || folded == "1" || folded == "yes" || folded == "on") return true;
  if (folded == "false" || folded == "0" || folded == "no" || folded == "off") return false;
  return std::nullopt;
}

Result<std::uint64_t> parse_count(const Raw& raw, std::uint64_t min, std::uint64_t max, const std::string& what) {
  std::uint64_t n = 0;
  const char* end = raw.text.data() + raw.text.size();
  auto [ptr, ec] = std::from_chars(raw.text.data(), end, n);
  if (raw.text.empty() || ec != std::errc() || ptr != end || n < min || n > max) {
    return bad(raw, "is not " + what + " (" + std::to_string(min) + " to " + std::to_string(max) + ")");
  }
  return n;
}

// Whole or decimal seconds, "60" or "0.25"; at most a year.
Result<std::chrono::milliseconds> parse_seconds(const Raw& raw) {
  double seconds = -1;
  const char* end = raw.text.data() + raw.text.size();
  auto [ptr, ec] = std::from_chars(raw.text.data(), end, seconds);
  constexpr double kMax = 366.0 * 24 * 3600;
  if (raw.text.empty() || ec != std::errc() || ptr != end || !std::isfinite(seconds) || seconds < 0 || seconds > kMax) {
    return bad(raw, "is not a number of seconds (0 or more, at most a year; e.g. 60 or 0.5)");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(seconds * 1000)));
}

fs::path parse_path(const Raw& raw) {
  fs::path path = raw.text;
  if (raw.text.starts_with("~/")) {
    if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
      path = fs::path(home) / raw.text.substr(2);
  }
  if (path.is_relative() && !raw.base.empty()) path = raw.base / path;
  return path.lexically_normal();
}

// An actuator name as the pipeline compares it: upper case, no leading ':'.
Result<std::string> parse_actuator(const Raw& raw, std::string_view text) {
  if (!text.empty() && text.front() == ':') text.remove_prefix(1);
  const bool ok = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  });
  if (!ok) return bad(raw, "is not an actuator name (letters, digits, '-' and '_')");
  return ascii_upper(text);
}

std::vector<std::string_view> split_list(std::string_view text) {
  std::vector<std::string_view> items;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (!item.empty()) items.push_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return items;
}

// A value of a .env line without its quotes.
std::string unquote(std::string_view value) {
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t' || value.back() == '\r'))
    value.remove_suffix(1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front()) {
    return std::string(value.substr(1, value.size() - 2));
  }
  if (const std::size_t hash = value.find(" #"); hash != std::string_view::npos) {  // a trailing comment
    value = value.substr(0, hash);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  }
  return std::string(value);
}

}  // namespace

std::span<const DaemonSetting> daemon_settings() { return kSettings; }

std::optional<std::string> process_env(std::string_view name) {
  const char* value = std::getenv(std::string(name).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

namespace {

// The environment lookup of `sources`, kept for later reads of the config (mcp reload).
mcp::EnvLookup env_lookup_copy(const SettingSources& sources) {
  return [lookup = sources.env](std::string_view name) -> std::optional<std::string> {
    return lookup ? lookup(name) : std::nullopt;
  };
}

}  // namespace

Result<std::vector<mcp::McpServerConfig>> read_mcp_configuration(const fs::path& config_file,
                                                                 const fs::path& mcp_config_file,
                                                                 const mcp::EnvLookup& env) {
  std::vector<mcp::McpServerConfig> servers;
  if (!config_file.empty()) {
    std::ifstream in(config_file, std::ios::binary);
    if (!in) {
      return fail(ErrorCode::io_error,
                  "config file " + config_file.string() + ": cannot be read (" + errno_text(errno) + ")");
    }
    std::stringstream text;
    text << in.rdbuf();
    YamlProblems problems(config_file.string());
    try {
      const YAML::Node root = YAML::Load(text.str());
      if (root.IsMap() && root["mcp_servers"].IsDefined()) {
        mcp::read_mcp_servers(root["mcp_servers"], problems, env, config_file.parent_path(), servers);
      }
    } catch (const YAML::Exception& e) {
      return fail(ErrorCode::invalid_input, located(config_file.string(), e.mark, e.msg));
    }
    if (!problems.ok()) return fail(ErrorCode::invalid_input, problems.message());
  }
  if (!mcp_config_file.empty()) {
    auto more = mcp::read_mcp_json(mcp_config_file, env);
    if (!more) return fail(more.error().code, more.error().message);
    for (mcp::McpServerConfig& server : *more) {
      const bool repeated = std::any_of(servers.begin(), servers.end(),
                                        [&](const mcp::McpServerConfig& c) { return c.name == server.name; });
      if (repeated) {
        return fail(ErrorCode::invalid_input, server.where + ": mcp server '" + server.name + "' is declared in " +
                                                  config_file.string() + " too; rename one");
      }
      servers.push_back(std::move(server));
    }
  }
  return servers;
}

Result<DaemonConfig> resolve_daemon_config(const SettingSources& sources) {
  // Lowest precedence first, each later source overwriting.
  RawMap raws;
  for (const DaemonSetting& s : kSettings) {
    if (s.env.empty() || !sources.env) continue;
    if (auto value = sources.env(s.env)) raws[std::string(s.key)] = Raw{*value, std::string(s.env), {}};
  }
  const EnvLookup env_lookup = [&](std::string_view name) -> std::optional<std::string> {
    return sources.env ? sources.env(name) : std::nullopt;
  };
  std::vector<ProviderConfig> declared;
  BudgetConfig budget;
  DaemonConfig config;
  if (!sources.config_file.empty()) {
    if (auto read = read_config_file(sources.config_file, raws, declared, budget, config, env_lookup); !read)
      return fail(read.error().code, read.error().message);
  }
  // PROVIDER_CASCADE wins over the file's provider_cascade: (the seed's variable).
  if (auto order = env_lookup("PROVIDER_CASCADE")) raws["provider-cascade"] = Raw{*order, "PROVIDER_CASCADE", {}};
  for (const auto& [key, text] : sources.command_line) raws[key] = Raw{text, "--" + key, {}};
  auto raw = [&](std::string_view key) -> const Raw* {
    auto it = raws.find(key);
    return it == raws.end() ? nullptr : &it->second;
  };
  auto env = [&](std::string_view name) { return sources.env ? sources.env(name) : std::nullopt; };
  auto flag = [&](std::string_view key, bool& out) -> Result<void> {
    if (const Raw* r = raw(key)) {
      auto value = parse_bool(r->text);
      if (!value) return bad(*r, "is not true or false");
      out = *value;
    }
    return {};
  };

  config.budget = std::move(budget);
  if (const Raw* r = raw("state-dir")) {
    if (r->text.empty()) return bad(*r, "is not a folder");
    config.state_dir = parse_path(*r);
  } else {
    config.state_dir = default_state_dir();
  }
  if (const Raw* r = raw("socket")) {
    if (r->text.empty()) return bad(*r, "is not a path");
    config.socket_path = parse_path(*r);
  } else {
    config.socket_path = default_socket_path(env("XDG_RUNTIME_DIR"), config.state_dir);
  }
  if (config.socket_path.native().size() > 107) {
    const Raw* r = raw("socket");
    const Raw fallback{config.socket_path.string(), "the Unix socket path", {}};
    return bad(r != nullptr ? *r : fallback,
               "is longer than the 107 bytes a Unix socket path may have; choose a shorter --socket");
  }
  if (const Raw* r = raw("listen")) {
    if (r->text.empty()) return bad(*r, "is not an address");
    config.listen_address = r->text;
  }
  if (const Raw* r = raw("port")) {
    auto port = parse_count(*r, 0, 65535, "a port number");
    if (!port) return fail(port.error().code, port.error().message);
    config.port = static_cast<std::uint16_t>(*port);
  }
  if (const Raw* r = raw("metrics-port")) {
    if (ascii_lower(r->text) == "off") {
      config.metrics = false;
    } else {
      auto port = parse_count(*r, 0, 65535, "a port number or off");
      if (!port) return fail(port.error().code, port.error().message);
      config.metrics_port = static_cast<std::uint16_t>(*port);
      config.metrics_port_explicit = true;
    }
  }
  bool no_tcp = false;
  if (auto r = flag("no-tcp", no_tcp); !r) return fail(r.error().code, r.error().message);
  config.listen_tcp = !no_tcp;
  bool require_auth = false;
  if (auto r = flag("require-auth", require_auth); !r) return fail(r.error().code, r.error().message);
  if (const Raw* r = raw("tcp-auth")) {
    if (r->text == "all") {
      config.tcp_auth = DaemonConfig::TcpAuth::all;
    } else if (r->text == "user-input") {
      config.tcp_auth = DaemonConfig::TcpAuth::user_input;
    } else {
      return bad(*r, "is not a TCP authentication mode: all or user-input");
    }
    if (require_auth && config.tcp_auth != DaemonConfig::TcpAuth::all) {
      return bad(*r, "contradicts --require-auth (which means --tcp-auth all); give one");
    }
  }
  if (auto r = flag("watch", config.watch); !r) return fail(r.error().code, r.error().message);
  bool no_decision_log = false;
  if (auto r = flag("no-decision-log", no_decision_log); !r) return fail(r.error().code, r.error().message);
  config.decision_log = !no_decision_log;
  bool log_json = false;
  if (auto r = flag("log-json", log_json); !r) return fail(r.error().code, r.error().message);
  config.log_format = log_json ? LogFormat::json : LogFormat::text;

  config.manifest_dir = raw("manifests") != nullptr ? parse_path(*raw("manifests")) : default_manifest_dir();
  config.plugin_dir = raw("plugins") != nullptr ? parse_path(*raw("plugins")) : default_plugin_dir();

  if (const Raw* r = raw("script")) {
    if (r->text.empty()) return bad(*r, "is not a file");
    config.script = parse_path(*r);
  }
  // The real providers: the seed's presets with the config file's declared over them.
  const std::vector<ProviderConfig> endpoints = merge_providers(preset_providers(env_lookup), std::move(declared));
  config.known_providers = endpoints;
  // Every provider a setting may name: the built-in ones, then the real ones.
  std::vector<std::string_view> provider_names = {"scripted", "offline"};
  for (const ProviderConfig& p : endpoints) provider_names.emplace_back(p.name);
  std::string known;
  for (const std::string_view name : provider_names) {
    if (!known.empty()) known += ", ";
    known += name;
  }
  if (const Raw* r = raw("provider")) {
    for (std::string_view name : split_list(r->text)) {
      const std::string folded = ascii_lower(name);
      if (std::find(config.providers.begin(), config.providers.end(), folded) != config.providers.end()) continue;
      if (folded != "scripted" && folded != "offline") {
        auto endpoint =
            std::find_if(endpoints.begin(), endpoints.end(), [&](const ProviderConfig& p) { return p.name == folded; });
        if (endpoint == endpoints.end()) {
          return bad(*r, "names an unknown provider '" + std::string(name) + "' (known: " + known + ")");
        }
        if (!endpoint->usable()) {
          return bad(*r, "names the provider '" + folded + "', which cannot be used: " + endpoint->unusable);
        }
        config.endpoints.push_back(*endpoint);
      }
      config.providers.push_back(folded);
    }
    if (config.providers.empty()) return bad(*r, "names no provider (known: " + known + ")");
  } else if (!config.script.empty()) {
    config.providers = {"scripted"};
  } else {
    std::optional<CascadeOrder> order;
    if (const Raw* given = raw("provider-cascade")) order = CascadeOrder{split_cascade(given->text), given->where};
    auto selection = select_cascade(endpoints, order, env_lookup("OLLAMA_HOST").has_value());
    if (!selection) return fail(selection.error().code, selection.error().message);
    config.endpoints = std::move(selection->providers);
    config.skipped_providers = std::move(selection->skipped);
    for (const ProviderConfig& p : config.endpoints) config.providers.push_back(p.name);
    if (config.providers.empty()) {
      config.providers = {"offline"};
      config.offline_by_default = true;
    }
  }
  // A per-provider cap must name a provider the daemon knows.
  for (const BudgetCap& cap : config.budget.caps) {
    if (cap.provider.empty() ||
        std::find(provider_names.begin(), provider_names.end(), cap.provider) != provider_names.end()) {
      continue;
    }
    return fail(ErrorCode::invalid_input,
                cap.origin + ": " + unknown_key_message(cap.provider, provider_names, " in budget.per_provider") +
                    " (the providers are the presets and the config file's providers:)");
  }
  // Consensus voters must be providers of the cascade: a round asks them there.
  for (std::size_t i = 0; i < config.consensus.providers.size(); ++i) {
    const std::string& name = config.consensus.providers[i];
    if (std::find(config.providers.begin(), config.providers.end(), name) != config.providers.end()) continue;
    std::string cascade;
    for (const std::string& p : config.providers) cascade += (cascade.empty() ? "" : ", ") + p;
    return fail(ErrorCode::invalid_input, config.consensus_origins[i] + ": consensus.providers: " + in_quotes(name) +
                                              " is not in the cascade (" + cascade +
                                              "): only the cascade's providers can vote");
  }
  if (const Raw* r = raw("state-db")) {
    auto shown = describe_pg_target(r->text);
    // Not quoted: the text may hold the password it is refused for.
    if (!shown) return fail(shown.error().code, r->where + ": the state database's address " + shown.error().message);
    config.state_db = r->text;
    config.state_db_shown = std::move(*shown);
  }
  if (const Raw* r = raw("node-id")) {
    if (r->text.empty() || r->text.size() > 128 || r->text.find_first_of(" \t\r\n") != std::string::npos) {
      return bad(*r, "is not a node name (1 to 128 characters, no blanks)");
    }
    config.node_id = r->text;
  } else {
    config.node_id = host_name();
  }
  if (const Raw* r = raw("fleet-trusted-key")) {
    if (r->text.size() != 64 || r->text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
      return bad(*r, "is not an Ed25519 public key (64 hex digits, as `passepartout fleet keygen` prints it)");
    }
    config.fleet_trusted_key = r->text;
  }
  if (const Raw* r = raw("price-table")) {
    if (r->text.empty()) return bad(*r, "is not a file");
    config.price_table = parse_path(*r);
  }
  const bool scripted =
      std::find(config.providers.begin(), config.providers.end(), "scripted") != config.providers.end();
  if (scripted && config.script.empty()) {
    return fail(ErrorCode::invalid_input,
                "the scripted provider needs its rules: give --script FILE (or PASSEPARTOUT_SCRIPT)");
  }

  config.memory_file =
      raw("memory-file") != nullptr ? parse_path(*raw("memory-file")) : config.state_dir / "memory.sexp";
  if (const Raw* r = raw("workspace")) {
    if (r->text.empty()) return bad(*r, "is not a folder");
    config.workspace = parse_path(*r);
  } else {
    config.workspace = config.state_dir / "workspace";
  }

  // The counts: key, where it goes, the range allowed, what it counts, and the unit's size.
  struct Count {
    std::string_view key;
    std::size_t* out;
    std::uint64_t min;
    std::uint64_t max;
    const char* what;
    std::size_t unit = 1;
  };
  for (const Count& n :
       {Count{"memory-history-limit", &config.memory_history_limit, 0, 1'000'000'000, "a number of versions"},
        Count{"context-log-limit", &config.context_log_limit, 0, 100, "a number of log lines"},
        Count{"prompt-log-lines", &config.context_log_limit, 0, 100, "a number of log lines"},
        Count{"transcript-tokens", &config.transcript_tokens, 0, 10'000'000, "a number of tokens"},
        Count{"max-frame", &config.max_frame, 64, kMaxFrameCodePoints, "a frame size in code points"},
        Count{"max-connections", &config.max_connections, 1, 100000, "a number of connections"},
        Count{"max-unix-connections", &config.max_unix_connections, 1, 10000, "a number of connections"},
        Count{"max-connections-per-peer", &config.max_connections_per_peer, 1, 100000, "a number of connections"},
        Count{"max-queued-replies", &config.max_queued_reply_bytes, 1, std::uint64_t{1024} * 1024, "a number of MiB",
              std::size_t{1024} * 1024},
        Count{"max-pending-approvals", &config.max_pending_approvals, 1, 1'000'000, "a number of approvals"},
        Count{"decision-log-file-size", &config.decision_log_file_bytes, 1, 65536, "a number of MiB",
              std::size_t{1024} * 1024},
        Count{"decision-log-files", &config.decision_log_files, 1, 10000, "a number of files"},
        Count{"decision-log-sample", &config.decision_log_sample, 1, 1'000'000, "a sampling rate (1 in N)"},
        Count{"decision-log-time-gates", &config.decision_log_time_gates, 1, 1'000'000, "a sampling rate (1 in N)"},
        Count{"decision-log-buffer", &config.decision_log_buffer, 16, 1'000'000, "a number of decisions"},
        Count{"max-pending-approvals-per-session", &config.max_pending_approvals_per_session, 1, 1'000'000,
              "a number of approvals"}}) {
    const Raw* r = raw(n.key);
    if (r == nullptr) continue;
    auto v = parse_count(*r, n.min, n.max, n.what);
    if (!v) return fail(v.error().code, v.error().message);
    *n.out = static_cast<std::size_t>(*v) * n.unit;
  }
  // The durations, in seconds; some cannot be zero.
  struct Duration {
    std::string_view key;
    std::chrono::milliseconds* out;
    bool zero_allowed;
  };
  for (const Duration& d :
       {Duration{"heartbeat-interval", &config.heartbeat_interval, true},
        Duration{"memory-auto-save-interval", &config.auto_save_interval, false},
        Duration{"approval-lifetime", &config.approval_lifetime, false},
        Duration{"fleet-lease", &config.fleet_lease, false},
        Duration{"approval-retention", &config.approval_retention, true},
        Duration{"decision-log-rotate", &config.decision_log_rotate, true},
        Duration{"idle-timeout", &config.idle_timeout, true}, Duration{"read-timeout", &config.read_timeout, false},
        Duration{"handshake-timeout", &config.handshake_timeout, true},
        Duration{"shutdown-grace", &config.shutdown_grace, true}, Duration{"gate-timeout", &config.gate_timeout, false},
        Duration{"gate-timeout-max", &config.gate_timeout_max, false}}) {
    const Raw* r = raw(d.key);
    if (r == nullptr) continue;
    auto value = parse_seconds(*r);
    if (!value) return fail(value.error().code, value.error().message);
    if (!d.zero_allowed && value->count() == 0) return bad(*r, "is not a number of seconds above 0");
    *d.out = *value;
  }
  for (std::string_view key : {"gate-timeout", "gate-timeout-max"}) {
    const Raw* r = raw(key);
    if (r == nullptr) continue;
    const std::chrono::milliseconds value = key == "gate-timeout" ? config.gate_timeout : config.gate_timeout_max;
    if (value < std::chrono::milliseconds(1) || value > std::chrono::hours(1)) {
      return bad(*r, "is not a number of seconds from 0.001 to 3600");
    }
  }
  if (config.gate_timeout > config.gate_timeout_max) {
    return fail(ErrorCode::invalid_input, "--gate-timeout (" + std::to_string(config.gate_timeout.count()) +
                                              " ms) is above --gate-timeout-max (" +
                                              std::to_string(config.gate_timeout_max.count()) +
                                              " ms); lower the one or raise the other");
  }
  if (const Raw* r = raw("default-actuator")) {
    auto v = parse_actuator(*r, r->text);
    if (!v) return fail(v.error().code, v.error().message);
    config.default_actuator = *v;
  }
  if (const Raw* r = raw("silent-actuators")) {
    config.silent_actuators.clear();
    for (std::string_view name : split_list(r->text)) {
      auto v = parse_actuator(*r, name);
      if (!v) return fail(v.error().code, v.error().message);
      config.silent_actuators.push_back(*v);
    }
  }
  if (const Raw* r = raw("rules")) {
    if (r->text.empty()) return bad(*r, "is not a file");
    config.rules_file = parse_path(*r);
  } else {
    config.rules_file = config.state_dir / "rules.yaml";
  }
  if (const Raw* r = raw("unattended-approvals")) {
    const std::string_view text = r->text;
    constexpr std::string_view kDenyAfter = "deny-after";
    if (text == "wait") {
      config.deny_unattended_after = std::chrono::milliseconds(0);
    } else if (text.starts_with(kDenyAfter) && text.size() > kDenyAfter.size() &&
               (text[kDenyAfter.size()] == ' ' || text[kDenyAfter.size()] == '=')) {
      std::string_view span = text.substr(kDenyAfter.size() + 1);
      while (!span.empty() && span.front() == ' ') span.remove_prefix(1);
      auto after = parse_span(span);
      if (!after) return bad(*r, "has a bad duration: " + after.error().message);
      config.deny_unattended_after = *after;
    } else {
      return bad(*r, "is not a policy: wait, or deny-after DURATION (deny-after 10m)");
    }
  }
  config.config_file = sources.config_file;
  if (const Raw* r = raw("mcp-config")) {
    if (r->text.empty()) return bad(*r, "is not a file");
    config.mcp_config_file = parse_path(*r);
  }
  config.env = env_lookup_copy(sources);
  auto servers = read_mcp_configuration(config.config_file, config.mcp_config_file, config.env);
  if (!servers) return fail(servers.error().code, servers.error().message);
  config.mcp_servers = std::move(*servers);
  if (const Raw* r = raw("identity")) {
    if (r->text.empty()) return bad(*r, "is not a file");
    config.identity_file = parse_path(*r);
    config.identity_explicit = true;
  } else {
    config.identity_file = default_env_file().parent_path() / "identity.md";
  }
  if (const Raw* r = raw("assistant-name")) {
    if (r->text.empty()) return bad(*r, "is not a name");
    config.assistant_name = r->text;
  }
  if (const Raw* r = raw("privacy-tags")) {
    config.privacy_tags.clear();
    for (std::string_view tag : split_list(r->text)) config.privacy_tags.emplace_back(tag);
    if (config.privacy_tags.empty()) return bad(*r, "names no tag");
  }
  if (const Raw* r = raw("idle-poll")) {
    auto v = parse_count(*r, 0, 100000, "a number of microseconds");
    if (!v) return fail(v.error().code, v.error().message);
    config.idle_poll = std::chrono::microseconds(*v);
  }
  if (const Raw* r = raw("log-level")) {
    const std::string folded = ascii_lower(r->text);
    if (folded == "debug") {
      config.log_level = LogLevel::debug;
    } else if (folded == "info") {
      config.log_level = LogLevel::info;
    } else if (folded == "warn" || folded == "warning") {
      config.log_level = LogLevel::warn;
    } else if (folded == "error") {
      config.log_level = LogLevel::error;
    } else {
      return bad(*r, "is not a log level (debug, info, warn or error)");
    }
  }
  return config;
}

fs::path default_socket_path(const std::optional<std::string>& runtime_dir, const fs::path& state_dir) {
  if (runtime_dir && fs::path(*runtime_dir).is_absolute()) return fs::path(*runtime_dir) / "passepartout.sock";
  return state_dir / "passepartout.sock";
}

fs::path default_env_file() {
  if (const char* config = std::getenv("XDG_CONFIG_HOME"); config != nullptr && fs::path(config).is_absolute()) {
    return fs::path(config) / "passepartout" / ".env";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : "") / ".config" / "passepartout" / ".env";
}

Result<std::size_t> load_env_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!fs::exists(file, ec)) return std::size_t{0};
    return fail(ErrorCode::io_error, file.string() + ": cannot be read");
  }
  std::vector<std::pair<std::string, std::string>> entries;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string_view rest = line;
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    if (rest.empty() || rest.front() == '#' || rest == "\r") continue;
    if (rest.starts_with("export ")) rest.remove_prefix(7);
    const std::size_t equals = rest.find('=');
    std::string_view name = rest.substr(0, equals);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    const bool valid_name =
        !name.empty() && !(name.front() >= '0' && name.front() <= '9') &&
        std::all_of(name.begin(), name.end(), [](char c) {
          return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
        });
    if (equals == std::string_view::npos || !valid_name) {
      return fail(ErrorCode::invalid_input, file.string() + ":" + std::to_string(number) +
                                                ": expected NAME=value (letters, digits and '_' in NAME)");
    }
    entries.emplace_back(std::string(name), unquote(rest.substr(equals + 1)));
  }
  std::size_t set = 0;
  for (const auto& [name, value] : entries) {
    if (std::getenv(name.c_str()) != nullptr) continue;  // the environment wins
    // NOLINTNEXTLINE(concurrency-mt-unsafe): called before the daemon starts any thread (see the header)
    if (::setenv(name.c_str(), value.c_str(), 0) == 0) ++set;
  }
  return set;
}

}  // namespace passepartout
