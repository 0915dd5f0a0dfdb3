// DecisionReplay: recorded decisions (docs/decision-log.md) run again
// through a snapshot of skills, and what would change. The core of
// `passepartout verify --replay`; nothing is executed and no daemon is needed.
#pragma once

#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cli/decision_files.hpp"
#include "skills/registry.hpp"

namespace passepartout::cli {

// One side of a decision: its outcome ("passed", "blocked", "failed",
// "approval") and, unless it passed, the deciding gate and its reason.
struct ReplaySide {
  std::string outcome;
  std::string gate;
  std::string reason;
};

// A record whose outcome is not the one recorded.
struct ReplayChange {
  std::string where;  // file:line
  std::string id;
  std::string time;
  std::string stage;
  ReplaySide then;
  ReplaySide now;
  bool masked = false;  // the record's action or signal had credentials masked
};

// A line that was not replayed: where, and why.
struct ReplaySkip {
  std::string where;
  std::string why;
};

struct ReplayReport {
  // Changes and skips kept with their details; past these they are only counted.
  static constexpr std::size_t kMaxChanges = 1000;
  static constexpr std::size_t kMaxSkips = 100;

  std::size_t read = 0;                    // non-empty lines
  std::size_t replayed = 0;                // records verified again
  std::size_t skipped = 0;                 // malformed lines and records whose action or signal did not parse
  std::map<std::string, std::size_t> now;  // replayed records by their new outcome
  std::size_t changed = 0;                 // replayed records whose outcome changed
  std::size_t masked = 0;                  // replayed records with "masked": true
  std::size_t masked_changed = 0;          // of those, the ones whose outcome changed
  // gate -> "then -> now" -> count: every replayed record in which that
  // gate's verdict changed ("not run" when it did not run on one side).
  std::map<std::string, std::map<std::string, std::size_t>> gate_changes;
  std::vector<ReplayChange> changes;  // the first kMaxChanges, in the order read
  std::vector<ReplaySkip> skips;      // the first kMaxSkips
};

// Replays records against one snapshot. Not thread-safe: one thread feeds it.
class DecisionReplay {
 public:
  explicit DecisionReplay(std::shared_ptr<const Snapshot> snapshot) : snapshot_(std::move(snapshot)) {}

  // Replays every line of `in`; `name` is how skips and changes name it.
  void replay_stream(std::istream& in, std::string_view name);
  // Replays one line (line number `number` of `name`); an empty line is ignored.
  void replay_line(std::string_view line, std::string_view name, std::size_t number);

  const ReplayReport& report() const noexcept { return report_; }

 private:
  void skip(std::string_view name, std::size_t number, std::string why);

  std::shared_ptr<const Snapshot> snapshot_;
  ReplayReport report_;
};

// `passepartout verify --replay REPLAY`: loads the skills of `manifest_dir`
// (libraries from `plugin_dir`), replays REPLAY (a decision file, a folder
// of them or a state folder holding decisions/, oldest first; "-": `in`)
// and prints the report to `out` (text, or one JSON document), skipped
// lines named on `err`. Returns kExitChanged when an outcome changed,
// kExitOk when none did, kExitUsage for missing or unreadable input or
// skills that cannot be loaded. `isolate`: every skill in a worker process
// of its own, whatever its manifest says. Defined in verify_command.cpp.
int replay_decisions(const std::string& replay, const std::filesystem::path& manifest_dir,
                     const std::filesystem::path& plugin_dir, bool as_json, std::istream& in, std::ostream& out,
                     std::ostream& err, bool isolate = false);

// The report as text: the table of changed decisions, then the summary.
std::string format_replay(const ReplayReport& report);
// The same as one JSON document.
DecisionJson replay_json(const ReplayReport& report);

}  // namespace passepartout::cli
