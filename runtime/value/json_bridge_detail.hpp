// The JSON bridge on nlohmann::json documents, for runtime .cpp files that
// already hold one. Private to the runtime: public headers never include nlohmann.
#pragma once

#include <nlohmann/json.hpp>

#include "value/value.hpp"

namespace passepartout {

// The mapping of json_to_value (json_bridge.hpp) applied to a parsed document.
// nlohmann::json keeps object keys sorted, so plist keys come out sorted too.
// Named apart from json_to_value(std::string_view) because nlohmann::json
// converts implicitly from a string literal, which would make calls ambiguous.
Value json_dom_to_value(const nlohmann::json& json);

// How value_to_json_dom names an object's keys: the keyword's name
// lower-cased (:SESSION-ID -> "session-id", as value_to_json does), or with
// each '-' as '_' as well (-> "session_id", as the client commands print).
enum class JsonKeys { lower_case, snake_case };

// The mapping of value_to_json (json_bridge.hpp) as an order-keeping document,
// its object keys named as `keys` says.
nlohmann::ordered_json value_to_json_dom(const Value& value, JsonKeys keys = JsonKeys::lower_case);

}  // namespace passepartout
