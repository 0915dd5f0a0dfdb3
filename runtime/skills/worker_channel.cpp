// The channel's frames: writing and reading them on a socket with a deadline,
// strictly (a peer's bytes are untrusted input).
#include "skills/worker_channel.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/errno_text.hpp"
#include "value/value_codec.hpp"

namespace passepartout {
namespace {

bool is_known_kind(std::uint16_t kind) {
  return (kind >= static_cast<std::uint16_t>(FrameKind::hello) &&
          kind <= static_cast<std::uint16_t>(FrameKind::select_model)) ||
         kind == static_cast<std::uint16_t>(FrameKind::reply) || kind == static_cast<std::uint16_t>(FrameKind::log) ||
         kind == static_cast<std::uint16_t>(FrameKind::denial);
}

// Milliseconds poll() may wait until `deadline` (-1: forever); 0 once it passed.
int poll_timeout(Deadline deadline) {
  if (deadline == no_deadline()) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 60'000 ? 60'000 : static_cast<int>(left.count());
}

// Waits until `fd` is ready for `events`; nullopt when it is.
std::optional<ChannelError> wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int timeout = poll_timeout(deadline);
    const int n = ::poll(&p, 1, timeout);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ChannelError{ChannelFault::closed, "poll: " + errno_text(errno)};
    if (n > 0) return std::nullopt;  // readable, writable, or hung up: the read or write says which
    if (timeout == 0) return ChannelError{ChannelFault::timeout, "deadline passed"};
  }
}

// Reads and writes try the socket first and wait only when it would block:
// a reply's payload is usually there with its header, and a lane's buffer
// has room, so most calls cost one system call each, not two.
std::optional<ChannelError> read_exactly(int fd, char* out, std::size_t size, Deadline deadline, bool started) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, out + done, size - done, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto waited = wait_for(fd, POLLIN, deadline)) return waited;
      continue;
    }
    if (n < 0) return ChannelError{ChannelFault::closed, errno_text(errno)};
    if (n == 0) {
      if (done == 0 && !started) return ChannelError{ChannelFault::closed, "end of file"};
      return ChannelError{ChannelFault::closed, "end of file in the middle of a frame"};
    }
    done += static_cast<std::size_t>(n);
  }
  return std::nullopt;
}

}  // namespace

std::optional<ChannelError> write_frame(int fd, FrameKind kind, std::uint64_t id, const Value& value,
                                        Deadline deadline) {
  std::string bytes(sizeof(FrameHeader), '\0');
  encode_message(value, bytes);
  const std::size_t payload = bytes.size() - sizeof(FrameHeader);
  if (payload > kMaxFramePayload) {
    return ChannelError{ChannelFault::garbage, "a frame of " + std::to_string(payload) +
                                                   " bytes is over the limit of " + std::to_string(kMaxFramePayload)};
  }
  FrameHeader header{static_cast<std::uint32_t>(payload), static_cast<std::uint16_t>(kind), 0, id};
  std::memcpy(bytes.data(), &header, sizeof header);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (auto waited = wait_for(fd, POLLOUT, deadline)) return waited;
      continue;
    }
    if (n < 0) return ChannelError{ChannelFault::closed, errno_text(errno)};
    done += static_cast<std::size_t>(n);
  }
  return std::nullopt;
}

FrameOrError read_frame(int fd, Deadline deadline) {
  FrameOrError out;
  FrameHeader header;
  if (auto error = read_exactly(fd, reinterpret_cast<char*>(&header), sizeof header, deadline, false)) {
    out.error = *error;
    return out;
  }
  if (!is_known_kind(header.kind) || header.reserved != 0) {
    out.error = {ChannelFault::garbage, "a frame header of unknown kind " + std::to_string(header.kind)};
    return out;
  }
  if (header.length > kMaxFramePayload) {
    out.error = {ChannelFault::garbage, "a frame of " + std::to_string(header.length) + " bytes is over the limit of " +
                                            std::to_string(kMaxFramePayload)};
    return out;
  }
  std::string payload(header.length, '\0');
  if (auto error = read_exactly(fd, payload.data(), payload.size(), deadline, true)) {
    out.error = *error;
    return out;
  }
  DecodeLimits limits;
  limits.max_bytes = kMaxFramePayload;
  auto value = decode(payload, limits);
  if (!value) {
    out.error = {ChannelFault::garbage, "an undecodable payload: " + value.error().message};
    return out;
  }
  out.frame = Frame{static_cast<FrameKind>(header.kind), header.id, std::move(*value)};
  return out;
}

std::string human_duration(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  if (ms % 60'000 == 0) {
    const auto minutes = ms / 60'000;
    return std::to_string(minutes) + (minutes == 1 ? " minute" : " minutes");
  }
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  const auto tenths = (ms + 50) / 100;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s";
}

}  // namespace passepartout
