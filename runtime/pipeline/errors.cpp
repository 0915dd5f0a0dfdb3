// The typed errors as a skill's error policy sees them.
#include "pipeline/errors.hpp"

#include "base/duration_text.hpp"
#include "base/utf8.hpp"

namespace passepartout {

Value PassepartoutError::to_value() const {
  return Value::plist({{"KIND", Value::keyword(kind())}, {"MESSAGE", Value::string(replace_invalid_utf8(what()))}});
}

Value LlmError::to_value() const {
  std::vector<Value> failures;
  failures.reserve(failures_.size());
  for (const std::string& failure : failures_) failures.push_back(Value::string(replace_invalid_utf8(failure)));
  return PipelineError::to_value().with("FAILURES", Value::list(failures)).with("ATTEMPT", Value::integer(attempt_));
}

Value GateError::to_value() const {
  return PipelineError::to_value()
      .with("GATE", Value::string(replace_invalid_utf8(gate_)))
      .with("REJECTED-ACTION", rejected_);
}

Value BudgetError::to_value() const {
  return PipelineError::to_value()
      .with("REMAINING", Value::real(refusal_.remaining))
      .with("REQUESTED", Value::real(refusal_.requested))
      .with("CAP", Value::string(refusal_.cap))
      .with("UNIT", Value::string(to_string(refusal_.unit)))
      .with("RESETS", refusal_.resets_at_ms == 0 ? Value() : Value::string(utc_timestamp(refusal_.resets_at_ms)));
}

Value ProtocolError::to_value() const {
  return PassepartoutError::to_value().with("RAW-MESSAGE", Value::string(replace_invalid_utf8(raw_)));
}

}  // namespace passepartout
