// `passepartout chat`: user input to the daemon, and what comes back (stream
// chunks, replies with their gate trace, approval notices) shown as it arrives.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <istream>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>
#include "cli/cli11.hpp"

#include "base/state_paths.hpp"
#include "base/utf8.hpp"
#include "cli/client_commands.hpp"
#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"
#include "cli/line_editor.hpp"
#include "cli/operator_request.hpp"
#include "cli/terminal_text.hpp"
#include "daemon/protocol.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout::cli {

namespace {

using Clock = Client::Clock;

std::string trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

// A gate trace entry's fields, whatever of them the daemon sent.
struct TraceEntry {
  std::string gate;     // "shell-guard 1.0.0"
  std::string verdict;  // "PASSED", "BLOCKED", ...
  std::string reason;
};

std::vector<TraceEntry> trace_entries(const Value& trace) {
  std::vector<TraceEntry> entries;
  for (const Value& item : trace.items()) {
    TraceEntry entry;
    if (!item.is_list()) {
      entry.gate = display_text(item);
      entries.push_back(std::move(entry));
      continue;
    }
    const Value* gate = item.get("GATE");
    if (gate == nullptr) gate = item.get("SKILL");
    if (gate == nullptr) gate = item.get("NAME");
    entry.gate = gate != nullptr ? display_text(*gate) : std::string("?");
    if (const std::string version = display_text(item.at("VERSION")); !version.empty()) entry.gate += " " + version;
    const Value* verdict = item.get("RESULT");
    if (verdict == nullptr) verdict = item.get("VERDICT");
    entry.verdict = verdict != nullptr ? display_text(*verdict) : std::string("?");
    for (char& c : entry.verdict) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    }
    entry.reason = display_text(item.at("REASON"));
    entries.push_back(std::move(entry));
  }
  return entries;
}

bool is_blocking(const TraceEntry& entry) { return entry.verdict == "BLOCKED" || entry.verdict == "FAILED"; }
bool is_not_passed(const TraceEntry& entry) { return entry.verdict != "PASSED"; }

OrderedJson trace_json(const std::vector<TraceEntry>& entries) {
  OrderedJson list = OrderedJson::array();
  for (const auto& e : entries) {
    OrderedJson entry{{"gate", e.gate}, {"verdict", e.verdict}};
    if (!e.reason.empty()) entry["reason"] = e.reason;
    list.push_back(std::move(entry));
  }
  return list;
}

void print_trace(std::ostream& out, const std::vector<TraceEntry>& entries) {
  if (entries.empty()) return;
  std::vector<std::vector<std::string>> rows;
  rows.reserve(entries.size());
  for (const auto& e : entries) rows.push_back({e.gate, e.verdict, e.reason});
  out << "Gate trace:\n" << render_table(rows, {}, "  ");
}

bool is_approval_notice(const Value& frame) {
  return frame.at("LEVEL").is_keyword("APPROVAL-REQUIRED") ||
         frame.path({"PAYLOAD", "SENSOR"}).is_keyword("APPROVAL-REQUIRED");
}

// What a reply frame says, for people: :PAYLOAD :TEXT, else :PAYLOAD
// :MESSAGE, else the printed payload (or frame), as the seed's TUI does.
std::string reply_text(const Value& frame) {
  const Value& payload = frame.at("PAYLOAD");
  if (const Value& text = payload.at("TEXT"); text.is_string()) return printable(text.text(), true);
  if (const Value& message = payload.at("MESSAGE"); message.is_string()) return printable(message.text(), true);
  if (!payload.is_nil()) return printable(to_sexp(payload));
  return printable(to_sexp(frame));
}

// An action a gate held for a human, as interactive chat asks about it.
struct HeldAction {
  std::string token;
  std::string command;  // the shell command, else the action as an s-expression
  std::string gates;    // "shell-guard 1.0.0", the gates that asked
  std::string reason;
  std::string text;  // the daemon's own words, for an action without a token
};

// One exchange on an open connection.
class Exchange {
 public:
  Exchange(Client& client, const Target& target, const Output& output)
      : client_(client), target_(target), output_(output) {}

