// Client: a small blocking connection to a running daemon (Unix socket or
// loopback TCP) that reads the handshake and exchanges framed messages.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>

#include "base/result.hpp"
#include "daemon/frame_codec.hpp"
#include "value/value.hpp"

namespace passepartout::cli {

// Where the daemon listens: a Unix socket path, or a TCP host and port.
struct Endpoint {
  std::filesystem::path socket_path;  // used when non-empty
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;

  bool is_tcp() const noexcept { return socket_path.empty(); }
  // "/run/user/1000/passepartout.sock" or "127.0.0.1:9105", for messages.
  std::string describe() const;
};

// True when something accepts a connection at `endpoint` within `timeout`
// (closed again at once); otherwise `why` says what happened.
bool is_listening(const Endpoint& endpoint, std::chrono::milliseconds timeout, std::string& why);

// Why a Client call failed; the Error's message says it for people.
enum class ClientFailure {
  unreachable,  // connect failed or timed out (nothing listens there)
  closed,       // the daemon ended the connection (orderly or reset)
  timeout,      // no complete frame before the deadline
  bad_frame,    // the daemon sent bytes that are no frame
  io,           // any other socket error
};

struct ClientError {
  ClientFailure failure = ClientFailure::io;
  std::string message;
};

// One connection. Blocking calls, each bounded by a deadline; not
// thread-safe (one thread uses it). Move-only; closes the socket on
// destruction.
class Client {
 public:
  using Clock = std::chrono::steady_clock;

  Client() = default;
  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Connects within `connect_timeout` and reads the handshake within the same
  // bound (closing any earlier connection first). A daemon that answers with
  // an error response instead (BUSY, SHUTTING-DOWN) fails with its message.
  bool open(const Endpoint& endpoint, std::chrono::milliseconds connect_timeout, ClientError& error);
  bool is_open() const noexcept { return fd_ >= 0; }
  // False when the daemon has ended the connection (a restart, a stop)
  // since the last read: looked at without waiting and without reading.
  bool alive() const noexcept;
  // The handshake frame the daemon sent first.
  const Value& handshake() const noexcept { return handshake_; }
  // The handshake's :PAYLOAD :VERSION, or empty.
  std::string daemon_version() const;

  // Sends one frame, waiting at most until `deadline` for the socket to take it.
  bool send(const Value& message, Clock::time_point deadline, ClientError& error);
  // The next frame, waiting at most until `deadline`. On failure `error` says
  // why and the connection stays usable only after a timeout.
  bool read(Value& frame, Clock::time_point deadline, ClientError& error);

  void close() noexcept;

 private:
  int fd_ = -1;
  bool eof_ = false;  // the daemon ended its side; what was decoded can still be read
  Endpoint endpoint_;
  FrameDecoder decoder_;
  Value handshake_;
};

}  // namespace passepartout::cli
