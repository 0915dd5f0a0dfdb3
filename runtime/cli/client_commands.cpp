// The commands that talk to a running daemon over its socket: finding it,
// the operator requests (status, stop, skills, approvals) and their output,
// and the CLI11 wiring of every client command.
#include "cli/client_commands.hpp"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <utility>

#include "cli/client_output.hpp"
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/history_format.hpp"
#include "cli/terminal_text.hpp"
#include "daemon/daemon_config.hpp"
#include "daemon/protocol.hpp"
#include "daemon/token_file.hpp"
#include "base/log.hpp"
#include "skills/audit_log.hpp"
#include "skills/bundled_skills.hpp"
#include "base/state_paths.hpp"
#include "value/sexp_printer.hpp"
#include "base/utf8.hpp"

namespace passepartout::cli {
namespace fs = std::filesystem;

namespace {

using Clock = Client::Clock;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : std::string();
}

// A port number in [1, 65535], or nullopt.
std::optional<std::uint16_t> parse_port(const std::string& text) {
  if (text.empty() || text.size() > 5 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const long port = std::stol(text);
  if (port < 1 || port > 65535) return std::nullopt;
  return static_cast<std::uint16_t>(port);
}

std::chrono::milliseconds seconds_to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000.0));
}

// A fresh id for one request, unique enough to tell our response from any other.
std::string new_request_id() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device random;
  std::string id = "cli-" + std::to_string(::getpid()) + "-";
  for (int i = 0; i < 4; ++i) {
    const unsigned bits = random();
    for (int nibble = 0; nibble < 4; ++nibble) id += kHex[(bits >> (4 * nibble)) & 0xf];
  }
  return id;
}

// --- operator requests -----------------------------------------------------------

// What to suggest when the daemon answers with one of these codes.
struct ErrorHints {
  std::string not_found;
  std::string refused;
};

std::string hint_for(std::string_view code, const Target& target, const ErrorHints& hints) {
  if (code == wire_error::kUnauthorized) {
    if (target.token.empty()) {
      return "over TCP, operator commands need the daemon's token: pass --token-file FILE or set PASSEPARTOUT_TOKEN "
             "(looked for " +
             token_file(default_state_dir()).string() + "), or use the Unix socket (--socket PATH)";
    }
    return "the token from " + target.token_source + " was not accepted; use the one the daemon wrote";
  }
  if (code == wire_error::kNotFound) return hints.not_found;
  if (code == wire_error::kRefused) return hints.refused;
  if (code == wire_error::kBadRequest) {
    return "check the arguments; if they are right, compare the daemon's version (`passepartout status`) with "
           "this client's (`passepartout version`)";
  }
  if (code == wire_error::kShuttingDown) return "the daemon is stopping; start it again with `passepartout daemon`";
  if (code == wire_error::kBusy) return "the daemon has too many connections; try again shortly";
  if (code == wire_error::kTimeout) return "the daemon timed the connection out; try again";
  return {};
}

// Sends (:TYPE :OPERATOR :COMMAND :<command> :REQUEST-ID id [:AUTH token] arguments...)
// and waits for its :RESPONSE. Returns the :OK response, or reports the
// failure and sets `status`.
std::optional<Value> operator_request(const Target& target, std::string_view command,
                                      std::initializer_list<std::pair<std::string_view, Value>> arguments,
                                      const ErrorHints& hints, const Output& output, int& status) {
  Client client;
  ClientError error;
  if (!client.open(target.endpoint, target.connect_timeout, error)) {
    status = report_client_error(output, error);
    return std::nullopt;
  }
  const std::string request_id = new_request_id();
  Value request = Value::plist({{"TYPE", Value::keyword("OPERATOR")},
                                {"COMMAND", Value::keyword(command)},
                                {"REQUEST-ID", Value::string(request_id)}});
  if (target.endpoint.is_tcp() && !target.token.empty()) request = request.with("AUTH", Value::string(target.token));
  for (const auto& [key, value] : arguments) {
    if (!value.is_nil()) request = request.with(key, value);  // NIL: an option not given
  }

  const Clock::time_point deadline = Clock::now() + target.reply_timeout;
  if (!client.send(request, deadline, error)) {
    status = report_client_error(output, error);
    return std::nullopt;
  }
  for (;;) {
    Value frame;
    if (!client.read(frame, deadline, error)) {
      if (error.failure == ClientFailure::closed) {
        error.message = "the daemon at " + target.endpoint.describe() + " closed the connection before answering";
      } else if (error.failure == ClientFailure::timeout) {
        error.message = "no answer from the daemon at " + target.endpoint.describe() + " within " +
                        format_seconds(target.reply_timeout);
      }
      status = report_client_error(output, error);
      return std::nullopt;
    }
    if (message_type(frame) != "RESPONSE") continue;
    const Value& id = frame.at("REQUEST-ID");
    if (id.is_string() && id.text() != request_id) continue;
    if (is_ok_response(frame)) return frame;
    // An error response, or one whose :STATUS is neither :OK nor :ERROR.
    const std::string code(error_response_code(frame));
    const Value& message = frame.path({"PAYLOAD", "MESSAGE"});
    std::string text = message.is_string() ? printable(message.text()) : std::string("the request failed");
    text = "`" + json_key(command) + "` failed: " + text;
    if (!code.empty()) text += " (" + code + ")";
    status = report_failure(output, text, hint_for(code, target, hints),
                            code == wire_error::kBadRequest ? kExitUsage : kExitProblem, code);
    return std::nullopt;
  }
}

