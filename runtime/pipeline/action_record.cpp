// ActionRecord: the two log lines and the user's message of one action.
#include "pipeline/action_record.hpp"
#include "pipeline/signal.hpp"

#include <cstdio>

#include "base/ascii.hpp"
#include "base/log.hpp"
#include "base/utf8.hpp"
#include "pipeline/gate_log.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

using namespace key_literals;

// `text` cut to `limit` code points, with how much was left out.
std::string cut(std::string_view text, std::size_t limit) {
  const std::size_t bytes = byte_length_of_code_points(text, limit);
  if (bytes == std::string_view::npos || bytes >= text.size()) return std::string(text);
  return std::string(text.substr(0, bytes)) + "... (" + std::to_string(text.size() - bytes) + " more bytes)";
}

// One log line's worth: masked, cut, and on one line.
std::string loggable(std::string_view text) {
  std::string line = cut(mask_secrets(text), ActionRecord::kMaxLoggedChars);
  for (char& c : line) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return line;
}

std::string text_of(const Value& value) {
  if (value.is_string()) return std::string(value.text());
  return to_sexp(value);
}

std::string milliseconds(std::chrono::steady_clock::duration took) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", std::chrono::duration<double, std::milli>(took).count());
  return buffer;
}

}  // namespace

ActionRecord::ActionRecord(std::string_view target, const Value& action)
    : target_(target), start_(std::chrono::steady_clock::now()) {
  const Value& payload = action.at("PAYLOAD"_key);
  if (target == "TOOL") {
    const Value& tool = payload.at("TOOL"_key);
    const std::string name = tool.is_string() || tool.is_keyword() || tool.is_symbol() ? ascii_lower(tool.text()) : "?";
    label_ = "tool " + name;
    const Value& args = payload.at("ARGS"_key);
    what_ = args.is_nil() ? name : name + " " + to_sexp(args);
  } else {
    label_ = ":" + std::string(target);
    const Value& command = payload.at("CMD"_key);
    what_ = command.is_string() ? std::string(command.text()) : to_sexp(payload);
  }
  session_ = session_id_of(action);
  log_message(LogLevel::info, "act", "ACT START [{}] (session {}): {}", label_, loggable(session_), loggable(what_));
}

Value ActionRecord::finish(const Result<Value>& result) const {
  const auto took = std::chrono::steady_clock::now() - start_;
  const std::string ms = milliseconds(took);
  std::string output = result ? (result->is_nil() ? std::string() : text_of(*result)) : result.error().message;
  // The shell answers a failed command with "ERROR ..." as its output (seed
  // I3); a tool may answer (:STATUS :ERROR :MESSAGE ...).
  const bool ok = result && output.rfind("ERROR", 0) != 0 && !result->at("STATUS"_key).is_keyword("ERROR"_key);
  log_message(ok ? LogLevel::info : LogLevel::warn, "act", "ACT END [{}] (session {}): {} in {} ms{}{}", label_,
              loggable(session_), ok ? "ok" : "failed", ms, output.empty() ? ", no output" : ": ",
              output.empty() ? std::string() : loggable(output));

  std::string text = "Ran " + what_ + (target_ == "TOOL" ? std::string() : " on " + label_) +
                     (ok ? std::string() : " (failed)") + ":\n" +
                     (output.empty() ? std::string("(no output)") : cut(output, kMaxShownChars));
  Value acted = Value::plist({{"TARGET", Value::keyword(target_)},
                              {"WHAT", Value::string(what_)},
                              {"STATUS", Value::keyword(ok ? "OK" : "ERROR")},
                              {"MS", Value::real(std::chrono::duration<double, std::milli>(took).count())}});
  return Value::plist(
      {{"ACTION", Value::keyword("MESSAGE"_key)}, {"TEXT", Value::string(text)}, {"ACTED", std::move(acted)}});
}

}  // namespace passepartout
