// DaemonConfig: every setting of `passepartout daemon`, and how it is resolved
// from the command line, a YAML config file, the environment and the .env file.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/log.hpp"
#include "base/result.hpp"
#include "mcp/server_config.hpp"
#include "memory/memory_store.hpp"
#include "pipeline/approvals.hpp"
#include "pipeline/consensus.hpp"
#include "providers/budget.hpp"
#include "providers/provider_config.hpp"

namespace passepartout {

// One setting: its flag (`--<key>`, and its key in the config file), the
// environment variable that sets it (empty when none), the name of its value
// in --help (empty for a switch), and its help including the default.
struct DaemonSetting {
  std::string_view key;
  std::string_view env;
  std::string_view value_name;
  std::string_view help;
  // Words the flag takes on the command line (joined with a space): 2 for
  // `--unattended-approvals deny-after 10m`.
  int words = 1;
  bool is_switch() const noexcept { return value_name.empty(); }
};

// Every setting, in the order --help lists them.
std::span<const DaemonSetting> daemon_settings();

// Where the text of each setting comes from. For each setting the first of
// these that has it wins: the command line, the config file, the environment
// (the .env file only fills variables the environment does not set).
struct SettingSources {
  // Key -> text as given on the command line; a switch given is "true".
  std::map<std::string, std::string, std::less<>> command_line;
  std::filesystem::path config_file;  // empty: none
  // Looks a variable up in the environment; nullopt when unset or empty.
  std::function<std::optional<std::string>(std::string_view)> env;
};

// The process environment (::getenv), for SettingSources::env.
std::optional<std::string> process_env(std::string_view name);

// The settings, resolved and checked.
struct DaemonConfig {
  std::filesystem::path state_dir;    // audit.sqlite3, approvals.sqlite3, memory.sexp, token
  std::filesystem::path workspace;    // what ${workspace} in manifests stands for
  std::filesystem::path socket_path;  // the Unix socket
  std::string listen_address = "127.0.0.1";
  std::uint16_t port = 9105;  // 0: any free port
  bool listen_tcp = true;
  // Which TCP requests must carry the token (the Unix socket's mode is its check):
  //   all         every request (the default)
  //   user_input  on loopback only, plain user input may come without it, for
  //               clients of the seeds' tokenless protocol (Lisp peers); raw
  //               actions, anything that would create an approval, and operator
  //               requests still need it
  // The loopback HTTP endpoint of /metrics, /healthz and /readyz: off, or
  // on 127.0.0.1:metrics_port (0: any free one). A default port in use is a
  // warning; a port the operator chose, an error that stops the start.
  bool metrics = true;
  std::uint16_t metrics_port = 9106;
  bool metrics_port_explicit = false;
  enum class TcpAuth { all, user_input };
  TcpAuth tcp_auth = TcpAuth::all;
  std::filesystem::path manifest_dir;
  std::filesystem::path plugin_dir;
  bool watch = false;                          // rescan when the manifest or plugin folder changes
  std::vector<std::string> providers;          // "scripted", "offline" or a real one's name, in cascade order
  bool offline_by_default = false;             // "offline" because nothing was configured, not chosen
  std::vector<ProviderConfig> endpoints;       // the real ones of `providers`, each with its settings
  std::vector<std::string> skipped_providers;  // "anthropic: ANTHROPIC_API_KEY is not set": named, unusable
  // Every real provider the presets and the config file define, usable or
  // not, in table order (what `doctor` reports as left out of the cascade).
  std::vector<ProviderConfig> known_providers;
  std::filesystem::path script;  // the scripted provider's rules
  // The config file's budget: caps (providers/budget.hpp), and the prices
  // the built-in table is extended with (--price-table, LiteLLM's format).
  // The state database (store/pg_client.hpp): libpq's address, "" for none;
  // how it is shown (no password can be in it); and this node's name there.
  std::string state_db;
  std::string state_db_shown;
  std::string node_id;
  std::chrono::milliseconds fleet_lease{10000};  // a claim's lease and a node's liveness; more than zero
  std::string fleet_trusted_key;                 // hex Ed25519 public key a release must be signed by; "" none
  BudgetConfig budget;
  // The config file's consensus: (pipeline/consensus.hpp), off when absent;
  // where each of its providers is written, for the errors.
  ConsensusConfig consensus;
  std::vector<std::string> consensus_origins;
  std::filesystem::path price_table;
  std::filesystem::path memory_file;
  std::size_t memory_history_limit = MemoryStore::kDefaultHistoryLimit;  // 0: none