  // Interactive chat: a lost connection is left to the caller to report, a
  // gate trace is shown only when a gate did not pass, and held actions are
  // collected (held()) for the caller to ask about instead of printed.
  void set_interactive(bool interactive) { interactive_ = interactive; }
  // After run(): whether the request went out, and whether the connection
  // dropped (closed or failed) before the exchange ended.
  bool sent() const { return sent_; }
  bool lost() const { return lost_; }
  const std::vector<HeldAction>& held() const { return held_; }

  // Sends `text` and shows the answer; returns the exit status. `usable`
  // becomes false when the connection cannot carry another exchange.
  int run(const std::string& text, const std::string& session_id, bool& usable) {
    request_id_ = "chat-" + std::to_string(++sequence_);
    Value meta = Value::plist({{"SOURCE", Value::keyword("TUI")}});
    if (!session_id.empty()) meta = meta.with("SESSION-ID", Value::string(replace_invalid_utf8(session_id)));
    Value message = Value::plist({{"TYPE", Value::keyword("EVENT")},
                                  {"META", meta},
                                  {"PAYLOAD", Value::plist({{"SENSOR", Value::keyword("USER-INPUT")},
                                                            {"TEXT", Value::string(replace_invalid_utf8(text))}})},
                                  {"REQUEST-ID", Value::string(request_id_)}});
    // A daemon that requires the token on every TCP request (--require-auth) needs it here too.
    if (target_.endpoint.is_tcp() && !target_.token.empty())
      message = message.with("AUTH", Value::string(target_.token));
    document_ = OrderedJson{{"ok", true}, {"request_id", request_id_}, {"input", replace_invalid_utf8(text)}};
    chunks_ = OrderedJson::array();
    replies_ = OrderedJson::array();
    approvals_ = OrderedJson::array();
    acted_ = OrderedJson::array();
    streamed_.clear();
    blocked_ = false;
    model_failures_.clear();
    model_failed_ = false;
    held_.clear();
    sent_ = false;
    lost_ = false;

    ClientError error;
    if (!client_.send(message, Clock::now() + target_.reply_timeout, error)) {
      usable = false;
      return fail_client(error);
    }
    sent_ = true;
    for (;;) {
      Value frame;
      // The deadline restarts with every frame: a long reply that keeps streaming is not cut off.
      if (!client_.read(frame, Clock::now() + target_.reply_timeout, error)) {
        usable = false;
        if (interactive_ && is_drop(error)) return fail_client(error);
        if (error.failure == ClientFailure::closed) {
          error.message =
              "the daemon at " + target_.endpoint.describe() + " closed the connection before the reply ended";
        } else if (error.failure == ClientFailure::timeout) {
          error.message = "the daemon at " + target_.endpoint.describe() + " sent nothing for " +
                          format_seconds(target_.reply_timeout);
        }
        return fail_client(error);
      }
      if (is_handshake(frame)) continue;
      if (is_stream_chunk(frame)) {
        on_chunk(frame);
        continue;
      }
      if (message_type(frame) == "RESPONSE") {
        const Value& id = frame.at("REQUEST-ID");
        if (id.is_string() && id.text() == request_id_) return on_end(frame, usable);
        if (!id.is_string() && is_error_response(frame)) {
          usable = false;  // a connection-level error: the daemon closes after it
          return on_end(frame, usable);
        }
        if (id.is_string()) continue;  // the end of some other exchange
      }
      if (is_approval_notice(frame)) {
        on_approval(frame);
      } else {
        on_reply(frame);
      }
    }
  }

 private:
  void end_stream_line() {
    if (!streamed_.empty() && !stream_line_closed_) {
      if (!output_.json && streamed_.back() != '\n') output_.out << '\n';
      stream_line_closed_ = true;
    }
  }

  void on_chunk(const Value& frame) {
    const Value& text = frame.path({"PAYLOAD", "TEXT"});
    if (!text.is_string()) return;
    chunks_.push_back(std::string(text.text()));
    if (streamed_.empty()) stream_line_closed_ = false;
    streamed_ += text.text();
    if (!output_.json) {
      output_.out << printable(text.text(), true);
      output_.out.flush();
    }
  }