// {"ok": true, "daemon": "<endpoint>", <payload keys>...}; `lists` are keys
// whose value is always an array.
OrderedJson payload_json(const Target& target, const Value& response, std::initializer_list<std::string_view> lists) {
  OrderedJson document{{"ok", true}, {"daemon", target.endpoint.describe()}};
  const Value& payload = response.at("PAYLOAD");
  const auto items = payload.items();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    if (!items[i].is_keyword()) continue;
    const std::string key = json_key(items[i].text());
    if (document.contains(key)) continue;
    const bool is_list =
        std::any_of(lists.begin(), lists.end(), [&](std::string_view name) { return items[i].is_keyword(name); });
    document[key] = is_list ? list_json(items[i + 1]) : value_json(items[i + 1]);
  }
  for (std::string_view name : lists) {
    const std::string key = json_key(name);
    if (!document.contains(key)) document[key] = OrderedJson::array();
  }
  return document;
}

// The daemon's :PAYLOAD :MESSAGE, or `fallback`.
std::string response_message(const Value& response, std::string_view fallback) {
  const Value& message = response.path({"PAYLOAD", "MESSAGE"});
  return message.is_string() && !message.text().empty() ? printable(message.text()) : std::string(fallback);
}

// --- text layout ----------------------------------------------------------------

// 12s, 4m 05s, 2h 03m 04s, 3d 04h 05m.
std::string format_uptime(std::int64_t seconds) {
  if (seconds < 0) seconds = 0;
  auto two = [](std::int64_t n) { return (n < 10 ? "0" : "") + std::to_string(n); };
  const std::int64_t days = seconds / 86400, hours = seconds / 3600 % 24, minutes = seconds / 60 % 60,
                     secs = seconds % 60;
  if (days > 0) return std::to_string(days) + "d " + two(hours) + "h " + two(minutes) + "m";
  if (hours > 0) return std::to_string(hours) + "h " + two(minutes) + "m " + two(secs) + "s";
  if (minutes > 0) return std::to_string(minutes) + "m " + two(secs) + "s";
  return std::to_string(secs) + "s";
}

// "in 14m 03s" / "3m 02s ago" relative to now; empty when `unix_ms` is not an integer.
std::string relative_time(const Value& unix_ms) {
  if (!unix_ms.is_integer()) return {};
  const auto now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const std::int64_t delta = (unix_ms.as_integer() - now_ms) / 1000;
  return delta >= 0 ? "in " + format_uptime(delta) : format_uptime(-delta) + " ago";
}

// A string field's text (or a keyword's lower-case name) for a SkillChange.
std::string field_text(const Value& value) {
  if (value.is_string() || value.is_symbol()) return std::string(value.text());
  if (value.is_keyword()) return json_key(value.text());
  if (value.is_nil()) return {};
  return to_sexp(value);
}

SkillChange wire_change(const Value& change) {
  SkillChange out;
  out.at_unix_ms = change.at("AT-UNIX-MS").as_integer();
  out.requester = field_text(change.at("REQUESTER"));
  out.action = field_text(change.at("KIND"));
  out.skill = field_text(change.at("SKILL"));
  out.from_version = field_text(change.at("FROM-VERSION"));
  out.from_sha256 = field_text(change.at("FROM-SHA256"));
  out.to_version = field_text(change.at("TO-VERSION"));
  out.to_sha256 = field_text(change.at("TO-SHA256"));
  out.outcome = field_text(change.at("OUTCOME"));
  out.step = field_text(change.at("STEP"));
  out.error = field_text(change.at("ERROR"));
  out.duration_us = change.at("DURATION-US").as_integer();
  return out;
}

// Items of a list; a lone plist counts as a list of one.
std::vector<Value> entries_of(const Value& list) {
  if (!list.is_list()) return {};
  if (list.items().front().is_keyword()) return {list};
  return {list.items().begin(), list.items().end()};
}

std::string yes_no(const Value& value) {
  return value.is_nil() ? "no" : "yes";
}

// "a, b, c" of the texts of a list's items (keywords with their ':').
std::string joined_texts(const Value& list) {
  std::string text;
  if (!list.is_list()) return display_text(list);
  for (const Value& item : list.items()) {  // a list of names: (:SHELL) is one keyword, not a plist
    if (!text.empty()) text += ", ";
    text += (item.is_keyword() ? ":" : "") + display_text(item);
  }
  return text;
}

// What each skill offers that acts on the world, and the gates that guard it:
//   Actuators and tools (each acts only while its guards are loaded):
//     shell       actuator :SHELL                   guarded by shell-guard
//     file-tools  tools read-file, write-file       guarded by tool-permissions  UNGUARDED: ...
std::string offers_text(const Value& skills) {
  std::vector<std::vector<std::string>> rows;
  for (const Value& skill : entries_of(skills)) {
    if (skill.get("GUARDED-BY") == nullptr) continue;
    std::string offers;
    if (!skill.at("ACTUATORS").is_nil()) {
      offers += (skill.at("ACTUATORS").size() == 1 ? "actuator " : "actuators ") +
                joined_texts(skill.at("ACTUATORS"));
    }
    if (!skill.at("TOOLS").is_nil()) {
      if (!offers.empty()) offers += "; ";
      offers += (skill.at("TOOLS").size() == 1 ? "tool " : "tools ") + joined_texts(skill.at("TOOLS"));
    }
    const Value& unguarded = skill.at("UNGUARDED");
    rows.push_back({display_text(skill.at("NAME")), offers, "guarded by " + joined_texts(skill.at("GUARDED-BY")),
                    unguarded.is_nil() ? std::string() : "REFUSES TO ACT: it " + display_text(unguarded)});
  }
  if (rows.empty()) return {};
  return "\nActuators and tools (each acts only while its guards are loaded):\n" + render_table(rows, {}, "  ");
}

