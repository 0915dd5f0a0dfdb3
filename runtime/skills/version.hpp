// Versions a manifest speaks of: a skill's semantic version, the constraint a
// dependency puts on it, and the skill ABI version a library was built for.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace passepartout {

// A semantic version (semver.org 2.0): MAJOR.MINOR.PATCH[-PRERELEASE].
//
// parse() also accepts the short forms "1" and "1.2" (missing parts are 0)
// and ignores "+build" metadata. Numeric parts have no leading zeros.
// Ordering is semver precedence: a pre-release sorts below its release, and
// pre-release identifiers compare numerically when both are numbers,
// otherwise as ASCII text, numbers below text.
struct SemVer {
  std::uint64_t major = 0;
  std::uint64_t minor = 0;
  std::uint64_t patch = 0;
  std::string prerelease;  // dot-separated identifiers, without the '-'; empty for a release

  static Result<SemVer> parse(std::string_view text);
  // "1.2.3" or "1.2.3-rc.1".
  std::string to_string() const;

  friend bool operator==(const SemVer&, const SemVer&) = default;
  friend std::strong_ordering operator<=>(const SemVer& a, const SemVer& b);
};

// What versions a dependency accepts: comparators that must all hold.
//
//   >=1.0  >1  <=2  <2.0  =1.2.3  ==1.2.3   compare; a partial version compares
//                                           only the parts given (>1 means >=2.0.0,
//                                           <=1.2 means <1.3.0)
//   1.2  =1.2                               the parts given are equal (1.2.x)
//   ^1.2.3                                  >=1.2.3 <2.0.0; ^0.2.3 is <0.3.0, ^0.0.3 is <0.0.4
//   ~1.2.3  ~1.2                            >=1.2.3 <1.3.0;  ~1 is <2.0.0
//   *  or nothing                           any version
//
// Comparators are separated by spaces or commas (">=1.0, <2"); an operator
// may be followed by spaces (">= 1.0"). As in Cargo and npm, a pre-release
// version satisfies a non-empty constraint only when one of its comparators
// names a pre-release of the same MAJOR.MINOR.PATCH, so ">=1.0" does not pick
// up 2.0.0-rc.1 by accident; an empty constraint accepts every version.
class VersionConstraint {
 public:
  // Any version.
  VersionConstraint() = default;

  static Result<VersionConstraint> parse(std::string_view text);

  bool matches(const SemVer& version) const;
  // The comparators as written, separated by ", " (">=1.0, <2"); "" for any.
  std::string to_string() const;
  // True when every version matches.
  bool is_any() const;

 private:
  enum class Op : std::uint8_t { any, eq, gt, ge, lt, le, caret, tilde };
  struct Comparator {
    Op op = Op::any;
    SemVer version;    // missing parts are 0
    int given = 3;     // how many of MAJOR, MINOR, PATCH were written (1..3)
    std::string text;  // as written, without inner spaces
  };

  static bool holds(const Comparator& c, const SemVer& v);

  std::vector<Comparator> comparators_;
};

// The skill ABI version a library was built for: "1" or "1.0".
struct AbiVersion {
  std::uint16_t major = 0;
  std::uint16_t minor = 0;

  static Result<AbiVersion> parse(std::string_view text);
  // "1.0".
  std::string to_string() const;

  friend bool operator==(const AbiVersion&, const AbiVersion&) = default;
  friend auto operator<=>(const AbiVersion&, const AbiVersion&) = default;
};

}  // namespace passepartout
