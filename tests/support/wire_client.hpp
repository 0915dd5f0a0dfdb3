// Test support: a blocking client of the framed protocol on a plain socket.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "daemon/frame_codec.hpp"
#include "value/value.hpp"

namespace passepartout::testing {

// Connects over loopback TCP or a Unix socket, sends frames and reads them
// back. Every send and read is bounded by the client's wait (a test that hits
// it has hung); a frame that cannot be decoded fails the test. Frames up to
// the protocol's largest are accepted both ways.
class WireClient {
 public:
  static constexpr std::chrono::seconds kDefaultWait{30};

  static WireClient tcp(std::uint16_t port, std::chrono::seconds wait = kDefaultWait);
  // nullopt when the connection is refused, or reset before it completes
  // (a listener that closes drops the connections still in its backlog).
  static std::optional<WireClient> try_tcp(std::uint16_t port, std::chrono::seconds wait = kDefaultWait);
  static WireClient local(const std::filesystem::path& path, std::chrono::seconds wait = kDefaultWait);

  WireClient(WireClient&& other) noexcept;
  WireClient& operator=(WireClient&&) = delete;
  WireClient(const WireClient&) = delete;
  WireClient& operator=(const WireClient&) = delete;
  ~WireClient();

  void close();
  // Closes with a reset instead of an orderly end of stream.
  void reset();
  // Sends the end of stream but keeps reading.
  void shutdown_write();

  void send_raw(std::string_view bytes);
  void send(const Value& message);
  void send(std::string_view message_text);  // an s-expression

  // The next frame; nullopt when the peer closed (or reset) the connection.
  std::optional<Value> read_frame();
  Value expect_frame();
  // Reads the handshake every connection starts with.
  Value expect_handshake();
  // Sends `message_text` and returns the next frame.
  Value request(std::string_view message_text);
  // True when the peer closed with no further frame; then closes this end too.
  bool closed_by_server();

 private:
  WireClient(int fd, std::chrono::seconds wait);

  int fd_ = -1;
  std::chrono::seconds wait_;
  FrameDecoder decoder_{FrameLimits{kMaxFrameCodePoints, 128, 4096}};
};

}  // namespace passepartout::testing
