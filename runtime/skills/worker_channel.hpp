// The channel between the host and a skill's worker process: frames on
// SOCK_STREAM socket pairs ("lanes"), each a fixed header and a Value codec message.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

// What a frame carries. Requests go host -> worker and are answered by one
// kReply with the same id; kLog and kDenial frames (worker -> host) may come before it.
enum class FrameKind : std::uint16_t {
  hello = 1,  // () -> the table description, or the load error
  create = 2,
  destroy = 3,
  trigger = 4,
  prompt = 5,
  gate = 6,
  self_test = 7,
  export_state = 8,
  import_state = 9,
  call_tool = 10,
  act = 11,
  observe = 12,
  error_policy = 13,
  mandate = 14,
  select_model = 15,
  reply = 100,
  log = 101,
  denial = 102,  // ("openat" ...): system calls the sandbox denied during the call
};

// The wire header, in host byte order (both ends are the same executable on
// the same machine): the payload length, the kind, zero, the request id.
struct FrameHeader {
  std::uint32_t length = 0;
  std::uint16_t kind = 0;
  std::uint16_t reserved = 0;
  std::uint64_t id = 0;
};
static_assert(sizeof(FrameHeader) == 16);

// Largest payload either side accepts; checked before anything is allocated.
inline constexpr std::size_t kMaxFramePayload = 64U * 1024 * 1024;

struct Frame {
  FrameKind kind = FrameKind::reply;
  std::uint64_t id = 0;
  Value value;  // the payload, decoded
};

// Why reading or writing a frame failed: the peer closed or broke the
// channel, the deadline passed, or the bytes were not a frame.
enum class ChannelFault { closed, timeout, garbage };

struct ChannelError {
  ChannelFault fault = ChannelFault::closed;
  std::string message;  // for garbage: what was wrong
};

using Deadline = std::chrono::steady_clock::time_point;

// A deadline far enough away to mean "none" (the worker waits for requests without one).
inline Deadline no_deadline() { return Deadline::max(); }

// Writes one frame; `value` is encoded as a codec message. Never raises SIGPIPE.
// Thread-compatible per fd: one writer per lane at a time.
std::optional<ChannelError> write_frame(int fd, FrameKind kind, std::uint64_t id, const Value& value,
                                        Deadline deadline);

// Reads one frame, checking the header (known kind, reserved zero, length at
// most kMaxFramePayload) before allocating, and decoding the payload strictly.
struct FrameOrError {
  std::optional<Frame> frame;
  ChannelError error;
};
FrameOrError read_frame(int fd, Deadline deadline);

// "1 s", "250 ms", "1.5 s", "10 minutes": a budget as a person writes it.
std::string human_duration(std::chrono::milliseconds duration);

}  // namespace passepartout
