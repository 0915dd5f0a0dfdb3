// Printing for the client commands: Values as JSON, terminal-safe text,
// failures with hints.
#include "cli/client_output.hpp"

#include <algorithm>
#include <ostream>

#include "base/ascii.hpp"
#include "cli/exit_status.hpp"
#include "cli/terminal_text.hpp"
#include "value/json_bridge_detail.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout::cli {

namespace {

bool is_plist(const Value& value) {
  const auto items = value.items();
  if (items.empty() || items.size() % 2 != 0) return false;
  for (std::size_t i = 0; i < items.size(); i += 2) {
    if (!items[i].is_keyword()) return false;
  }
  return true;
}

std::string yes_no(const Value& value) { return value.is_nil() ? "no" : "yes"; }

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
      offers += (skill.at("ACTUATORS").size() == 1 ? "actuator " : "actuators ") + joined_texts(skill.at("ACTUATORS"));
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

}  // namespace

std::string json_key(std::string_view keyword) {
  std::string key = ascii_lower(keyword);
  std::replace(key.begin(), key.end(), '-', '_');
  return key;
}

OrderedJson value_json(const Value& value) { return value_to_json_dom(value, JsonKeys::snake_case); }

OrderedJson list_json(const Value& value) {
  if (value.is_nil()) return OrderedJson::array();
  if (!value.is_list() || is_plist(value)) return OrderedJson::array({value_json(value)});
  return value_json(value);
}

void print_json(std::ostream& out, const OrderedJson& document) {
  out << document.dump(2, ' ', false, OrderedJson::error_handler_t::replace) << '\n';
  out.flush();
}

std::string display_text(const Value& value) {
  if (value.is_nil()) return {};
  if (value.is_string() || value.is_keyword() || value.is_symbol()) return printable(value.text());
  return printable(to_sexp(value));
}

std::string integer_text(const Value& value) {
  return value.is_integer() ? std::to_string(value.as_integer()) : std::string("-");
}

// Columns separated by two spaces, each as wide as its widest cell; the
// columns in `right` are right-aligned (numbers). Trailing spaces trimmed.
std::string render_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right,
                         std::string_view indent) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], display_width(row[c]));
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line(indent);
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c > 0) line += "  ";
      const std::string padding(widths[c] - display_width(row[c]), ' ');
      const bool align_right = c < right.size() && right[c];
      if (align_right) line += padding;
      line += row[c];
      if (!align_right) line += padding;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

std::string format_seconds(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  std::string text = std::to_string(ms / 1000) + "." + std::to_string(ms % 1000 + 1000).substr(1);
  while (text.back() == '0') text.pop_back();
  return text + " s";
}

int report_failure(const Output& output, const std::string& message, const std::string& hint, int status,
                   std::string_view code) {
  if (output.json) {
    OrderedJson document{{"ok", false}, {"error", message}};
    if (!hint.empty()) document["hint"] = hint;
    if (!code.empty()) document["code"] = std::string(code);
    print_json(output.out, document);
  } else {
    output.out.flush();
    output.err << "passepartout: " << message;
    if (!hint.empty()) output.err << "; " << hint;
    output.err << '\n';
    output.err.flush();
  }
  return status;
}

std::string client_error_hint(const ClientError& error) {
  switch (error.failure) {
    case ClientFailure::unreachable:
      return "start it with `passepartout daemon`, or name where it listens with --socket PATH or --port N";
    case ClientFailure::closed:
      return "the daemon may have stopped or failed; check its log, then try again";
    case ClientFailure::timeout:
      return "allow more time with --timeout SECONDS, or see what the daemon is doing with `passepartout status`";
    case ClientFailure::bad_frame:
      return "check that a passepartout daemon listens there";
    case ClientFailure::io:
      return {};
  }
  return {};
}

int report_client_error(const Output& output, const ClientError& error) {
  return report_failure(output, error.message, client_error_hint(error), kExitProblem);
}

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

