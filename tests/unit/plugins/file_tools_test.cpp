// Tests of the bundled file-tools skill, loaded through the host with a private
// workspace: what read-file, write-file, list-files, search-files and edit-file
// return, and every way a path is refused (outside the workspace, through a
// symbolic link, too large, not text).
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

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

Result<Value> list_files(ConfiguredSkills& skills, std::string_view path, bool recursive = false) {
  return call(skills, "list-files",
              Value::plist({{"PATH", Value::string(path)}, {"RECURSIVE", Value::boolean(recursive)}}));
}

Result<Value> search_files(ConfiguredSkills& skills, std::string_view pattern, std::string_view path = ".") {
  return call(skills, "search-files",
              Value::plist({{"PATTERN", Value::string(pattern)}, {"PATH", Value::string(path)}}));
}

Result<Value> edit_file(ConfiguredSkills& skills, std::string_view path, std::string_view old_text,
                        std::string_view new_text) {
  return call(skills, "edit-file",
              Value::plist({{"FILEPATH", Value::string(path)},
                            {"OLD_TEXT", Value::string(old_text)},
                            {"NEW_TEXT", Value::string(new_text)}}));
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

TEST_CASE("file-tools offers its five tools with JSON parameters", "[plugins]") {
  Folders folders;
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  const auto snapshot = skills.snapshot();
  REQUIRE(snapshot->tools().size() == 5);
  const auto* read = snapshot->find_tool("READ-FILE");
  REQUIRE(read != nullptr);
  CHECK(read->tool().parameters.path({"PROPERTIES", "FILEPATH", "TYPE"}).text() == "string");
  CHECK_THAT(read->tool().parameters_json, Catch::Contains("\"required\": [\"filepath\"]"));
  const auto* written = snapshot->find_tool("write-file");
  REQUIRE(written != nullptr);
  CHECK(written->tool().parameters.path({"PROPERTIES", "CONTENT", "TYPE"}).text() == "string");
  const auto* listed = snapshot->find_tool("list-files");
  REQUIRE(listed != nullptr);
  CHECK(listed->tool().parameters.path({"PROPERTIES", "RECURSIVE", "TYPE"}).text() == "boolean");
  CHECK(listed->tool().parameters.path({"PROPERTIES", "MAX_ENTRIES", "TYPE"}).text() == "integer");
  const auto* searched = snapshot->find_tool("search-files");
  REQUIRE(searched != nullptr);
  CHECK(searched->tool().parameters.path({"PROPERTIES", "PATTERN", "TYPE"}).text() == "string");
  CHECK_THAT(searched->tool().parameters_json, Catch::Contains("\"required\": [\"pattern\"]"));
  const auto* edited = snapshot->find_tool("edit-file");
  REQUIRE(edited != nullptr);
  CHECK(edited->tool().parameters.path({"PROPERTIES", "OLD_TEXT", "TYPE"}).text() == "string");
  CHECK_THAT(edited->tool().parameters_json,
             Catch::Contains("\"required\": [\"filepath\", \"old_text\", \"new_text\"]"));
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

TEST_CASE("list-files lists a folder's entries with their kind and size, sorted by path", "[plugins]") {
  Folders folders;
  write(folders.workspace / "b.txt", "hello");
  write(folders.workspace / "a" / "c.txt", "abc");
  write(folders.workspace / "a" / "d" / "e.md", "");
  fs::create_symlink("b.txt", folders.workspace / "l");
  REQUIRE(::mkfifo((folders.workspace / "p").c_str(), 0600) == 0);
  fs::create_directories(folders.workspace / "empty");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));

  const std::string flat = "a/ (folder)\nb.txt (file, 5 bytes)\nempty/ (folder)\nl (link to b.txt)\np (other)";
  CHECK(content_of(list_files(skills, ".")) == flat);
  CHECK(content_of(call(skills, "list-files", Value::nil())) == flat);  // the workspace, by default
  CHECK(content_of(list_files(skills, fs::canonical(folders.workspace).string())) == flat);
  CHECK(content_of(list_files(skills, ".", true)) ==
        "a/ (folder)\na/c.txt (file, 3 bytes)\na/d/ (folder)\na/d/e.md (file, 0 bytes)\nb.txt (file, 5 bytes)\n"
        "empty/ (folder)\nl (link to b.txt)\np (other)");
  CHECK(content_of(list_files(skills, "a")) == "a/c.txt (file, 3 bytes)\na/d/ (folder)");
  CHECK(content_of(list_files(skills, "a/")) == "a/c.txt (file, 3 bytes)\na/d/ (folder)");
  CHECK(content_of(list_files(skills, "./a/../a/d", true)) == "a/d/e.md (file, 0 bytes)");
  CHECK(content_of(list_files(skills, "empty")) == "'empty' is an empty folder");
  SECTION("recursive given as the string a model may send") {
    const Value args = Value::plist({{"PATH", Value::string("a")}, {"RECURSIVE", Value::string("true")}});
    CHECK(content_of(call(skills, "list-files", args)) ==
          "a/c.txt (file, 3 bytes)\na/d/ (folder)\na/d/e.md (file, 0 bytes)");
  }
}

