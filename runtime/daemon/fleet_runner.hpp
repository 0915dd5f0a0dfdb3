// FleetRunner: a node's side of the fleet's approved runs (--state-db). An
// action approved on any node runs here when this node may claim it (it
// asked, or the node that asked has gone silent, or a claim's lease ran
// out): woken by the decision's notification, by every reconnection to the
// state database (notifications sent while it was away are lost), and by a
// poll, it asks the store which runs are claimable and hands each to the
// pipeline, which claims it, checks it through this node's gates and runs
// it once. Nothing runs on the state database's loop.
#pragma once

#include <chrono>
#include <memory>

namespace passepartout {

class ApprovalStore;
class Executor;
class Pipeline;
class PgClient;

class FleetRunner {
 public:
  // `work` runs the sweeps (they wait on the database); everything must
  // outlive stop().
  FleetRunner(PgClient& client, ApprovalStore& store, Pipeline& pipeline, Executor& work,
              std::chrono::milliseconds poll);
  ~FleetRunner();  // stop()
  FleetRunner(const FleetRunner&) = delete;
  FleetRunner& operator=(const FleetRunner&) = delete;

  void start();
  // No sweep starts after this; waits for the one going on, if any.
  void stop();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace passepartout
