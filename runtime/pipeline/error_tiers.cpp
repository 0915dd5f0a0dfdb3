// The error tiers (seed F4, F5): a failure is offered to the skills' error
// policies first; otherwise a crash rolls memory back and is fed back as a
// :LOOP-ERROR, up to depth 2.
#include <optional>
#include <string>

#include "memory/memory_store.hpp"
#include "pipeline/run.hpp"
#include "pipeline/signal.hpp"

namespace passepartout {

using namespace key_literals;

bool Run::policy_decides(const PassepartoutError& error) {
  if (snapshot == nullptr || snapshot->error_policies().empty()) return false;
  const Value value = error.to_value();
  std::optional<ErrorChoice> choice;
  for (const Slot* slot : snapshot->error_policies()) {
    choice = slot->error_policy(signal, value);
    if (choice && choice->kind != ErrorChoice::Kind::standard) break;
    choice.reset();
  }
  if (!choice) return false;
  log_message(LogLevel::info, kPipelineComponent, "ERROR POLICY: {} error handled by '{}'", error.kind(),
              to_string(choice->kind));
  const std::int64_t depth = depth_of(signal);
  switch (choice->kind) {
    case ErrorChoice::Kind::skip:
      finish("skip");
      return true;
    case ErrorChoice::Kind::abort:
      finish("abort");
      return true;
    case ErrorChoice::Kind::fallback:
      next_cycle(feedback_event(depth + 1, signal.at("META"_key),
                                Value::plist({{"SENSOR", Value::keyword("LOOP-ERROR"_key)},
                                              {"MESSAGE", choice->text},
                                              {"DEPTH", Value::integer(depth)}})));
      return true;
    case ErrorChoice::Kind::standard:
      break;
  }
  return false;
}

void Run::crash(const PassepartoutError& error) {
  const std::string sensor(sensor_name(signal));
  const std::string message = error.what();
  log_message(LogLevel::error, kPipelineComponent, "METABOLISM CRASH [{}]: {}", sensor, message);
  if (policy_decides(error)) return;  // a skill's error policy chooses first
  const std::int64_t depth = depth_of(signal);
  const bool quiet_sensor = sensor == "LOOP-ERROR" || sensor == "TOOL-ERROR" || sensor == "SYNTAX-ERROR";
  if (!quiet_sensor) {
    log_message(LogLevel::error, kPipelineComponent, "CRITICAL ERROR: Initiating Micro-Rollback.");
    if (MemoryStore* memory = services().memory) static_cast<void>(memory->rollback(0));
  }
  if (depth > 2 || sensor == "LOOP-ERROR" || sensor == "TOOL-ERROR") {
    finish("error");
    return;
  }
  next_cycle(feedback_event(depth + 1, signal.at("META"_key),
                            Value::plist({{"SENSOR", Value::keyword("LOOP-ERROR"_key)},
                                          {"MESSAGE", Value::string(message)},
                                          {"DEPTH", Value::integer(depth)}})));
}

}  // namespace passepartout