TEST_CASE("list-files lists hidden folders but enters them only when named, and stops 32 levels down", "[plugins]") {
  Folders folders;
  write(folders.workspace / ".git" / "HEAD", "ref");
  write(folders.workspace / "src" / "main.cpp", "int main() {}\n");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  CHECK(content_of(list_files(skills, ".", true)) ==
        ".git/ (folder)\nsrc/ (folder)\nsrc/main.cpp (file, 14 bytes)\n"
        "Note: 1 hidden folder (such as '.git') listed but not entered; give one as the path to list it");
  CHECK(content_of(list_files(skills, ".git", true)) == ".git/HEAD (file, 3 bytes)");

  fs::path deep = folders.workspace / "deep";
  for (int level = 0; level < 33; ++level) deep /= "d";
  fs::create_directories(deep);
  const std::string listing = content_of(list_files(skills, "deep", true));
  CHECK(std::count(listing.begin(), listing.end(), '\n') == 32);  // 32 folders, then the note
  CHECK_THAT(listing,
             Catch::EndsWith("Note: 1 folder 32 levels down not entered; give one as the path to look inside"));
}

TEST_CASE("list-files answers at most its limit of entries and says how many it left out", "[plugins]") {
  Folders folders;
  for (const char* name : {"1.txt", "2.txt", "3.txt", "4.txt", "5.txt"}) write(folders.workspace / name, "x");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace, "max_list_entries: 3"));
  CHECK(content_of(list_files(skills, ".")) ==
        "1.txt (file, 1 byte)\n2.txt (file, 1 byte)\n3.txt (file, 1 byte)\n"
        "Note: 2 more entries left out (the limit is 3); list a subfolder to see them");
  auto with_max = [&](std::int64_t max) {
    return call(skills, "list-files", Value::plist({{"MAX_ENTRIES", Value::integer(max)}}));
  };
  CHECK(content_of(with_max(1)) ==
        "1.txt (file, 1 byte)\nNote: 4 more entries left out (the limit is 1); list a subfolder to see them");
  CHECK_THAT(content_of(with_max(100)), Catch::EndsWith("Note: 2 more entries left out (the limit is 3); list a "
                                                        "subfolder to see them"));  // never above the config
  CHECK(error_of(with_max(0)) == "list-files: :MAX_ENTRIES must be a positive integer, got 0");
}

TEST_CASE("list-files refuses a path that is not a folder, is missing or is badly given", "[plugins]") {
  Folders folders;
  write(folders.workspace / "notes.txt", "x");
  REQUIRE(::mkfifo((folders.workspace / "fifo").c_str(), 0600) == 0);
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  CHECK(error_of(list_files(skills, "notes.txt")) ==
        "'notes.txt' is a file, not a folder; list-files lists folders (read-file reads a file)");
  CHECK(error_of(list_files(skills, "notes.txt/")) ==
        "'notes.txt/' is a file, not a folder; list-files lists folders (read-file reads a file)");
  CHECK(error_of(list_files(skills, "fifo")) == "'fifo' is not a folder");
  CHECK(error_of(list_files(skills, "missing")) == "'missing' does not exist in the workspace");
  CHECK(error_of(list_files(skills, "")) ==
        "list-files: :PATH must be a non-empty string (a path relative to the workspace), got \"\"");
  CHECK(error_of(call(skills, "list-files", Value::plist({{"RECURSIVE", Value::string("yes")}}))) ==
        "list-files: :RECURSIVE must be true or false, got \"yes\"");
}

