// Shadow gates: after the live gates have decided a verification, each
// shadow candidate the snapshot carries is asked about the action its live
// gate was given, and its verdict is compared with the live gate's. Nothing
// it answers changes the verification: what differs is counted
// (ShadowStats), remembered, and handed to the decision log.
//
// The candidates run on the verifying thread, after the live chain and
// before the decision is recorded, under the same time budget (GateWatchdog)
// as a live gate: their cost is one gate call each, paid only while an
// operator is trying a candidate (docs/decisions/0024-shadow-gates.md).
#pragma once

#include <vector>

#include "pipeline/gate_log.hpp"
#include "pipeline/verifier.hpp"
#include "skills/shadow.hpp"

namespace passepartout {

struct ShadowDisagreement;

// How `candidate` compares with `live`: strictness first (pass and rewrite <
// approval < block, a failed live gate counting as a block), then for two
// verdicts that let the action through, the actions they let through
// (`live_output`, `candidate_output`). A failed candidate is candidate_failed
// whatever the live gate did.
ShadowKind compare_verdicts(GateResult live, const Value& live_output, GateResult candidate,
                            const Value& candidate_output);

// Asks every candidate of `snapshot` whose live gate `capture` says was
// reached, compares, counts in the candidate's statistics, and appends each
// disagreement to `disagreements`. Never changes `live`; any thread.
void run_shadow_gates(DecisionStage stage, const Snapshot& snapshot, const Value& signal, const ShadowCapture& capture,
                      const Verification& live, std::vector<ShadowDisagreement>& disagreements);

}  // namespace passepartout
