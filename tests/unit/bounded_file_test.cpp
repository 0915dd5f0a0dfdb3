// read_bounded_file: whole files up to a limit, refused past it, and never a
// wait on something that is not a regular file.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "bounded_file.hpp"
#include "support/skill_fixtures.hpp"

namespace passepartout {

TEST_CASE("a file up to the limit is read whole; one byte more is refused", "[bounded-file]") {
  testing::TempDir dir;
  const auto file = dir.path() / "f";
  std::ofstream(file, std::ios::binary) << std::string(100, 'x');
  auto whole = read_bounded_file(file, 100);
  REQUIRE(whole.has_value());
  CHECK(*whole == std::string(100, 'x'));
  auto over = read_bounded_file(file, 99);
  REQUIRE_FALSE(over.has_value());
  CHECK(over.error().code == ErrorCode::limit_exceeded);

  std::ofstream(dir.path() / "empty").close();
  auto empty = read_bounded_file(dir.path() / "empty", 100);
  REQUIRE(empty.has_value());
  CHECK(empty->empty());
}

TEST_CASE("what is not a regular file is refused without being waited on", "[bounded-file]") {
  testing::TempDir dir;
  const auto fifo = dir.path() / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto from_fifo = read_bounded_file(fifo, 100);  // would block forever if opened for a plain read
  REQUIRE_FALSE(from_fifo.has_value());
  CHECK(from_fifo.error().message == "not a regular file");
  auto from_dir = read_bounded_file(dir.path(), 100);
  REQUIRE_FALSE(from_dir.has_value());
  CHECK(from_dir.error().message == "not a regular file");
  auto missing = read_bounded_file(dir.path() / "absent", 100);
  REQUIRE_FALSE(missing.has_value());
  CHECK(missing.error().code == ErrorCode::not_found);
}

}  // namespace passepartout