std::string skills_table(const Value& skills, bool with_details) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  if (with_details) {
    rows.push_back({"NAME", "VERSION", "PRIORITY", "STATE", "GATE", "VERIFIED", "BLOCKED", "FAILED", "SHA256"});
  } else {
    rows.push_back({"NAME", "VERSION", "STATE", "VERIFIED", "BLOCKED", "FAILED"});
  }
  std::string out;
  for (const Value& skill : entries_of(skills)) {
    const std::string name = display_text(skill.at("NAME"));
    const std::string state = json_key(display_text(skill.at("STATE")));
    std::string sha = display_text(skill.at("SHA256")).substr(0, 12);
    if (with_details) {
      rows.push_back({name.empty() ? "?" : name, display_text(skill.at("VERSION")), integer_text(skill.at("PRIORITY")),
                      state, skill.get("GATE") != nullptr ? yes_no(skill.at("GATE")) : "-",
                      integer_text(skill.at("VERIFIED")), integer_text(skill.at("BLOCKED")),
                      integer_text(skill.at("FAILED")), sha.empty() ? "-" : sha});
    } else {
      rows.push_back({name.empty() ? "?" : name, display_text(skill.at("VERSION")), state,
                      integer_text(skill.at("VERIFIED")), integer_text(skill.at("BLOCKED")),
                      integer_text(skill.at("FAILED"))});
    }
    if (const Value& reason = skill.at("REASON"); !reason.is_nil()) {
      notes.push_back("  " + (name.empty() ? std::string("?") : name) + ": " + display_text(reason));
    }
  }
  out += render_table(rows,
                      with_details ? std::vector<bool>{false, false, true, false, false, true, true, true, false}
                                   : std::vector<bool>{false, false, false, true, true, true},
                      "  ");
  if (!notes.empty()) {
    out += "\nWhy disabled:\n";
    for (const auto& note : notes) out += note + '\n';
  }
  out += offers_text(skills);
  return out;
}

// The text of one change command: the daemon's message, then each change.
int print_changes(const Target& target, const Value& response, std::string_view fallback, const Output& output) {
  const Value& changes = response.path({"PAYLOAD", "CHANGES"});
  if (output.json) {
    print_json(output.out, payload_json(target, response, {"CHANGES"}));
    return kExitOk;
  }
  output.out << response_message(response, fallback) << '\n';
  std::vector<SkillChange> list;
  for (const Value& change : entries_of(changes)) list.push_back(wire_change(change));
  if (list.empty()) {
    output.out << "No changes.\n";
  } else {
    output.out << format_history(list);
  }
  return kExitOk;
}

const ErrorHints kSkillHints{"see the loaded skills with `passepartout skills list`",
                             "`passepartout skills history` shows the recorded changes"};
const ErrorHints kApprovalHints{"see the pending approvals with `passepartout approvals list`", ""};

}  // namespace

// --- finding the daemon ------------------------------------------------------------

// The socket of the daemon scripts/passepartout.service runs (RuntimeDirectory=passepartout).
constexpr const char* kSystemSocket = "/run/passepartout/passepartout.sock";

// The user's own daemon's socket, else, when that does not exist and the
// system service's does, the service's: an operator finds either without flags.
fs::path default_socket_path() {
  fs::path own = passepartout::default_socket_path(process_env("XDG_RUNTIME_DIR"), default_state_dir());
  std::error_code ec;
  if (!fs::exists(own, ec) && fs::exists(kSystemSocket, ec)) return kSystemSocket;
  return own;
}

Result<Target> resolve_target(const ConnectionOptions& options, std::chrono::milliseconds default_reply_timeout) {
  Target target;
  target.reply_timeout = options.timeout_s ? seconds_to_ms(*options.timeout_s) : default_reply_timeout;
  if (!options.host.empty()) target.endpoint.host = options.host;
  if (!options.socket_path.empty()) {
    target.endpoint.socket_path = options.socket_path;
  } else if (options.port) {
    target.endpoint.port = *options.port;
  } else if (std::string socket = env("PASSEPARTOUT_SOCKET"); !socket.empty()) {
    target.endpoint.socket_path = socket;
  } else if (std::string port = env("PASSEPARTOUT_PORT"); !port.empty()) {
    const auto parsed = parse_port(port);
    if (!parsed) {
      return fail(ErrorCode::invalid_input,
                  "PASSEPARTOUT_PORT is '" + printable(port) + "', not a port number from 1 to 65535");
    }
    target.endpoint.port = *parsed;
  } else {
    target.endpoint.socket_path = default_socket_path();
  }
  if (!target.endpoint.is_tcp()) return target;

  // The token, for operator requests over TCP.
  std::string file = options.token_file;
  std::string source = "--token-file";
  if (file.empty()) {
    file = env("PASSEPARTOUT_TOKEN_FILE");
    source = "PASSEPARTOUT_TOKEN_FILE";
  }
  if (!file.empty()) {
    auto token = read_token(file);
    if (!token) {
      return fail(ErrorCode::invalid_input,
                  "cannot read the token file " + file + " (from " + source + "): " + token.error().message);
    }
    target.token = std::move(*token);
    target.token_source = file;
  } else if (std::string from_env = env("PASSEPARTOUT_TOKEN"); !from_env.empty()) {
    target.token = std::move(from_env);
    target.token_source = "PASSEPARTOUT_TOKEN";
  } else if (const fs::path default_file = token_file(default_state_dir());
             auto from_file = read_token(default_file)) {
    target.token = std::move(*from_file);
    target.token_source = default_file.string();
  }
  if (!is_valid_utf8(target.token)) {
    return fail(ErrorCode::invalid_input, "the token from " + target.token_source + " is not UTF-8 text");
  }
  return target;
}