TEST_CASE("search-files answers matching lines as file:line: text, skipping binary and hidden files", "[plugins]") {
  Folders folders;
  write(folders.workspace / "src" / "a.cpp", "int main() {\n  return 0;\n}\n");
  write(folders.workspace / "src" / "b.txt", "hello\r\nmain street\r\n");
  write(folders.workspace / "bin.dat", std::string("main\0\x01\x02", 7));
  write(folders.workspace / ".hidden", "main");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));

  CHECK(content_of(search_files(skills, "main")) ==
        "src/a.cpp:1: int main() {\nsrc/b.txt:2: main street\n"
        "Note: 1 binary file (a NUL byte in the first 8 KiB) skipped\n"
        "Note: 1 hidden file or folder (such as '.hidden') not searched; give one as the path to search it");
  CHECK(content_of(search_files(skills, "main", "src")) == "src/a.cpp:1: int main() {\nsrc/b.txt:2: main street");
  CHECK(content_of(search_files(skills, "main", "src/b.txt")) == "src/b.txt:2: main street");
  CHECK(content_of(search_files(skills, "main", ".hidden")) == ".hidden:1: main");
  CHECK(content_of(search_files(skills, R"(^\s+return \d;$)", "src/")) == "src/a.cpp:2:   return 0;");
  CHECK(content_of(search_files(skills, "(?i)HELLO", "src")) == "src/b.txt:1: hello");
  CHECK(content_of(search_files(skills, "nowhere", "src")) == "No line matches 'nowhere' in 'src' (2 files searched)");
  CHECK(content_of(call(skills, "search-files", Value::plist({{"PATTERN", Value::string("street")}}))) ==
        "src/b.txt:2: main street\nNote: 1 binary file (a NUL byte in the first 8 KiB) skipped\n"
        "Note: 1 hidden file or folder (such as '.hidden') not searched; give one as the path to search it");
  CHECK(error_of(search_files(skills, "main", "bin.dat")) ==
        "'bin.dat' is a binary file (a NUL byte in its first 8 KiB); search-files searches text files");
  CHECK(error_of(search_files(skills, "main", "missing")) == "'missing' does not exist in the workspace");
  CHECK(error_of(search_files(skills, "main", "src/a.cpp/")) ==
        "'src/a.cpp/' ends with '/', but it is a file, not a folder");
}

TEST_CASE("search-files cuts long lines on a character boundary and shows what is not UTF-8", "[plugins]") {
  Folders folders;
  // 299 bytes, then a character of two: the cut comes before it, not inside it.
  write(folders.workspace / "long.txt", "needle " + std::string(292, 'x') + "\xC3\xA9 tail\n");
  write(folders.workspace / "latin1.txt", "caf\xE9 needle\n");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  CHECK(content_of(search_files(skills, "needle")) ==
        "latin1.txt:1: caf\xEF\xBF\xBD needle\nlong.txt:1: needle " + std::string(292, 'x') + "\xE2\x80\xA6");
}

TEST_CASE("search-files refuses an invalid pattern with RE2's reason", "[plugins]") {
  Folders folders;
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  CHECK(error_of(search_files(skills, "main(")) ==
        "search-files: the pattern 'main(' is not a valid RE2 regular expression: missing ): main( (escape ( ) [ ] "
        "{ } . * + ? | \\ with a backslash to match them literally)");
  CHECK(error_of(search_files(skills, "")) ==
        "search-files: :PATTERN must be a non-empty string (a regular expression in RE2 syntax), got \"\"");
  CHECK(error_of(call(skills, "search-files", Value::nil())) ==
        "search-files: :PATTERN must be a non-empty string (a regular expression in RE2 syntax), got NIL");
}

