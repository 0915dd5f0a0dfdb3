// Tests of SemVer, VersionConstraint and AbiVersion: parsing, precedence,
// matching, and the messages for text that is not a version.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "skills/version.hpp"

using passepartout::AbiVersion;
using passepartout::ErrorCode;
using passepartout::SemVer;
using passepartout::VersionConstraint;

namespace {

SemVer v(const char* text) {
  auto parsed = SemVer::parse(text);
  INFO(text);
  REQUIRE(parsed.has_value());
  return *parsed;
}

bool satisfies(const char* constraint, const char* version) {
  auto parsed = VersionConstraint::parse(constraint);
  INFO(constraint);
  REQUIRE(parsed.has_value());
  return parsed->matches(v(version));
}

std::string version_error(const char* text) {
  auto parsed = SemVer::parse(text);
  REQUIRE_FALSE(parsed.has_value());
  CHECK(parsed.error().code == ErrorCode::invalid_input);
  return parsed.error().message;
}

std::string constraint_error(const char* text) {
  auto parsed = VersionConstraint::parse(text);
  REQUIRE_FALSE(parsed.has_value());
  CHECK(parsed.error().code == ErrorCode::invalid_input);
  return parsed.error().message;
}

const std::string kShape = "; expected MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD], e.g. 1.2.0";

}  // namespace

TEST_CASE("semver parses full and short forms, filling missing parts with zero", "[skills]") {
  CHECK(v("1") == SemVer{1, 0, 0, ""});
  CHECK(v("1.2") == SemVer{1, 2, 0, ""});
  CHECK(v("1.2.3") == SemVer{1, 2, 3, ""});
  CHECK(v("1.2.3-rc.1") == SemVer{1, 2, 3, "rc.1"});
  CHECK(v("0.0.0") == SemVer{0, 0, 0, ""});
  CHECK(v("18446744073709551615.0.0").major == 18446744073709551615u);
}

TEST_CASE("semver accepts and ignores build metadata", "[skills]") {
  CHECK(v("1.2.3+build.5") == v("1.2.3"));
  CHECK(v("1.2.3-rc.1+exp.sha.5114f85") == v("1.2.3-rc.1"));
  CHECK(v("1.2.3+build.5").to_string() == "1.2.3");
}

TEST_CASE("semver prints MAJOR.MINOR.PATCH with its pre-release", "[skills]") {
  CHECK(v("1").to_string() == "1.0.0");
  CHECK(v("1.2").to_string() == "1.2.0");
  CHECK(v("10.20.30-alpha.1").to_string() == "10.20.30-alpha.1");
}

TEST_CASE("semver orders by precedence, pre-releases below their release", "[skills]") {
  // The chain from semver.org, section 11.
  const std::vector<const char*> chain = {"1.0.0-alpha",  "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
                                          "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1",       "1.0.0",
                                          "1.0.1",        "1.1.0",         "1.10.0",           "2.0.0"};
  for (std::size_t i = 0; i + 1 < chain.size(); ++i) {
    INFO(chain[i] << " < " << chain[i + 1]);
    CHECK(v(chain[i]) < v(chain[i + 1]));
    CHECK(v(chain[i + 1]) > v(chain[i]));
    CHECK(v(chain[i]) != v(chain[i + 1]));
  }
  CHECK(v("1.2.3") == v("1.2.3"));
  CHECK((v("1.2.3") <=> v("1.2.3")) == std::strong_ordering::equal);
  SECTION("numeric identifiers compare as numbers, below alphanumeric ones") {
    CHECK(v("1.0.0-2") < v("1.0.0-10"));
    CHECK(v("1.0.0-99") < v("1.0.0-a"));
    CHECK(v("1.0.0-rc.99999999999999999999") > v("1.0.0-rc.9"));
  }
}

