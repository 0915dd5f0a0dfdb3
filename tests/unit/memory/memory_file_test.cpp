// Tests for saving and loading memory: the round trip, auto-save, crash safety
// (a failed save keeps the previous file), and rejection of damaged files.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "base/log.hpp"
#include "memory/memory_file.hpp"
#include "memory/memory_store.hpp"
#include "memory/merkle_hash.hpp"
#include "support/sexp.hpp"
#include "support/skill_fixtures.hpp"
#include "value/sexp_reader.hpp"

namespace fs = std::filesystem;
using passepartout::ErrorCode;
using passepartout::MemoryFileStep;
using passepartout::MemoryStore;
using passepartout::Value;
using passepartout::testing::TempDir;

namespace {

using passepartout::testing::sexp;

std::string slurp(const fs::path& file) {
  std::string text(static_cast<std::size_t>(fs::file_size(file)), '\0');
  std::ifstream in(file, std::ios::binary);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

void spit(const fs::path& file, std::string_view text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
}

std::size_t files_in(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

constexpr std::int64_t kTime = 3'900'000'000;

constexpr std::string_view kTree = R"(
  (:TYPE :HEADLINE :PROPERTIES (:ID "p1" :TITLE "Größe \"quoted\" 日本" :TAGS ("project") :LEVEL 1 :SCORE 0.5
                                :NESTED (:A (1 2 (3)) :B NIL))
   :RAW-CONTENT "line one
line two \\ backslash"
   :CONTENTS ((:TYPE :HEADLINE :PROPERTIES (:ID "c1" :TITLE "Child" :TODO-STATE "DONE"))
              (:TYPE :PARAGRAPH)))
)";

void fill(MemoryStore& store) {
  REQUIRE(store.ingest(sexp(kTree)).has_value());
  store.snapshot();
  // A version that only the history keeps after the rollback.
  REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "gone" :TITLE "Rolled back")))")).has_value());
  REQUIRE(store.rollback().has_value());
}

}  // namespace

TEST_CASE("memory saved and loaded again is the same memory", "[memory]") {
  TempDir dir;
  const fs::path file = dir.path() / "state" / "memory.sexp";
  MemoryStore store([] { return kTime; });
  fill(store);
  REQUIRE(store.save(file).has_value());
  CHECK(slurp(file).starts_with("(:FORMAT \"passepartout-memory\" :VERSION 1 :SAVED-AT 3900000000\n"));
  CHECK((fs::status(file).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));

  MemoryStore loaded([] { return kTime + 1; });
  auto result = loaded.load(file);
  REQUIRE(result.has_value());
  CHECK(*result);
  CHECK_FALSE(loaded.dirty());
  CHECK(loaded.size() == store.size());
  CHECK(loaded.history_size() == store.history_size());
  CHECK(loaded.history_size() == 4);
  CHECK(loaded.find("gone") == nullptr);

  for (const auto& [hash, original] : *store.image().history) {
    auto copy = loaded.find_version(hash);
    REQUIRE(copy != nullptr);
    CHECK(copy->id == original->id);
    CHECK(copy->type == original->type);
    CHECK(copy->attributes == original->attributes);
    CHECK(copy->content == original->content);
    CHECK(copy->parent_id == original->parent_id);
    CHECK(copy->children == original->children);
    CHECK(copy->child_hashes == original->child_hashes);
    CHECK(copy->version == original->version);
    CHECK(copy->last_sync == original->last_sync);
  }
  for (const auto& [id, original] : *store.objects()) {
    REQUIRE(loaded.find(id) != nullptr);
    CHECK(loaded.find(id)->hash == original->hash);
    CHECK(loaded.find(id) == loaded.find_version(original->hash));  // one object, shared by both tables
  }
  CHECK(loaded.find("p1")->content == "Größe \"quoted\" 日本\nline one\nline two \\ backslash");
}

TEST_CASE("loading a missing file leaves memory empty and is not an error", "[memory]") {
  TempDir dir;
  MemoryStore store([] { return kTime; });
  auto result = store.load(dir.path() / "none.sexp");
  REQUIRE(result.has_value());
  CHECK_FALSE(*result);
  CHECK(store.size() == 0);
}