TEST_CASE("search-files answers at most its limit of matches and bytes, and says what it left out", "[plugins]") {
  Folders folders;
  write(folders.workspace / "a.txt", "hit 1\nmiss\nhit 2\nhit 3\n");
  write(folders.workspace / "b.txt", "hit 4\nhit 5\n");
  SECTION("matches") {
    ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace, "max_search_matches: 2"));
    CHECK(content_of(search_files(skills, "hit")) ==
          "a.txt:1: hit 1\na.txt:3: hit 2\nNote: 3 more matches not shown (the limit is 2); narrow the pattern or "
          "the path");
    CHECK(content_of(call(skills, "search-files",
                          Value::plist({{"PATTERN", Value::string("hit")}, {"MAX_MATCHES", Value::integer(4)}}))) ==
          "a.txt:1: hit 1\na.txt:3: hit 2\nNote: 3 more matches not shown (the limit is 2); narrow the pattern or "
          "the path");
    CHECK(content_of(call(skills, "search-files",
                          Value::plist({{"PATTERN", Value::string("hit")}, {"MAX_MATCHES", Value::integer(1)}}))) ==
          "a.txt:1: hit 1\nNote: 4 more matches not shown (the limit is 1); narrow the pattern or the path");
  }
  SECTION("bytes scanned") {
    ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace, "max_search_bytes: 30"));
    CHECK(content_of(search_files(skills, "hit")) ==
          "a.txt:1: hit 1\na.txt:3: hit 2\na.txt:4: hit 3\nNote: the search stopped before 'b.txt' after scanning "
          "23 bytes, the limit being 30 (max_search_bytes); the files after it were not searched: search a narrower "
          "path");
    CHECK(content_of(search_files(skills, "hit", "b.txt")) == "b.txt:1: hit 4\nb.txt:2: hit 5");
  }
  SECTION("file size") {
    ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace, "max_read_bytes: 20"));
    CHECK(content_of(search_files(skills, "hit")) ==
          "b.txt:1: hit 4\nb.txt:2: hit 5\nNote: 1 file larger than 20 bytes (max_read_bytes) skipped");
    CHECK(error_of(search_files(skills, "hit", "a.txt")) ==
          "'a.txt' is 23 bytes, more than the limit of 20 bytes for search-files");
  }
}

TEST_CASE("edit-file replaces text that occurs exactly once and says which lines changed", "[plugins]") {
  Folders folders;
  write(folders.workspace / "notes.txt", "one\ntwo\nthree\n");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));

  auto result = edit_file(skills, "notes.txt", "two\n", "2\n2b\n");
  CHECK(content_of(result) == "Edited 'notes.txt': replaced line 2 with lines 2-3 (now 15 bytes)");
  CHECK(slurp(folders.workspace / "notes.txt") == "one\n2\n2b\nthree\n");
  CHECK(content_of(edit_file(skills, "notes.txt", "2\n2b\nth", "th")) ==
        "Edited 'notes.txt': replaced lines 2-4 with line 2 (now 10 bytes)");
  CHECK(slurp(folders.workspace / "notes.txt") == "one\nthree\n");
  CHECK(content_of(edit_file(skills, "notes.txt", "ree", "")) ==
        "Edited 'notes.txt': removed the text of line 2 (now 7 bytes)");
  CHECK(slurp(folders.workspace / "notes.txt") == "one\nth\n");
  SECTION("an explanation argument is accepted and ignored") {
    const Value args = Value::plist({{"FILEPATH", Value::string("notes.txt")},
                                     {"OLD_TEXT", Value::string("one")},
                                     {"NEW_TEXT", Value::string("1")},
                                     {"EXPLANATION", Value::string("shorter")}});
    CHECK(content_of(call(skills, "edit-file", args)) ==
          "Edited 'notes.txt': replaced line 1 with line 1 (now 5 bytes)");
  }
}

TEST_CASE("edit-file keeps the file's mode and leaves no temporary file", "[plugins]") {
  Folders folders;
  write(folders.workspace / "run.sh", "echo old\n");
  const auto mode = fs::perms::owner_all | fs::perms::group_read;
  fs::permissions(folders.workspace / "run.sh", mode);
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  REQUIRE(edit_file(skills, "run.sh", "old", "new").has_value());
  CHECK(slurp(folders.workspace / "run.sh") == "echo new\n");
  CHECK(fs::status(folders.workspace / "run.sh").permissions() == mode);
  CHECK(std::distance(fs::directory_iterator(folders.workspace), fs::directory_iterator()) == 1);
}

