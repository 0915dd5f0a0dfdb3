// Tests for copy-on-write snapshots and rollback: sharing instead of copying,
// the cap of 20, rollback semantics and messages, and use from many threads.
#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "base/log.hpp"
#include "memory/memory_store.hpp"
#include "value/sexp_reader.hpp"

using passepartout::ErrorCode;
using passepartout::LogCapture;
using passepartout::MemoryStore;
using passepartout::Value;

namespace {

Value headline(const std::string& id, const std::string& title) {
  return Value::plist({{"TYPE", Value::keyword("HEADLINE")},
                       {"PROPERTIES", Value::plist({{"ID", Value::string(id)}, {"TITLE", Value::string(title)}})}});
}

constexpr std::int64_t kTime = 3'900'000'000;

}  // namespace

TEST_CASE("a snapshot shares the live table and its objects instead of copying them", "[memory]") {
  MemoryStore store([] { return kTime; });
  REQUIRE(store.ingest(headline("a", "A")).has_value());
  REQUIRE(store.ingest(headline("b", "B")).has_value());
  store.snapshot();

  auto snapshots = store.snapshots();
  REQUIRE(snapshots.size() == 1);
  CHECK(snapshots[0].timestamp == kTime);
  CHECK(snapshots[0].objects == store.objects());  // the same table: O(1)

  SECTION("a later write leaves the snapshot as it was and copies no object") {
    REQUIRE(store.ingest(headline("c", "C")).has_value());
    REQUIRE(store.ingest(headline("a", "A, edited")).has_value());
    auto live = store.objects();
    CHECK(live != snapshots[0].objects);
    CHECK(live->size() == 3);
    CHECK(snapshots[0].objects->size() == 2);
    CHECK_FALSE(snapshots[0].objects->contains("c"));
    CHECK(snapshots[0].objects->at("a")->attributes.at("TITLE") == Value::string("A"));
    CHECK(live->at("a")->attributes.at("TITLE") == Value::string("A, edited"));
    CHECK(live->at("b").get() == snapshots[0].objects->at("b").get());  // untouched objects are shared
  }
}

TEST_CASE("a table nobody else holds is updated in place", "[memory]") {
  MemoryStore store([] { return kTime; });
  REQUIRE(store.ingest(headline("a", "A")).has_value());
  const void* table = store.objects().get();  // the view is released at once
  REQUIRE(store.ingest(headline("b", "B")).has_value());
  CHECK(store.objects().get() == table);

  auto view = store.objects();  // held: the next write must not change it
  REQUIRE(store.ingest(headline("c", "C")).has_value());
  CHECK(view->size() == 2);
  CHECK(store.size() == 3);
}

TEST_CASE("snapshots are capped at 20, newest first, dropping the oldest", "[memory]") {
  std::int64_t now = kTime;
  MemoryStore store([&] { return now; });
  LogCapture capture;
  for (int i = 1; i <= 25; ++i) {
    now = kTime + i;
    store.snapshot();
  }
  CHECK(MemoryStore::kMaxSnapshots == 20);
  auto snapshots = store.snapshots();
  REQUIRE(snapshots.size() == 20);
  CHECK(store.snapshot_count() == 20);
  CHECK(snapshots.front().timestamp == kTime + 25);
  CHECK(snapshots.back().timestamp == kTime + 6);
  CHECK(capture.contains("memory: MEMORY - CoW Memory snapshot created."));
}

TEST_CASE("rollback makes a snapshot live again and keeps it and the history", "[memory]") {
  MemoryStore store([] { return kTime; });
  REQUIRE(store.ingest(headline("a", "A")).has_value());
  store.snapshot();  // will be index 1
  REQUIRE(store.ingest(headline("b", "B")).has_value());
  store.snapshot();  // index 0
  REQUIRE(store.ingest(headline("c", "C")).has_value());
  const std::string c_hash = store.find("c")->hash;
  LogCapture capture;

  SECTION("index 0 is the newest") {
    REQUIRE(store.rollback().has_value());
    CHECK(store.size() == 2);
    CHECK(store.find("b") != nullptr);
    CHECK(store.find("c") == nullptr);
    CHECK(capture.contains("memory: MEMORY - Memory rolled back to snapshot 0"));
  }
  SECTION("an older snapshot by index") {
    REQUIRE(store.rollback(1).has_value());
    CHECK(store.size() == 1);
    CHECK(store.find("b") == nullptr);
    CHECK(capture.contains("memory: MEMORY - Memory rolled back to snapshot 1"));
  }
  CHECK(store.snapshot_count() == 2);
  CHECK(store.find_version(c_hash) != nullptr);  // the history is not rolled back
  CHECK(store.dirty());

  // Writing after a rollback must not alter the snapshot it came from.
  REQUIRE(store.ingest(headline("d", "D")).has_value());
  REQUIRE(store.rollback().has_value());
  CHECK(store.find("d") == nullptr);
}