std::vector<Value> entries_of(const Value& list) {
  if (!list.is_list()) return {};
  if (list.items().front().is_keyword()) return {list};
  return {list.items().begin(), list.items().end()};
}

std::string skills_table(const Value& skills, bool with_details) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  std::vector<std::string> quarantined;
  if (with_details) {
    rows.push_back(
        {"NAME", "VERSION", "PRIORITY", "STATE", "GATE", "VERIFIED", "BLOCKED", "FAILED", "SHA256", "ISOLATION"});
  } else {
    rows.push_back({"NAME", "VERSION", "STATE", "VERIFIED", "BLOCKED", "FAILED", "ISOLATION"});
  }
  std::string out;
  for (const Value& skill : entries_of(skills)) {
    const std::string name = display_text(skill.at("NAME"));
    const std::string state = json_key(display_text(skill.at("STATE")));
    std::string sha = display_text(skill.at("SHA256")).substr(0, 12);
    // "in-process", or "process (pid 1234, 2 restarts, 3 sandbox denials)" / "process (quarantined)".
    std::string isolation = display_text(skill.at("ISOLATION"));
    if (isolation.empty()) isolation = "-";
    if (isolation == "process") {
      std::string detail;
      if (!skill.at("QUARANTINED").is_nil()) {
        detail = "quarantined";
      } else if (skill.at("WORKER-PID").as_integer() > 0) {
        detail = "pid " + integer_text(skill.at("WORKER-PID"));
      } else {
        detail = "not running";
      }
      const std::int64_t restarts = skill.at("RESTARTS").as_integer();
      if (restarts > 0) detail += ", " + std::to_string(restarts) + (restarts == 1 ? " restart" : " restarts");
      // Only where non-zero: a denial is worth a look (the log names the system call).
      const std::int64_t denials = skill.at("SANDBOX-DENIALS").as_integer();
      if (denials > 0) {
        detail += ", " + std::to_string(denials) + (denials == 1 ? " sandbox denial" : " sandbox denials");
      }
      isolation += " (" + detail + ")";
    }
    if (with_details) {
      rows.push_back({name.empty() ? "?" : name, display_text(skill.at("VERSION")), integer_text(skill.at("PRIORITY")),
                      state, skill.get("GATE") != nullptr ? yes_no(skill.at("GATE")) : "-",
                      integer_text(skill.at("VERIFIED")), integer_text(skill.at("BLOCKED")),
                      integer_text(skill.at("FAILED")), sha.empty() ? "-" : sha, isolation});
    } else {
      rows.push_back({name.empty() ? "?" : name, display_text(skill.at("VERSION")), state,
                      integer_text(skill.at("VERIFIED")), integer_text(skill.at("BLOCKED")),
                      integer_text(skill.at("FAILED")), isolation});
    }
    if (const Value& reason = skill.at("REASON"); !reason.is_nil()) {
      notes.push_back("  " + (name.empty() ? std::string("?") : name) + ": " + display_text(reason));
    }
    if (const Value& reason = skill.at("QUARANTINED"); !reason.is_nil()) {
      quarantined.push_back("  " + (name.empty() ? std::string("?") : name) + ": " + display_text(reason));
    }
  }
  out += render_table(rows,
                      with_details ? std::vector<bool>{false, false, true, false, false, true, true, true, false, false}
                                   : std::vector<bool>{false, false, false, true, true, true, false},
                      "  ");
  if (!notes.empty()) {
    out += "\nWhy disabled:\n";
    for (const auto& note : notes) out += note + '\n';
  }
  if (!quarantined.empty()) {
    out += "\nQuarantined (its hooks fail closed until `passepartout skills reload NAME`):\n";
    for (const auto& note : quarantined) out += note + '\n';
  }
  out += offers_text(skills);
  return out;
}

}  // namespace passepartout::cli