TEST_CASE("dirty tracks unsaved changes and save_if_dirty writes only then", "[memory]") {
  TempDir dir;
  const fs::path file = dir.path() / "memory.sexp";
  MemoryStore store([] { return kTime; });
  CHECK_FALSE(store.dirty());
  auto clean = store.save_if_dirty(file);
  REQUIRE(clean.has_value());
  CHECK_FALSE(*clean);
  CHECK_FALSE(fs::exists(file));

  REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "a" :TITLE "A")))")).has_value());
  CHECK(store.dirty());
  auto saved = store.save_if_dirty(file);
  REQUIRE(saved.has_value());
  CHECK(*saved);
  CHECK_FALSE(store.dirty());
  CHECK(fs::exists(file));

  store.snapshot();
  CHECK_FALSE(store.dirty());  // a snapshot changes nothing that is saved
  REQUIRE(store.rollback().has_value());
  CHECK(store.dirty());
}

TEST_CASE("a save that fails at any step keeps the previous file intact", "[memory]") {
  TempDir dir;
  const fs::path file = dir.path() / "memory.sexp";
  MemoryStore store([] { return kTime; });
  REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "a" :TITLE "A")))")).has_value());
  REQUIRE(store.save(file).has_value());
  const std::string good = slurp(file);
  REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "b" :TITLE "B")))")).has_value());

  auto step = GENERATE(MemoryFileStep::create, MemoryFileStep::write, MemoryFileStep::sync, MemoryFileStep::rename);
  passepartout::LogCapture capture;
  passepartout::fail_next_write_for_test(step);
  auto failed = store.save(file);
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().code == ErrorCode::io_error);
  CHECK_THAT(failed.error().message, Catch::StartsWith("memory file '" + file.string() + "': cannot "));
  CHECK(capture.contains("memory: MEMORY WARNING - Failed to save memory: memory file '"));
  CHECK(slurp(file) == good);
  CHECK(files_in(dir.path()) == 1);  // no temporary file left behind
  CHECK(store.dirty());

  MemoryStore reloaded([] { return kTime; });
  REQUIRE(reloaded.load(file).has_value());
  CHECK(reloaded.find("a") != nullptr);
  CHECK(reloaded.find("b") == nullptr);

  REQUIRE(store.save(file).has_value());  // the next save goes through
  CHECK_FALSE(store.dirty());
  REQUIRE(reloaded.load(file).has_value());
  CHECK(reloaded.find("b") != nullptr);
}

TEST_CASE("a save into a folder that cannot be written keeps the previous file", "[memory]") {
  if (::geteuid() == 0) {
    WARN("running as root: folder permissions do not apply; the injected failures cover this");
    return;
  }
  TempDir dir;
  const fs::path file = dir.path() / "memory.sexp";
  MemoryStore store([] { return kTime; });
  REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "a" :TITLE "A")))")).has_value());
  REQUIRE(store.save(file).has_value());
  const std::string good = slurp(file);
  REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "b" :TITLE "B")))")).has_value());
  fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
  auto failed = store.save(file);
  fs::permissions(dir.path(), fs::perms::owner_all);
  REQUIRE_FALSE(failed.has_value());
  CHECK(failed.error().code == ErrorCode::io_error);
  CHECK(slurp(file) == good);
}

