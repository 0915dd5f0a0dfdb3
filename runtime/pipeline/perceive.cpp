// Perceive (seed C2): a signal is logged, fed to memory (buffer and point
// updates), marked with the session's focus, and shown to the skills whose
// trigger matches it.
#include <utility>

#include "memory/memory_store.hpp"
#include "pipeline/run.hpp"
#include "pipeline/signal.hpp"

namespace passepartout {

using namespace key_literals;

Value Run::perceive(Value incoming) {
  const Value& sensor = sensor_of(incoming);
  {  // "GATE [Perceive]: EVENT (USER-INPUT) [Source: TUI]", built in one string
    using namespace std::string_view_literals;  // appended without measuring them first
    std::string& line = log_line_buffer();
    line += "GATE [Perceive]: "sv;
    const std::size_t before_type = line.size();
    append_target_name(line, incoming.at("TYPE"_key));
    if (line.size() == before_type) line += "NIL"sv;
    line += " ("sv;
    line += sensor_name(incoming);
    line += ") [Source: "sv;
    append_target_name(line, incoming.path("META"_key, "SOURCE"_key));
    line += ']';
    log_message(LogLevel::info, kPipelineComponent, line);
  }
  MemoryStore* memory = services().memory;
  if (type_is(incoming, "EVENT"_key) && memory != nullptr) {
    if (sensor.is_keyword("BUFFER-UPDATE"_key) && incoming.path("PAYLOAD"_key, "AST"_key).is_list()) {
      memory->snapshot();
      if (auto ingested = memory->ingest(incoming.path("PAYLOAD"_key, "AST"_key)); !ingested) {
        log_message(LogLevel::warn, kPipelineComponent, "PERCEIVE: {}", ingested.error().message);
      }
    } else if (sensor.is_keyword("POINT-UPDATE"_key) && incoming.path("PAYLOAD"_key, "ELEMENT"_key).is_list()) {
      // The element at the client's point: the session's focus from now on.
      const Value& element = incoming.path("PAYLOAD"_key, "ELEMENT"_key);
      memory->snapshot();
      auto ingested = memory->ingest(element);
      if (!ingested) {
        log_message(LogLevel::warn, kPipelineComponent, "PERCEIVE: {}", ingested.error().message);
      } else {
        session->foveal_focus = *ingested;
      }
    }
  }
  if (sensor.is_keyword("INTERRUPT"_key)) pipeline->raise_interrupt();
  // C2: the signal carries the session's focus (`sensor` points into the
  // signal as it was: not used past here).
  if (!session->foveal_focus.empty() && incoming.get("FOVEAL-FOCUS"_key) == nullptr) {
    incoming = std::move(incoming).with("FOVEAL-FOCUS"_key, Value::string(session->foveal_focus));
  }

  // Skills whose manifest trigger matches see the signal (heartbeats included: Decisions 9).
  for (const Slot* slot : snapshot->observers()) {
    const TriggerSpec& trigger = slot->manifest().trigger;
    if (!trigger.declared() || !trigger.matches(incoming)) continue;
    if (auto observed = slot->observe(incoming); !observed) {
      log_message(LogLevel::warn, slot->name(), "observe failed: {}", observed.error().message);
    }
  }
  return std::move(incoming).with("STATUS"_key, Value::keyword("PERCEIVED"_key));
}

}  // namespace passepartout
