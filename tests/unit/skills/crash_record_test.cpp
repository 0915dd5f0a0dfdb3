// The crash record: what parses and what is refused (never trusted, never a
// crash), and a host booting after a crash: the skill held back while its
// library is unchanged, audited, left out of rescans until loaded by name.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/log.hpp"
#include "skills/crash_record.hpp"
#include "skills/skill_host.hpp"
#include "skills/skill_loader.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using passepartout::testing::TempDir;
namespace fs = std::filesystem;

namespace {

const std::string kDigest(64, 'a');

std::string line(std::string_view cause = "SIGSEGV", std::string_view skill = "crash-gate",
                 std::string_view sha = kDigest) {
  return "passepartout-crash 1\tcause=" + std::string(cause) + "\tat_ms=1764367800000\tskill=" + std::string(skill) +
         "\tversion=1.0.0\thook=gate\tsha256=" + std::string(sha) + "\n";
}

}  // namespace

TEST_CASE("a crash record as the crash writer writes it parses", "[skills][crash]") {
  auto record = parse_crash_record(line());
  INFO((record ? std::string() : record.error().message));
  REQUIRE(record.has_value());
  CHECK(record->cause == "SIGSEGV");
  CHECK(record->at_unix_ms == 1764367800000);
  CHECK(record->skill == "crash-gate");
  CHECK(record->version == "1.0.0");
  CHECK(record->hook == "gate");
  CHECK(record->sha256 == kDigest);
  CHECK(record->what() == "SIGSEGV in hook gate at 2025-11-28T22:10:00Z");
  CHECK(record->hold_reason().starts_with("crashed the daemon: SIGSEGV in hook gate at 2025-11-28T22:10:00Z"));
  CHECK(record->hold_reason().find("isolation: process") != std::string::npos);

  auto exited = parse_crash_record(line("exit"));
  REQUIRE(exited.has_value());
  CHECK(exited->what().starts_with("called exit() in hook gate"));
  CHECK(exited->hold_reason().starts_with("ended the daemon: called exit()"));
}