TEST_CASE("semver explains text that is not a version", "[skills]") {
  CHECK(version_error("") == "invalid version '': the version is empty" + kShape);
  CHECK(version_error("1.x") == "invalid version '1.x': 'x' is not a number" + kShape);
  CHECK(version_error("v1.2") == "invalid version 'v1.2': 'v1' is not a number" + kShape);
  CHECK(version_error("1.2.3.4") == "invalid version '1.2.3.4': a version has at most three numbers" + kShape);
  CHECK(version_error("1..2") == "invalid version '1..2': a number is missing" + kShape);
  CHECK(version_error("01.2") == "invalid version '01.2': '01' has a leading zero" + kShape);
  CHECK(version_error("1.2.99999999999999999999") ==
        "invalid version '1.2.99999999999999999999': '99999999999999999999' is too large" + kShape);
  CHECK(version_error("1.2-rc.1") ==
        "invalid version '1.2-rc.1': a pre-release needs all of MAJOR.MINOR.PATCH" + kShape);
  CHECK(version_error("1.2.3-") == "invalid version '1.2.3-': empty pre-release identifier" + kShape);
  CHECK(version_error("1.2.3-rc.01") ==
        "invalid version '1.2.3-rc.01': pre-release identifier '01' has a leading zero" + kShape);
  CHECK(version_error("1.2.3-rc_1") ==
        "invalid version '1.2.3-rc_1': pre-release identifier 'rc_1' may only contain letters, "
        "digits and '-'" +
            kShape);
  CHECK(version_error("1.2.3+") == "invalid version '1.2.3+': empty build identifier" + kShape);
}

TEST_CASE("version constraint with comparators checks the parts written", "[skills]") {
  CHECK(satisfies(">=1.0", "1.0.0"));
  CHECK(satisfies(">=1.0", "7.3.1"));
  CHECK_FALSE(satisfies(">=1.0", "0.9.9"));
  SECTION("> with a partial version means above every version it names") {
    CHECK_FALSE(satisfies(">1", "1.9.9"));
    CHECK(satisfies(">1", "2.0.0"));
    CHECK_FALSE(satisfies(">1.2", "1.2.7"));
    CHECK(satisfies(">1.2", "1.3.0"));
    CHECK(satisfies(">1.2.3", "1.2.4"));
    CHECK_FALSE(satisfies(">1.2.3", "1.2.3"));
  }
  SECTION("<= with a partial version includes every version it names") {
    CHECK(satisfies("<=2", "2.9.9"));
    CHECK_FALSE(satisfies("<=2", "3.0.0"));
    CHECK(satisfies("<=1.2", "1.2.9"));
    CHECK_FALSE(satisfies("<=1.2", "1.3.0"));
  }
  SECTION("< excludes the version it names") {
    CHECK(satisfies("<2.0", "1.99.0"));
    CHECK_FALSE(satisfies("<2.0", "2.0.0"));
    CHECK_FALSE(satisfies("<2", "2.0.1"));
  }
  SECTION("= and == are exact on a full version") {
    CHECK(satisfies("=1.2.3", "1.2.3"));
    CHECK(satisfies("==1.2.3", "1.2.3"));
    CHECK_FALSE(satisfies("=1.2.3", "1.2.4"));
  }
}

TEST_CASE("version constraint with a bare version fixes the parts given", "[skills]") {
  CHECK(satisfies("1.2", "1.2.0"));
  CHECK(satisfies("1.2", "1.2.9"));
  CHECK_FALSE(satisfies("1.2", "1.3.0"));
  CHECK_FALSE(satisfies("1.2", "1.1.9"));
  CHECK(satisfies("1", "1.7.0"));
  CHECK_FALSE(satisfies("1", "2.0.0"));
  CHECK(satisfies("=1.2", "1.2.5"));
  CHECK(satisfies("1.2.3", "1.2.3"));
  CHECK_FALSE(satisfies("1.2.3", "1.2.4"));
}

TEST_CASE("version constraint caret allows changes that keep the left-most non-zero part", "[skills]") {
  CHECK(satisfies("^1.2", "1.2.0"));
  CHECK(satisfies("^1.2", "1.9.0"));
  CHECK_FALSE(satisfies("^1.2", "2.0.0"));
  CHECK_FALSE(satisfies("^1.2", "1.1.9"));
  CHECK(satisfies("^1.2.3", "1.2.3"));
  CHECK_FALSE(satisfies("^1.2.3", "1.2.2"));
  CHECK(satisfies("^0.2.3", "0.2.9"));
  CHECK_FALSE(satisfies("^0.2.3", "0.3.0"));
  CHECK(satisfies("^0.0.3", "0.0.3"));
  CHECK_FALSE(satisfies("^0.0.3", "0.0.4"));
  CHECK(satisfies("^0", "0.9.9"));
  CHECK_FALSE(satisfies("^0", "1.0.0"));
  CHECK(satisfies("^0.0", "0.0.9"));
  CHECK_FALSE(satisfies("^0.0", "0.1.0"));
}

