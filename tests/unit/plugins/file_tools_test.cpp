// Tests of the bundled file-tools skill, loaded through the host with a private
// workspace: what read-file and write-file return, and every way a path is
// refused (outside the workspace, through a symbolic link, too large, not text).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "configured_skills.hpp"
#include "support/skill_fixtures.hpp"
#include "value/value.hpp"

namespace {

using passepartout::Result;
using passepartout::Value;
using passepartout::testing::ConfiguredSkills;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

// A workspace folder beside a folder outside it, both removed at the end.
struct Folders {
  TempDir root;
  fs::path workspace = root.path() / "workspace";
  fs::path outside = root.path() / "outside";
  Folders() {
    fs::create_directories(workspace);
    fs::create_directories(outside);
  }
};

std::string config(const fs::path& workspace, std::string_view more = "") {
  return passepartout::testing::folder_config("workspace", workspace, more);
}

void write(const fs::path& path, std::string_view bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

const Value kSignal = Value::plist({{"TYPE", Value::keyword("EVENT")}});

Result<Value> call(ConfiguredSkills& skills, std::string_view tool, const Value& args) {
  const auto snapshot = skills.snapshot();
  const auto* entry = snapshot->find_tool(tool);
  REQUIRE(entry != nullptr);
  return entry->call(args, kSignal);
}

Result<Value> read_file(ConfiguredSkills& skills, std::string_view path) {
  return call(skills, "read-file", Value::plist({{"FILEPATH", Value::string(path)}}));
}

Result<Value> write_file(ConfiguredSkills& skills, std::string_view path, std::string_view content) {
  return call(skills, "write-file",
              Value::plist({{"FILEPATH", Value::string(path)}, {"CONTENT", Value::string(content)}}));
}

// The content read-file returned; REQUIREs success.
std::string content_of(const Result<Value>& result) {
  INFO((result ? std::string() : result.error().message));
  REQUIRE(result.has_value());
  CHECK(result->at("STATUS").is_keyword("SUCCESS"));
  return std::string(result->at("CONTENT").text());
}

// The message of a failed call; REQUIREs failure.
std::string error_of(const Result<Value>& result) {
  REQUIRE_FALSE(result.has_value());
  return result.error().message;
}

}  // namespace

TEST_CASE("file-tools offers read-file and write-file with JSON parameters", "[plugins]") {
  Folders folders;
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  const auto snapshot = skills.snapshot();
  REQUIRE(snapshot->tools().size() == 2);
  const auto* read = snapshot->find_tool("READ-FILE");
  REQUIRE(read != nullptr);
  CHECK(read->tool().parameters.path({"PROPERTIES", "FILEPATH", "TYPE"}).text() == "string");
  CHECK_THAT(read->tool().parameters_json, Catch::Contains("\"required\": [\"filepath\"]"));
  const auto* written = snapshot->find_tool("write-file");
  REQUIRE(written != nullptr);
  CHECK(written->tool().parameters.path({"PROPERTIES", "CONTENT", "TYPE"}).text() == "string");
  CHECK_FALSE(snapshot->find("file-tools")->has_gate());
  CHECK(snapshot->actuators().empty());
}

TEST_CASE("read-file reads a file of the workspace by relative or absolute path", "[plugins]") {
  Folders folders;
  write(folders.workspace / "notes" / "today.txt", "buy milk\n");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  CHECK(content_of(read_file(skills, "notes/today.txt")) == "buy milk\n");
  CHECK(content_of(read_file(skills, "./notes/../notes//today.txt")) == "buy milk\n");
  CHECK(content_of(read_file(skills, (folders.workspace / "notes" / "today.txt").string())) == "buy milk\n");
  CHECK(content_of(read_file(skills, (fs::canonical(folders.workspace) / "notes/today.txt").string())) == "buy milk\n");
  SECTION("arguments wrapped in a list, as the seed's tool actuator accepted them") {
    const Value wrapped = Value::list({Value::plist({{"FILEPATH", Value::string("notes/today.txt")}})});
    CHECK(content_of(call(skills, "read-file", wrapped)) == "buy milk\n");
  }
  SECTION("an empty file") {
    write(folders.workspace / "empty.txt", "");
    CHECK(content_of(read_file(skills, "empty.txt")).empty());
  }
}

TEST_CASE("read-file refuses paths outside the workspace", "[plugins]") {
  Folders folders;
  write(folders.outside / "secret.txt", "outside");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  CHECK(error_of(read_file(skills, "../outside/secret.txt")) == "'../outside/secret.txt' is outside the workspace");
  CHECK(error_of(read_file(skills, "a/../../x")) == "'a/../../x' is outside the workspace");
  CHECK(error_of(read_file(skills, "/etc/hostname")) ==
        "'/etc/hostname' is outside the workspace " + fs::canonical(folders.workspace).string());
  CHECK(error_of(read_file(skills, ".")) == "'.' is the workspace folder itself, not a file");
  CHECK(error_of(read_file(skills, "")) ==
        "read-file: :FILEPATH must be a non-empty string (a path relative to the workspace), got \"\"");
  CHECK(error_of(call(skills, "read-file", Value::nil())) ==
        "read-file: :FILEPATH must be a non-empty string (a path relative to the workspace), got NIL");
}

TEST_CASE("read-file follows symbolic links only while they stay in the workspace", "[plugins]") {
  Folders folders;
  write(folders.workspace / "notes.txt", "inside");
  write(folders.outside / "secret.txt", "outside");
  fs::create_symlink("notes.txt", folders.workspace / "alias.txt");
  fs::create_symlink(folders.outside, folders.workspace / "escape");
  fs::create_symlink("../outside/secret.txt", folders.workspace / "sneaky.txt");
  fs::create_symlink(folders.outside / "secret.txt", folders.workspace / "absolute.txt");

  SECTION("by default") {
    ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
    CHECK(content_of(read_file(skills, "alias.txt")) == "inside");
    CHECK(error_of(read_file(skills, "escape/secret.txt")) ==
          "'escape/secret.txt' leads outside the workspace through a symbolic link");
    CHECK(error_of(read_file(skills, "sneaky.txt")) ==
          "'sneaky.txt' leads outside the workspace through a symbolic link");
    CHECK(error_of(read_file(skills, "absolute.txt")) ==
          "'absolute.txt' leads outside the workspace through a symbolic link");
  }
  SECTION("with follow_symlinks false, no link is followed") {
    ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace, "follow_symlinks: false"));
    CHECK(content_of(read_file(skills, "notes.txt")) == "inside");
    CHECK(error_of(read_file(skills, "alias.txt")) == "'alias.txt' goes through a symbolic link that is not followed");
    CHECK(error_of(read_file(skills, "escape/secret.txt")) ==
          "'escape/secret.txt' goes through a symbolic link that is not followed");
  }
}

