// DecisionShipper: a node's decision log shipped to the fleet's one table.
// The log's files (pipeline/decision_log.hpp) are the spool: every decision
// is a whole line there first, then copied in batches (COPY) into
// passepartout_decisions, tagged with the node. How far each file is
// shipped lives beside the rows, in passepartout_decision_files, and moves
// in the same transaction as the batch it covers: a node killed at any
// moment re-reads it and goes on from there, so no line it wrote is lost
// and none is shipped twice. While the database is away the spool grows
// (rotated files are kept until shipped) and the node goes on deciding.
//
// One thread of its own, with one connection of its own: COPY cannot run in
// PgClient's pipeline mode, and the spool is read from disk, which has no
// business on an event loop. It runs at the lowest priority, as the log's
// writer does: a busy node's signals come first, its shipping catches up.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "value/value.hpp"

namespace passepartout {

class DecisionShipper {
 public:
  struct Options {
    std::string conninfo;
    std::string node;
    std::filesystem::path folder;                    // the decision log's (<state dir>/decisions)
    std::chrono::milliseconds interval{1000};        // how often the spool is looked at without a nudge
    std::size_t batch_bytes = std::size_t{4} << 20;  // at most this much of a file per transaction
    std::chrono::milliseconds connect_timeout{5000};
    std::chrono::milliseconds initial_backoff{200};  // after a failure, doubling ...
    std::chrono::milliseconds max_backoff{10000};    // ... up to this
  };

  // What status, doctor and /metrics show.
  struct Figures {
    bool connected = false;
    std::uint64_t shipped = 0;      // lines this process shipped
    std::uint64_t skipped = 0;      // malformed lines passed over (a torn write), shipped as nothing
    std::uint64_t batches = 0;      // transactions committed
    std::uint64_t failures = 0;     // transactions or connections that failed
    std::uint64_t spool_bytes = 0;  // written, not shipped yet (as of the last look)
    std::uint64_t spool_files = 0;  // files holding some of them
    double lag_seconds = 0;         // how old the oldest decision not shipped is; 0: none
    std::string last_error;         // "" when the last attempt succeeded
  };

  explicit DecisionShipper(Options options);
  ~DecisionShipper();  // stop()
  DecisionShipper(const DecisionShipper&) = delete;
  DecisionShipper& operator=(const DecisionShipper&) = delete;

  void start();
  // Ships what is there now, for at most `wait`, then stops the thread.
  void stop(std::chrono::milliseconds wait = std::chrono::milliseconds(2000));
  // Any thread: look at the spool now (the log's writer calls it after each write).
  void nudge();
  // Any thread: whether `file` (a rotated file of the folder) holds lines
  // not known to be shipped — the log keeps it then. True until the
  // database has said how far it is shipped.
  bool unshipped(const std::filesystem::path& file) const;
  // Any thread: returns once everything written before the call is shipped,
  // or after `timeout` (false then). For tests and benchmarks.
  bool drain(std::chrono::milliseconds timeout);

  Figures figures() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// What of a node's spool in `folder` is not shipped yet by the marks
// `shipped` (file key -> bytes, as passepartout_decision_files holds them
// for the node): doctor's reading, without a daemon.
struct SpoolBacklog {
  std::uint64_t bytes = 0;
  std::uint64_t files = 0;
  double oldest_seconds = 0;  // the oldest decision not shipped; 0: none
};
SpoolBacklog spool_backlog(const std::filesystem::path& folder, const std::map<std::string, std::uint64_t>& shipped);

// STATUS's and doctor's DECISION-SHIPPING: (:CONNECTED T :SHIPPED n
// :SKIPPED n :SPOOL-BYTES n :SPOOL-FILES n :LAG-SECONDS x :LAST-ERROR "..."|NIL).
Value decision_shipping_status(const DecisionShipper::Figures& figures);

}  // namespace passepartout
