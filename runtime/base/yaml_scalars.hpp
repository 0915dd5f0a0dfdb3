// Typing YAML scalars: the one rule the skill manifests' config and the
// scripted-model scripts read values by (YAML 1.2 core schema, 64-bit integers).
// Included only by those readers' .cpp files: it brings in yaml-cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace passepartout {

// A scalar's value, typed.
struct YamlScalar {
  enum class Type { null, boolean, integer, real, string };
  Type type = Type::null;
  bool boolean = false;
  std::int64_t integer = 0;
  double real = 0.0;
  std::string_view text;  // the scalar as written (Type::string: its value); borrowed from the node
};

// A scalar node typed by its tag. Plain (untagged, unquoted): by the YAML 1.2
// core schema — null (empty, ~, null), true/false, integers ([-+]?[0-9]+,
// 0o17, 0x1F), floats (1.5, 1e3, .5, [-+].inf, .nan), anything else a string.
// Quoted, "!" or !!str: a string. !!int, !!float, !!bool, !!null: a value of
// that type. Fails (invalid_input, a message without location for the reader
// to place) on an integer that does not fit in 64 bits, a float out of range,
// a tagged value not of its tag's type, or another tag: a config value is
// never wrapped, clamped or quietly read as something else.
Result<YamlScalar> type_scalar(const YAML::Node& node);

// The scalar as a value of V, built by V's named constructors (V::nil(),
// V::boolean, V::integer, V::real, V::string).
template <class V>
V scalar_value(const YamlScalar& scalar) {
  switch (scalar.type) {
    case YamlScalar::Type::null:
      return V::nil();
    case YamlScalar::Type::boolean:
      return V::boolean(scalar.boolean);
    case YamlScalar::Type::integer:
      return V::integer(scalar.integer);
    case YamlScalar::Type::real:
      return V::real(scalar.real);
    case YamlScalar::Type::string:
      return V::string(scalar.text);
  }
  return V::nil();
}

// YAML 1.2 core schema booleans: true/True/TRUE, false/False/FALSE.
std::optional<bool> core_bool(std::string_view s);

}  // namespace passepartout
