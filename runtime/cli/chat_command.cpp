// `passepartout chat`: user input to the daemon, and what comes back (stream
// chunks, replies with their gate trace, approval notices) shown as it arrives.
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <istream>
#include <ostream>
#include <string>
#include <utility>
#include <vector>
#include "cli/cli11.hpp"

#include "base/utf8.hpp"
#include "cli/client_commands.hpp"
#include "cli/client_options.hpp"
#include "cli/client_output.hpp"
#include "cli/exit_status.hpp"
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

// One exchange on an open connection.
class Exchange {
 public:
  Exchange(Client& client, const Target& target, const Output& output)
      : client_(client), target_(target), output_(output) {}

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

    ClientError error;
    if (!client_.send(message, Clock::now() + target_.reply_timeout, error)) {
      usable = false;
      return fail_client(error);
    }
    for (;;) {
      Value frame;
      // The deadline restarts with every frame: a long reply that keeps streaming is not cut off.
      if (!client_.read(frame, Clock::now() + target_.reply_timeout, error)) {
        usable = false;
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
    print_trace(output_.out, trace);
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

  int fail_client(const ClientError& error) {
    end_stream_line();
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
};

}  // namespace

int run_chat(const Target& target, const ChatOptions& options, std::istream& in, const Output& output) {
  if (options.text && trimmed(*options.text).empty()) {
    return report_failure(output, "nothing to send: the message is empty", "", kExitUsage);
  }
  Client client;
  ClientError error;
  if (!client.open(target.endpoint, target.connect_timeout, error)) return report_client_error(output, error);
  Exchange exchange(client, target, output);
  bool usable = true;
  if (options.text) return exchange.run(*options.text, options.session_id, usable);

  int status = kExitOk;
  std::string line;
  for (;;) {
    if (options.prompt) {
      output.out << "> ";
      output.out.flush();
    }
    if (!std::getline(in, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string text = trimmed(line);
    if (text.empty()) continue;
    if (text == "/exit" || text == "/quit") break;
    if (!usable) {
      // The last exchange lost the connection (the daemon restarted, or
      // closed it after an error): one new connection for this message.
      if (!client.open(target.endpoint, target.connect_timeout, error)) return report_client_error(output, error);
      usable = true;
      if (!output.json) {
        output.err << "passepartout: reconnected to " << target.endpoint.describe() << '\n';
        output.err.flush();
      }
    }
    status = exchange.run(line, options.session_id, usable);
  }
  if (options.prompt) output.out << '\n';
  return status;
}

void add_chat_command(CLI::App& app, const std::shared_ptr<ParsedClient>& parsed, Runner& chosen) {
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
  add_connection_options(*chat, *parsed, kChatReplyTimeoutS);
  chat->footer(
      "Exit status: 0 the exchange ended; 1 the daemon could not be reached, failed or closed the\n"
      "connection; 2 bad usage; 3 a gate blocked the reply's action; 4 an action waits for approval;\n"
      "5 no model answered (every provider failed; each one's reason is printed)\n"
      "(interactive: the status of the last exchange). With --json: one JSON document per exchange.");
  chat->callback([parsed, &chosen] {
    choose(chosen, parsed, kChatReplyTimeoutS, [parsed](const Target& target, const Output& output) {
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
}

}  // namespace passepartout::cli
