// Signal: the envelope every message of the loop carries (seed A–C) — its
// vocabulary and the defaults of :META, :SESSION-ID and :DEPTH, for the
// daemon that receives signals and the pipeline that runs them alike.
//
//   (:TYPE :EVENT :DEPTH 0 :META (:SOURCE :TUI :SESSION-ID "s")
//    :PAYLOAD (:SENSOR :USER-INPUT :TEXT "..."))
//
// :TYPE is :EVENT (a sensor saw something), :REQUEST (an action for an
// actuator, its :TARGET) or :LOG. An event's :PAYLOAD :SENSOR says what kind:
// from outside :USER-INPUT, :CHAT-MESSAGE, :HEARTBEAT, :BUFFER-UPDATE,
// :POINT-UPDATE, :INTERRUPT; fed back by the loop :TOOL-OUTPUT, :TOOL-ERROR,
// :LOOP-ERROR; and :APPROVED, the signal an approved action's actuator sees.
// All functions: pure, any thread.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "value/value.hpp"

namespace passepartout {

// The session of a signal whose :META names none (C1).
inline constexpr std::string_view kInternalSession = "internal";

// Whether `message`'s :TYPE is the keyword `type`.
inline bool type_is(const Value& message, const Key& type) {
  using namespace key_literals;
  return message.at("TYPE"_key).is_keyword(type);
}
// :TYPE :LOG or :EVENT: a message that tells, as against one that asks an actuator to act.
inline bool is_log_or_event(const Value& message) {
  using namespace key_literals;
  return type_is(message, "LOG"_key) || type_is(message, "EVENT"_key);
}
// The signal's :PAYLOAD :SENSOR (NIL when it has none).
inline const Value& sensor_of(const Value& signal) {
  using namespace key_literals;
  return signal.path("PAYLOAD"_key, "SENSOR"_key);
}
// The sensor's name ("USER-INPUT"), or "UNKNOWN"; a view into `signal`.
std::string_view sensor_name(const Value& signal);
// The sensors the daemon's metrics count signals by, as label values
// (lower case): the known ones, then "none" (a signal without a sensor: a
// request, a log) and "other" (a sensor not in the list), so the label set
// stays bounded whatever clients send.
std::span<const std::string_view> counted_sensors() noexcept;
// The index in counted_sensors() of `signal`'s sensor.
std::size_t counted_sensor_of(const Value& signal) noexcept;
// The signal's :DEPTH, 0 when it has none (F1).
std::int64_t depth_of(const Value& signal);

// D16 and Decisions 5: whether the Reason stage reasons about `signal` (an
// event from :USER-INPUT, :CHAT-MESSAGE, :TOOL-OUTPUT or :TOOL-ERROR).
bool is_reasoned(const Value& signal);

// A message that is no list, as a signal: (:TYPE :EVENT :PAYLOAD (:TEXT message)).
// A list is returned as it is.
Value as_signal(Value message);
// C1: `signal` with a :META list: its own, or (:SOURCE :SYSTEM :SESSION-ID "internal").
Value with_default_meta(Value signal);
// `signal` whose :META names a session (a non-empty string or keyword): when
// it names none, `session` is written in ((:SOURCE :SYSTEM :SESSION-ID session)
// when it has no :META list at all).
Value with_session(Value signal, std::string_view session);
// The session `signal` belongs to: its :META :SESSION-ID (a string or
// keyword), else "internal". A view into `signal`.
std::string_view session_id_of(const Value& signal);

// (:TYPE :EVENT :DEPTH d :META m :PAYLOAD payload): what the loop feeds back.
Value feedback_event(std::int64_t depth, const Value& meta, Value payload);

// The seed's envelope helpers, shared with the daemon and tests.
// (:TYPE :EVENT :META (:SOURCE :TUI :SESSION-ID "s") :PAYLOAD (:SENSOR :USER-INPUT :TEXT "..."))
Value user_input_signal(std::string_view text, std::string_view session = kInternalSession,
                        std::string_view source = "TUI");
// (:TYPE :EVENT :PAYLOAD (:SENSOR :HEARTBEAT :UNIX-TIME <universal time>))
Value heartbeat_signal();

}  // namespace passepartout
