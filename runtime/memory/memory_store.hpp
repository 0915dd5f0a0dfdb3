// MemoryStore: the agent's memory. Org-like trees are ingested into a live
// table (id -> object) and an immutable history (hash -> object); snapshots
// and rollback are copy-on-write; the whole can be saved and loaded crash-safely.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "memory/memory_query.hpp"
#include "memory/memory_table.hpp"
#include "value/value.hpp"

namespace passepartout {

// The live table at one moment, kept for rollback.
struct MemorySnapshot {
  std::int64_t timestamp = 0;  // universal time it was taken
  std::shared_ptr<const MemoryTable> objects;
};

// The agent's memory.
//
// Copy-on-write: the live table is an immutable MemoryTable behind a
// shared_ptr. Readers and snapshots share that pointer (O(1), no object is
// copied); a write copies the table (its map of pointers, never the objects)
// only when someone else still holds it, and otherwise updates it in place.
// Rollback makes a snapshot's table live again, shared, in O(1).
//
// Thread-safe: one mutex guards the two table pointers, the snapshot stack and
// the counters, and is held only to copy a pointer or to apply one whole
// ingest, so every read is a pointer copy and a lookup; queries run on an
// immutable view outside the lock. Saves are serialised by a second mutex and
// write a view, so the store stays usable while a save is on disk.
class MemoryStore {
 public:
  // How many snapshots are kept; taking one more drops the oldest.
  static constexpr std::size_t kMaxSnapshots = 20;
  // Deepest tree ingest() accepts (a root is depth 1).
  static constexpr std::size_t kMaxIngestDepth = 256;
  // Versions the history keeps by default (see set_history_limit()).
  static constexpr std::size_t kDefaultHistoryLimit = 100'000;

  // Universal time (seconds since 1900); injected so tests are hermetic.
  using Clock = std::function<std::int64_t()>;

  explicit MemoryStore(Clock clock = universal_time_now);
  MemoryStore(const MemoryStore&) = delete;
  MemoryStore& operator=(const MemoryStore&) = delete;

  // --- ingesting ----------------------------------------------------------
  // Stores the Org-like tree `ast`
  //   (:TYPE :HEADLINE :PROPERTIES (:ID "n1" :TITLE "T" ...) :CONTENTS (child ...) :RAW-CONTENT "...")
  // and returns the root's id. The id is :PROPERTIES :ID, or a generated one
  // (`temp-<universal time>-<n>`) unique in this store. Children (the list
  // elements of :CONTENTS; text and other atoms are skipped) are stored first,
  // with this id as their parent. A headline's content is "<:TITLE>\n<:RAW-CONTENT>";
  // other types have none. When the history already holds an object with the
  // same Merkle hash that object is reused as it is (its version and parent
  // come from its first ingestion); otherwise a new one is archived. Each id
  // then maps to its object in the live table.
  // All or nothing: a malformed tree (not a plist, :TYPE not a keyword,
  // :PROPERTIES not a plist with keyword keys, :ID or :RAW-CONTENT not a
  // string, :CONTENTS not a list, nesting deeper than kMaxIngestDepth) is
  // refused with a message naming the node, and nothing is stored.
  Result<std::string> ingest(const Value& ast);

  // Bounds the history, which otherwise keeps every version ever ingested
  // (a client that sends its buffer on every change adds a version of each
  // changed node and of its ancestors each time): past `limit` versions, the
  // oldest that neither the live table nor a snapshot holds are dropped,
  // down to nine tenths of the limit, after each ingest and load and at
  // once. A dropped version ingested again is stored anew (with the time of
  // that ingest). 0: no limit. Default kDefaultHistoryLimit.
  void set_history_limit(std::size_t limit);

  // --- reading (any thread) -----------------------------------------------
  // The live object with `id`, or null.
  MemoryObjectPtr find(std::string_view id) const;
  // The archived object with Merkle hash `hash`, or null.
  MemoryObjectPtr find_version(std::string_view hash) const;
  std::size_t size() const;
  std::size_t history_size() const;
  // An immutable view of the live table / of both tables, valid as long as held.
  std::shared_ptr<const MemoryTable> objects() const;
  MemoryImage image() const;

  std::vector<MemoryObjectPtr> query(const MemoryQuery& query) const;
  std::vector<MemoryObjectPtr> with_attribute(std::string_view key, const Value& value) const;
  std::vector<MemoryObjectPtr> tagged(std::string_view tag) const;
  std::vector<MemoryObjectPtr> with_todo_state(std::string_view state) const;
  std::vector<MemoryObjectPtr> of_type(std::string_view type) const;
  std::vector<MemoryObjectPtr> active_projects() const;
  std::vector<MemoryObjectPtr> completed_tasks() const;

  // --- snapshots ----------------------------------------------------------
  // Pushes the live table, with the time, onto the snapshot stack (O(1));
  // beyond kMaxSnapshots the oldest is dropped. Logs
  // "MEMORY - CoW Memory snapshot created.".
  void snapshot();
  // Makes snapshot `index` (0 = newest) the live table. The snapshot stays on
  // the stack; the history is not rolled back. Logs
  // "MEMORY - Memory rolled back to snapshot <i>". A missing snapshot logs
  // "MEMORY ERROR - Snapshot <i> not found.", changes nothing and returns not_found.
  Result<void> rollback(std::size_t index = 0);
  std::size_t snapshot_count() const;
  // The stack, newest first.
  std::vector<MemorySnapshot> snapshots() const;

  // --- persistence (see memory_file.hpp for the format) --------------------
  // Writes both tables to `file` crash-safely: the previous file stays intact
  // until the new one is complete and synced. Clears dirty() for the changes
  // it wrote. Failures are logged and returned; the store is unchanged.
  Result<void> save(const std::filesystem::path& file);
  // save() when there are unsaved changes; true when it wrote. For the heartbeat.
  Result<bool> save_if_dirty(const std::filesystem::path& file);
  // Replaces both tables with `file`'s (snapshots are kept). A missing file is
  // not an error: nothing changes and the result is false. Any other problem
  // (unreadable, corrupt, truncated, inconsistent) is logged and returned, and
  // the store is unchanged.
  Result<bool> load(const std::filesystem::path& file);
  // True when something changed since the last save or load.
  bool dirty() const;

 private:
  struct Ingestion;
  std::string generate_id(const MemoryTable& table, std::int64_t now);
  // Under state_mutex_: applies the history limit; returns the versions dropped.
  std::size_t trim_history();
  // Logs what trim_history() did (outside the lock).
  void report_trim(std::size_t dropped) const;

  Clock clock_;
  mutable std::mutex state_mutex_;  // guards everything below except save_mutex_
  std::shared_ptr<const MemoryTable> objects_;
  std::shared_ptr<const HistoryTable> history_;
  std::deque<MemorySnapshot> snapshots_;  // newest first
  std::uint64_t generation_ = 0;          // bumped by every change
  std::uint64_t saved_generation_ = 0;    // generation_ the last save or load covered
  std::uint64_t next_generated_id_ = 1;
  std::size_t history_limit_ = kDefaultHistoryLimit;  // 0: none
  std::mutex save_mutex_;                             // serialises save() so files land in the order they were taken
};

}  // namespace passepartout