TEST_CASE("a damaged memory file is refused with a precise error and memory is unchanged", "[memory]") {
  TempDir dir;
  const fs::path file = dir.path() / "memory.sexp";
  MemoryStore original([] { return kTime; });
  REQUIRE(original
              .ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "n1" :TITLE "T")
                                   :CONTENTS ((:TYPE :PARAGRAPH :PROPERTIES (:ID "c1")))))"))
              .has_value());
  REQUIRE(original.save(file).has_value());
  const std::string good = slurp(file);
  const std::string who = "memory file '" + file.string() + "': ";

  MemoryStore store([] { return kTime; });
  REQUIRE(store.ingest(sexp(R"((:TYPE :HEADLINE :PROPERTIES (:ID "mine" :TITLE "Mine")))")).has_value());
  auto before = store.image();

  auto replaced = [&](std::string_view from, std::string_view to) {
    std::string text = good;
    auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
    return text;
  };
  auto refused = [&](std::string_view text) {
    spit(file, text);
    passepartout::LogCapture capture;
    auto result = store.load(file);
    REQUIRE_FALSE(result.has_value());
    CHECK(capture.contains("memory: MEMORY WARNING - Failed to load snapshot: memory file '"));
    return result.error();
  };

  SECTION("truncated") {
    auto error = refused(std::string_view(good).substr(0, good.size() / 2));
    CHECK(error.code == ErrorCode::invalid_input);
    CHECK_THAT(error.message, Catch::StartsWith(who + "byte "));
  }
  SECTION("empty") { CHECK_THAT(refused("").message, Catch::StartsWith(who + "byte 0")); }
  SECTION("not UTF-8") { CHECK_THAT(refused(replaced("\"T\"", "\"\xff\"")).message, Catch::StartsWith(who + "byte ")); }
  SECTION("another format") {
    CHECK(refused(replaced("passepartout-memory", "other")).message ==
          who + "not a Passepartout memory file (:FORMAT is \"other\", expected \"passepartout-memory\")");
  }
  SECTION("a newer version") {
    auto error = refused(replaced(":VERSION 1", ":VERSION 2"));
    CHECK(error.code == ErrorCode::refused);
    CHECK(error.message == who + "format version 2 is newer than this build reads (1)");
  }
  SECTION("edited content no longer matches its hash") {
    CHECK(refused(replaced(":CONTENT \"T\n\"", ":CONTENT \"X\n\"")).message ==
          who + "history object 2 (id \"n1\"): :HASH does not match its contents (they hash to " +
              passepartout::merkle_hash("n1", Value::keyword("HEADLINE"), sexp(R"((:ID "n1" :TITLE "T"))"), "X\n",
                                        std::vector<std::string>{original.find("c1")->hash}) +
              ")");
  }
  SECTION("a field of the wrong kind") {
    CHECK(refused(replaced(":VERSION 3900000000", ":VERSION \"soon\"")).message ==
          who + "history object 1 (id \"c1\"): :VERSION is string, expected an integer");
  }
  SECTION("a missing field") {
    CHECK(refused(replaced(":LAST-SYNC 3900000000", "")).message ==
          who + "history object 1 (id \"c1\"): is missing :LAST-SYNC");
  }
  SECTION("a child whose version is not archived") {
    // Drop the child's object from the history; the parent still links to it.
    std::string text = good;
    auto start = text.find("\n  (:ID \"c1\"");
    auto end = text.find('\n', start + 1);
    text.erase(start, end - start);
    CHECK(refused(text).message == who + "history object 1 (id \"n1\"): child 1 \"c1\" has hash " +
                                       original.find("c1")->hash + ", which is not in :HISTORY");
  }
  SECTION("a live hash that is not archived") {
    CHECK(refused(replaced(":OBJECTS (\n  \"", ":OBJECTS (\n  \"" + std::string(64, '0') + "\" \"")).message ==
          who + ":OBJECTS element 1 " + std::string(64, '0') + " is not in :HISTORY");
  }
  SECTION("not a file") {
    fs::remove(file);
    fs::create_directory(file);
    auto result = store.load(file);
    REQUIRE_FALSE(result.has_value());
    CHECK(result.error().message == who + "not a regular file");
  }
  auto after = store.image();
  CHECK(after.objects == before.objects);
  CHECK(after.history == before.history);
}

TEST_CASE("a history saved under a larger limit is trimmed when loaded", "[memory]") {
  TempDir dir;
  const auto file = dir.path() / "memory.sexp";
  std::int64_t now = 3'900'000'000;
  {
    MemoryStore store([&now] { return now; });
    for (int i = 0; i < 20; ++i) {
      ++now;
      REQUIRE(store.ingest(sexp("(:TYPE :HEADLINE :PROPERTIES (:ID \"n\" :TITLE \"v" + std::to_string(i) + "\"))"))
                  .has_value());
    }
    REQUIRE(store.history_size() == 20);
    REQUIRE(store.save(file).has_value());
  }
  MemoryStore store([&now] { return now; });
  store.set_history_limit(10);
  REQUIRE(store.load(file).value());
  CHECK(store.history_size() == 9);
  CHECK(store.find("n")->attributes.at("TITLE").text() == "v19");
  CHECK(store.dirty());  // the trimmed history is what the next save writes
}
