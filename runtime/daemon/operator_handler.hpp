// OperatorHandler: the operator requests of the wire protocol (STATUS, SKILLS,
// LOAD ... SHUTDOWN, see protocol.hpp), carried out against the live runtime.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "daemon/protocol.hpp"
#include "value/value.hpp"

namespace passepartout {

class SkillHost;
class McpHub;
class Pipeline;
class ApprovalStore;
class DecisionLog;
class RuleBook;
class Executor;
struct BootResult;
struct ChangeResult;
struct RescanResult;
struct SkillChange;

// The skills that are not serving and why, kept current as changes happen:
// boot's disabled skills and unreadable manifests, then every change (a
// skill that loads is no longer disabled; one refused while being added is).
// Thread-safe: one mutex guards the lists.
class SkillProblems {
 public:
  struct Entry {
    std::string reason;
    std::string version;  // from its manifest, when known
    int priority = 0;
  };

  void record(const BootResult& boot);
  void record(const ChangeResult& change);
  void record(const RescanResult& rescan);

  std::map<std::string, Entry> disabled() const;
  std::vector<std::string> manifest_errors() const;
  bool empty() const;

 private:
  mutable std::mutex problems_mutex_;  // guards disabled_ and manifest_errors_
  std::map<std::string, Entry> disabled_;
  std::vector<std::string> manifest_errors_;
};

// Carries out operator requests. Every command runs on the `control`
// executor (one thread, so changes never interleave and the io threads never
// wait on a skill's create or a SQLite write) and is answered once, through
// the `answer` callback, from whichever thread finished it.
//
// Thread affinity: handle() from any thread; the services must outlive every
// request in flight (the daemon stops `control` before destroying them).
class OperatorHandler {
 public:
  // Connections turned away or closed to make room, since the daemon started.
  struct ConnectionFigures {
    std::uint64_t refused = 0;          // protocol connections refused at a limit or while stopping
    std::uint64_t evicted = 0;          // protocol connections closed to make room for a newer one
    std::uint64_t metrics_evicted = 0;  // the same on the metrics endpoint
  };
  struct Services {
    SkillHost& skills;
    Pipeline& pipeline;
    ApprovalStore* approvals;  // may be null: APPROVALS lists nothing, APPROVE/DENY are refused
    Executor& control;
    SkillProblems& problems;
    std::string version;
    std::chrono::steady_clock::time_point started;
    std::function<HealthReport()> health;
    std::function<std::uint64_t()> connections;  // open connections, for STATUS
    std::function<void()> shutdown;              // begins the daemon's stop (SHUTDOWN)
    std::function<void()> changed;               // after a change to the skills (health is re-evaluated)
    std::function<Value()> providers;            // STATUS's PROVIDERS (provider_status.hpp); may be empty
    std::function<Value()> budget;               // STATUS's BUDGET and BUDGET's payload (budget_status); may be empty
    const DecisionLog* decisions = nullptr;      // STATUS's decision log figures; null: the log is off
    std::function<std::string()> metrics_url;    // STATUS's METRICS: "http://127.0.0.1:<port>/metrics", "" when off
    // STATUS's CONNECTIONS-REFUSED, CONNECTIONS-EVICTED and METRICS-EVICTED; may be empty (all 0).
    std::function<ConnectionFigures()> connection_figures;
    // STATUS's READY (T) or NOT-READY (the reason, as /readyz says it); may be empty (ready).
    std::function<std::string()> not_ready;
    // The MCP servers (STATUS's MCP-SERVERS, MCP, MCP-TRUST); null: none.
    McpHub* mcp = nullptr;
    // MCP-RELOAD: reads the servers' configuration again; how many are configured.
    std::function<Result<std::size_t>()> mcp_reload;
    // The operator's rules (RULES, RULE-ADD, ..., APPROVE :REMEMBER); null: refused.
    RuleBook* rules = nullptr;
    // Whether an open connection carries the session (a session's rule ends with it); may be empty (none does).
    std::function<bool(std::string_view)> session_open;
    // STATUS's STATE-DB (state_db_status); may be empty (NIL: no state database).
    std::function<Value()> state_db;
  };
  using Answer = std::function<void(Value response)>;

  explicit OperatorHandler(Services services);

  // Answers `request`, a (:TYPE :OPERATOR :COMMAND :<NAME> ...) plist,
  // echoing its :REQUEST-ID. `requester` is recorded with skill changes
  // ("wire", "sighup").
  void handle(Value request, std::string requester, Answer answer);

  // The (:NAME ... :STATE ...) plists of the SKILLS command, for tests and STATUS.
  Value skills_value() const;
  // The (:NAME ... :SEEN ... :LATEST (...)) plists of the SHADOW-STATUS command, for STATUS.
  Value shadows_value() const;
  // The MCP servers, one plist each (NIL without a hub).
  Value mcp_value() const;

 private:
  // Runs on `control`; calls `answer` exactly once.
  void run(const Value& request, const std::string& requester, const Answer& answer);

  Services services_;
};

// A change as the HISTORY, LOAD, ... responses list it: (:KIND "swap" :SKILL "n" ...).
Value change_value(const SkillChange& change);

}  // namespace passepartout