TEST_CASE("a crash record that is not exactly well-formed is refused with the reason", "[skills][crash]") {
  struct Case {
    std::string text;
    std::string says;
  };
  const Case cases[] = {
      {"", "not one whole line"},
      {line().substr(0, line().size() - 1), "not one whole line"},
      {line() + line(), "more than one line"},
      {"garbage\n", "it does not start with"},
      {line("SIGTERM"), "unknown cause \"SIGTERM\""},
      {line("SIGSEGV", "Bad Name"), "is no skill name"},
      {line("SIGSEGV", "crash-gate", "xyz"), "sha256 is not 64 lower-case hex digits"},
      {line("SIGSEGV", "crash-gate", std::string(64, 'A')), "sha256 is not 64"},
      {"passepartout-crash 1\tcause=SIGSEGV\tat_ms=12\n", "no skill"},
      {"passepartout-crash 1\tcause=SIGSEGV\tat_ms=-5\tskill=a\tversion=1\thook=gate\tsha256=" + kDigest + "\n",
       "at_ms is not a time"},
      {"passepartout-crash 1\tat_ms=1\tcause=SIGSEGV\tskill=a\tversion=1\thook=gate\tsha256=" + kDigest + "\n",
       "expected cause=..."},
      {line().substr(0, line().size() - 1) + "\textra=1\n", "more fields than it should have"},
      {std::string(5000, 'x'), "longer than 4096 bytes"},
      {std::string("passepartout-crash 1\tcause=SIGSEGV\0\n", 36), "unknown cause"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    auto record = parse_crash_record(c.text);
    REQUIRE_FALSE(record.has_value());
    CHECK(record.error().code == ErrorCode::invalid_input);
    CHECK(record.error().message.find(c.says) != std::string::npos);
  }
}

TEST_CASE("a bad or absent crash record file is ignored with a warning", "[skills][crash]") {
  TempDir dir;
  const fs::path file = crash_record_file(dir.path());
  CHECK(file == dir.path() / "last-crash");
  CHECK_FALSE(read_crash_record(file).has_value());  // absent
  std::ofstream(file).close();
  CHECK_FALSE(read_crash_record(file).has_value());  // empty: the run ended without a crash in a hook

  std::ofstream(file) << "passepartout-crash 1\tcause=SIGSEGV\n";
  LogCapture capture;
  CHECK_FALSE(read_crash_record(file).has_value());
  CHECK(capture.contains("ignored: bad crash record: no at_ms"));

  std::ofstream(file, std::ios::trunc) << line();
  auto record = read_crash_record(file);
  REQUIRE(record.has_value());
  CHECK(record->skill == "crash-gate");
}

namespace {

// A host over a manifest folder with echo (libecho-v1.so) and a skill that
// depends on it, booted after a crash recorded against echo with `sha256`.
struct CrashedWorld {
  TempDir root;
  fs::path manifests = root.path() / "manifests";
  fs::path plugins = root.path() / "plugins";
  std::unique_ptr<SkillHost> host;
  BootResult boot;

  explicit CrashedWorld(const std::string& sha256) {
    setup();
    auto record = parse_crash_record(
        "passepartout-crash 1\tcause=SIGSEGV\tat_ms=1764367800000\tskill=echo\t"
        "version=1.0.0\thook=gate\tsha256=" +
        sha256 + "\n");
    REQUIRE(record.has_value());
    boot = host->boot("boot", &*record);
  }
  // A later start over the same folders (no crash this time): a new host.
  void restart() {
    host.reset();
    auto created = SkillHost::create(options());
    REQUIRE(created.has_value());
    host = std::move(*created);
    boot = host->boot("boot");
  }
  SkillHostOptions options() const {
    return SkillHostOptions{manifests,
                            plugins,
                            root.path() / "state" / "audit.sqlite3",
                            true,
                            root.path() / "workspace",
                            held_skills_file(root.path() / "state")};
  }

 private:
  void setup() {
    fs::create_directories(manifests);
    fs::create_directories(plugins);
    fs::permissions(plugins, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
    for (const std::string lib : {"libecho-v1.so", "libdepends-on-echo.so"}) {
      fs::copy_file(fs::path(PP_FIXTURE_DIR) / lib, plugins / lib);
      fs::permissions(plugins / lib,
                      fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
    }
    std::ofstream(manifests / "echo.yaml")
        << "name: echo\nversion: 1.0.0\nlibrary: libecho-v1.so\nabi: 1\nisolation: in-process\n";
    std::ofstream(manifests / "depends-on-echo.yaml")
        << "name: depends-on-echo\nversion: 1.0.0\nlibrary: libdepends-on-echo.so\nabi: 1\nisolation: in-process\n"
           "depends_on: [\"echo >=1.0 <3\"]\n";
    auto created = SkillHost::create(options());
    REQUIRE(created.has_value());
    host = std::move(*created);
  }
};

}  // namespace

TEST_CASE("a skill that crashed the daemon is held back at the next start until loaded by name", "[skills][crash]") {
  auto digest = sha256_file(fs::path(PP_FIXTURE_DIR) / "libecho-v1.so");
  REQUIRE(digest.has_value());
  CrashedWorld w(*digest);

  CHECK(w.host->snapshot()->find("echo") == nullptr);
  CHECK(w.host->snapshot()->find("depends-on-echo") == nullptr);  // it needs echo
  REQUIRE(w.boot.disabled.size() == 2);
  CHECK(w.boot.disabled[1].name == "echo");
  CHECK(w.boot.disabled[1].reason.starts_with("crashed the daemon: SIGSEGV in hook gate at 2025-11-28T22:10:00Z"));
  CHECK(w.boot.disabled[0].name == "depends-on-echo");
  CHECK(w.boot.disabled[0].reason == "depends on 'echo', which failed to load");
  CHECK(w.host->held_back() == std::vector<std::string>{"echo"});

  auto history = w.host->history(10);
  REQUIRE(history.has_value());
  auto row = std::find_if(history->begin(), history->end(), [](const SkillChange& c) { return c.skill == "echo"; });
  REQUIRE(row != history->end());
  CHECK(row->action == "load");
  CHECK(row->outcome == "refused");
  CHECK(row->step == "crash");
  CHECK(row->to_version == "1.0.0");
  CHECK(row->to_sha256 == *digest);
  CHECK(row->error == w.boot.disabled[1].reason);

  // A rescan leaves it out and says why.
  RescanResult rescan = w.host->rescan("rescan");
  CHECK(w.host->snapshot()->find("echo") == nullptr);
  REQUIRE(rescan.kept.size() == 1);
  CHECK(rescan.kept[0].starts_with("echo: held back since it crashed the daemon"));

  // Held at every start, not only the next one, until an operator loads it.
  const fs::path held_file = held_skills_file(w.root.path() / "state");
  REQUIRE(read_held_skills(held_file).size() == 1);
  CHECK(read_held_skills(held_file)[0].skill == "echo");
  w.restart();
  CHECK(w.host->snapshot()->find("echo") == nullptr);
  REQUIRE(w.boot.disabled.size() == 2);
  CHECK(w.boot.disabled[1].reason.starts_with("crashed the daemon: SIGSEGV in hook gate at 2025-11-28T22:10:00Z"));
  CHECK(w.host->held_back() == std::vector<std::string>{"echo"});

  // Loaded by name (skills reload): loaded, no longer held back; a rescan then loads its dependent.
  ChangeResult reloaded = w.host->reload("echo", "operator");
  INFO(reloaded.change.error);
  CHECK(reloaded.ok());
  CHECK(w.host->snapshot()->find("echo") != nullptr);
  CHECK(w.host->held_back().empty());
  CHECK_FALSE(fs::exists(held_file));
  w.host->rescan("rescan");
  CHECK(w.host->snapshot()->find("depends-on-echo") != nullptr);

  // And at the next start.
  w.restart();
  CHECK(w.boot.disabled.empty());
  CHECK(w.host->snapshot()->find("echo") != nullptr);
}

TEST_CASE("the held skills file keeps its records and skips a bad line", "[skills][crash]") {
  TempDir dir;
  const fs::path file = held_skills_file(dir.path());
  CHECK(read_held_skills(file).empty());
  auto a = parse_crash_record(line("SIGSEGV", "a-gate"));
  auto b = parse_crash_record(line("exit", "b-gate"));
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  CHECK(crash_record_line(*a) == line("SIGSEGV", "a-gate"));
  REQUIRE(write_held_skills(file, {*a, *b}).has_value());
  CHECK((fs::status(file).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
  CHECK(read_held_skills(file) == std::vector<CrashRecord>{*a, *b});

  std::ofstream(file, std::ios::app) << "not a record\n";
  LogCapture capture;
  CHECK(read_held_skills(file) == std::vector<CrashRecord>{*a, *b});
  CHECK(capture.contains(":3 ignored: bad crash record"));

  REQUIRE(write_held_skills(file, {}).has_value());
  CHECK_FALSE(fs::exists(file));
}

TEST_CASE("a held-back skill whose manifest was removed is let go", "[skills][crash]") {
  auto digest = sha256_file(fs::path(PP_FIXTURE_DIR) / "libecho-v1.so");
  REQUIRE(digest.has_value());
  CrashedWorld w(*digest);
  REQUIRE(w.host->held_back() == std::vector<std::string>{"echo"});
  fs::remove(w.manifests / "echo.yaml");
  fs::remove(w.manifests / "depends-on-echo.yaml");
  w.restart();
  CHECK(w.host->held_back().empty());
  CHECK_FALSE(fs::exists(held_skills_file(w.root.path() / "state")));
  std::ofstream(w.manifests / "echo.yaml")
      << "name: echo\nversion: 1.0.0\nlibrary: libecho-v1.so\nabi: 1\nisolation: in-process\n";
  w.restart();
  CHECK(w.host->snapshot()->find("echo") != nullptr);
}

TEST_CASE("a skill whose library changed since it crashed the daemon loads as usual", "[skills][crash]") {
  LogCapture capture;
  CrashedWorld w(kDigest);  // the library that crashed had other bytes
  CHECK(w.boot.disabled.empty());
  CHECK(w.host->snapshot()->find("echo") != nullptr);
  CHECK(w.host->held_back().empty());
  CHECK(capture.contains("its library changed since"));
}