  void on_reply(const Value& frame) {
    end_stream_line();
    const auto trace = trace_entries(frame.at("GATE-TRACE"));
    const bool blocked = std::any_of(trace.begin(), trace.end(), is_blocking);
    blocked_ = blocked_ || blocked;
    const std::string text = reply_text(frame);
    OrderedJson reply{{"type", json_key(message_type(frame))}, {"text", text}, {"gate_trace", trace_json(trace)}};
    if (blocked) reply["blocked"] = true;
    // No model answered: the daemon says which providers failed and why.
    if (const Value& failure = frame.at("MODEL-FAILURE"); failure.is_list()) {
      model_failed_ = true;
      for (const Value& f : failure.at("FAILURES").items()) {
        model_failures_.push_back(printable(display_text(f.at("PROVIDER"))) + ": " +
                                  printable(display_text(f.at("MESSAGE"))));
      }
    }
    // What an actuator or tool ran, as the daemon tells it (ActionRecord).
    if (const Value& acted = frame.path({"PAYLOAD", "ACTED"}); acted.is_list()) {
      OrderedJson record = value_json(acted);
      acted_.push_back(record);
      reply["acted"] = std::move(record);
    }
    reply["frame"] = value_json(frame);
    replies_.push_back(std::move(reply));
    if (output_.json) return;
    // A streamed reply's final frame repeats the chunks: show it only when it says something else.
    if (streamed_.empty() || trimmed(text) != trimmed(printable(streamed_, true))) {
      const Value& level = frame.path({"PAYLOAD", "LEVEL"});
      if (message_type(frame) == "LOG" && level.is_keyword()) output_.out << "[" << json_key(level.text()) << "] ";
      output_.out << text << '\n';
    }
    streamed_.clear();
    if (!interactive_ || std::any_of(trace.begin(), trace.end(), is_not_passed)) print_trace(output_.out, trace);
    output_.out.flush();
  }

  void on_approval(const Value& frame) {
    end_stream_line();
    const Value& payload = frame.at("PAYLOAD");
    const std::string token = display_text(payload.at("TOKEN"));
    const std::string reason = display_text(payload.at("REASON"));
    const auto trace = trace_entries(frame.at("GATE-TRACE"));
    OrderedJson approval{{"token", token}, {"text", reply_text(frame)}, {"gate_trace", trace_json(trace)}};
    if (!reason.empty()) approval["reason"] = reason;
    if (payload.get("ACTION") != nullptr) approval["action"] = to_sexp(payload.at("ACTION"));
    approvals_.push_back(std::move(approval));
    if (output_.json) return;
    if (interactive_) {
      HeldAction held{token, {}, {}, reason, printable(display_text(payload.at("TEXT")), true)};
      const Value& command = payload.path({"ACTION", "PAYLOAD", "CMD"});
      held.command = printable(command.is_string() ? std::string(command.text()) : to_sexp(payload.at("ACTION")));
      for (const auto& entry : trace) {
        if (is_not_passed(entry)) held.gates += (held.gates.empty() ? "" : ", ") + printable(entry.gate);
      }
      held_.push_back(std::move(held));
      return;
    }
    std::ostream& out = output_.out;
    const Value& text = payload.at("TEXT");
    if (text.is_string()) {
      out << printable(text.text(), true) << '\n';
    } else {
      out << "Approval required" << (reason.empty() ? "" : ": " + reason) << ".\n";
    }
    if (payload.get("ACTION") != nullptr) out << "  action: " << printable(to_sexp(payload.at("ACTION"))) << '\n';
    if (!token.empty()) {
      out << "  token:  " << token << '\n';
      // The daemon's text usually says how already.
      if (!text.is_string() || text.text().find(token) == std::string_view::npos) {
        out << "  approve: passepartout approvals approve " << token << "\n  deny:    passepartout approvals deny "
            << token << '\n';
      }
    } else {
      out << "  (the daemon sent no token; see `passepartout approvals list`)\n";
    }
    print_trace(out, trace);
    out.flush();
  }

