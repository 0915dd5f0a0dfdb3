// The pipeline's typed errors (seed A18): what a cycle can fail with, so the
// loop's error tiers and a skill's error policy decide by kind, not by text.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "providers/budget_refusal.hpp"
#include "value/value.hpp"

namespace passepartout {

// The root: every error the pipeline raises on purpose.
class PassepartoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  // The kind as the error policy and the logs name it: "pipeline", "llm", ...
  virtual const char* kind() const noexcept { return "error"; }
  // What a skill's error policy sees: (:KIND :llm :MESSAGE "..." <the kind's own keys>).
  virtual Value to_value() const;
};

// Something went wrong while a signal was being processed.
class PipelineError : public PassepartoutError {
 public:
  using PassepartoutError::PassepartoutError;
  const char* kind() const noexcept override { return "pipeline"; }
};

// Every provider of the cascade failed; `failures` says how, one per provider.
class LlmError : public PipelineError {
 public:
  LlmError(const std::string& message, std::vector<std::string> failures, int attempt)
      : PipelineError(message), failures_(std::move(failures)), attempt_(attempt) {}
  const char* kind() const noexcept override { return "llm"; }
  Value to_value() const override;  // + :FAILURES ("provider: why" ...) :ATTEMPT n
  const std::vector<std::string>& failures() const noexcept { return failures_; }
  int attempt() const noexcept { return attempt_; }

 private:
  std::vector<std::string> failures_;
  int attempt_;
};

// A gate refused an action in a way the pipeline cannot continue from.
class GateError : public PipelineError {
 public:
  GateError(const std::string& message, std::string gate, Value rejected)
      : PipelineError(message), gate_(std::move(gate)), rejected_(std::move(rejected)) {}
  const char* kind() const noexcept override { return "gate"; }
  Value to_value() const override;  // + :GATE "name" :REJECTED-ACTION (...)
  const std::string& gate() const noexcept { return gate_; }
  const Value& rejected_action() const noexcept { return rejected_; }

 private:
  std::string gate_;
  Value rejected_;
};

// A spending budget would be exceeded: every provider's call was refused by
// a cap (providers/budget.hpp). The message is the refusal's, the seed's
// "Budget exhausted: $x remaining, $y requested" with the cap and its reset.
class BudgetError : public PipelineError {
 public:
  explicit BudgetError(BudgetRefusal refusal) : PipelineError(refusal.message), refusal_(std::move(refusal)) {}
  const char* kind() const noexcept override { return "budget"; }
  // + :REMAINING x :REQUESTED y :CAP "daily_usd" :UNIT "usd" :RESETS "2026-12-04T00:00:00Z" (NIL: never)
  Value to_value() const override;
  double remaining() const noexcept { return refusal_.remaining; }
  double requested() const noexcept { return refusal_.requested; }
  const BudgetRefusal& refusal() const noexcept { return refusal_; }

 private:
  BudgetRefusal refusal_;
};

// A message on the wire that cannot be understood.
class ProtocolError : public PassepartoutError {
 public:
  ProtocolError(const std::string& message, std::string raw) : PassepartoutError(message), raw_(std::move(raw)) {}
  const char* kind() const noexcept override { return "protocol"; }
  Value to_value() const override;  // + :RAW-MESSAGE "..."
  const std::string& raw_message() const noexcept { return raw_; }

 private:
  std::string raw_;
};

}  // namespace passepartout
