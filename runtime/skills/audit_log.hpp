// AuditLog: the durable, append-only record of every change to the loaded
// skills (load, swap, add, remove; ok, refused or failed), kept in SQLite.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace passepartout {

// One requested change to the loaded skills and how it ended.
struct SkillChange {
  std::int64_t id = 0;          // assigned by the log (ignored by record())
  std::int64_t at_unix_ms = 0;  // when the change was requested (set by the caller; 0 = now)
  // Who or what asked: "boot", "sighup", "watcher", "rescan", or over the wire
  // "wire uid=1000 pid=4242" (Unix socket) / "wire token=token#1a2b3c4d peer=127.0.0.1:5555" (TCP).
  std::string requester;
  // "load", "swap", "add", "remove", "force-remove" (a guard removed with
  // --force), "shadow" (a candidate version started beside the live one),
  // "shadow-stop" (dropped: by the operator, or because the live version
  // changed), "promote" (the candidate swapped in), "quarantine" (a skill's
  // worker process died too often; requester "worker", outcome "failed",
  // the reason in `error`); "mcp-tool-changed" (an MCP tool's definition
  // differs from its pin: `skill` is its offered name, outcome "refused",
  // step "pin", the pinned and the new digests as from_ and to_sha256) and
  // "mcp-trust" (an operator accepted it); "rule-add", "rule-remove",
  // "rule-carry" and "rules-reload" (the operator's rules, pipeline/rules.hpp:
  // `skill` is the rule's id, or the rules file for a reload; `details` what
  // the rule says). A new action is a new string, not a schema change.
  std::string action;
  std::string skill;
  std::string from_version, from_sha256;  // empty when there was none (add, boot)
  std::string to_version, to_sha256;      // empty when there is none (remove, or a refusal before the library was read)
  // The first 12 hex digits of the sha256 of the manifest's settings and the
  // resolved config (skill_fingerprint.hpp): tells apart two swaps of the
  // same library and version. Empty when not known (rows of schema 1).
  std::string from_fingerprint, to_fingerprint;
  // What a swap changed besides the library, "; "-separated:
  // "priority: 50 -> 60; config: approve_all_shell true -> false"; a key that
  // looks like a secret is named without its values ("config: api_token changed").
  std::string details;
  // The state hand-over of a swap: "1234 bytes", or why there was none
  // ("skipped: no export hook", "import refused: ..."); empty for other actions.
  std::string state_handover;
  // A structured detail (schema 3): for promote and shadow-stop, the
  // candidate's shadow statistics as JSON ({"seen":..,"agreements":..,
  // "candidate-blocks":..,...}); empty otherwise and for older rows.
  std::string detail;
  std::string outcome;  // "ok", "refused", "failed"
  // The step that failed: "manifest", "dependencies", "load", "create", "self-test", "state", "publish";
  // "crash" for a boot load refused because the skill crashed the previous run (crash_record.hpp);
  // "quarantine" for a quarantine;
  // empty when ok.
  std::string step;
  std::string error;             // the message, empty when ok
  std::int64_t duration_us = 0;  // how long the change took, microseconds

  bool operator==(const SkillChange&) const = default;
};

// A durable, append-only record of every change to the loaded skills, in SQLite.
// Thread-safe: one internal mutex serialises every use of the connection.
// Several processes may read while one writes (WAL journal; writers wait up to
// 2 s for each other's locks). Rows cannot be updated or deleted (triggers).
class AuditLog {
 public:
  // The schema this build reads and writes (stored in `PRAGMA user_version`).
  static constexpr int kSchemaVersion = 3;

  // Opens `file` for reading and writing: creates missing folders (mode 0700)
  // and the file (mode 0600), then migrates the schema to kSchemaVersion.
  // Refuses, changing nothing, a file that is not SQLite, another
  // application's database, or a schema newer than this build's.
  static Result<std::unique_ptr<AuditLog>> open(const std::filesystem::path& file);
  // Opens an existing log read-only (for `passepartout skills history` while a
  // daemon writes). not_found when the file is absent or holds no log yet.
  static Result<std::unique_ptr<AuditLog>> open_read_only(const std::filesystem::path& file);

  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;
  ~AuditLog();

  // Appends `change` durably: the row is committed (synchronous=FULL) before
  // this returns. Returns its id (increasing, never reused). `action` and
  // `outcome` must be among the values listed on SkillChange; at_unix_ms 0 is
  // replaced by the current time. Any thread; blocks while another process writes.
  Result<std::int64_t> record(const SkillChange& change);
  // Appends every change of `changes` in one transaction (one sync), all or
  // none; their ids in order. Each is checked as record() checks it before any
  // is written. For a batch that happens at once, such as the boot's loads.
  Result<std::vector<std::int64_t>> record_all(std::span<const SkillChange> changes);
  // Newest first (the order they were recorded in); at most `limit`; only
  // changes of `skill` when it is non-empty. Any thread.
  Result<std::vector<SkillChange>> list(std::size_t limit = 100, std::string_view skill = {}) const;

  const std::filesystem::path& file() const noexcept;
  bool is_read_only() const noexcept;

 private:
  Result<std::int64_t> insert_locked(const SkillChange& change);
  struct State;
  explicit AuditLog(std::unique_ptr<State> state);
  static Result<std::unique_ptr<AuditLog>> open_with(const std::filesystem::path& file, bool read_only);
  std::unique_ptr<State> state_;
};

// The audit log in a state folder: <state_dir>/audit.sqlite3.
std::filesystem::path audit_file(const std::filesystem::path& state_dir);

}  // namespace passepartout