// --- status and stop -----------------------------------------------------------------

int run_status(const Target& target, const Output& output) {
  int status = kExitOk;
  auto response = operator_request(target, "STATUS", {}, {}, output, status);
  if (!response) return status;
  if (output.json) {
    print_json(output.out, payload_json(target, *response, {"SKILLS"}));
    return kExitOk;
  }
  const Value& p = response->at("PAYLOAD");
  std::ostream& out = output.out;
  const std::string version = display_text(p.at("VERSION"));
  out << "passepartout daemon" << (version.empty() ? "" : " " + version) << " at " << target.endpoint.describe()
      << '\n';
  const std::string health = display_text(p.at("HEALTH"));
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"health", health.empty() ? "unknown" : health});
  rows.push_back({"uptime", p.at("UPTIME-S").is_integer() ? format_uptime(p.at("UPTIME-S").as_integer()) : "-"});
  rows.push_back({"connections", integer_text(p.at("CONNECTIONS"))});
  std::string signals = integer_text(p.at("SIGNALS-PROCESSED"));
  if (p.at("IN-FLIGHT").is_integer()) signals += " (" + std::to_string(p.at("IN-FLIGHT").as_integer()) + " in flight)";
  rows.push_back({"signals processed", signals});
  std::string approvals = integer_text(p.at("PENDING-APPROVALS"));
  if (p.at("PENDING-APPROVALS").as_integer() > 0) approvals += " (see `passepartout approvals list`)";
  rows.push_back({"pending approvals", approvals});
  std::string refused = integer_text(p.at("APPROVALS-REFUSED"));
  if (p.at("APPROVALS-REFUSED").as_integer() > 0) refused += " (past --max-pending-approvals[-per-session])";
  rows.push_back({"approvals refused", refused});
  out << render_table(rows, {}, "  ");
  const auto skills = entries_of(p.at("SKILLS"));
  out << "\nSkills (" << skills.size() << ", in load order):\n";
  if (skills.empty()) {
    out << "  (none loaded)\n";
  } else {
    out << skills_table(p.at("SKILLS"), false);
  }
  return kExitOk;
}

int run_stop(const Target& target, const Output& output) {
  int status = kExitOk;
  auto response = operator_request(target, "SHUTDOWN", {}, {}, output, status);
  if (!response) return status;
  if (output.json) {
    print_json(output.out, payload_json(target, *response, {}));
    return kExitOk;
  }
  output.out << "The daemon at " << target.endpoint.describe() << " is shutting down";
  const std::string message = response_message(*response, "");
  if (!message.empty()) output.out << ": " << message;
  output.out << '\n';
  return kExitOk;
}

// --- skills ------------------------------------------------------------------------------

int run_skills_list(const Target& target, const Output& output) {
  int status = kExitOk;
  auto response = operator_request(target, "SKILLS", {}, kSkillHints, output, status);
  if (!response) return status;
  if (output.json) {
    print_json(output.out, payload_json(target, *response, {"SKILLS"}));
    return kExitOk;
  }
  const Value& skills = response->path({"PAYLOAD", "SKILLS"});
  const auto count = entries_of(skills).size();
  if (count == 0) {
    output.out << "No skills loaded in the daemon at " << target.endpoint.describe() << ".\n";
    return kExitOk;
  }
  output.out << count << " skill" << (count == 1 ? "" : "s") << " in the daemon at " << target.endpoint.describe()
             << ", in load order:\n"
             << skills_table(skills, true);
  return kExitOk;
}

int run_skills_load(const Target& target, const fs::path& manifest, const Output& output) {
  std::error_code ec;
  fs::path absolute = fs::absolute(manifest, ec);
  if (ec) absolute = manifest;
  const std::string path = absolute.lexically_normal().string();
  if (!is_valid_utf8(path)) return report_failure(output, "the manifest path is not UTF-8", "", kExitUsage);
  int status = kExitOk;
  auto response = operator_request(
      target, "LOAD", {{"MANIFEST", Value::string(path)}},
      {"check the path; the daemon reads it itself, so it must be readable by the daemon", kSkillHints.refused}, output,
      status);
  if (!response) return status;
  return print_changes(target, *response, "Loaded " + printable(path) + ".", output);
}

int run_skills_reload(const Target& target, const std::string& name, const Output& output) {
  if (!is_valid_utf8(name)) return report_failure(output, "the skill name is not UTF-8", "", kExitUsage);
  int status = kExitOk;
  auto response = operator_request(target, "RELOAD", {{"NAME", Value::string(name)}}, kSkillHints, output, status);
  if (!response) return status;
  return print_changes(target, *response, "Reloaded '" + printable(name) + "'.", output);
}

int run_skills_unload(const Target& target, const std::string& name, bool cascade, bool force,
                      const Output& output) {
  if (!is_valid_utf8(name)) return report_failure(output, "the skill name is not UTF-8", "", kExitUsage);
  if (cascade && force) {
    return report_failure(output, "--cascade and --force exclude each other",
                          "--cascade unloads what needs the skill too; --force unloads a guard alone", kExitUsage);
  }
  int status = kExitOk;
  const ErrorHints hints{kSkillHints.not_found,
                         cascade || force ? kSkillHints.refused
                                          : "to unload the skills that need it as well, add --cascade (a guard alone: "
                                            "--force, and what it guards refuses to act until it is back); " +
                                                kSkillHints.refused};
  const Value skill = Value::string(name);
  std::optional<Value> response = operator_request(
      target, "UNLOAD",
      {{"NAME", skill}, {"CASCADE", cascade ? Value::t() : Value()}, {"FORCE", force ? Value::t() : Value()}}, hints,
      output, status);
  if (!response) return status;
  return print_changes(target, *response, "Unloaded '" + printable(name) + "'.", output);
}

