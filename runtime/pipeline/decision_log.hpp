// DecisionLog: every verification (reason, last-mile, approval) as one JSON
// line in <state dir>/decisions/, written off the pipeline's threads. The
// line format is docs/decision-log.md's; this file is its only writer.
//
// The pipeline's side is cheap: a record holds references (Values, the
// snapshot whose slots name the gates) and clock readings, and goes into the
// calling thread's shard of a bounded buffer. A full shard drops the record
// and counts it: a signal never waits for the disk. One writer thread prints,
// masks, formats and appends them, a batch per write(), and rotates files.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/interval_clock.hpp"
#include "base/result.hpp"
#include "pipeline/gate_log.hpp"
#include "pipeline/verifier.hpp"
#include "value/value.hpp"

namespace passepartout {

// A shadow candidate that disagreed with the live gate of the same name,
// as the record's "shadow" array shows it (docs/decision-log.md).
struct ShadowDisagreement {
  std::string name;
  std::string version;
  std::string sha256;
  std::string live;       // the live gate's verdict
  std::string candidate;  // the candidate's verdict
  std::string reason;     // the candidate's reason (masked when written)
  std::string kind;       // "candidate-blocks", "candidate-passes", "rewrites-differently", "candidate-failed"
};

// One verification as captured on the pipeline's thread. The writer reads
// the gates' names, versions and library digests through the trace's slots,
// which the snapshot keeps alive (a record whose `snapshot` is null relies
// on an earlier record of the same batch holding the same one).
struct DecisionRecord {
  // User-provided, so that a record made in a buffer's slot (emplace_back())
  // is not zero-filled first: its arrays are written up to their counts.
  DecisionRecord() noexcept {}  // NOLINT(modernize-use-equals-default): see above
  DecisionStage stage = DecisionStage::reason;
  VerifyOutcome outcome = VerifyOutcome::passed;
  Value action;  // as the gates were given it
  Value signal;
  Value reason;  // the deciding reason; NIL when it passed
  GateTrace trace;
  std::shared_ptr<const Snapshot> snapshot;
  std::string provider;
  std::string model;
  std::string approval_token_sha256;  // outcome approval: hex SHA-256 of the token
  std::string granted_by;             // the standing approval (rule id) that answered the approval; empty: none
  // An approval that expired undecided (no verification: the trace is
  // empty): the outcome reads "expired", the reason says how it ended.
  bool expired = false;
  IntervalClock::Ticks started = 0;
  IntervalClock::Ticks finished = 0;
  // Per gate (trace index i): at[i] to at[i + 1]; `timed` entries + 1 readings.
  IntervalClock::Ticks gate_marks[GateTimes::kMax + 1];
  std::size_t marks = 0;
  std::vector<ShadowDisagreement> shadow;  // written as "shadow" when not empty
  // The decision's number when it was given one as it was captured (a
  // verification the gate log names); 0: the writer numbers it.
  std::uint64_t id = 0;
};

struct DecisionLogOptions {
  static constexpr std::uint64_t kDefaultMaxFileBytes = std::uint64_t{64} * 1024 * 1024;
  static constexpr std::size_t kDefaultMaxFiles = 8;
  static constexpr std::chrono::seconds kDefaultMaxAge{std::chrono::hours(24)};
  static constexpr std::size_t kDefaultBuffer = 1024;

  std::filesystem::path folder;                         // <state dir>/decisions, created mode 0700
  std::uint64_t max_file_bytes = kDefaultMaxFileBytes;  // the current file is rotated before it passes this
  std::size_t max_files = kDefaultMaxFiles;             // files kept, the current one included; older ones deleted
  std::chrono::seconds max_age = kDefaultMaxAge;        // the current file is rotated once this old (0: never)
  std::uint32_t sample_passed = 1;                      // 1 in N passed verifications recorded; others always
  std::size_t buffer = kDefaultBuffer;                  // records each thread may have waiting for the writer
  // Each gate's own time ("us") is measured in 1 of every N verifications of
  // a thread (a clock reading per gate costs the loop about a tenth at
  // saturation); the whole verification's ("took_us") in every one.
  std::uint32_t time_gates_every = kDefaultTimeGatesEvery;
  static constexpr std::uint32_t kDefaultTimeGatesEvery = 8;
  // How often the writer looks for records when no thread's buffer is half full.
  std::chrono::milliseconds interval{100};
  // How often, at most, a warning says how many were dropped since the last one.
  std::chrono::milliseconds drop_report_every{std::chrono::minutes(1)};
  // With a fleet's decision log (daemon/decision_shipper.hpp), the files are
  // its spool: a rotated file for which `unshipped` holds is kept past
  // max_files until it is shipped, and `written` is called (on the writer's
  // thread) after each batch of lines reaches the file. Both may be empty.
  std::function<bool(const std::filesystem::path&)> unshipped;
  std::function<void()> written;
};

// Holds the record of a verification that asked for approval until its
// token exists (the approval is created after the gates). Destroyed without
// submit(), it records the decision without a token. Not thread-safe: one
// owner (a signal's run).
class PendingDecision {
 public:
  PendingDecision() = default;
  PendingDecision(PendingDecision&&) noexcept = default;
  PendingDecision& operator=(PendingDecision&& other) noexcept;
  PendingDecision(const PendingDecision&) = delete;
  PendingDecision& operator=(const PendingDecision&) = delete;
  ~PendingDecision();