  // The end of the exchange: the :RESPONSE with our :REQUEST-ID (or an error
  // about the connection).
  int on_end(const Value& frame, bool& usable) {
    end_stream_line();
    if (!streamed_.empty()) {
      // Chunks with no final reply frame: they were the whole answer.
      streamed_.clear();
    }
    const Value& payload = frame.at("PAYLOAD");
    if (!is_ok_response(frame)) {
      const std::string code(error_response_code(frame));
      const Value& message = payload.at("MESSAGE");
      std::string text = "the daemon reported an error: " +
                         (message.is_string() ? printable(message.text()) : std::string("(no message)"));
      if (!code.empty()) text += " (" + code + ")";
      if (code == wire_error::kBadFrame || code == wire_error::kFrameTooLarge || code == wire_error::kBusy ||
          code == wire_error::kShuttingDown || code == wire_error::kTimeout) {
        usable = false;
      }
      return fail(text, code == wire_error::kShuttingDown ? "start it again with `passepartout daemon`" : "", code);
    }
    const std::string stopped_by = json_key(display_text(payload.at("STOPPED-BY")));
    const Value& cycles = payload.at("CYCLES");
    int status = approvals_.empty() ? (blocked_ ? kExitBlocked : kExitOk) : kExitApproval;
    std::string note;
    if (model_failed_) {
      status = kExitNoModel;
      note = "no model answered";
      if (model_failures_.empty()) note += " (no provider is configured: see `passepartout daemon --help`)";
      for (const std::string& line : model_failures_) note += "\n  " + line;
    } else if (stopped_by == "error" || stopped_by == "abort" || stopped_by == "cancelled") {
      status = kExitProblem;
      note = "the daemon stopped this exchange (" + stopped_by + "); its log says why";
    } else if (stopped_by == "depth") {
      note = "the exchange reached the depth limit";
    } else if (stopped_by == "interrupt") {
      note = "the exchange was interrupted";
    }
    if (output_.json) {
      document_["ok"] = status != kExitProblem && status != kExitNoModel;
      document_["outcome"] = status == kExitApproval  ? "approval_required"
                             : status == kExitBlocked ? "blocked"
                             : status == kExitNoModel ? "no_model"
                             : status == kExitOk      ? "done"
                                                      : "error";
      if (model_failed_) document_["model_failures"] = model_failures_;
      if (!stopped_by.empty()) document_["stopped_by"] = stopped_by;
      if (cycles.is_integer()) document_["cycles"] = cycles.as_integer();
      if (!note.empty()) document_["note"] = note;
      emit_document();
    } else if (!note.empty()) {
      output_.err << "passepartout: " << note << '\n';
      output_.err.flush();
    }
    return status;
  }

  static bool is_drop(const ClientError& error) {
    return error.failure == ClientFailure::closed || error.failure == ClientFailure::io;
  }

  int fail_client(const ClientError& error) {
    end_stream_line();
    if (interactive_ && is_drop(error)) {
      lost_ = true;  // the caller says so and reconnects
      output_.out.flush();
      return kExitProblem;
    }
    return fail(error.message, client_error_hint(error), {});
  }

  // Text: the message on err. JSON: the exchange so far, with the error.
  int fail(const std::string& message, const std::string& hint, std::string_view code) {
    if (!output_.json) return report_failure(output_, message, hint, kExitProblem, code);
    document_["ok"] = false;
    document_["outcome"] = "error";
    document_["error"] = message;
    if (!hint.empty()) document_["hint"] = hint;
    if (!code.empty()) document_["code"] = std::string(code);
    emit_document();
    return kExitProblem;
  }

  void emit_document() {
    document_["chunks"] = chunks_;
    document_["replies"] = replies_;
    document_["approvals"] = approvals_;
    document_["acted"] = acted_;  // what actuators and tools ran, in order
    document_["blocked"] = blocked_;
    print_json(output_.out, document_);
  }

  Client& client_;
  const Target& target_;
  const Output& output_;
  std::uint64_t sequence_ = 0;
  std::string request_id_;
  OrderedJson document_;
  OrderedJson chunks_, replies_, approvals_, acted_;
  std::string streamed_;  // chunks since the last reply frame
  bool stream_line_closed_ = false;
  bool blocked_ = false;
  bool model_failed_ = false;                // a reply said no model answered (:MODEL-FAILURE)
  std::vector<std::string> model_failures_;  // "provider: why", one per failed attempt
  bool interactive_ = false;
  bool sent_ = false;
  bool lost_ = false;
  std::vector<HeldAction> held_;
};

