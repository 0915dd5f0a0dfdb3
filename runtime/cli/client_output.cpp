// Printing for the client commands: Values as JSON, terminal-safe text,
// failures with hints.
#include "cli/client_output.hpp"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "cli/exit_status.hpp"
#include "cli/terminal_text.hpp"
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

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

std::string json_key(std::string_view keyword) {
  std::string key = lower(keyword);
  for (char& c : key) {
    if (c == '-') c = '_';
  }
  return key;
}

OrderedJson value_json(const Value& value) {
  switch (value.kind()) {
    case Kind::Nil:
      return nullptr;
    case Kind::True:
      return true;
    case Kind::Integer:
      return value.as_integer();
    case Kind::Float:
      return std::isfinite(value.as_float()) ? OrderedJson(value.as_float()) : OrderedJson(nullptr);
    case Kind::String:
      return std::string(value.text());
    case Kind::Keyword:
      return lower(value.text());
    case Kind::Symbol:
      return std::string(value.text());
    case Kind::List:
      break;
  }
  const auto items = value.items();
  if (is_plist(value)) {
    OrderedJson object = OrderedJson::object();
    for (std::size_t i = 0; i < items.size(); i += 2) {
      const std::string key = json_key(items[i].text());
      if (!object.contains(key)) object[key] = value_json(items[i + 1]);  // the first wins, as plist lookup does
    }
    return object;
  }
  OrderedJson array = OrderedJson::array();
  for (const Value& item : items) array.push_back(value_json(item));
  return array;
}

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
    case ClientFailure::closed: return "the daemon may have stopped or failed; check its log, then try again";
    case ClientFailure::timeout:
      return "allow more time with --timeout SECONDS, or see what the daemon is doing with `passepartout status`";
    case ClientFailure::bad_frame: return "check that a passepartout daemon listens there";
    case ClientFailure::io: return {};
  }
  return {};
}

int report_client_error(const Output& output, const ClientError& error) {
  return report_failure(output, error.message, client_error_hint(error), kExitProblem);
}

}  // namespace passepartout::cli