  bool holds() const noexcept { return record_ != nullptr; }
  // Records it with the SHA-256 of `token` (empty: none) and, when a
  // standing approval answered it, that rule's id. Nothing when it holds none.
  void submit(std::string_view token, std::string_view granted_by = {});

 private:
  friend class DecisionLog;
  DecisionLog* log_ = nullptr;
  std::unique_ptr<DecisionRecord> record_;
};

// Created and stopped on one thread (the daemon's boot and shutdown);
// record() from any thread.
class DecisionLog {
 public:
  // Creates the folder, opens the current file and starts the writer.
  static Result<std::unique_ptr<DecisionLog>> open(DecisionLogOptions options);
  ~DecisionLog();  // flush() and stop
  DecisionLog(const DecisionLog&) = delete;
  DecisionLog& operator=(const DecisionLog&) = delete;

  // The pipeline's side: captures the verification into the calling thread's
  // shard (passes sampled; a full shard drops it, counted). Never blocks on
  // the writer. `pending`, for an outcome approval, takes the record instead.
  // Returns the decision's id when the verification was not all plain passes
  // (the gate log names it beside the gates' lines), else empty: a pass is
  // numbered by the writer, off the pipeline's threads.
  std::string record(DecisionStage stage, const std::shared_ptr<const Snapshot>& snapshot, const Value& action,
                     const Value& signal, const Verification& verification, const GateTimes& times,
                     IntervalClock::Ticks started, IntervalClock::Ticks finished, const DecisionContext& context);
  // A record built elsewhere (PendingDecision); dropped and counted when full.
  void push(DecisionRecord&& record);

  // Writes every record pushed before the call; returns once they are on
  // disk (or failed to be). Any thread but the writer.
  void flush();

  // Lock-free, any thread: records dropped because a buffer was full (or the
  // file could not be written), and lines written, since open().
  std::uint64_t dropped() const noexcept;
  std::uint64_t written() const noexcept;
  const std::filesystem::path& folder() const noexcept;
  // Whether the calling thread's next verification has its gates timed
  // (1 in DecisionLogOptions::time_gates_every). Counts it.
  bool time_next_gates() const noexcept;

  // Tests: while held, the writer takes nothing from the buffers.
  void hold_writer_for_test(bool held);

  struct State;

 private:
  explicit DecisionLog(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// A verification's "outcome" as the log writes it: "passed", "approval",
// "blocked", or "failed" when what stopped it (the trace's last entry) failed.
const char* decision_outcome(VerifyOutcome outcome, const GateTrace& trace) noexcept;

// The log's files in `folder`, newest first: the current one
// (decisions.jsonl), then the rotated ones (decisions-<stamp>-<n>.jsonl) by
// the time and sequence in their names, latest first. Empty when there are none.
std::vector<std::filesystem::path> decision_files_newest_first(const std::filesystem::path& folder);

// The Unix time, to the second, of the record whose line `text` begins
// with (its "time"); nullopt when it holds none. How the writer dates a file
// it did not begin, and the fleet's shipper the oldest line it has not shipped.
std::optional<std::int64_t> decision_unix_seconds(std::string_view text);

// The current file of `folder` (<folder>/decisions.jsonl).
std::filesystem::path current_decisions_file(const std::filesystem::path& folder);
// Where the daemon keeps them: <state dir>/decisions.
std::filesystem::path decisions_folder(const std::filesystem::path& state_dir);

// One record as the writer prints it (the line without its '\n'), for tests
// and the writer. `id` and `unix_us` (the record's time) are the writer's.
std::string decision_line(const DecisionRecord& record, std::string_view id, std::int64_t unix_us);

}  // namespace passepartout