// A session id for one interactive run: the daemon keeps the conversation
// under it, also across a reconnect.
std::string new_session_id() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device random;
  std::string id = "chat-";
  for (int i = 0; i < 4; ++i) {
    const unsigned bits = random();
    for (int nibble = 0; nibble < 4; ++nibble) id += kHex[(bits >> (4 * nibble)) & 0xf];
  }
  return id;
}

// The short /status: one line about the daemon, one about the models.
void print_short_status(const Target& target, const std::string& session_id, const Value& response, std::ostream& out) {
  const Value& p = response.at("PAYLOAD");
  const std::string version = display_text(p.at("VERSION"));
  const std::string health = display_text(p.at("HEALTH"));
  out << "daemon" << (version.empty() ? "" : " " + version) << " at " << target.endpoint.describe() << ": "
      << (health.empty() ? "health unknown" : health);
  if (p.at("UPTIME-S").is_integer()) out << ", up " << format_uptime(p.at("UPTIME-S").as_integer());
  const Value& pending = p.at("PENDING-APPROVALS");
  if (pending.is_integer()) out << ", " << pending.as_integer() << " pending approval(s)";
  out << "; session " << printable(session_id) << '\n';
  std::string models;
  for (const Value& e : entries_of(p.at("PROVIDERS"))) {
    std::string model = display_text(e.at("NAME"));
    if (const std::string name = display_text(e.at("MODEL")); !name.empty()) model += " (" + name + ")";
    if (const std::string state = display_text(e.at("STATE")); !state.empty()) model += " " + state;
    models += (models.empty() ? "" : ", ") + printable(model);
  }
  out << "models: " << (models.empty() ? "none configured" : models) << '\n';
}

constexpr const char* kSlashHelp =
    "Commands (never sent to the model):\n"
    "  /help           this list\n"
    "  /approve TOKEN  run an action a gate held for approval (add --remember: always, for this action)\n"
    "  /deny TOKEN     drop it\n"
    "  /status         the daemon's health, pending approvals and models\n"
    "  /quit, /exit    leave (so does Ctrl-D)\n"
    "Any other line is sent to the agent; start it with // to send a line that begins with /.\n";

// The first backoff step and the longest one while reconnecting.
constexpr std::chrono::milliseconds kFirstRetry{100};
constexpr std::chrono::milliseconds kLongestRetry{2000};
// How long reconnecting is tried at most (less when --timeout is shorter).
constexpr std::chrono::milliseconds kReconnectFor{20000};

// Interactive chat: lines from a terminal or a stream, one session for the
// whole run, slash commands handled here, held actions asked about inline,
// and a dropped connection reopened.
class Conversation {
 public:
  Conversation(const Target& target, const ChatOptions& options, LineReader& lines, const Output& output)
      : target_(target),
        lines_(lines),
        output_(output),
        session_id_(options.session_id.empty() ? new_session_id() : options.session_id),
        exchange_(client_, target_, output_) {
    exchange_.set_interactive(true);
  }

  int run() {
    ClientError error;
    if (!client_.open(target_.endpoint, target_.connect_timeout, error)) return report_client_error(output_, error);
    if (lines_.is_terminal()) {
      output_.out << "Connected to the daemon at " << target_.endpoint.describe() << " (session "
                  << printable(session_id_) << "). /help lists the commands; Ctrl-D quits.\n";
      output_.out.flush();
    }
    for (;;) {
      const auto line = lines_.read("> ");
      if (!line) break;
      const std::string text = trimmed(*line);
      if (text.empty()) continue;
      lines_.remember(text);
      if (text.front() == '/' && text.rfind("//", 0) != 0) {
        if (!command(text)) break;
        continue;
      }
      if (!say(text.front() == '/' ? text.substr(1) : text)) return kExitDisconnected;
      if (quit_) break;
    }
    if (lines_.is_terminal()) output_.out << '\n';
    output_.out.flush();
    return kExitOk;
  }

