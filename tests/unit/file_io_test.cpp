// read_bounded_file: whole files up to a limit, refused past it, and never a
// wait on something that is not a regular file; sync_path.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <fstream>
#include <string>

#include "base/file_io.hpp"
#include "support/skill_fixtures.hpp"

namespace passepartout {

TEST_CASE("a file up to the limit is read whole, one byte more is refused", "[file-io]") {
  testing::TempDir dir;
  const auto file = dir.path() / "f";
  std::ofstream(file, std::ios::binary) << std::string(100, 'x');
  auto whole = read_bounded_file(file, 100);
  REQUIRE(whole.has_value());
  CHECK(*whole == std::string(100, 'x'));
  auto over = read_bounded_file(file, 99);
  REQUIRE_FALSE(over.has_value());
  CHECK(over.error().code == ErrorCode::limit_exceeded);
  CHECK(over.error().message == "100 bytes");  // the size found, for the caller's message

  std::ofstream(dir.path() / "empty").close();
  auto empty = read_bounded_file(dir.path() / "empty", 100);
  REQUIRE(empty.has_value());
  CHECK(empty->empty());
}

TEST_CASE("what is not a regular file is refused without being waited on", "[file-io]") {
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

TEST_CASE("a file and a folder are synced, a missing one gives its errno", "[file-io]") {
  testing::TempDir dir;
  std::ofstream(dir.path() / "f") << "x";
  CHECK(sync_path(dir.path() / "f") == 0);
  CHECK(sync_path(dir.path(), true) == 0);
  CHECK(sync_path(dir.path() / "absent") == ENOENT);
  CHECK(sync_path(dir.path() / "f", true) == ENOTDIR);
}

}  // namespace passepartout