  std::chrono::milliseconds heartbeat_interval{std::chrono::seconds(60)};  // zero: no heartbeat
  std::chrono::milliseconds auto_save_interval{std::chrono::seconds(300)};
  std::string default_actuator = "CLI";
  std::vector<std::string> silent_actuators = {"CLI", "SYSTEM-MESSAGE", "EMACS"};
  std::string assistant_name = "Agent";
  std::size_t context_log_limit = 20;  // --prompt-log-lines, --context-log-limit
  // The identity file (--identity); a default one that does not exist is none.
  std::filesystem::path identity_file;
  bool identity_explicit = false;
  std::size_t transcript_tokens = 0;                      // 0: PipelineOptions' default (a quarter of the context)
  std::vector<std::string> privacy_tags = {"@personal"};  // G7: kept out of the prompt's CONTEXT
  std::chrono::milliseconds approval_lifetime = ApprovalOptions::kDefaultLifetime;                // more than zero
  std::chrono::milliseconds approval_retention = ApprovalOptions::kDefaultRetention;              // zero: for ever
  std::size_t max_pending_approvals = ApprovalOptions::kDefaultMaxPending;                        // more than zero
  std::size_t max_pending_approvals_per_session = ApprovalOptions::kDefaultMaxPendingPerSession;  // more than zero
  // --unattended-approvals: zero waits (today's behaviour: the lifetime ends
  // an approval quietly); more, deny-after: an approval undecided this long
  // is denied at that time, told once.
  std::chrono::milliseconds deny_unattended_after{0};
  std::filesystem::path rules_file;  // the operator's rules (default <state dir>/rules.yaml)
  // The decision log (<state dir>/decisions/, pipeline/decision_log.hpp).
  bool decision_log = true;
  std::size_t decision_log_file_bytes = std::size_t{64} * 1024 * 1024;
  std::size_t decision_log_files = 8;                                     // the current one included
  std::chrono::milliseconds decision_log_rotate{std::chrono::hours(24)};  // zero: by size only
  std::size_t decision_log_sample = 1;                                    // 1 in N passes recorded
  std::size_t decision_log_time_gates = 8;                                // gates timed in 1 in N verifications
  std::size_t decision_log_buffer = 1024;                                 // per pipeline thread

  std::size_t max_frame = std::size_t{1024} * 1024;  // code points
  // TCP connections; 0: as many as the descriptor limit leaves room for, at
  // most 1024 (the daemon raises its soft limit to the hard one at start, and
  // refuses a value the limit cannot serve).
  std::size_t max_connections = 0;
  std::size_t max_unix_connections = 64;                                  // the Unix socket's own, apart from TCP's
  std::size_t max_connections_per_peer = 64;                              // TCP connections from one address
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(10)};  // to the first complete request
  std::size_t max_queued_reply_bytes = std::size_t{256} * 1024 * 1024;    // all connections together
  std::chrono::milliseconds idle_timeout{std::chrono::minutes(30)};       // zero: never
  std::chrono::milliseconds read_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds shutdown_grace{std::chrono::seconds(10)};
  // A gate's time budget when its manifest sets no `gate_timeout`, and the
  // largest `gate_timeout` a manifest may set (one above it is refused at load).
  std::chrono::milliseconds gate_timeout{std::chrono::seconds(1)};
  std::chrono::milliseconds gate_timeout_max{std::chrono::seconds(10)};
  // How long an event loop polls after its last work before it sleeps.
  std::chrono::microseconds idle_poll{200};

  LogLevel log_level = LogLevel::info;
  LogFormat log_format = LogFormat::text;

  // The Model Context Protocol servers: the config file's mcp_servers: and
  // those of --mcp-config, read again on `mcp reload` and SIGHUP.
  std::vector<mcp::McpServerConfig> mcp_servers;
  std::filesystem::path config_file;      // "" : none
  std::filesystem::path mcp_config_file;  // "" : none
  mcp::EnvLookup env;                     // what ${env:NAME} reads, for those later reads
};

// The MCP servers of `config_file`'s mcp_servers: and of `mcp_config_file`
// (an .mcp.json), either path empty for none. Errors name the file, line and
// key; a server declared in both is an error.
Result<std::vector<mcp::McpServerConfig>> read_mcp_configuration(const std::filesystem::path& config_file,
                                                                 const std::filesystem::path& mcp_config_file,
                                                                 const mcp::EnvLookup& env);

// Resolves and checks every setting. The error (invalid_input) names where
// the bad value came from and what is allowed, e.g.
//   "--port: 'abc' is not a port number (0 to 65535)"
//   "/etc/pp.yaml:3:1: unknown key 'prot'; did you mean 'port'?"
//   "HEARTBEAT_INTERVAL: '-1' is not a number of seconds (0 or more, e.g. 60 or 0.5)"
// A config file that cannot be read is io_error. Settings without a value
// anywhere take the defaults described in daemon_settings().
Result<DaemonConfig> resolve_daemon_config(const SettingSources& sources);

// Where the daemon puts its Unix socket when none is configured, and where
// clients look for it: <runtime_dir>/passepartout.sock when `runtime_dir`
// ($XDG_RUNTIME_DIR) is an absolute path, else <state_dir>/passepartout.sock.
std::filesystem::path default_socket_path(const std::optional<std::string>& runtime_dir,
                                          const std::filesystem::path& state_dir);

// $XDG_CONFIG_HOME/passepartout/.env when that variable is an absolute path,
// else ~/.config/passepartout/.env.
std::filesystem::path default_env_file();

// Reads KEY=VALUE lines (blank lines and '#' comments skipped, an optional
// `export ` prefix, values optionally in single or double quotes) and sets
// each variable the environment does not already set. A missing file sets
// nothing (returns 0). Returns how many variables were set; invalid_input
// names the file and line of a malformed line, and then nothing is set.
// Call before the process starts any thread (setenv is not thread-safe).
Result<std::size_t> load_env_file(const std::filesystem::path& file);

}  // namespace passepartout