TEST_CASE("edit-file refuses text that is empty, absent or not unique, and leaves the file alone", "[plugins]") {
  Folders folders;
  write(folders.workspace / "notes.txt", "x = 1\ny = 2\nx = 1\nx = 1\n");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  CHECK(error_of(edit_file(skills, "notes.txt", "z = 3", "z = 4")) ==
        "old_text was not found in 'notes.txt'; read the file first and copy the exact text (spaces, indentation "
        "and line breaks included)");
  CHECK(error_of(edit_file(skills, "notes.txt", "x = 1", "x = 5")) ==
        "old_text occurs 3 times in 'notes.txt' (at lines 1, 3 and 4); include more of the surrounding text so it "
        "occurs once");
  CHECK(error_of(edit_file(skills, "notes.txt", "= ", "=")) ==
        "old_text occurs 4 times in 'notes.txt' (at lines 1, 2, 3 and 4); include more of the surrounding text so "
        "it occurs once");
  CHECK(error_of(edit_file(skills, "notes.txt", "", "x")) ==
        "edit-file: old_text is empty; copy the exact text to replace from the file (read-file shows it), or use "
        "write-file to write a whole file");
  CHECK(error_of(edit_file(skills, "notes.txt", "y = 2", "y = 2")) ==
        "edit-file: old_text and new_text are the same, so nothing would change");
  CHECK(error_of(call(skills, "edit-file",
                      Value::plist({{"FILEPATH", Value::string("notes.txt")}, {"OLD_TEXT", Value::string("y")}}))) ==
        "edit-file: :NEW_TEXT must be a string (the text to put in place of old_text; \"\" deletes it), got NIL");
  CHECK(error_of(edit_file(skills, "missing.txt", "a", "b")) == "'missing.txt' does not exist in the workspace");
  CHECK(slurp(folders.workspace / "notes.txt") == "x = 1\ny = 2\nx = 1\nx = 1\n");
  SECTION("occurrences that overlap count as more than one") {
    write(folders.workspace / "a.txt", "aaa");
    CHECK(error_of(edit_file(skills, "a.txt", "aa", "b")) ==
          "old_text occurs 2 times in 'a.txt' (at line 1); include more of the surrounding text so it occurs once");
  }
}

TEST_CASE("edit-file refuses files over max_read_bytes and results over max_write_bytes", "[plugins]") {
  Folders folders;
  write(folders.workspace / "big.txt", "0123456789A");
  write(folders.workspace / "small.txt", "0123456789");
  fs::create_directories(folders.workspace / "folder");
  ConfiguredSkills skills({"file-tools"}, "file-tools",
                          config(folders.workspace, "max_read_bytes: 10, max_write_bytes: 12"));
  CHECK(error_of(edit_file(skills, "big.txt", "A", "B")) ==
        "'big.txt' is 11 bytes, more than the limit of 10 bytes for edit-file");
  CHECK(error_of(edit_file(skills, "small.txt", "9", "9ABC")) ==
        "edit-file: the edited 'small.txt' would be 13 bytes, more than the limit of 12 bytes (max_write_bytes)");
  CHECK(content_of(edit_file(skills, "small.txt", "9", "9AB")) ==
        "Edited 'small.txt': replaced line 1 with line 1 (now 12 bytes)");
  CHECK(error_of(edit_file(skills, "folder", "a", "b")) == "'folder' is a folder, not a file");
  CHECK(slurp(folders.workspace / "big.txt") == "0123456789A");
}