TEST_CASE("read-file refuses what is not a readable text file within the size cap", "[plugins]") {
  Folders folders;
  write(folders.workspace / "big.txt", "0123456789A");
  write(folders.workspace / "small.txt", "0123456789");
  write(folders.workspace / "binary.dat", std::string("\xff\xfe\x00\x01", 4));
  fs::create_directories(folders.workspace / "folder");
  REQUIRE(::mkfifo((folders.workspace / "fifo").c_str(), 0600) == 0);
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace, "max_read_bytes: 10"));

  CHECK(content_of(read_file(skills, "small.txt")) == "0123456789");
  CHECK(error_of(read_file(skills, "big.txt")) ==
        "'big.txt' is 11 bytes, more than the limit of 10 bytes for read-file");
  CHECK(error_of(read_file(skills, "binary.dat")) == "'binary.dat' is not UTF-8 text");
  CHECK(error_of(read_file(skills, "missing.txt")) == "'missing.txt' does not exist in the workspace");
  CHECK(error_of(read_file(skills, "folder")) == "'folder' is a folder, not a file");
  CHECK(error_of(read_file(skills, "fifo")) == "'fifo' is not a regular file");
  CHECK(error_of(read_file(skills, "small.txt/x")) == "a folder on the way to 'small.txt/x' is not a folder");
}

TEST_CASE("write-file writes a new file, creating its folders", "[plugins]") {
  Folders folders;
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  auto result = write_file(skills, "a/b/c.txt", "hello");
  REQUIRE(result.has_value());
  CHECK(result->at("STATUS").is_keyword("SUCCESS"));
  CHECK(result->at("CONTENT").text() == "Wrote 5 bytes to 'a/b/c.txt'");
  CHECK(slurp(folders.workspace / "a/b/c.txt") == "hello");
  CHECK(content_of(read_file(skills, "a/b/c.txt")) == "hello");

  REQUIRE(write_file(skills, "empty.txt", "").has_value());
  CHECK(fs::file_size(folders.workspace / "empty.txt") == 0);
}

TEST_CASE("write-file replaces a file atomically, keeps its mode and leaves no temporary file", "[plugins]") {
  Folders folders;
  write(folders.workspace / "plan.md", "old plan");
  fs::permissions(folders.workspace / "plan.md", fs::perms::owner_read | fs::perms::owner_write);
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));

  REQUIRE(write_file(skills, "plan.md", "new plan").has_value());
  CHECK(slurp(folders.workspace / "plan.md") == "new plan");
  CHECK(fs::status(folders.workspace / "plan.md").permissions() == (fs::perms::owner_read | fs::perms::owner_write));
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(folders.workspace)) ++entries;
  CHECK(entries == 1);
}

