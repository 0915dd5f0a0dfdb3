// A tool call's arguments on their way back to a server. The gates see them
// as a plist whose keys the JSON bridge upper-cased, and in which false, {}
// and [] all read as NIL; a server wants its own property names
// ("maxResults") and its own types. The tool's input schema says both, so it
// guides the way back.
#pragma once

#include <string>
#include <string_view>

#include "value/value.hpp"

namespace passepartout::mcp {

// `args` (a plist, or NIL for none) as a JSON object's text, guided by
// `input_schema_json`:
//   - a key takes the name of the schema property it upper-cases to (at
//     each level, nested objects and array items included), else its name
//     lower-cased (as value_to_json writes keys);
//   - NIL becomes what its property's type says: false for a boolean, [] for
//     an array, {} for an object, null otherwise (or when the type allows null);
//   - a top-level :EXPLANATION the schema does not name is left out (it is
//     the action's, for the gates);
//   - T is true; a keyword value is its name lower-cased; numbers and strings
//     stay as they are.
// A schema that is missing or not JSON guides nothing: the plain rules apply.
std::string arguments_json(const Value& args, std::string_view input_schema_json);

}  // namespace passepartout::mcp
