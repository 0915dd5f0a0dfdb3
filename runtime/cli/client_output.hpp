// How the client commands print what the daemon sent: Values as JSON with
// snake_case keys, text made safe for a terminal, failures with a hint.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cli/client.hpp"
#include "cli/client_commands.hpp"
#include "value/value.hpp"

namespace passepartout::cli {

using OrderedJson = nlohmann::ordered_json;

// A keyword name as a JSON key: lower case, '-' as '_' (UPTIME-S -> uptime_s).
std::string json_key(std::string_view keyword);
// `value` as JSON: a property list is an object keyed by json_key(), any
// other list an array, NIL null, T true, a keyword its lower-case name.
OrderedJson value_json(const Value& value);
// `value` as JSON, with NIL as an empty array (for lists that may be empty).
OrderedJson list_json(const Value& value);
// Writes `document` pretty-printed and a newline; invalid UTF-8 is replaced.
void print_json(std::ostream& out, const OrderedJson& document);

// A string's text, or the name of a keyword or symbol, made printable; the
// printed s-expression of anything else; empty for NIL.
std::string display_text(const Value& value);
// An integer as text, or "-" when it is missing or not an integer.
std::string integer_text(const Value& value);

// Columns separated by two spaces, each as wide as its widest cell (in code
// points); the columns flagged in `right` are right-aligned. Every line
// starts with `indent`; trailing spaces are trimmed.
std::string render_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right,
                         std::string_view indent);

// "30 s", "0.2 s": a timeout for messages.
std::string format_seconds(std::chrono::milliseconds duration);
// 12s, 4m 05s, 2h 03m 04s, 3d 04h 05m; a negative count is 0s.
std::string format_uptime(std::int64_t seconds);

// The items of a list of entries; a lone plist counts as a list of one.
std::vector<Value> entries_of(const Value& list);

// The loaded skills (the :SKILLS of a status or skills answer) as a table,
// with priority, gate and sha256 columns when `with_details`; then why each
// disabled one is, and what each offers that acts on the world and its guards.
std::string skills_table(const Value& skills, bool with_details);

// Reports a failure: text mode writes "passepartout: <message>; <hint>" to
// err; JSON mode writes {"ok": false, "error", "hint", "code"} to out.
// Returns `status`.
int report_failure(const Output& output, const std::string& message, const std::string& hint, int status,
                   std::string_view code = {});
// The same for a failure talking to the daemon, with the hint that fits it.
int report_client_error(const Output& output, const ClientError& error);

// What to do about a failure to reach or talk to the daemon ("" when there is
// nothing to suggest); report_client_error and chat say the same.
std::string client_error_hint(const ClientError& error);

}  // namespace passepartout::cli