TEST_CASE("version constraint tilde allows patch-level changes", "[skills]") {
  CHECK(satisfies("~1.2", "1.2.0"));
  CHECK(satisfies("~1.2", "1.2.9"));
  CHECK_FALSE(satisfies("~1.2", "1.3.0"));
  CHECK(satisfies("~1.2.3", "1.2.5"));
  CHECK_FALSE(satisfies("~1.2.3", "1.2.2"));
  CHECK(satisfies("~1", "1.9.0"));
  CHECK_FALSE(satisfies("~1", "2.0.0"));
}

TEST_CASE("version constraint ands comparators separated by commas or spaces", "[skills]") {
  CHECK(satisfies(">=1.0, <2", "1.5.0"));
  CHECK_FALSE(satisfies(">=1.0, <2", "2.0.0"));
  CHECK_FALSE(satisfies(">=1.0, <2", "0.9.0"));
  CHECK(satisfies(">=1.0 <2", "1.5.0"));
  CHECK(satisfies(">= 1.0 ,< 2", "1.5.0"));
  CHECK_FALSE(satisfies(">=1.0 <1.2", "1.2.0"));
}

TEST_CASE("empty version constraint accepts every version", "[skills]") {
  auto any = VersionConstraint::parse("");
  REQUIRE(any.has_value());
  CHECK(any->is_any());
  CHECK(any->to_string().empty());
  CHECK(any->matches(v("0.0.1")));
  CHECK(any->matches(v("3.0.0-rc.1")));
  CHECK(VersionConstraint().is_any());
  CHECK(satisfies("*", "9.9.9"));
  CHECK(satisfies("  ", "9.9.9"));
  CHECK_FALSE(VersionConstraint::parse(">=1")->is_any());
}

TEST_CASE("version constraint admits a pre-release only when a comparator names one", "[skills]") {
  CHECK_FALSE(satisfies(">=1.0", "2.0.0-rc.1"));
  CHECK_FALSE(satisfies("^1.2", "1.5.0-beta"));
  CHECK(satisfies(">=1.2.3-rc.1", "1.2.3-rc.2"));
  CHECK(satisfies(">=1.2.3-rc.1", "1.2.3"));
  CHECK_FALSE(satisfies(">=1.2.3-rc.1", "1.2.4-rc.1"));
  CHECK_FALSE(satisfies(">=1.2.3-rc.2", "1.2.3-rc.1"));
  CHECK(satisfies("=1.2.3-rc.1", "1.2.3-rc.1"));
}

TEST_CASE("version constraint prints its comparators as written", "[skills]") {
  CHECK(VersionConstraint::parse(">=1.0, <2")->to_string() == ">=1.0, <2");
  CHECK(VersionConstraint::parse(">= 1.0   <2")->to_string() == ">=1.0, <2");
  CHECK(VersionConstraint::parse("^1.2")->to_string() == "^1.2");
  CHECK(VersionConstraint::parse("1.2")->to_string() == "1.2");
}

TEST_CASE("version constraint explains what it cannot read", "[skills]") {
  CHECK(constraint_error("=>1.0") ==
        "invalid version constraint '=>1.0': unknown operator '=>'; use one of >= > <= < = ^ ~");
  CHECK(constraint_error(">=") == "invalid version constraint '>=': '>=' needs a version after it");
  CHECK(constraint_error(">=1.x") == "invalid version constraint '>=1.x': 'x' is not a number" + kShape);
  CHECK(constraint_error(">=1 || <3") == "invalid version constraint '>=1 || <3': '||' is not a number" + kShape);
  CHECK(constraint_error(">=*") == "invalid version constraint '>=*': '*' takes no operator");
}

TEST_CASE("abi version accepts MAJOR or MAJOR.MINOR", "[skills]") {
  auto one = AbiVersion::parse("1");
  REQUIRE(one.has_value());
  CHECK(*one == AbiVersion{1, 0});
  CHECK(one->to_string() == "1.0");
  auto one_two = AbiVersion::parse("1.2");
  REQUIRE(one_two.has_value());
  CHECK(*one_two == AbiVersion{1, 2});
  CHECK(AbiVersion{1, 2} > AbiVersion{1, 0});

  for (const char* bad : {"", "1.0.0", "x", "1.", ".1", "65536", "-1", "1.0-rc"}) {
    auto parsed = AbiVersion::parse(bad);
    INFO(bad);
    REQUIRE_FALSE(parsed.has_value());
    CHECK(parsed.error().message ==
          "invalid ABI version '" + std::string(bad) + "': expected MAJOR or MAJOR.MINOR, e.g. 1");
  }
}