TEST_CASE("rollback to a missing snapshot logs, changes nothing and fails", "[memory]") {
  MemoryStore store([] { return kTime; });
  REQUIRE(store.ingest(headline("a", "A")).has_value());
  auto before = store.objects();
  LogCapture capture;

  auto result = store.rollback();
  REQUIRE_FALSE(result.has_value());
  CHECK(result.error().code == ErrorCode::not_found);
  CHECK(capture.contains("memory: MEMORY ERROR - Snapshot 0 not found."));

  store.snapshot();
  store.snapshot();
  auto beyond = store.rollback(5);
  REQUIRE_FALSE(beyond.has_value());
  CHECK(capture.contains("memory: MEMORY ERROR - Snapshot 5 not found."));
  CHECK(store.objects() == before);
  CHECK(store.snapshot_count() == 2);
}

TEST_CASE("snapshots, writes and reads from many threads stay consistent", "[memory][concurrency]") {
  MemoryStore store([] { return kTime; });
  constexpr int kWriters = 2;
  constexpr int kPerWriter = 200;
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kPerWriter; ++i) {
        auto parent = Value::plist(
            {{"TYPE", Value::keyword("HEADLINE")},
             {"PROPERTIES", Value::plist({{"ID", Value::string("w" + std::to_string(w) + "-" + std::to_string(i))},
                                          {"TITLE", Value::string("T")}})},
             {"CONTENTS", Value::list({headline("w" + std::to_string(w) + "-" + std::to_string(i) + "-child", "C")})}});
        if (!store.ingest(parent)) failed = true;
      }
    });
  }
  for (int s = 0; s < 2; ++s) {
    threads.emplace_back([&] {
      for (int i = 0; i < kPerWriter; ++i) {
        store.snapshot();
        if (i % 10 != 0) continue;
        // Every snapshot is a whole ingest or none: a parent is never without its child.
        for (const auto& snapshot : store.snapshots()) {
          for (const auto& [id, object] : *snapshot.objects) {
            for (const auto& child : object->children) {
              if (!snapshot.objects->contains(child)) failed = true;
            }
          }
        }
        (void)store.find("w0-0");
        (void)store.active_projects();
      }
    });
  }
  threads.emplace_back([&] {
    for (int i = 0; i < 20; ++i) {
      if (store.snapshot_count() > 2) (void)store.rollback(static_cast<std::size_t>(i % 3));
      std::this_thread::yield();
    }
  });
  for (auto& thread : threads) thread.join();
  CHECK_FALSE(failed);
  CHECK(store.snapshot_count() == MemoryStore::kMaxSnapshots);
  CHECK(store.history_size() == kWriters * kPerWriter * 2);
}

TEST_CASE("the history keeps at most its limit of versions, dropping the oldest nothing else holds", "[memory]") {
  LogCapture logs;
  std::int64_t now = kTime;
  MemoryStore store([&now] { return now; });
  store.set_history_limit(10);
  // Version i of "n" at time kTime + i; "kept" once, at the start.
  REQUIRE(store.ingest(headline("kept", "always live")).has_value());
  std::vector<std::string> hashes;  // of "n", oldest first
  const auto edit = [&](int i) {
    ++now;
    REQUIRE(store.ingest(headline("n", "draft " + std::to_string(i))).has_value());
    hashes.push_back(store.find("n")->hash);
  };
  for (int i = 0; i < 10; ++i) edit(i);  // 11 versions: over the limit
  // Trimmed to nine (nine tenths of 10): the two oldest drafts went; the
  // live "kept", though older, stays.
  CHECK(store.history_size() == 9);
  CHECK(store.find_version(hashes[0]) == nullptr);
  CHECK(store.find_version(hashes[1]) == nullptr);
  CHECK(store.find_version(hashes[2]) != nullptr);
  CHECK(store.find_version(store.find("kept")->hash) != nullptr);
  CHECK(logs.contains("MEMORY - History trimmed: 2 old versions dropped, 9 kept."));

  SECTION("a version a snapshot holds stays, so rollback finds it archived") {
    store.snapshot();  // holds draft 9
    const std::string held = hashes.back();
    for (int i = 10; i < 30; ++i) edit(i);
    CHECK(store.history_size() <= 10);
    CHECK(store.find_version(held) != nullptr);
    REQUIRE(store.rollback(0).has_value());
    CHECK(store.find("n")->hash == held);
    for (const auto& entry : *store.objects()) CHECK(store.find_version(entry.second->hash) != nullptr);
  }
  SECTION("a dropped version ingested again is stored anew") {
    ++now;
    REQUIRE(store.ingest(headline("n", "draft 0")).has_value());
    CHECK(store.find("n")->hash == hashes[0]);
    CHECK(store.find("n")->version == now);
  }
  SECTION("a lower limit trims at once; 0 lifts it") {
    store.set_history_limit(4);
    CHECK(store.history_size() == 4);  // nine tenths of 4 rounds to 4
    store.set_history_limit(0);
    for (int i = 10; i < 40; ++i) edit(i);
    CHECK(store.history_size() == 34);
  }
}

TEST_CASE("live objects are never dropped, even when they alone pass the limit", "[memory]") {
  MemoryStore store([] { return kTime; });
  store.set_history_limit(3);
  for (int i = 0; i < 5; ++i) REQUIRE(store.ingest(headline("id" + std::to_string(i), "t")).has_value());
  CHECK(store.size() == 5);
  CHECK(store.history_size() == 5);
}