 private:
  // A slash command; false to leave.
  bool command(const std::string& text) {
    const auto space = text.find_first_of(" \t");
    const std::string name = text.substr(0, space);
    const std::string argument = space == std::string::npos ? std::string() : trimmed(text.substr(space));
    if (name == "/quit" || name == "/exit") return false;
    if (name == "/help") {
      output_.out << kSlashHelp;
    } else if (name == "/status") {
      run_operator_command(target_, output_, {"STATUS", {}, {}, {}}, [&](const Value& response, std::ostream& out) {
        print_short_status(target_, session_id_, response, out);
      });
    } else if (name == "/approve" || name == "/deny") {
      // /approve TOKEN [--remember]: "always" teaches a standing approval (exact).
      std::string token = argument;
      RememberOptions remember;
      if (const auto flag = token.find(" --remember");
          name == "/approve" && flag != std::string::npos && trimmed(token.substr(flag)) == "--remember") {
        remember.remember = true;
        token = trimmed(token.substr(0, flag));
      }
      if (token.empty() || token.find_first_of(" \t") != std::string::npos) {
        output_.err << "passepartout: " << name << " needs one TOKEN (the one shown when a gate asked)"
                    << (name == "/approve" ? ", and --remember to approve it always" : "") << '\n';
      } else {
        run_approvals_decide(target_, token, name == "/approve", output_, remember);
      }
    } else {
      output_.err << "passepartout: unknown command " << printable(name) << " (not sent to the model)\n";
      output_.err.flush();
      output_.out << kSlashHelp;
    }
    output_.out.flush();
    output_.err.flush();
    return true;
  }

  // Sends `text` as one exchange and asks about what it held; false when
  // the daemon could not be reached again.
  bool say(const std::string& text) {
    if (!usable_ || !client_.alive()) {
      if (!reconnect()) return false;
    }
    exchange_.run(text, session_id_, usable_);
    if (exchange_.lost() && !exchange_.sent()) {
      // The line never left: send it again on a new connection.
      if (!reconnect()) return false;
      exchange_.run(text, session_id_, usable_);
    }
    if (exchange_.lost()) {
      if (!reconnect()) return false;
      if (lines_.keep(text)) {
        note("the answer was cut off; your line is back at the prompt to send again");
      } else {
        note("the answer was cut off; the line was not sent again");
      }
      return true;
    }
    if (!output_.json) {
      for (const HeldAction& held : exchange_.held()) ask(held);
    }
    return true;
  }

  // Shows what a gate held and asks whether to run it: y approves, anything
  // else (or the end of input) denies.
  void ask(const HeldAction& held) {
    std::ostream& out = output_.out;
    if (held.token.empty()) {
      out << held.text << "\n  (the daemon sent no token; see `passepartout approvals list`)\n";
      out.flush();
      return;
    }
    out << "Approval needed" << (held.gates.empty() ? "" : " (" + held.gates + ")")
        << (held.reason.empty() ? "" : ": " + printable(held.reason)) << "\n  would run: " << held.command
        << "\n  token:     " << printable(held.token) << '\n';
    out.flush();
    const std::string question = "Run it? [y/N/a=always] ";
    if (!lines_.is_terminal()) {
      out << question;
      out.flush();
    }
    const auto answer = lines_.read(question);
    if (!answer) quit_ = true;  // the end of input: deny, then leave
    const std::string said = answer ? trimmed(*answer) : std::string();
    if (!lines_.is_terminal()) out << said << '\n';
    // a: always, a standing approval of exactly this (docs/rules.md); it still passes every gate.
    RememberOptions remember;
    remember.remember = said == "a" || said == "A" || said == "always";
    const bool approve = remember.remember || said == "y" || said == "Y" || said == "yes";
    run_approvals_decide(target_, held.token, approve, output_, remember);
    out.flush();
  }

  // Reopens the connection, trying again with a growing pause, for at most
  // the reply timeout (capped at kReconnectFor); false when it gave up.
  bool reconnect() {
    note("connection to the daemon lost; reconnecting\u2026");
    const auto bound = std::min<std::chrono::milliseconds>(target_.reply_timeout, kReconnectFor);
    const auto give_up = Clock::now() + bound;
    auto pause = kFirstRetry;
    ClientError error;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now());
      if (client_.open(target_.endpoint, std::min(target_.connect_timeout, std::max(left, kFirstRetry)), error)) break;
      if (Clock::now() + pause >= give_up) {
        report_failure(output_,
                       "could not reconnect to the daemon within " + format_seconds(bound) + ": " + error.message,
                       client_error_hint(error), kExitDisconnected);
        return false;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, kLongestRetry);
    }
    usable_ = true;
    note("reconnected to " + target_.endpoint.describe());
    return true;
  }

  void note(const std::string& text) {
    output_.out.flush();
    output_.err << "passepartout: " << text << '\n';
    output_.err.flush();
  }

  const Target& target_;
  LineReader& lines_;
  const Output& output_;
  std::string session_id_;
  Client client_;
  Exchange exchange_;
  bool usable_ = true;
  bool quit_ = false;
};

}  // namespace

