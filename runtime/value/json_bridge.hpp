// The JSON bridge: JSON from LLM tool calls and HTTP APIs into Values, and
// Values out as JSON for `--json` output.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

// Parses one JSON document (surrounding whitespace allowed) into a Value:
//   object -> keyword plist in document order, keys upper-cased into keywords
//             ({"action":"shell"} -> (:ACTION "shell")); a key's leading ':'
//             stays part of the name, so value_to_json gives the key back
//   array  -> list (an array of objects is a list of plists)
//   string -> string; integer -> integer; a non-negative integer above the
//             int64 range -> float; other numbers -> float
//   true -> T; false, null, {} and [] -> NIL
// Errors name the byte offset: `byte <offset>: invalid JSON: <reason>`
// (invalid_input), or `byte <offset>: nesting deeper than <max_depth>`
// (limit_exceeded) where an object or array opens past max_depth levels.
// Thread-safe.
Result<Value> json_to_value(std::string_view json, std::size_t max_depth = 256);

// A Value as compact JSON (UTF-8, not ASCII-escaped):
//   proper plist (non-empty, even length, every even element a keyword)
//             -> object with lower-cased keys (:SESSION-ID -> "session-id"),
//                in order; a repeated key keeps its first value, as plist lookup does
//   other list -> array; NIL -> null; T -> true
//   keyword -> its name lower-cased, without the colon; symbol -> its name
//   integer, float -> number (NaN and infinities -> null); string -> string
std::string value_to_json(const Value& value);

}  // namespace passepartout