// The three tools through every spelling that might slip past a check on the
// text of a path: a link out, '..', an absolute path elsewhere, a trailing
// slash. None lists, searches or edits anything outside.
TEST_CASE("list-files, search-files and edit-file stay in the workspace", "[plugins]") {
  Folders folders;
  write(folders.workspace / "notes.txt", "inside");
  write(folders.workspace / "sub" / "inner.txt", "inside too");
  write(folders.outside / "secret.txt", "outside secret");
  fs::create_symlink(folders.outside, folders.workspace / "escape");
  fs::create_symlink("..", folders.workspace / "up");
  fs::create_symlink("../outside/secret.txt", folders.workspace / "sneaky.txt");
  fs::create_symlink("sub", folders.workspace / "alias");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace));
  const std::string outside = folders.outside.string();
  const std::string workspace = fs::canonical(folders.workspace).string();

  SECTION("list-files") {
    CHECK(error_of(list_files(skills, "escape")) == "'escape' leads outside the workspace through a symbolic link");
    CHECK(error_of(list_files(skills, "escape/")) == "'escape/' leads outside the workspace through a symbolic link");
    CHECK(error_of(list_files(skills, "up/outside")) ==
          "'up/outside' leads outside the workspace through a symbolic link");
    CHECK(error_of(list_files(skills, "..")) == "'..' is outside the workspace");
    CHECK(error_of(list_files(skills, "sub/../../outside/")) == "'sub/../../outside/' is outside the workspace");
    CHECK(error_of(list_files(skills, outside)) == "'" + outside + "' is outside the workspace " + workspace);
    CHECK(error_of(list_files(skills, outside + "/")) == "'" + outside + "/' is outside the workspace " + workspace);
    CHECK(content_of(list_files(skills, "alias")) == "alias/inner.txt (file, 10 bytes)");  // a link that stays inside
    const std::string all = content_of(list_files(skills, ".", true));
    CHECK_THAT(all, Catch::Contains("escape (link to " + outside + ")") && Catch::Contains("up (link to ..)"));
    CHECK_THAT(all, !Catch::Contains("secret.txt (file") && !Catch::Contains("alias/inner.txt"));
  }
  SECTION("search-files") {
    CHECK(error_of(search_files(skills, "secret", "escape")) ==
          "'escape' leads outside the workspace through a symbolic link");
    CHECK(error_of(search_files(skills, "secret", "escape/")) ==
          "'escape/' leads outside the workspace through a symbolic link");
    CHECK(error_of(search_files(skills, "secret", "sneaky.txt")) ==
          "'sneaky.txt' leads outside the workspace through a symbolic link");
    CHECK(error_of(search_files(skills, "secret", "up/outside/secret.txt")) ==
          "'up/outside/secret.txt' leads outside the workspace through a symbolic link");
    CHECK(error_of(search_files(skills, "secret", "../outside")) == "'../outside' is outside the workspace");
    CHECK(error_of(search_files(skills, "secret", outside + "/secret.txt")) ==
          "'" + outside + "/secret.txt' is outside the workspace " + workspace);
    CHECK(content_of(search_files(skills, "secret")) == "No line matches 'secret' in '.' (2 files searched)");
    CHECK(content_of(search_files(skills, "inside", "alias")) == "alias/inner.txt:1: inside too");
  }
  SECTION("edit-file") {
    for (const std::string& path :
         {std::string("escape/secret.txt"), std::string("sneaky.txt"), std::string("up/outside/secret.txt"),
          std::string("../outside/secret.txt"), std::string("sub/../../outside/secret.txt"), outside + "/secret.txt",
          outside + "/secret.txt/", std::string("escape/secret.txt/")}) {
      INFO(path);
      CHECK_FALSE(edit_file(skills, path, "outside", "overwritten").has_value());
    }
    CHECK(error_of(edit_file(skills, "escape/secret.txt", "outside", "x")) ==
          "'escape/secret.txt' leads outside the workspace through a symbolic link");
    CHECK(error_of(edit_file(skills, "sneaky.txt", "outside", "x")) ==
          "'sneaky.txt' is a symbolic link; edit-file edits only regular files (edit the file it leads to)");
    CHECK(error_of(edit_file(skills, "notes.txt/", "inside", "x")) ==
          "'notes.txt/' ends with '/', so it names a folder, not a file");
    CHECK(error_of(edit_file(skills, "..", "inside", "x")) == "'..' is outside the workspace");
    CHECK(content_of(edit_file(skills, "alias/inner.txt", "too", "as well")) ==
          "Edited 'alias/inner.txt': replaced line 1 with line 1 (now 14 bytes)");
    CHECK(slurp(folders.workspace / "sub" / "inner.txt") == "inside as well");
  }
  CHECK(slurp(folders.outside / "secret.txt") == "outside secret");
  CHECK(std::distance(fs::directory_iterator(folders.outside), fs::directory_iterator()) == 1);
}

TEST_CASE("list-files, search-files and edit-file refuse every link with follow_symlinks false", "[plugins]") {
  Folders folders;
  write(folders.workspace / "sub" / "inner.txt", "inside");
  fs::create_symlink("sub", folders.workspace / "alias");
  ConfiguredSkills skills({"file-tools"}, "file-tools", config(folders.workspace, "follow_symlinks: false"));
  CHECK(error_of(list_files(skills, "alias")) == "'alias' goes through a symbolic link that is not followed");
  CHECK(error_of(search_files(skills, "inside", "alias/")) ==
        "'alias/' goes through a symbolic link that is not followed");
  CHECK(error_of(edit_file(skills, "alias/inner.txt", "inside", "x")) ==
        "'alias/inner.txt' goes through a symbolic link that is not followed");
  CHECK(content_of(search_files(skills, "inside")) == "sub/inner.txt:1: inside");
  CHECK(slurp(folders.workspace / "sub" / "inner.txt") == "inside");
}