int run_chat(const Target& target, const ChatOptions& options, LineReader& lines, const Output& output) {
  if (options.text) {
    if (trimmed(*options.text).empty()) {
      return report_failure(output, "nothing to send: the message is empty", "", kExitUsage);
    }
    Client client;
    ClientError error;
    if (!client.open(target.endpoint, target.connect_timeout, error)) return report_client_error(output, error);
    Exchange exchange(client, target, output);
    bool usable = true;
    return exchange.run(*options.text, options.session_id, usable);
  }
  return Conversation(target, options, lines, output).run();
}

int run_chat(const Target& target, const ChatOptions& options, std::istream& in, const Output& output) {
  const auto lines = stream_lines(in);
  return run_chat(target, options, *lines, output);
}

void add_chat_command(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen) {
  // chat
  auto* chat = app.add_subcommand(
      "chat",
      "Talk to the agent through the running daemon. With TEXT, one exchange: the reply streams as it arrives,\n"
      "then its gate trace (each gate's verdict and reason) and any approval request with the token to\n"
      "approve it. Without TEXT, a conversation in one session: on a terminal with line editing and a\n"
      "history (<state dir>/chat_history, the last 1000 lines), else line by line from standard input.\n"
      "Lines starting with / are commands, never sent to the model: /help, /approve TOKEN, /deny TOKEN,\n"
      "/status, /quit (or /exit; Ctrl-D too). An action a gate holds for approval is shown with the gate\n"
      "that asked and \"Run it? [y/N/a=always]\" (y runs it; a runs it and teaches a standing approval of\n"
      "exactly that action, docs/rules.md; anything else denies it). When the daemon drops the connection\n"
      "(a restart), chat reconnects and sends the line that had not gone out; Ctrl-C clears the line being\n"
      "typed.");
  chat->add_option("text", parsed->chat_words, "The message (several words are joined with spaces)");
  chat->add_option("--session", parsed->session_id,
                   "Session id to talk in (default: with TEXT the connection's own, else a new one for the run)")
      ->type_name("ID");
  add_connection_options(*chat, *parsed, kChatReplyTimeoutS);
  chat->footer(
      "Exit status (with TEXT): 0 the exchange ended; 1 the daemon could not be reached, failed or closed\n"
      "the connection; 2 bad usage; 3 a gate blocked the reply's action; 4 an action waits for approval;\n"
      "5 no model answered (every provider failed; each one's reason is printed).\n"
      "Interactive: 0 at the end of input or /quit; 1 the daemon could not be reached at the start;\n"
      "6 the connection was lost and reconnecting failed (tried for up to 20 s, or --timeout if shorter).\n"
      "With --json: one JSON document per exchange.");
  chat->callback([parsed, &chosen] {
    choose(chosen, parsed, kChatReplyTimeoutS, [parsed](const Target& target, const Output& output) {
      ChatOptions options;
      if (!parsed->chat_words.empty()) {
        std::string text;
        for (const auto& word : parsed->chat_words) text += (text.empty() ? "" : " ") + word;
        options.text = std::move(text);
      }
      options.session_id = parsed->session_id;
      // A terminal gets line editing and a history; anything else is read line by line as it comes.
      std::unique_ptr<LineReader> lines;
      if (!options.text && !parsed->json && ::isatty(STDIN_FILENO) != 0 && ::isatty(STDOUT_FILENO) != 0) {
        lines = terminal_editor(default_state_dir() / kChatHistoryFile);
      }
      if (!lines) lines = stream_lines(std::cin);
      return run_chat(target, options, *lines, output);
    });
  });
}

}  // namespace passepartout::cli
