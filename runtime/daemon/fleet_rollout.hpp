// What a fleet's skill rollout is made of, as pure functions every node and
// the CLI share: a release and the statement its signature covers, the
// checks a node makes before it loads one, the stages (shadow, a stable
// fraction of the nodes, all of them), which nodes are canaries, and the
// rule that advances, halts or holds a rollout from what the nodes report.
// The database's side is rollout_agent.cpp (nodes) and cli/fleet_command.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace passepartout {

// A skill's release as `fleet publish` stores it.
struct FleetRelease {
  std::string name;
  std::string version;
  std::string manifest;         // the manifest's text
  std::string library;          // the library's bytes
  std::string manifest_sha256;  // hex, as published
  std::string library_sha256;   // hex, as published
  std::string signature;        // hex Ed25519 over release_statement(); "" unsigned
};

// What a release's signature covers: its name, version and both digests.
std::string release_statement(std::string_view name, std::string_view version, std::string_view manifest_sha256,
                              std::string_view library_sha256);

// Why a node refuses a release: the step ("digest", "signature") and what was wrong.
struct ReleaseRefusal {
  std::string step;
  std::string error;
};

// The checks before a node loads `release`: both digests as published, and,
// when `trusted_key` (hex Ed25519 public key) is set, a signature by it.
std::optional<ReleaseRefusal> check_release(const FleetRelease& release, std::string_view trusted_key);

struct RolloutStage {
  bool shadow = false;  // every node shadows the candidate; none applies it
  int percent = 100;    // else: the candidate live on this share of the nodes
  std::string text() const;
};

// "shadow,10%,100%": a shadow stage only first, shares rising, the last 100%.
// invalid_input names what is wrong.
Result<std::vector<RolloutStage>> parse_rollout_stages(std::string_view text);

// The nodes of `alive` (any order) on which a stage of `percent` puts the
// release live: the ceil(percent × n / 100) with the smallest digest of
// (rollout key, node), so that the set is the same on every node and a
// share only grows stage by stage.
std::vector<std::string> canary_nodes(const std::vector<std::string>& alive, std::string_view rollout_key, int percent);

// A rollout as the rule reads it.
struct RolloutFigures {
  std::vector<RolloutStage> stages;
  std::size_t stage = 0;
  std::int64_t stage_ms = 0;            // how long the stage has lasted
  std::int64_t dwell_ms = 0;            // how long each stage must last at least
  std::uint64_t min_verifications = 0;  // each stage must have seen at least as many (0: none needed)
  double max_disagreements = 0;         // per thousand shadow verifications
  double max_failures = 0;              // per thousand verifications on the canaries
  double max_blocks = 0;                // the same
};

// One node's report for the current stage.
struct RolloutReport {
  std::string node;
  std::string state;  // "refused", "shadowing", "live", "kept", "rolled-back"
  std::string step;
  std::string error;
  std::uint64_t verifications = 0;  // shadow: comparisons; live: the candidate's gate calls
  std::uint64_t disagreements = 0;
  std::uint64_t failures = 0;
  std::uint64_t blocks = 0;
};

struct RolloutVerdict {
  enum class Kind { hold, advance, done, halt } kind = Kind::hold;
  std::string why;  // the figures that decided it, for the audit and fleet status
};

// What the rollout does next, given the reports of the current stage from
// the nodes alive now: halt when a node refused the release or a threshold
// is passed; advance (or done, after the last stage) once the stage has
// lasted its dwell, every alive node has reported, and it has seen its
// verifications; else hold.
RolloutVerdict judge_rollout(const RolloutFigures& rollout, const std::vector<std::string>& alive,
                             const std::vector<RolloutReport>& reports);

}  // namespace passepartout