TEST_CASE("write-file refuses paths outside the workspace and through symbolic links", "[plugins]") {
  Folders folders;
  write(folders.workspace / "real.txt", "real");
  fs::create_symlink("real.txt", folders.workspace / "link.txt");
  fs::create_symlink(folders.outside, folders.workspace / "escape");
  fs::create_directories(folders.workspace / "folder");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));

  CHECK(error_of(write_file(skills, "../outside/x.txt", "x")) == "'../outside/x.txt' is outside the workspace");
  CHECK(error_of(write_file(skills, (folders.outside / "x.txt").string(), "x")) ==
        "'" + (folders.outside / "x.txt").string() + "' is outside the workspace " +
            fs::canonical(folders.workspace).string());
  CHECK(error_of(write_file(skills, "escape/x.txt", "x")) ==
        "'escape/x.txt' leads outside the workspace through a symbolic link");
  CHECK(error_of(write_file(skills, "escape/new/x.txt", "x")) ==
        "'escape/new/x.txt' leads outside the workspace through a symbolic link");
  CHECK(error_of(write_file(skills, "link.txt", "x")) ==
        "'link.txt' is a symbolic link; write-file replaces only regular files");
  CHECK(error_of(write_file(skills, "folder", "x")) == "'folder' is a folder, not a file");
  CHECK(fs::is_empty(folders.outside));
  CHECK(slurp(folders.workspace / "real.txt") == "real");
}

TEST_CASE("write-file refuses bad content and, when told to, missing folders", "[plugins]") {
  Folders folders;
  ConfiguredSkills skills({"file-tools"}, "file-tools",
                          config(folders.workspace, "max_write_bytes: 4, create_folders: false"));
  CHECK(error_of(write_file(skills, "x.txt", "12345")) ==
        "write-file: the content is 5 bytes, more than the limit of 4 bytes");
  CHECK(error_of(call(skills, "write-file", Value::plist({{"FILEPATH", Value::string("x.txt")}}))) ==
        "write-file: :CONTENT must be a string, got NIL");
  CHECK(error_of(write_file(skills, "new/x.txt", "1")) == "'new/x.txt' does not exist in the workspace");
  CHECK(write_file(skills, "x.txt", "1234").has_value());
}

TEST_CASE("file-tools refuses to load without a usable workspace or with bad limits", "[plugins]") {
  using Case = std::pair<std::string, std::string>;  // config, expected message
  const Case bad = GENERATE(
      Case{"{}", "config workspace: required, the folder the tools may use; got NIL"},
      Case{"{workspace: /nonexistent/folder}", "config workspace: '/nonexistent/folder': No such file or directory"},
      Case{"{workspace: /etc/passwd}", "config workspace: '/etc/passwd' is not a folder that can be opened"},
      Case{"{workspace: /tmp, max_read_bytes: 0}", "config max_read_bytes: expected a positive integer, got 0"},
      Case{"{workspace: /tmp, max_write_bytes: big}",
           "config max_write_bytes: expected a positive integer, got \"big\""},
      Case{"{workspace: /tmp, follow_symlinks: maybe}",
           "config follow_symlinks: expected true or false, got \"maybe\""});
  CAPTURE(bad.first);
  ConfiguredSkills skills({"file-tools"}, "file-tools", bad.first);
  CHECK_THAT(skills.load_errors(), Catch::Contains("skill 'file-tools'") && Catch::Contains(bad.second));
}

// Spellings that might slip past a check on the text of a path: a trailing
// slash, '..' through a link, a link to the workspace's parent, the
// workspace's own path with a slash. None reads or writes outside.
TEST_CASE("file-tools keeps trailing slashes, '..' and links to its workspace", "[plugins]") {
  Folders folders;
  write(folders.workspace / "notes.txt", "inside");
  write(folders.outside / "secret.txt", "outside");
  fs::create_symlink(folders.outside, folders.workspace / "escape");
  fs::create_symlink("..", folders.workspace / "up");
  fs::create_directories(folders.workspace / "sub");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  const std::string secret = (folders.outside / "secret.txt").string();

  for (const std::string& path :
       {std::string("escape/"), std::string("escape/secret.txt/"), std::string("up/outside/secret.txt"),
        std::string("up/outside/secret.txt/"), std::string("sub/../../outside/secret.txt"), secret + "/",
        std::string("notes.txt/")}) {
    INFO(path);
    const Result<Value> read = read_file(skills, path);
    CHECK_FALSE((read.has_value() && read->at("STATUS").is_keyword("SUCCESS")));
    const Result<Value> written = write_file(skills, path, "overwritten");
    CHECK_FALSE((written.has_value() && written->at("STATUS").is_keyword("SUCCESS")));
  }
  CHECK(slurp(folders.outside / "secret.txt") == "outside");
  CHECK(slurp(folders.workspace / "notes.txt") == "inside");
  CHECK(std::distance(fs::directory_iterator(folders.outside), fs::directory_iterator()) == 1);
  CHECK(error_of(read_file(skills, "notes.txt/")) == "'notes.txt/' ends with '/', so it names a folder, not a file");
  SECTION("'..' is resolved on the path's text first, so it cannot climb out through a link") {
    CHECK(content_of(read_file(skills, "escape/../notes.txt")) == "inside");  // escape/.. is the workspace
    CHECK(content_of(read_file(skills, "sub/../notes.txt")) == "inside");
    CHECK(content_of(read_file(skills, fs::canonical(folders.workspace).string() + "/notes.txt")) == "inside");
  }
}
