// RolloutAgent: a node's side of the fleet's skill rollouts (--state-db).
// Every poll (and at once when `fleet rollout` or another node announces a
// change) it reads each skill's latest rollout and makes this node what the
// rollout's stage asks: the release shadowed beside the live version, live
// (a canary, or every node), or not there (not a canary yet, or the
// rollout halted: a shadow is stopped, a canary swapped back). A release is
// loaded only once its digests and, with --fleet-trusted-key, its
// signature check; it is kept in <state dir>/releases/, apart from the
// manifest and plugin folders. The node reports what it did in its own row,
// with the figures of the current stage, and then judges the rollout by
// every node's reports (judge_rollout): whichever node gets there first
// advances or halts it, by a conditional update, with an event that says why.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

namespace passepartout {

class PgClient;
class SkillHost;

class RolloutAgent {
 public:
  struct Options {
    std::string node;
    std::filesystem::path releases_dir;      // <state dir>/releases
    std::string trusted_key;                 // hex Ed25519 public key; "" none
    std::chrono::milliseconds lease{10000};  // a node not seen within it is not counted
    std::chrono::milliseconds poll{3333};
  };

  // `client` and `host` must outlive stop().
  RolloutAgent(PgClient& client, SkillHost& host, Options options);
  ~RolloutAgent();  // stop()
  RolloutAgent(const RolloutAgent&) = delete;
  RolloutAgent& operator=(const RolloutAgent&) = delete;

  void start();
  void stop();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// The channel `fleet rollout` and the nodes notify on a rollout's change.
inline constexpr const char* kRolloutChannel = "passepartout_rollouts";

}  // namespace passepartout