int run_skills_rescan(const Target& target, const Output& output) {
  int status = kExitOk;
  auto response = operator_request(target, "RESCAN", {}, kSkillHints, output, status);
  if (!response) return status;
  return print_changes(target, *response, "Rescanned the manifests.", output);
}

// --- approvals ----------------------------------------------------------------------------

namespace {

// The JSON of an approvals answer, each action also as the s-expression it
// is (for pasting into `passepartout verify`).
void add_action_sexps(OrderedJson& approvals, const std::vector<Value>& listed) {
  for (std::size_t i = 0; i < listed.size() && i < approvals.size(); ++i) {
    if (approvals[i].is_object() && listed[i].get("ACTION") != nullptr) {
      approvals[i]["action_sexp"] = to_sexp(listed[i].at("ACTION"));
    }
  }
}

// "2024-11-26T10:00:00+01:00 (3m 02s ago)", or "" without a time.
std::string when_text(const Value& unix_ms) {
  if (!unix_ms.is_integer()) return {};
  return local_iso8601(unix_ms.as_integer()) + " (" + relative_time(unix_ms) + ")";
}

// One approval: its token, then a line per field it has.
void print_approval(std::ostream& out, const Value& approval) {
  const std::string token = display_text(approval.at("TOKEN"));
  out << "\n  " << (token.empty() ? "(no token)" : token) << '\n';
  const std::string state = json_key(display_text(approval.at("STATE")));
  if (!state.empty() && state != "pending") {
    std::string decided = state;
    if (const std::string by = display_text(approval.at("DECIDED-BY")); !by.empty()) decided += " by " + by;
    if (const std::string when = when_text(approval.at("DECIDED-UNIX-MS")); !when.empty()) decided += ", " + when;
    out << "    state:    " << decided << '\n';
  }
  if (const std::string run = json_key(display_text(approval.at("RUN"))); !run.empty()) {
    const std::string error = display_text(approval.at("RUN-ERROR"));
    out << "    run:      " << run << (error.empty() ? "" : ": " + error) << '\n';
  }
  if (const std::string session = display_text(approval.at("SESSION-ID")); !session.empty()) {
    out << "    session:  " << session << '\n';
  }
  if (const std::string reason = display_text(approval.at("REASON")); !reason.empty()) {
    out << "    reason:   " << reason << '\n';
  }
  std::string gates;
  for (const Value& gate : entries_of(approval.at("GATES"))) gates += (gates.empty() ? "" : ", ") + display_text(gate);
  if (approval.at("GATES").is_string()) gates = display_text(approval.at("GATES"));
  if (!gates.empty()) out << "    gates:    " << gates << '\n';
  if (approval.get("ACTION") != nullptr) out << "    action:   " << printable(to_sexp(approval.at("ACTION"))) << '\n';
  if (const std::string when = when_text(approval.at("CREATED-UNIX-MS")); !when.empty()) {
    out << "    created:  " << when << '\n';
  }
  if (const std::string when = when_text(approval.at("EXPIRES-UNIX-MS")); !when.empty()) {
    out << "    expires:  " << when << '\n';
  }
}

}  // namespace

int run_approvals_list(const Target& target, const ApprovalsPage& page, const Output& output) {
  int status = kExitOk;
  const Value limit = page.limit ? Value::integer(*page.limit) : Value();
  const Value offset = page.offset ? Value::integer(*page.offset) : Value();
  auto response =
      operator_request(target, "APPROVALS", {{"LIMIT", limit}, {"OFFSET", offset}}, kApprovalHints, output, status);
  if (!response) return status;
  const auto approvals = entries_of(response->path({"PAYLOAD", "APPROVALS"}));
  if (output.json) {
    OrderedJson document = payload_json(target, *response, {"APPROVALS"});
    add_action_sexps(document["approvals"], approvals);
    print_json(output.out, document);
    return kExitOk;
  }
  std::ostream& out = output.out;
  const Value& total_value = response->path({"PAYLOAD", "TOTAL"});
  const Value& offset_value = response->path({"PAYLOAD", "OFFSET"});
  // A daemon that does not page sends every pending approval.
  const std::int64_t first = offset_value.is_integer() ? offset_value.as_integer() : 0;
  const std::int64_t shown = static_cast<std::int64_t>(approvals.size());
  const std::int64_t total = total_value.is_integer() ? total_value.as_integer() : first + shown;
  if (total == 0) {
    out << "No approvals pending.\n";
    return kExitOk;
  }
  if (approvals.empty()) {
    out << "no pending approvals at offset " << first << " (" << total << " pending; newest first: --offset 0)\n";
    return kExitOk;
  }
  out << "showing " << first + 1 << "-" << first + shown << " of " << total << " pending (newest first)";
  if (first + shown < total) out << "; next: --offset " << first + shown;
  out << '\n';
  for (const Value& approval : approvals) print_approval(out, approval);
  out << "\nApprove with `passepartout approvals approve TOKEN`, deny with `passepartout approvals deny TOKEN`\n"
         "(every pending one of a session: `passepartout approvals deny --all-from SESSION`).\n";
  return kExitOk;
}

