// DaemonMetrics: what GET /metrics serves, read at scrape time from the
// counters the daemon's parts keep anyway, written in the Prometheus format.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "daemon/metrics_listener.hpp"
#include "daemon/server.hpp"

namespace passepartout {

class SkillHost;
class Pipeline;
class Cascade;
class ApprovalStore;
class McpHub;
class RuleBook;
class Budget;
class StateDb;
class DecisionShipper;

// Where the figures come from. Each must outlive the DaemonMetrics.
struct MetricsSources {
  const SkillHost* skills = nullptr;                          // skills loaded, gate verdicts and latency, skill changes
  const Pipeline* pipeline = nullptr;                         // signals by sensor and outcome, in flight
  const Cascade* cascade = nullptr;                           // provider calls, latency, tokens
  const ApprovalStore* approvals = nullptr;                   // may be null (approvals unavailable)
  std::function<ServerCounters()> connections;                // may be empty (no server yet)
  std::string version;                                        // passepartout_build_info
  std::function<MetricsListenerCounters()> metrics_endpoint;  // may be empty (not yet listening)
  const McpHub* mcp = nullptr;                                // the MCP servers; may be null
  const RuleBook* rules = nullptr;                            // the operator's rules; may be null
  const Budget* budget = nullptr;                             // the caps and the usage ledger; may be null
  const StateDb* state_db = nullptr;                          // the state database; null without one
  const DecisionShipper* shipper = nullptr;                   // the decision log's shipping; null without one
};

// The process's own figures (/proc/self/stat, /proc/self/fd, getrlimit), as
// Prometheus' process_* metrics name them; a figure that cannot be read is -1.
struct ProcessStats {
  double cpu_seconds = -1;
  double resident_bytes = -1;
  double virtual_bytes = -1;
  double open_fds = -1;
  double max_fds = -1;
  double start_time_seconds = -1;  // since the Unix epoch
};
ProcessStats read_process_stats();

// Thread affinity: made on the daemon's main thread; scrape() from any
// thread, one at a time or concurrently. A scrape reads sharded counters and
// atomics and takes no lock a signal takes (the registry's and the
// cascade's published snapshots are read through the scraping thread's own
// shard); it allocates its text only.
class DaemonMetrics {
 public:
  explicit DaemonMetrics(MetricsSources sources) : sources_(std::move(sources)) {}

  // Where passepartout_decisions_dropped_total comes from (decisions the
  // decision log could not keep); until one is set it is 0. Any thread.
  void set_decisions_dropped(std::function<std::uint64_t()> read);

  // The whole exposition, text/plain; version=0.0.4.
  std::string scrape() const;

 private:
  MetricsSources sources_;
  mutable std::mutex source_mutex_;  // guards decisions_dropped_ (scrapes and its setter only)
  std::function<std::uint64_t()> decisions_dropped_;
};

}  // namespace passepartout
