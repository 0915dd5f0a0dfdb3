// Typing YAML scalars by the YAML 1.2 core schema, for every YAML reader.
#include "base/yaml_scalars.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "base/yaml_diagnostics.hpp"

namespace passepartout {
namespace {

constexpr std::string_view kIntTag = "tag:yaml.org,2002:int";
constexpr std::string_view kFloatTag = "tag:yaml.org,2002:float";
constexpr std::string_view kBoolTag = "tag:yaml.org,2002:bool";
constexpr std::string_view kNullTag = "tag:yaml.org,2002:null";
constexpr std::string_view kStrTag = "tag:yaml.org,2002:str";

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool is_core_null(std::string_view s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }

enum class Parsed { no, yes, out_of_range };

// [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+
Parsed core_int(std::string_view s, std::int64_t& out) {
  int base = 10;
  bool negative = false;
  std::string_view digits = s;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'o' || s[1] == 'x')) {
    base = s[1] == 'o' ? 8 : 16;
    digits = s.substr(2);
  } else if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    digits = s.substr(1);
  }
  auto valid = [base](char c) { return base == 16 ? is_hex(c) : (c >= '0' && c < static_cast<char>('0' + base)); };
  if (digits.empty() || !std::all_of(digits.begin(), digits.end(), valid)) return Parsed::no;
  std::uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  if (ec != std::errc() || end != digits.data() + digits.size()) return Parsed::out_of_range;
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (negative) {
    if (magnitude > kMax + 1) return Parsed::out_of_range;
    out = magnitude == kMax + 1 ? std::numeric_limits<std::int64_t>::min() : -static_cast<std::int64_t>(magnitude);
  } else {
    if (magnitude > kMax) return Parsed::out_of_range;
    out = static_cast<std::int64_t>(magnitude);
  }
  return Parsed::yes;
}

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? | [-+]?\.inf | \.nan
Parsed core_float(std::string_view s, double& out) {
  std::string_view body = s;
  bool negative = false;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
    negative = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == ".inf" || body == ".Inf" || body == ".INF") {
    out = negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    return Parsed::yes;
  }
  if (s == ".nan" || s == ".NaN" || s == ".NAN") {
    out = std::numeric_limits<double>::quiet_NaN();
    return Parsed::yes;
  }
  std::size_t i = 0;
  std::size_t int_digits = 0;
  std::size_t frac_digits = 0;
  while (i < body.size() && is_digit(body[i])) {
    ++i;
    ++int_digits;
  }
  if (i < body.size() && body[i] == '.') {
    ++i;
    while (i < body.size() && is_digit(body[i])) {
      ++i;
      ++frac_digits;
    }
  }
  if (int_digits == 0 && frac_digits == 0) return Parsed::no;
  if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
    ++i;
    if (i < body.size() && (body[i] == '-' || body[i] == '+')) ++i;
    std::size_t exp_digits = 0;
    while (i < body.size() && is_digit(body[i])) {
      ++i;
      ++exp_digits;
    }
    if (exp_digits == 0) return Parsed::no;
  }
  if (i != body.size()) return Parsed::no;
  double magnitude = 0.0;
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), magnitude);
  if (ec != std::errc() || end != body.data() + body.size() || std::isinf(magnitude)) {
    return Parsed::out_of_range;
  }
  out = negative ? -magnitude : magnitude;
  return Parsed::yes;
}

YamlScalar typed(YamlScalar::Type type, std::string_view text) {
  YamlScalar scalar;
  scalar.type = type;
  scalar.text = text;
  return scalar;
}

}  // namespace

Result<YamlScalar> type_scalar(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  const std::string& tag = node.Tag();
  auto bad = [](const std::string& what) -> Result<YamlScalar> { return fail(ErrorCode::invalid_input, what); };
  YamlScalar scalar = typed(YamlScalar::Type::string, text);
  if (tag == "!" || tag == kStrTag) return scalar;

  if (tag == "?") {
    if (is_core_null(text)) return typed(YamlScalar::Type::null, text);
    if (auto b = core_bool(text)) {
      scalar.type = YamlScalar::Type::boolean;
      scalar.boolean = *b;
      return scalar;
    }
    switch (core_int(text, scalar.integer)) {
      case Parsed::yes:
        scalar.type = YamlScalar::Type::integer;
        return scalar;
      case Parsed::out_of_range:
        return bad("integer " + in_quotes(text) + " does not fit in 64 bits; quote it to pass a string");
      case Parsed::no:
        break;
    }
    switch (core_float(text, scalar.real)) {
      case Parsed::yes:
        scalar.type = YamlScalar::Type::real;
        return scalar;
      case Parsed::out_of_range:
        return bad("number " + in_quotes(text) + " is out of range; quote it to pass a string");
      case Parsed::no:
        break;
    }
    return scalar;
  }
  if (tag == kIntTag) {
    if (core_int(text, scalar.integer) == Parsed::yes) {
      scalar.type = YamlScalar::Type::integer;
      return scalar;
    }
    return bad("!!int " + in_quotes(text) + " is not a 64-bit integer");
  }
  if (tag == kFloatTag) {
    scalar.type = YamlScalar::Type::real;
    if (core_float(text, scalar.real) == Parsed::yes) return scalar;
    if (std::int64_t integer = 0; core_int(text, integer) == Parsed::yes) {  // 0x10, 0o17
      scalar.real = static_cast<double>(integer);
      return scalar;
    }
    return bad("!!float " + in_quotes(text) + " is not a number");
  }
  if (tag == kBoolTag) {
    if (auto b = core_bool(text)) {
      scalar.type = YamlScalar::Type::boolean;
      scalar.boolean = *b;
      return scalar;
    }
    return bad("!!bool " + in_quotes(text) + " is not true or false");
  }
  if (tag == kNullTag) {
    if (is_core_null(text)) return typed(YamlScalar::Type::null, text);
    return bad("!!null " + in_quotes(text) + " is not null");
  }
  return bad("unsupported tag " + in_quotes(tag) + "; remove it, or quote the value for a string");
}

std::optional<bool> core_bool(std::string_view s) {
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  return std::nullopt;
}

}  // namespace passepartout
