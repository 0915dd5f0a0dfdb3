// Parsing, ordering and matching of semantic versions, version constraints
// and ABI versions.
#include "skills/version.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <system_error>

namespace passepartout {
namespace {

constexpr std::string_view kVersionShape = "expected MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD], e.g. 1.2.0";

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum_or_dash(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-'; }
bool all_digits(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_digit); }

std::string in_quotes(std::string_view s) { return "'" + std::string(s) + "'"; }

// A number part of a version: digits, no leading zero, fits 64 bits.
// Returns why it is not one.
std::optional<std::string> parse_number(std::string_view part, std::uint64_t& out) {
  if (part.empty()) return std::string("a number is missing");
  if (!all_digits(part)) return in_quotes(part) + " is not a number";
  if (part.size() > 1 && part[0] == '0') return in_quotes(part) + " has a leading zero";
  auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
  if (ec != std::errc() || end != part.data() + part.size()) return in_quotes(part) + " is too large";
  return std::nullopt;
}

// Dot-separated identifiers of [0-9A-Za-z-]; numeric ones without leading zeros
// when `numeric_rule` (pre-release) is set. Returns why they are not valid.
std::optional<std::string> check_identifiers(std::string_view ids, std::string_view what, bool numeric_rule) {
  std::size_t start = 0;
  while (true) {
    std::size_t dot = ids.find('.', start);
    std::string_view id = ids.substr(start, dot == std::string_view::npos ? ids.npos : dot - start);
    if (id.empty()) return "empty " + std::string(what) + " identifier";
    if (!std::all_of(id.begin(), id.end(), is_alnum_or_dash)) {
      return std::string(what) + " identifier " + in_quotes(id) + " may only contain letters, digits and '-'";
    }
    if (numeric_rule && all_digits(id) && id.size() > 1 && id[0] == '0') {
      return std::string(what) + " identifier " + in_quotes(id) + " has a leading zero";
    }
    if (dot == std::string_view::npos) return std::nullopt;
    start = dot + 1;
  }
}

// MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD]; `given` receives how many of the
// three numbers were written. Returns why `text` is not a version.
std::optional<std::string> parse_version(std::string_view text, SemVer& out, int& given) {
  if (text.empty()) return std::string("the version is empty");
  std::string_view core = text;
  if (std::size_t plus = core.find('+'); plus != std::string_view::npos) {
    if (auto why = check_identifiers(core.substr(plus + 1), "build", false)) return why;
    core = core.substr(0, plus);
  }
  std::string_view prerelease;
  if (std::size_t dash = core.find('-'); dash != std::string_view::npos) {
    prerelease = core.substr(dash + 1);
    core = core.substr(0, dash);
    if (auto why = check_identifiers(prerelease, "pre-release", true)) return why;
  }
  std::uint64_t* parts[] = {&out.major, &out.minor, &out.patch};
  out = SemVer{};
  given = 0;
  std::size_t start = 0;
  while (true) {
    if (given == 3) return std::string("a version has at most three numbers");
    std::size_t dot = core.find('.', start);
    std::string_view part = core.substr(start, dot == std::string_view::npos ? core.npos : dot - start);
    if (auto why = parse_number(part, *parts[given])) return why;
    ++given;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (!prerelease.empty() && given != 3) {
    return std::string("a pre-release needs all of MAJOR.MINOR.PATCH");
  }
  out.prerelease = std::string(prerelease);
  return std::nullopt;
}

// Compares the first `given` numbers only; with all three, the full precedence.
std::strong_ordering compare_prefix(const SemVer& v, const SemVer& bound, int given) {
  if (given >= 3) return v <=> bound;
  if (auto c = v.major <=> bound.major; std::is_neq(c) || given == 1) return c;
  return v.minor <=> bound.minor;
}

bool equal_numbers(const SemVer& v, const SemVer& bound, int count) {
  return v.major == bound.major && (count < 2 || v.minor == bound.minor) && (count < 3 || v.patch == bound.patch);
}

// Identifiers compare numerically when both are numbers (no leading zeros, so
// longer means larger), numbers sort below text, text compares as ASCII.
std::strong_ordering compare_identifier(std::string_view a, std::string_view b) {
  bool a_num = all_digits(a);
  bool b_num = all_digits(b);
  if (a_num && b_num) {
    if (a.size() != b.size()) return a.size() <=> b.size();
    return a.compare(b) <=> 0;
  }
  if (a_num != b_num) return a_num ? std::strong_ordering::less : std::strong_ordering::greater;
  return a.compare(b) <=> 0;
}

}  // namespace

// --- SemVer -------------------------------------------------------------------

Result<SemVer> SemVer::parse(std::string_view text) {
  SemVer version;
  int given = 0;
  if (auto why = parse_version(text, version, given)) {
    return fail(ErrorCode::invalid_input,
                "invalid version " + in_quotes(text) + ": " + *why + "; " + std::string(kVersionShape));
  }
  return version;
}

std::string SemVer::to_string() const {
  std::string s = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
  if (!prerelease.empty()) s += "-" + prerelease;
  return s;
}

std::strong_ordering operator<=>(const SemVer& a, const SemVer& b) {
  if (auto c = a.major <=> b.major; std::is_neq(c)) return c;
  if (auto c = a.minor <=> b.minor; std::is_neq(c)) return c;
  if (auto c = a.patch <=> b.patch; std::is_neq(c)) return c;
  if (a.prerelease.empty() || b.prerelease.empty()) {
    // A release ranks above any of its pre-releases.
    return a.prerelease.empty() <=> b.prerelease.empty();
  }
  std::string_view x = a.prerelease;
  std::string_view y = b.prerelease;
  while (true) {
    std::size_t dx = x.find('.');
    std::size_t dy = y.find('.');
    if (auto c = compare_identifier(x.substr(0, dx), y.substr(0, dy)); std::is_neq(c)) return c;
    if (dx == std::string_view::npos || dy == std::string_view::npos) {
      // Equal so far: the one with more identifiers ranks higher.
      return (dx != std::string_view::npos) <=> (dy != std::string_view::npos);
    }
    x = x.substr(dx + 1);
    y = y.substr(dy + 1);
  }
}

// --- VersionConstraint --------------------------------------------------------

Result<VersionConstraint> VersionConstraint::parse(std::string_view text) {
  auto invalid = [&](const std::string& why) {
    return fail(ErrorCode::invalid_input, "invalid version constraint " + in_quotes(text) + ": " + why);
  };
  auto is_separator = [](char c) { return c == ' ' || c == '\t' || c == ','; };
  auto is_op_char = [](char c) { return c == '<' || c == '>' || c == '=' || c == '^' || c == '~'; };

  VersionConstraint constraint;
  std::size_t i = 0;
  while (true) {
    while (i < text.size() && is_separator(text[i])) ++i;
    if (i == text.size()) break;

    std::size_t op_start = i;
    while (i < text.size() && is_op_char(text[i])) ++i;
    std::string_view op_text = text.substr(op_start, i - op_start);
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    std::size_t version_start = i;
    while (i < text.size() && !is_separator(text[i])) ++i;
    std::string_view version_text = text.substr(version_start, i - version_start);

    Comparator c;
    if (op_text.empty() || op_text == "=" || op_text == "==")
      c.op = Op::eq;
    else if (op_text == ">")
      c.op = Op::gt;
    else if (op_text == ">=")
      c.op = Op::ge;
    else if (op_text == "<")
      c.op = Op::lt;
    else if (op_text == "<=")
      c.op = Op::le;
    else if (op_text == "^")
      c.op = Op::caret;
    else if (op_text == "~")
      c.op = Op::tilde;
    else
      return invalid("unknown operator " + in_quotes(op_text) + "; use one of >= > <= < = ^ ~");

    c.text = std::string(op_text) + std::string(version_text);
    if (version_text.empty()) return invalid(in_quotes(op_text) + " needs a version after it");
    if (version_text == "*") {
      if (!op_text.empty()) return invalid("'*' takes no operator");
      c.op = Op::any;
    } else if (auto why = parse_version(version_text, c.version, c.given)) {
      return invalid(*why + "; " + std::string(kVersionShape));
    }
    constraint.comparators_.push_back(std::move(c));
  }
  return constraint;
}

bool VersionConstraint::holds(const Comparator& c, const SemVer& v) {
  switch (c.op) {
    case Op::any:
      return true;
    case Op::eq:
      return std::is_eq(compare_prefix(v, c.version, c.given));
    case Op::gt:
      return std::is_gt(compare_prefix(v, c.version, c.given));
    case Op::ge:
      return std::is_gteq(compare_prefix(v, c.version, c.given));
    case Op::lt:
      return std::is_lt(compare_prefix(v, c.version, c.given));
    case Op::le:
      return std::is_lteq(compare_prefix(v, c.version, c.given));
    case Op::caret: {
      // The numbers up to and including the first non-zero one written stay fixed.
      int fixed = c.given;
      if (c.version.major != 0)
        fixed = 1;
      else if (c.given >= 2 && c.version.minor != 0)
        fixed = 2;
      return v >= c.version && equal_numbers(v, c.version, fixed);
    }
    case Op::tilde:
      return v >= c.version && equal_numbers(v, c.version, std::min(c.given, 2));
  }
  return false;
}

bool VersionConstraint::matches(const SemVer& version) const {
  if (is_any()) return true;
  if (!std::all_of(comparators_.begin(), comparators_.end(), [&](const Comparator& c) { return holds(c, version); })) {
    return false;
  }
  if (version.prerelease.empty()) return true;
  return std::any_of(comparators_.begin(), comparators_.end(), [&](const Comparator& c) {
    return c.op != Op::any && c.given == 3 && !c.version.prerelease.empty() && equal_numbers(version, c.version, 3);
  });
}

std::string VersionConstraint::to_string() const {
  std::string s;
  for (const Comparator& c : comparators_) {
    if (!s.empty()) s += ", ";
    s += c.text;
  }
  return s;
}

bool VersionConstraint::is_any() const {
  return std::all_of(comparators_.begin(), comparators_.end(), [](const Comparator& c) { return c.op == Op::any; });
}

// --- AbiVersion ---------------------------------------------------------------

Result<AbiVersion> AbiVersion::parse(std::string_view text) {
  auto invalid = [&] {
    return fail(ErrorCode::invalid_input,
                "invalid ABI version " + in_quotes(text) + ": expected MAJOR or MAJOR.MINOR, e.g. 1");
  };
  std::size_t dot = text.find('.');
  std::string_view major_text = text.substr(0, dot);
  std::string_view minor_text = dot == std::string_view::npos ? "0" : text.substr(dot + 1);
  AbiVersion abi;
  for (auto [part, out] : {std::pair{major_text, &abi.major}, std::pair{minor_text, &abi.minor}}) {
    if (!all_digits(part)) return invalid();
    auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), *out);
    if (ec != std::errc() || end != part.data() + part.size()) return invalid();
  }
  return abi;
}

std::string AbiVersion::to_string() const { return std::to_string(major) + "." + std::to_string(minor); }

}  // namespace passepartout
