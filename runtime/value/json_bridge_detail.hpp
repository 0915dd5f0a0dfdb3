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

// The mapping of value_to_json (json_bridge.hpp) as an order-keeping document.
nlohmann::ordered_json value_to_json_dom(const Value& value);

}  // namespace passepartout