int run_approvals_show(const Target& target, const std::string& token, const Output& output) {
  if (!is_valid_utf8(token)) return report_failure(output, "the token is not UTF-8", "", kExitUsage);
  int status = kExitOk;
  auto response =
      operator_request(target, "APPROVAL", {{"TOKEN", Value::string(token)}}, kApprovalHints, output, status);
  if (!response) return status;
  const Value& approval = response->path({"PAYLOAD", "APPROVAL"});
  if (output.json) {
    OrderedJson document = payload_json(target, *response, {});
    if (document.contains("approval") && document["approval"].is_object() && approval.get("ACTION") != nullptr) {
      document["approval"]["action_sexp"] = to_sexp(approval.at("ACTION"));
    }
    print_json(output.out, document);
    return kExitOk;
  }
  const std::string state = json_key(display_text(approval.at("STATE")));
  output.out << "Approval " << printable(token) << ": " << (state.empty() ? "unknown state" : state) << '\n';
  print_approval(output.out, approval);
  return kExitOk;
}

int run_approvals_deny_session(const Target& target, const std::string& session, const Output& output) {
  if (session.empty() || !is_valid_utf8(session)) {
    return report_failure(output, "--all-from needs a session id (UTF-8 text)",
                          "the SESSION column of `passepartout approvals list` shows them", kExitUsage);
  }
  int status = kExitOk;
  auto response =
      operator_request(target, "DENY", {{"SESSION", Value::string(session)}}, kApprovalHints, output, status);
  if (!response) return status;
  if (output.json) {
    print_json(output.out, payload_json(target, *response, {}));
    return kExitOk;
  }
  const Value& denied = response->path({"PAYLOAD", "DENIED"});
  const std::string fallback = denied.is_integer() && denied.as_integer() > 0
                                   ? "denied " + std::to_string(denied.as_integer()) +
                                         " pending approvals of session '" + printable(session) + "'"
                                   : "no pending approvals of session '" + printable(session) + "'";
  output.out << response_message(*response, fallback) << '\n';
  return kExitOk;
}

int run_approvals_decide(const Target& target, const std::string& token, bool approve, const Output& output) {
  if (!is_valid_utf8(token)) return report_failure(output, "the token is not UTF-8", "", kExitUsage);
  int status = kExitOk;
  auto response = operator_request(target, approve ? "APPROVE" : "DENY", {{"TOKEN", Value::string(token)}},
                                   kApprovalHints, output, status);
  if (!response) return status;
  if (output.json) {
    OrderedJson document = payload_json(target, *response, {});
    document["token"] = token;
    document["decision"] = approve ? "approved" : "denied";
    print_json(output.out, document);
    return kExitOk;
  }
  output.out << response_message(*response, (approve ? "Approved " : "Denied ") + printable(token) + ".") << '\n';
  if (!approve) return kExitOk;
  const Value& result = response->path({"PAYLOAD", "RESULT"});
  if (result.is_nil()) return kExitOk;
  const Value& text = result.is_string() ? result : result.path({"PAYLOAD", "TEXT"});
  output.out << "Result: " << (text.is_string() ? printable(text.text(), true) : printable(to_sexp(result))) << '\n';
  return kExitOk;
}

// --- the command line -------------------------------------------------------------------

namespace {

// Everything the client commands parse into; shared by their callbacks (only
// one subcommand runs) and kept alive by them.
struct ParsedClient {
  std::string socket_path;
  int port = 0;
  std::string host;
  std::string token_file;
  double timeout_s = 0;
  bool json = false;
  const CLI::Option* verbose = nullptr;  // the top-level --verbose, read after parsing

  std::vector<std::string> chat_words;
  std::string session_id;
  fs::path manifest;
  std::string name;
  bool cascade = false;
  bool force = false;
  std::string token;
  std::string all_from;
  std::int64_t limit = 0;    // 0: not given
  std::int64_t offset = -1;  // -1: not given
  DoctorOptions doctor;
};

constexpr const char* kConnectionGroup = "Connection";

void add_connection_options(CLI::App& command, ParsedClient& parsed, int default_timeout_s) {
  auto* socket = command
                     .add_option("--socket", parsed.socket_path,
                                 "The daemon's Unix socket (default: $PASSEPARTOUT_SOCKET, else "
                                 "$XDG_RUNTIME_DIR/passepartout.sock, else <state dir>/passepartout.sock;\n"
                                 "when that does not exist, the system service's "
                                 "/run/passepartout/passepartout.sock)")
                     ->type_name("PATH")
                     ->group(kConnectionGroup);
  command
      .add_option("--port", parsed.port,
                  "Talk to the daemon over TCP on this port instead (default: $PASSEPARTOUT_PORT)")
      ->type_name("N")
      ->check(CLI::Range(1, 65535))
      ->excludes(socket)
      ->group(kConnectionGroup);
  command.add_option("--host", parsed.host, "The host for --port (default 127.0.0.1)")
      ->type_name("HOST")
      ->group(kConnectionGroup);
  command
      .add_option("--token-file", parsed.token_file,
                  "Over TCP, read the operator token from FILE (default: $PASSEPARTOUT_TOKEN_FILE, else "
                  "$PASSEPARTOUT_TOKEN, else <state dir>/token)")
      ->type_name("FILE")
      ->group(kConnectionGroup);
  command
      .add_option("--timeout", parsed.timeout_s,
                  "Seconds to wait for the daemon's answer (default " + std::to_string(default_timeout_s) +
                      "; connecting has 5)")
      ->type_name("SECONDS")
      ->check(CLI::PositiveNumber)
      ->group(kConnectionGroup);
  command.add_flag("--json", parsed.json, "Print one JSON document instead of text");
}

ConnectionOptions connection_options(const ParsedClient& parsed) {
  ConnectionOptions options;
  options.socket_path = parsed.socket_path;
  if (parsed.port > 0) options.port = static_cast<std::uint16_t>(parsed.port);
  options.host = parsed.host;
  options.token_file = parsed.token_file;
  if (parsed.timeout_s > 0) options.timeout_s = parsed.timeout_s;
  return options;
}

// Sets `chosen` to resolve the target, then run `body` with it.
template <class Body>
void choose(Runner& chosen, const std::shared_ptr<ParsedClient>& parsed, int default_timeout_s, Body body) {
  chosen = [parsed, default_timeout_s, body]() -> int {
    const bool verbose = parsed->verbose != nullptr && parsed->verbose->count() > 0;
    configure_logging(verbose ? LogLevel::debug : LogLevel::warn);
    const Output output{std::cout, std::cerr, parsed->json};
    auto target = resolve_target(connection_options(*parsed), std::chrono::seconds(default_timeout_s));
    if (!target) return report_failure(output, target.error().message, "", kExitUsage);
    return body(*target, output);
  };
}

constexpr const char* kExitFooter =
    "Exit status: 0 success; 1 the daemon could not be reached or the request failed; 2 bad usage or a request "
    "the daemon did not understand.";

}  // namespace

