// Tests of the pattern table the bundled skills share (plugins/common): every
// pattern in one pass, hits reported in table order, bad patterns named.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "pattern_table.hpp"

namespace {

using passepartout::bundled::PatternTable;

std::vector<std::string> names_of(const PatternTable& table, const std::vector<std::size_t>& indices) {
  std::vector<std::string> names;
  for (const std::size_t index : indices) names.push_back(table.name(index));
  return names;
}

}  // namespace

TEST_CASE("a pattern table reports every pattern found, in table order, whatever order they appear in",
          "[plugins][patterns]") {
  const PatternTable table(
      {{"SECOND-IN-TEXT", "b+c"}, {"NEVER", "zzz"}, {"FIRST-IN-TEXT", "(?i)alpha"}, {"ANY-DIGIT", "[0-9]"}});
  REQUIRE(table.size() == 4);
  CHECK(names_of(table, table.matches("ALPHA then bbc, 7")) ==
        std::vector<std::string>{"SECOND-IN-TEXT", "FIRST-IN-TEXT", "ANY-DIGIT"});
  CHECK(table.first_match("ALPHA then bbc") == "SECOND-IN-TEXT");
  CHECK(table.first_match("alpha") == "FIRST-IN-TEXT");
}

TEST_CASE("a pattern table finds nothing in text that matches no pattern, empty text included", "[plugins][patterns]") {
  const PatternTable table({{"RM", "rm\\s+-rf"}, {"DOT-ENV", "(^|/)\\.env$"}});
  CHECK(table.matches("ls -la /tmp").empty());
  CHECK(table.matches("").empty());
  CHECK(table.first_match("cat README.env.md").empty());
  CHECK(table.first_match("project/.env") == "DOT-ENV");
}

TEST_CASE("a pattern table refuses a pattern that does not compile, naming it", "[plugins][patterns]") {
  CHECK_THROWS_WITH(PatternTable({{"FINE", "a"}, {"BROKEN", "(unclosed"}}),
                    Catch::Contains("pattern 'BROKEN': invalid regex '(unclosed'"));
}

TEST_CASE("an empty pattern table matches nothing", "[plugins][patterns]") {
  const PatternTable table({});
  CHECK(table.size() == 0);
  CHECK(table.matches("anything").empty());
}
