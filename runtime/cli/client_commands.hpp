// The commands that talk to a running daemon (chat, status, stop, skills
// list|load|reload|unload|rescan, approvals, doctor) as functions of their
// options and output streams, so they run the same from the CLI and in tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "cli/client.hpp"
#include "cli/skill_install.hpp"
#include "providers/provider_config.hpp"
#include "providers/provider_probe.hpp"
#include "value/value.hpp"

namespace passepartout::cli {

// How to reach the daemon, as given on the command line (empty / unset:
// from the environment, then the defaults; see resolve_target()).
struct ConnectionOptions {
  std::string socket_path;            // --socket PATH
  std::optional<std::uint16_t> port;  // --port N (TCP)
  std::string host;                   // --host NAME (TCP; default 127.0.0.1)
  std::string token_file;             // --token-file FILE
  std::optional<double> timeout_s;    // --timeout SECONDS for replies
};

// Where and how a command talks to the daemon, everything decided.
struct Target {
  Endpoint endpoint;
  std::string token;         // sent as :AUTH with every request over TCP; empty: none
  std::string token_source;  // where the token came from (a file or the variable), for hints
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds reply_timeout{30000};
};

// The daemon's default Unix socket: $XDG_RUNTIME_DIR/passepartout.sock, else
// <state dir>/passepartout.sock (state dir as default_state_dir()).
std::filesystem::path default_socket_path();

// Decides the target: --socket or --port, else $PASSEPARTOUT_SOCKET, else
// $PASSEPARTOUT_PORT (TCP), else default_socket_path(). The token (TCP only):
// the file from --token-file, else from $PASSEPARTOUT_TOKEN_FILE, else
// $PASSEPARTOUT_TOKEN, else <state dir>/token when it exists. Fails
// (invalid_input) on a bad $PASSEPARTOUT_PORT or an unreadable token file
// that was named explicitly.
Result<Target> resolve_target(const ConnectionOptions& options, std::chrono::milliseconds default_reply_timeout);

// Where a command writes: `out` for results (text, or exactly one JSON
// document with `json`), `err` for problems and hints in text mode.
struct Output {
  std::ostream& out;
  std::ostream& err;
  bool json = false;
};

struct ChatOptions {
  // The message; empty: interactive, one exchange per line read until the
  // end of input or /quit (see run_chat).
  std::optional<std::string> text;
  // :META :SESSION-ID; empty: the connection is the session (one message),
  // or a new id for the whole interactive run.
  std::string session_id;
};

class LineReader;

// The interactive history, in the state folder.
inline constexpr const char* kChatHistoryFile = "chat_history";

// `passepartout chat`: sends user input with a :REQUEST-ID and prints, as
// they arrive, the streamed chunks, each reply's text with its gate trace and
// approval notices, until the daemon's end-of-exchange response. Returns
// kExitOk, kExitBlocked when a reply was blocked by a gate, kExitApproval
// when an action waits for approval (interactive: of the last exchange), or
// kExitProblem. With json: one JSON document per exchange.
//
// Interactive (no text): each line from `lines` is one exchange in one
// session; slash commands (/help, /approve TOKEN, /deny TOKEN, /status,
// /quit, /exit) are handled here and never sent; an action a gate holds for
// approval is shown and asked about ("Run it? [y/N]", the answer from the
// next line); a connection the daemon dropped is reopened, and a line that
// was not sent goes out on the new one. Returns kExitOk at the end of input
// or /quit, kExitDisconnected when reconnecting failed (or the first
// connection's failure status).
int run_chat(const Target& target, const ChatOptions& options, LineReader& lines, const Output& output);
// The same with plain lines from `in`.
int run_chat(const Target& target, const ChatOptions& options, std::istream& in, const Output& output);

// Operator requests; each returns kExitOk or the failure's status.
int run_status(const Target& target, const Output& output);
// status --health: a health check, answered as /healthz is (exit 0 when the daemon answers).
int run_health(const Target& target, const Output& output);
// status --ready: ready as /readyz says (exit 0), or not, with the reason (exit 1).
int run_ready(const Target& target, const Output& output);
int run_skills_list(const Target& target, const Output& output);
// `manifest` is made absolute (the daemon resolves paths in its own folder).
int run_skills_load(const Target& target, const std::filesystem::path& manifest, const Output& output);
int run_skills_reload(const Target& target, const std::string& name, const Output& output);
int run_skills_unload(const Target& target, const std::string& name, bool cascade, bool force, const Output& output);
int run_skills_rescan(const Target& target, const Output& output);
// Shadow candidates: start one from a manifest (made absolute here), show
// them (all, or NAME's), stop one, promote one.
int run_skills_shadow(const Target& target, const std::filesystem::path& manifest, const Output& output);
int run_skills_shadow_status(const Target& target, const std::string& name, const Output& output);
int run_skills_shadow_stop(const Target& target, const std::string& name, const Output& output);
int run_skills_promote(const Target& target, const std::string& name, const Output& output);
// `skills new NAME [--dir PARENT] [--template DIR]`: a project from the template.
struct NewSkillOptions {
  std::string name;
  std::filesystem::path parent;        // empty: the current folder
  std::filesystem::path template_dir;  // empty: default_template_dir()
};
int run_skills_new(const NewSkillOptions& options, const Output& output);
// `skills install MANIFEST [LIBRARY]`: checked, copied into the daemon's
// folders (asked of the daemon; `folders` when none runs, else the
// defaults) and loaded.
struct InstallSkillOptions {
  std::filesystem::path manifest;
  std::filesystem::path library;  // empty: find_skill_library()
  SkillFolders folders;           // empty: the daemon's, or the defaults
};
int run_skills_install(const Target& target, const InstallSkillOptions& options, const Output& output);
// `skills uninstall NAME`: unloaded, then its manifest and library removed.
int run_skills_uninstall(const Target& target, const std::string& name, const SkillFolders& folders,
                         const Output& output);
// Which page of the pending approvals to list (unset: the daemon's defaults,
// the newest 100).
struct ApprovalsPage {
  std::optional<std::int64_t> limit;   // --limit N, 1 to 1000
  std::optional<std::int64_t> offset;  // --offset N, 0 or more
};
int run_approvals_list(const Target& target, const ApprovalsPage& page, const Output& output);
// One approval in whatever state: its decision, and what came of its run.
int run_approvals_show(const Target& target, const std::string& token, const Output& output);
// "Always" instead of "once" (approvals approve --remember): the standing
// approval the daemon teaches from the approval (docs/rules.md).
struct RememberOptions {
  bool remember = false;
  std::string match = "exact";   // exact, prefix
  std::string scope = "always";  // always, session
  std::string expires;           // a span ("7d"); empty: never
};
int run_approvals_decide(const Target& target, const std::string& token, bool approve, const Output& output,
                         const RememberOptions& remember = {});
// Denies every pending approval of `session` (--all-from); none pending is not a failure.
int run_approvals_deny_session(const Target& target, const std::string& session, const Output& output);
int run_stop(const Target& target, const Output& output);

struct DoctorOptions {
  std::vector<std::string> tools = {"sh"};  // looked up on $PATH
  std::filesystem::path state_dir;          // must exist and be writable
  std::filesystem::path manifest_dir;       // the bundled skills must load from here
  std::filesystem::path plugin_dir;
  // The model providers the daemon would use (its settings as `daemon` resolves
  // them from config_file and env), each asked for its models.
  bool check_provider = true;
  bool network = true;                    // false: report what is configured, send no request (--no-network)
  std::filesystem::path config_file;      // the daemon's --config file (its providers: list); empty: none
  std::filesystem::path mcp_config_file;  // the daemon's --mcp-config file; empty: none (or the environment's)
  EnvLookup env;                          // the environment settings are read from; empty: none
  ProbeLimits probe_limits;
  std::string env_file_error;  // the .env file could not be read: why (a check fails with it)
};

// `passepartout doctor`: each check with OK, FAIL or INFO and a hint; kExitOk
// only when every required check passed.
int run_doctor(const Target& target, const DoctorOptions& options, const Output& output);

}  // namespace passepartout::cli
