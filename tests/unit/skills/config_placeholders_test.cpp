// ${workspace} and the like in a manifest's config.
#include <catch2/catch.hpp>

#include "skills/config_placeholders.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;

namespace {

const ConfigPlaceholders kValues{{"workspace", "/srv/ws"}};

std::string expanded(std::string_view config_sexp) {
  auto config = read_sexp(config_sexp);
  REQUIRE(config.has_value());
  auto result = expand_config_placeholders(*config, kValues, "skill 'x'");
  INFO((result ? std::string() : result.error().message));
  REQUIRE(result.has_value());
  return to_sexp(result->config);
}

std::string error_of(std::string_view config_sexp) {
  auto config = read_sexp(config_sexp);
  REQUIRE(config.has_value());
  auto result = expand_config_placeholders(*config, kValues, "skill 'x'");
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().code == ErrorCode::invalid_input);
  return result.error().message;
}

}  // namespace

TEST_CASE("config placeholders are replaced in every string, nested lists included", "[skills]") {
  CHECK(expanded("(:WORKDIR \"${workspace}\")") == "(:WORKDIR \"/srv/ws\")");
  CHECK(expanded("(:ROOTS (\"${workspace}/a\" \"b${workspace}\") :N 3)") ==
        "(:ROOTS (\"/srv/ws/a\" \"b/srv/ws\") :N 3)");
  CHECK(expanded("(:PRICE \"$5 and ${workspace}\")") == "(:PRICE \"$5 and /srv/ws\")");
  CHECK(expanded("NIL") == "NIL");
  auto config = read_sexp("(:A \"${workspace}\" :B \"plain\")");
  REQUIRE(config.has_value());
  auto result = expand_config_placeholders(*config, kValues, "skill 'x'");
  REQUIRE(result.has_value());
  CHECK(result->used == std::set<std::string>{"workspace"});
  auto plain = expand_config_placeholders(*read_sexp("(:B \"plain\")"), kValues, "skill 'x'");
  REQUIRE(plain.has_value());
  CHECK(plain->used.empty());
}

TEST_CASE("an unknown or unclosed config placeholder is refused, naming the known ones", "[skills]") {
  CHECK(error_of("(:DIR \"${home}\")") ==
        "skill 'x': config uses ${home}, which this host does not define (known: ${workspace})");
  CHECK(error_of("(:DIR \"${workspace\")") ==
        "skill 'x': config string \"${workspace\" opens a placeholder with ${ but never closes it with }");
  auto none = expand_config_placeholders(*read_sexp("(:DIR \"${workspace}\")"), {}, "skill 'x'");
  REQUIRE_FALSE(none.has_value());
  CHECK(none.error().message ==
        "skill 'x': config uses ${workspace}, which this host does not define (this host defines none)");
}
