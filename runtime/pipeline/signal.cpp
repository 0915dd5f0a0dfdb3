// Signal: the envelope's defaults and the signal vocabulary's readers and makers.
#include "pipeline/signal.hpp"

#include <array>
#include <utility>

#include "memory/memory_object.hpp"

namespace passepartout {

using namespace key_literals;

std::string_view sensor_name(const Value& signal) {
  const Value& sensor = sensor_of(signal);
  return sensor.is_keyword() ? sensor.text() : std::string_view("UNKNOWN");
}

namespace {
// In the order of counted_sensors(), which adds "none" and "other".
constexpr std::array kCountedSensorKeys{"USER-INPUT"_key,   "CHAT-MESSAGE"_key,  "TOOL-OUTPUT"_key,
                                        "TOOL-ERROR"_key,   "HEARTBEAT"_key,     "INTERRUPT"_key,
                                        "POINT-UPDATE"_key, "BUFFER-UPDATE"_key, "LOOP-ERROR"_key};
constexpr std::array<std::string_view, kCountedSensorKeys.size() + 2> kCountedSensors{
    "user-input",   "chat-message",  "tool-output", "tool-error", "heartbeat", "interrupt",
    "point-update", "buffer-update", "loop-error",  "none",       "other"};
}  // namespace

std::span<const std::string_view> counted_sensors() noexcept { return kCountedSensors; }

std::size_t counted_sensor_of(const Value& signal) noexcept {
  const Value& sensor = sensor_of(signal);
  if (!sensor.is_keyword()) return kCountedSensorKeys.size();  // "none"
  for (std::size_t i = 0; i < kCountedSensorKeys.size(); ++i) {
    if (sensor.is_keyword(kCountedSensorKeys[i])) return i;
  }
  return kCountedSensorKeys.size() + 1;  // "other"
}

std::int64_t depth_of(const Value& signal) {
  const Value& depth = signal.at("DEPTH"_key);
  return depth.is_integer() ? depth.as_integer() : 0;
}

bool is_reasoned(const Value& signal) {
  if (!type_is(signal, "EVENT"_key)) return false;
  const Value& sensor = sensor_of(signal);
  return sensor.is_keyword("USER-INPUT"_key) || sensor.is_keyword("CHAT-MESSAGE"_key) ||
         sensor.is_keyword("TOOL-OUTPUT"_key) || sensor.is_keyword("TOOL-ERROR"_key);
}

Value as_signal(Value message) {
  if (message.is_list()) return message;
  return Value::plist(
      {{"TYPE", Value::keyword("EVENT"_key)}, {"PAYLOAD", Value::plist({{"TEXT", std::move(message)}})}});
}

namespace {

// (:SOURCE :SYSTEM :SESSION-ID session)
Value default_meta(std::string_view session) {
  return Value::plist({{"SOURCE", Value::keyword("SYSTEM"_key)}, {"SESSION-ID", Value::string(session)}});
}

}  // namespace

Value with_default_meta(Value signal) {
  if (signal.at("META"_key).is_list()) return signal;
  return std::move(signal).with("META"_key, default_meta(kInternalSession));
}

Value with_session(Value signal, std::string_view session) {
  const Value& meta = signal.at("META"_key);
  if (!meta.is_list()) return std::move(signal).with("META"_key, default_meta(session));
  const Value& named = meta.at("SESSION-ID"_key);
  if ((named.is_string() || named.is_keyword()) && !named.text().empty()) return signal;
  Value with_id = meta.with("SESSION-ID"_key, Value::string(session));
  return std::move(signal).with("META"_key, std::move(with_id));
}

std::string_view session_id_of(const Value& signal) {
  const Value& session = signal.path("META"_key, "SESSION-ID"_key);
  return session.is_string() || session.is_keyword() ? session.text() : kInternalSession;
}

Value feedback_event(std::int64_t depth, const Value& meta, Value payload) {
  return Value::plist({{"TYPE", Value::keyword("EVENT"_key)},
                       {"DEPTH", Value::integer(depth)},
                       {"META", meta},
                       {"PAYLOAD", std::move(payload)}});
}

Value user_input_signal(std::string_view text, std::string_view session, std::string_view source) {
  return Value::plist(
      {{"TYPE", Value::keyword("EVENT"_key)},
       {"META", Value::plist({{"SOURCE", Value::keyword(source)}, {"SESSION-ID", Value::string(session)}})},
       {"PAYLOAD", Value::plist({{"SENSOR", Value::keyword("USER-INPUT"_key)}, {"TEXT", Value::string(text)}})}});
}

Value heartbeat_signal() {
  // :UNIX-TIME is Lisp universal time (seconds since 1900) despite its name (A3).
  return Value::plist({{"TYPE", Value::keyword("EVENT"_key)},
                       {"PAYLOAD", Value::plist({{"SENSOR", Value::keyword("HEARTBEAT"_key)},
                                                 {"UNIX-TIME", Value::integer(universal_time_now())}})}});
}

}  // namespace passepartout