void add_client_commands(CLI::App& app, CLI::App& skills, Runner& chosen) {
  auto parsed = std::make_shared<ParsedClient>();
  parsed->verbose = app.get_option_no_throw("--verbose");
  constexpr int kChatTimeout = 120;
  constexpr int kTimeout = 30;

  // chat
  auto* chat = app.add_subcommand(
      "chat",
      "Talk to the agent through the running daemon. With TEXT, one exchange: the reply streams as it arrives,\n"
      "then its gate trace (each gate's verdict and reason) and any approval request with the token to\n"
      "approve it. Without TEXT, reads standard input line by line (a terminal or a pipe), one exchange per\n"
      "line, in one session, until end of input or /exit.");
  chat->add_option("text", parsed->chat_words, "The message (several words are joined with spaces)");
  chat->add_option("--session", parsed->session_id, "Session id to talk in (default: one session per connection)")
      ->type_name("ID");
  add_connection_options(*chat, *parsed, kChatTimeout);
  chat->footer(
      "Exit status: 0 the exchange ended; 1 the daemon could not be reached, failed or closed the\n"
      "connection; 2 bad usage; 3 a gate blocked the reply's action; 4 an action waits for approval\n"
      "(interactive: the status of the last exchange). With --json: one JSON document per exchange.");
  chat->callback([parsed, &chosen] {
    choose(chosen, parsed, kChatTimeout, [parsed](const Target& target, const Output& output) {
      ChatOptions options;
      if (!parsed->chat_words.empty()) {
        std::string text;
        for (const auto& word : parsed->chat_words) text += (text.empty() ? "" : " ") + word;
        options.text = std::move(text);
      }
      options.session_id = parsed->session_id;
      options.prompt = !options.text && !parsed->json && ::isatty(STDIN_FILENO) != 0;
      return run_chat(target, options, std::cin, output);
    });
  });

  // status
  auto* status =
      app.add_subcommand("status",
                         "Show the running daemon: version, uptime, health, connections, signals processed, pending\n"
                         "approvals, and the loaded skills with their versions and gate counters.");
  add_connection_options(*status, *parsed, kTimeout);
  status->footer(kExitFooter);
  status->callback([parsed, &chosen] { choose(chosen, parsed, kTimeout, run_status); });

  // stop
  auto* stop = app.add_subcommand(
      "stop", "Ask the running daemon to shut down gracefully (as on SIGTERM: it drains its connections and saves).");
  add_connection_options(*stop, *parsed, kTimeout);
  stop->footer(kExitFooter);
  stop->callback([parsed, &chosen] { choose(chosen, parsed, kTimeout, run_stop); });

  // skills list|load|reload|unload|rescan
  auto* list = skills.add_subcommand(
      "list",
      "List the skills the running daemon has, in load order: version, priority, state (and why a\n"
      "skill is disabled), whether it gates, its verified/blocked/failed counters, its library's sha256.");
  add_connection_options(*list, *parsed, kTimeout);
  list->footer(kExitFooter);
  list->callback([parsed, &chosen] { choose(chosen, parsed, kTimeout, run_skills_list); });

  auto* load = skills.add_subcommand(
      "load",
      "Load the skill a manifest describes into the running daemon (it swaps in a new version when the\n"
      "skill is loaded already). The old version keeps serving when the change is refused.");
  load->add_option("manifest", parsed->manifest, "The manifest (*.yaml); a relative path is made absolute here")
      ->required()
      ->type_name("MANIFEST");
  add_connection_options(*load, *parsed, kTimeout);
  load->footer(kExitFooter);
  load->callback([parsed, &chosen] {
    choose(chosen, parsed, kTimeout, [parsed](const Target& target, const Output& output) {
      return run_skills_load(target, parsed->manifest, output);
    });
  });

  auto* reload = skills.add_subcommand(
      "reload", "Reload a skill in the running daemon from its manifest and library (a hot swap).");
  reload->add_option("name", parsed->name, "The skill's name")->required()->type_name("NAME");
  add_connection_options(*reload, *parsed, kTimeout);
  reload->footer(kExitFooter);
  reload->callback([parsed, &chosen] {
    choose(chosen, parsed, kTimeout, [parsed](const Target& target, const Output& output) {
      return run_skills_reload(target, parsed->name, output);
    });
  });

  auto* unload = skills.add_subcommand("unload", "Unload a skill from the running daemon.");
  unload->add_option("name", parsed->name, "The skill's name")->required()->type_name("NAME");
  unload->add_flag("--cascade", parsed->cascade, "Also unload the skills that depend on it or are guarded by it");
  unload->add_flag("--force", parsed->force,
                   "Unload a guard although skills it guards stay loaded: their actuators and tools then refuse\n"
                   "to act until a guard is loaded again (audited as force-remove, logged as a warning)");
  add_connection_options(*unload, *parsed, kTimeout);
  unload->footer(kExitFooter);
  unload->callback([parsed, &chosen] {
    choose(chosen, parsed, kTimeout, [parsed](const Target& target, const Output& output) {
      return run_skills_unload(target, parsed->name, parsed->cascade, parsed->force, output);
    });
  });

  auto* rescan = skills.add_subcommand(
      "rescan",
      "Make the running daemon read its manifest folder again: new skills load, changed ones swap,\n"
      "removed ones unload.");
  add_connection_options(*rescan, *parsed, kTimeout);
  rescan->footer(kExitFooter);
  rescan->callback([parsed, &chosen] { choose(chosen, parsed, kTimeout, run_skills_rescan); });

  // approvals list|show|approve|deny
  auto* approvals = app.add_subcommand(
      "approvals", "Actions the gates held for a human's decision, in the running daemon: list, show, approve, deny.");
  approvals->require_subcommand(1);
  auto* pending = approvals->add_subcommand(
      "list",
      "List the pending approvals a page at a time, newest first: token, session, reason, the gates that\n"
      "asked, the action, when it expires; and how many are pending in all.");
  pending->add_option("--limit", parsed->limit, "Approvals per page (default 100)")
      ->type_name("N")
      ->check(CLI::Range(1, 1000));
  pending->add_option("--offset", parsed->offset, "Skip this many of the newest first (default 0)")
      ->type_name("N")
      ->check(CLI::NonNegativeNumber);
  add_connection_options(*pending, *parsed, kTimeout);
  pending->footer(kExitFooter);
  pending->callback([parsed, &chosen] {
    choose(chosen, parsed, kTimeout, [parsed](const Target& target, const Output& output) {
      ApprovalsPage page;
      if (parsed->limit > 0) page.limit = parsed->limit;
      if (parsed->offset >= 0) page.offset = parsed->offset;
      return run_approvals_list(target, page, output);
    });
  });
  auto* show = approvals->add_subcommand(
      "show",
      "Show one approval in whatever state: pending, or approved or denied (by whom, when), or expired;\n"
      "and for an approved one what came of its run: running, done, failed (why), or interrupted (the\n"
      "daemon stopped while it ran).");
  show->add_option("token", parsed->token, "The approval's token")->required()->type_name("TOKEN");
  add_connection_options(*show, *parsed, kTimeout);
  show->footer(kExitFooter);
  show->callback([parsed, &chosen] {
    choose(chosen, parsed, kTimeout, [parsed](const Target& target, const Output& output) {
      return run_approvals_show(target, parsed->token, output);
    });
  });
  for (const bool approve : {true, false}) {
    auto* decide = approvals->add_subcommand(
        approve ? "approve" : "deny",
        approve ? "Approve a pending action: it runs (exactly once) and its result is printed."
                : "Deny a pending action: it is dropped and never runs. With --all-from SESSION, deny every\n"
                  "pending action of that session at once (a flood of requests) and print how many.");
    auto* token =
        decide->add_option("token", parsed->token, "The approval's token (from `passepartout approvals list` or chat)")
            ->type_name("TOKEN");
    if (approve) {
      token->required();
    } else {
      decide->add_option("--all-from", parsed->all_from, "Deny every pending approval of this session instead")
          ->type_name("SESSION")
          ->excludes(token);
    }
    add_connection_options(*decide, *parsed, kTimeout);
    decide->footer(kExitFooter);
    decide->callback([parsed, approve, &chosen] {
      choose(chosen, parsed, kTimeout, [parsed, approve](const Target& target, const Output& output) {
        if (!approve && !parsed->all_from.empty()) return run_approvals_deny_session(target, parsed->all_from, output);
        if (parsed->token.empty()) {
          return report_failure(output, "deny needs a TOKEN or --all-from SESSION",
                                "see the pending approvals with `passepartout approvals list`", kExitUsage);
        }
        return run_approvals_decide(target, parsed->token, approve, output);
      });
    });
  }

  // doctor
  auto* doctor = app.add_subcommand(
      "doctor",
      "Check that Passepartout can run here: the tools the bundled skills need, the state folder,\n"
      "the bundled skills, the running daemon and its health, and (for information) a language model.\n"
      "Prints each check with OK, FAIL or INFO and a hint.");
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
  add_connection_options(*doctor, *parsed, kTimeout);
  doctor->footer("Exit status: 0 every required check passed; 1 a check failed; 2 bad usage.");
  doctor->callback([parsed, &chosen] {
    choose(chosen, parsed, kTimeout, [parsed](const Target& target, const Output& output) {
      DoctorOptions options = parsed->doctor;
      if (options.manifest_dir.empty()) options.manifest_dir = default_manifest_dir();
      if (options.plugin_dir.empty()) options.plugin_dir = default_plugin_dir();
      if (options.state_dir.empty()) options.state_dir = default_state_dir();
      return run_doctor(target, options, output);
    });
  });
}

}  // namespace passepartout::cli
