// Server: listeners (Unix socket, TCP), connections with their strands, write
// queues and deadlines, reply sinks, and the graceful stop.
#include "daemon/server.hpp"

// GCC 12 reports a "potential null pointer dereference" inside Asio's epoll
// reactor once it is inlined here (a false positive: the scheduler's thread
// info is always set on an io thread); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#pragma GCC diagnostic pop

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/log.hpp"

namespace passepartout {

namespace asio = boost::asio;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;
// Sockets and timers name their executor's type: with the type-erased
// any_io_executor, every asynchronous operation copied the strand into a
// heap-allocated wrapper (ten allocations a request).
using Strand = asio::strand<asio::io_context::executor_type>;
using GenericSocket = asio::basic_stream_socket<asio::generic::stream_protocol, Strand>;
using Timer = asio::basic_waitable_timer<std::chrono::steady_clock, asio::wait_traits<std::chrono::steady_clock>, Strand>;

const char* to_string(Transport transport) noexcept {
  switch (transport) {
    case Transport::unix_socket: return "unix";
    case Transport::tcp: return "tcp";
  }
  return "tcp";
}

namespace {

constexpr std::string_view kComponent = "daemon";
constexpr std::size_t kReadBufferSize = std::size_t{16} * 1024;
// Frames gathered into one write at most.
constexpr std::size_t kMaxWriteBatch = 64;
// After the grace period, how long stop() waits for forcibly closed connections.
constexpr auto kForceCloseWait = std::chrono::seconds(2);
// Pause before accepting again after accept() failed (e.g. out of descriptors).
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

// Equal length and content, in time independent of where they differ.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    difference = static_cast<unsigned char>(difference | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i])));
  }
  return difference == 0;
}

std::string errno_text(int error) { return std::error_code(error, std::system_category()).message(); }

std::string milliseconds_text(std::chrono::milliseconds duration) {
  return std::to_string(duration.count()) + " ms";
}

class Connection;

// What reply sinks need from the server: the codec and the gate that keeps
// them from posting to an io_context being torn down. Deliberately holds no
// handler, so a handler keeping sinks forms no ownership cycle.
struct ReplyHub {
  explicit ReplyHub(const FrameLimits& limits) : codec(limits) {}

  const FrameCodec codec;
  // Sinks post to a connection only under this lock while posts_open.
  std::mutex posts_mutex;
  bool posts_open = true;
};

// What the listeners, the connections and the reply sinks share. Lives as
// long as any of them.
struct ServerState {
  ServerState(ServerOptions server_options, std::shared_ptr<RequestHandler> request_handler, HealthProbe probe)
      : options(std::move(server_options)),
        codec(options.frame_limits),
        hub(std::make_shared<ReplyHub>(options.frame_limits)),
        handler(std::move(request_handler)),
        health(std::move(probe)) {}

  HealthReport health_report() const {
    if (!health) return {};
    try {
      return health();
    } catch (const std::exception& error) {
      log_message(LogLevel::warn, kComponent, std::string("health probe failed: ") + error.what());
    } catch (...) {
      log_message(LogLevel::warn, kComponent, "health probe failed");
    }
    return {};
  }

  // The connections still alive; the caller holds connections_mutex.
  std::vector<std::shared_ptr<Connection>> open_connections() const;

  void unregister(std::uint64_t id) {
    {
      std::lock_guard lock(connections_mutex);
      auto found = connections.find(id);
      if (found == connections.end()) return;
      if (found->second.transport == Transport::unix_socket) {
        --open_unix;
      } else {
        --open_tcp;
        auto peer = per_peer.find(found->second.peer_address);
        if (peer != per_peer.end() && --peer->second == 0) per_peer.erase(peer);
      }
      connections.erase(found);
    }
    connections_changed.notify_all();
  }

  // Counts `bytes` of replies queued (positive) or written or dropped
  // (negative); true when all connections together now hold more than the budget.
  bool add_queued(std::int64_t bytes) noexcept {
    const std::int64_t total = queued_write_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    return bytes > 0 && total > static_cast<std::int64_t>(options.max_total_queued_write_bytes);
  }
  // Closes the connection holding the most unread replies (see
  // ServerOptions::max_total_queued_write_bytes). Any thread.
  void shed_largest();

  const ServerOptions options;
  const FrameCodec codec;
  const std::shared_ptr<ReplyHub> hub;
  const std::shared_ptr<RequestHandler> handler;
  const HealthProbe health;
  std::string handshake_frame;  // set before the first accept

  std::atomic<std::uint64_t> connections_total{0};
  std::atomic<std::uint64_t> connections_rejected{0};
  std::atomic<std::uint64_t> frames_in{0};
  std::atomic<std::uint64_t> frames_out{0};
  std::atomic<std::uint64_t> errors{0};
  std::atomic<std::uint64_t> next_connection_id{1};
  std::atomic<std::uint64_t> closed_for_replies{0};
  std::atomic<std::int64_t> queued_write_bytes{0};  // all connections' unwritten reply bytes

  // A connection as the registry counts it.
  struct Registered {
    std::weak_ptr<Connection> connection;
    Transport transport;
    std::string peer_address;  // TCP: the client's address without its port
  };
  mutable std::mutex connections_mutex;  // guards connections, the counts and draining
  mutable std::condition_variable connections_changed;
  std::unordered_map<std::uint64_t, Registered> connections;
  std::size_t open_tcp = 0;
  std::size_t open_unix = 0;
  std::unordered_map<std::string, std::size_t> per_peer;  // open TCP connections by address
  bool draining = false;
};

// "127.0.0.1:5000" -> "127.0.0.1"; "::1:5000" -> "::1".
std::string address_of(const std::string& peer) {
  const std::size_t colon = peer.rfind(':');
  return colon == std::string::npos ? peer : peer.substr(0, colon);
}

}  // namespace

namespace detail {

// One request's reply: shared by the copies of its WireReply.
struct ReplyState {
  ReplyState(std::weak_ptr<Connection> reply_connection, std::shared_ptr<ReplyHub> reply_hub, std::uint64_t id,
             ConnectionInfo connection_info)
      : connection(std::move(reply_connection)),
        hub(std::move(reply_hub)),
        request_id(id),
        info(std::move(connection_info)) {}
  ReplyState(const ReplyState&) = delete;
  ReplyState& operator=(const ReplyState&) = delete;

  // The last copy of the sink is gone: the request ends, with no final frame
  // if none was sent.
  ~ReplyState() {
    if (finished.exchange(true)) return;
    try {
      post(std::nullopt, true);
    } catch (...) {  // NOLINT(bugprone-empty-catch): nothing to report to; the connection closes on its own
    }
  }

  // Hands a frame (or just the end of the request) to the connection's strand.
  bool post(std::optional<std::string> frame, bool final);

  const std::weak_ptr<Connection> connection;
  const std::shared_ptr<ReplyHub> hub;
  const std::uint64_t request_id;
  const ConnectionInfo info;
  std::atomic<bool> finished{false};
};

}  // namespace detail

namespace {

// One accepted socket: handshake, decoding, the request queue, the write
// queue and the deadlines. Every member below runs on the connection's
// strand (the socket's executor); the public entry points post there and
// may be called from any thread.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<ServerState> server, GenericSocket socket, ConnectionInfo info)
      : server_(std::move(server)),
        strand_(socket.get_executor()),
        socket_(std::move(socket)),
        timer_(strand_),
        info_(std::move(info)),
        decoder_(server_->options.frame_limits) {}

  void start() {
    asio::post(strand_, [self = shared_from_this()] { self->on_start(); });
  }
  void drain() {
    asio::post(strand_, [self = shared_from_this()] { self->on_drain(); });
  }
  void force_close() {
    asio::post(strand_, [self = shared_from_this()] { self->close_now(); });
  }
  // From any thread. Deliveries wait in the inbox for one turn of the strand,
  // which takes all that arrived meanwhile (a reply and the end of its
  // request, say) and writes their frames together. defer: from a thread of
  // the same io_context (the pipeline's), that turn comes once its task
  // returns, without waking another.
  void deliver(std::uint64_t request_id, std::optional<std::string> frame, bool final) {
    bool first = false;
    {
      std::lock_guard lock(inbox_mutex_);
      first = inbox_.empty();
      inbox_.push_back(Delivery{request_id, std::move(frame), final});
    }
    if (first) asio::defer(strand_, [self = shared_from_this()] { self->take_inbox(); });
  }
  bool is_closed() const noexcept { return closed_flag_.load(std::memory_order_acquire); }
  // Reply bytes queued and not yet written, as of the strand's last change. Any thread.
  std::size_t queued_bytes() const noexcept { return queued_shared_.load(std::memory_order_relaxed); }
  // Closes the connection for holding `bytes` of unread replies, the most of
  // any, while all together are over the budget. From any thread.
  void close_for_replies(std::size_t bytes) {
    asio::post(strand_, [self = shared_from_this(), bytes] {
      if (self->closed_) return;
      self->server_->closed_for_replies.fetch_add(1, std::memory_order_relaxed);
      self->server_->errors.fetch_add(1, std::memory_order_relaxed);
      log_message(LogLevel::warn, kComponent,
                  self->describe() + ": closed: its " + std::to_string(bytes) +
                      " bytes of unread replies were the most while all connections together held more than " +
                      std::to_string(self->server_->options.max_total_queued_write_bytes) + " bytes");
      self->close_now();
    });
  }

 private:
  struct Delivery {
    std::uint64_t request_id;
    std::optional<std::string> frame;
    bool final;
  };
  // A decoded request, or the error response after which the connection closes.
  struct Item {
    Value message;
    std::optional<Value> final_error;
  };
  enum class Phase { none, idle, reading, busy };

  void on_start() {
    if (server_->options.handshake_timeout.count() > 0) {
      handshake_deadline_ = Clock::now() + server_->options.handshake_timeout;
    }
    timer_.expires_at(Clock::time_point::max());
    wait_deadline();
    // Reads after a wait for readiness must not block: see start_read.
    error_code not_set;
    socket_.non_blocking(true, not_set);
    non_blocking_ = !not_set;
    log_message(LogLevel::debug, kComponent,
                "connection " + std::to_string(info_.connection_id) + " from " + info_.peer + " (" +
                    to_string(info_.transport) + ") opened");
    queue_frame(server_->handshake_frame);
    update_deadline();
    start_read();
  }

  void on_drain() {
    if (closed_ || draining_) return;
    draining_ = true;
    input_closed_ = true;
    process_next();
  }

  void take_inbox() {
    {
      std::lock_guard lock(inbox_mutex_);
      taken_.swap(inbox_);  // both keep their capacity
    }
    {
      // The frames leave together below; taking_inbox_ is reset even if a
      // delivery throws (the handler's exception then reaches the loop).
      taking_inbox_ = true;
      struct Reset {
        Connection& self;
        ~Reset() {
          self.taking_inbox_ = false;
          self.taken_.clear();
        }
      } reset{*this};
      for (Delivery& delivery : taken_) on_deliver(delivery.request_id, std::move(delivery.frame), delivery.final);
    }
    if (!closed_ && !writing_ && !writes_.empty()) write_next();
  }

  void on_deliver(std::uint64_t request_id, std::optional<std::string> frame, bool final) {
    if (closed_ || !in_flight_ || request_id != request_id_) return;
    if (frame) queue_frame(std::move(*frame));
    if (final) {
      in_flight_ = false;
      process_next();
    }
  }

  // --- reading ---------------------------------------------------------------

  void start_read() {
    if (reading_ || closed_ || eof_) return;
    // Too many requests waiting: stop reading until the handler catches up.
    if (!lingering_ && !input_closed_ && pending_.size() >= server_->options.max_queued_requests) return;
    reading_ = true;
    // A read that did not fill the buffer emptied the socket, so the next
    // bytes cannot be there yet: wait until they are, then read. Asio's read
    // would first try one that fails (a recv returning EAGAIN in every
    // request). Only in the handler of that read: the reactor has not polled
    // since, so it cannot have taken the edge-triggered readiness of newer
    // bytes while no operation waited for it.
    if (std::exchange(drained_, false) && non_blocking_) {
      socket_.async_wait(asio::socket_base::wait_read,
                         [self = shared_from_this()](const error_code& error) { self->on_readable(error); });
      return;
    }
    socket_.async_read_some(asio::buffer(read_buffer_),
                            [self = shared_from_this()](const error_code& error, std::size_t size) {
                              self->on_read(error, size);
                            });
  }

  void on_readable(const error_code& error) {
    if (error || closed_) {
      on_read(error, 0);
      return;
    }
    error_code read_error;
    const std::size_t size = socket_.read_some(asio::buffer(read_buffer_), read_error);
    if (read_error == asio::error::would_block || read_error == asio::error::try_again) {
      reading_ = false;  // readiness without bytes: still empty, wait again
      drained_ = true;
      start_read();
      return;
    }
    on_read(read_error, size);
  }

  void on_read(const error_code& error, std::size_t size) {
    reading_ = false;
    if (closed_) return;
    if (error) {
      if (lingering_ || error != asio::error::eof) {
        if (!lingering_ && error != asio::error::connection_reset) {
          log_message(LogLevel::debug, kComponent, describe() + ": read failed: " + error.message());
        }
        close_now();
        return;
      }
      // The client has finished sending; what it sent is still answered.
      eof_ = true;
      if (!input_closed_) {
        input_closed_ = true;
        if (!decoder_.finish()) report_frame_error();
      }
      process_next();
      return;
    }
    drained_ = size < read_buffer_.size();  // for the next start_read, in this handler
    // Once input is closed (error, drain, closing) bytes are read only to be dropped.
    if (!lingering_ && !input_closed_) {
      decoder_.feed(std::string_view(read_buffer_.data(), size));
      while (auto message = decoder_.next()) {
        server_->frames_in.fetch_add(1, std::memory_order_relaxed);
        ++frames_decoded_;
        pending_.push_back(Item{std::move(*message), std::nullopt});
      }
      if (decoder_.failed()) report_frame_error();
      process_next();
    }
    start_read();
  }

  void report_frame_error() {
    const FrameError& error = *decoder_.error();
    server_->errors.fetch_add(1, std::memory_order_relaxed);
    log_message(LogLevel::warn, kComponent, describe() + ": malformed frame (" + to_string(error.kind) + "): " +
                                                error.message);
    input_closed_ = true;
    pending_.push_back(Item{Value(), make_frame_error_response(error)});
  }

  // --- requests --------------------------------------------------------------

  void process_next() {
    while (!closed_ && !close_after_write_ && !in_flight_ && !pending_.empty()) {
      Item item = std::move(pending_.front());
      pending_.pop_front();
      if (item.final_error) {
        pending_.clear();
        input_closed_ = true;
        queue_message(*item.final_error);
        break;
      }
      if (is_health_check(item.message)) {
        queue_message(make_health_response(server_->health_report()));
        continue;
      }
      if (draining_) {
        queue_message(make_error_response(wire_error::kShuttingDown, "the daemon is stopping; request not handled"));
        continue;
      }
      dispatch(std::move(item.message));
    }
    if (!closed_ && !close_after_write_ && !in_flight_ && pending_.empty() && input_closed_) begin_close();
    update_deadline();
    start_read();
  }

  void dispatch(Value message) {
    ConnectionInfo info = info_;
    const auto token = auth_token(message);
    const std::string& expected = server_->options.auth_token;
    info.authenticated = info_.transport == Transport::unix_socket ||
                         (token.has_value() && !expected.empty() && constant_time_equal(*token, expected));
    if (message.get("AUTH") != nullptr) message = message.without("AUTH");

    in_flight_ = true;
    request_id_ = ++last_request_id_;
    WireReply sink(std::make_shared<detail::ReplyState>(weak_from_this(), server_->hub, request_id_, info));
    // `keep` lets a failed handler's reply be finished here; when the handler
    // dropped its copy unfinished, releasing `keep` ends the request.
    WireReply keep = sink;
    try {
      server_->handler->handle(std::move(message), info, std::move(sink));
    } catch (const std::exception& error) {
      fail_request(keep, error.what());
    } catch (...) {
      fail_request(keep, "unknown exception");
    }
  }

  void fail_request(WireReply& reply, std::string_view what) {
    server_->errors.fetch_add(1, std::memory_order_relaxed);
    log_message(LogLevel::error, kComponent, describe() + ": request handler failed: " + std::string(what));
    reply.finish(make_error_response(wire_error::kInternal, "request failed: " + std::string(what)));
  }

  // --- writing ---------------------------------------------------------------

  void queue_message(const Value& message) {
    auto frame = server_->codec.encode(message);
    if (!frame) {
      log_message(LogLevel::error, kComponent, describe() + ": cannot encode a reply: " + frame.error().message);
      return;
    }
    queue_frame(std::move(*frame));
  }

  void queue_frame(std::string frame) {
    if (closed_) return;
    queued_write_bytes_ += frame.size();
    queued_shared_.store(queued_write_bytes_, std::memory_order_relaxed);
    const bool over_total = server_->add_queued(static_cast<std::int64_t>(frame.size()));
    if (queued_write_bytes_ > server_->options.max_queued_write_bytes) {
      server_->errors.fetch_add(1, std::memory_order_relaxed);
      log_message(LogLevel::warn, kComponent, describe() + ": the client is not reading (" +
                                                  std::to_string(queued_write_bytes_) +
                                                  " bytes of replies queued); closing");
      close_now();
      return;
    }
    writes_.push_back(std::move(frame));
    schedule_flush();
    if (over_total) server_->shed_largest();
  }

  // For the connection's own frames (the handshake, health answers, errors):
  // the write starts after the handlers already queued on the strand, so
  // frames queued together leave in one write. Delivered frames are written
  // by take_inbox() at the end of its turn instead.
  void schedule_flush() {
    if (writing_ || flush_scheduled_ || taking_inbox_) return;
    flush_scheduled_ = true;
    asio::defer(strand_, [self = shared_from_this()] {
      self->flush_scheduled_ = false;
      if (!self->closed_ && !self->writing_ && !self->writes_.empty()) self->write_next();
    });
  }

  // Writes every queued frame (up to kMaxWriteBatch) with one gathering write:
  // at once when the socket takes it all (the usual case), otherwise what is
  // left asynchronously.
  void write_next() {
    writing_ = true;
    write_batch_.clear();
    batch_frames_ = std::min(writes_.size(), kMaxWriteBatch);
    for (std::size_t i = 0; i < batch_frames_; ++i) write_batch_.push_back(asio::buffer(writes_[i]));
    if (non_blocking_) {
      error_code error;
      std::size_t written = socket_.write_some(write_batch_, error);
      if (error != asio::error::would_block && error != asio::error::try_again) {
        if (error || written == asio::buffer_size(write_batch_)) {
          on_write(error);  // done (or failed) without a turn of the reactor
          return;
        }
      } else {
        written = 0;
      }
      // Only what the socket did not take is left to write.
      auto first = write_batch_.begin();
      while (written >= first->size()) {
        written -= first->size();
        ++first;
      }
      *first += written;
      write_batch_.erase(write_batch_.begin(), first);
    }
    asio::async_write(socket_, write_batch_,
                      [self = shared_from_this()](const error_code& error, std::size_t) { self->on_write(error); });
  }

  void on_write(const error_code& error) {
    writing_ = false;
    if (closed_) return;
    if (error) {
      log_message(LogLevel::debug, kComponent, describe() + ": write failed: " + error.message());
      close_now();
      return;
    }
    const std::size_t written = batch_frames_;
    std::size_t written_bytes = 0;
    for (std::size_t i = 0; i < written; ++i) {
      written_bytes += writes_.front().size();
      writes_.pop_front();
    }
    queued_write_bytes_ -= written_bytes;
    queued_shared_.store(queued_write_bytes_, std::memory_order_relaxed);
    server_->add_queued(-static_cast<std::int64_t>(written_bytes));
    write_batch_.clear();
    server_->frames_out.fetch_add(written, std::memory_order_relaxed);
    if (!writes_.empty()) {
      write_next();
    } else if (close_after_write_) {
      shutdown_output();
    }
  }

  // --- closing ---------------------------------------------------------------

  // Closes once the queued frames are written; a client that does not read
  // them within `linger` is cut off.
  void begin_close() {
    if (close_after_write_ || closed_) return;
    close_after_write_ = true;
    if (!writing_ && writes_.empty()) {
      shutdown_output();
    } else {
      set_deadline(Clock::now() + server_->options.linger);
    }
  }

  // Everything is written: send FIN and drain what the client still sends
  // until it closes (bounded by `linger`), so closing with unread input does
  // not reset the connection and destroy the last frame in flight.
  void shutdown_output() {
    error_code ignored;
    socket_.shutdown(asio::socket_base::shutdown_send, ignored);
    lingering_ = true;
    if (eof_) {
      close_now();
      return;
    }
    set_deadline(Clock::now() + server_->options.linger);
    start_read();
  }

  void close_now() {
    if (closed_) return;
    closed_ = true;
    closed_flag_.store(true, std::memory_order_release);
    server_->add_queued(-static_cast<std::int64_t>(queued_write_bytes_));  // dropped with the connection
    queued_write_bytes_ = 0;
    queued_shared_.store(0, std::memory_order_relaxed);
    error_code ignored;
    socket_.close(ignored);
    timer_.cancel();
    pending_.clear();
    log_message(LogLevel::debug, kComponent, describe() + " closed");
    server_->unregister(info_.connection_id);
  }

  // --- deadlines -------------------------------------------------------------

  // One wait is always outstanding while the connection is open; moving the
  // expiry cancels it, and the handler simply waits again for the new one.
  void wait_deadline() {
    timer_.async_wait([self = shared_from_this()](const error_code&) { self->check_deadline(); });
  }

  // The deadline of the current phase. The timer fires at or before it, and
  // is moved only when the deadline comes earlier: a request that pushes the
  // idle deadline later leaves the timer alone (moving it costs the reactor a
  // wake-up), and the timer, when it fires early, waits again for the rest.
  void set_deadline(Clock::time_point deadline) {
    deadline_ = deadline;
    if (deadline < timer_.expiry()) timer_.expires_at(deadline);  // the pending wait ends; check_deadline waits anew
  }

  void check_deadline() {
    if (closed_) return;
    const Clock::time_point now = Clock::now();
    if (deadline_ <= now) {
      deadline_ = Clock::time_point::max();
      timer_.expires_at(Clock::time_point::max());
      on_deadline();
      if (closed_) return;
    } else if (timer_.expiry() <= now) {
      timer_.expires_at(deadline_);
    }
    wait_deadline();
  }

  void on_deadline() {
    if (lingering_ || close_after_write_) {
      close_now();
      return;
    }
    if (frames_decoded_ == 0 && Clock::now() >= handshake_deadline_) {
      server_->errors.fetch_add(1, std::memory_order_relaxed);
      const std::string what =
          "no complete request within " + milliseconds_text(server_->options.handshake_timeout) + " of connecting";
      log_message(LogLevel::warn, kComponent, describe() + ": " + what);
      expire(what);
    } else if (phase_ == Phase::reading) {
      server_->errors.fetch_add(1, std::memory_order_relaxed);
      const std::string what = "a frame was not complete within " + milliseconds_text(server_->options.read_timeout);
      log_message(LogLevel::warn, kComponent, describe() + ": " + what);
      expire(what);
    } else if (phase_ == Phase::idle) {
      const std::string what = "the connection was idle for " + milliseconds_text(server_->options.idle_timeout);
      log_message(LogLevel::debug, kComponent, describe() + ": " + what);
      expire(what);
    }
  }

  void expire(const std::string& what) {
    input_closed_ = true;
    pending_.push_back(Item{Value(), make_error_response(wire_error::kTimeout, what)});
    process_next();
  }

  void update_deadline() {
    if (closed_ || close_after_write_) return;
    // While reading is paused for a slow handler, a half-received frame is
    // the server's delay, not the client's: no read deadline then.
    const bool paused = pending_.size() >= server_->options.max_queued_requests;
    Phase phase = Phase::busy;
    if (!input_closed_ && decoder_.in_frame() && !paused) {
      phase = Phase::reading;
    } else if (!input_closed_ && !in_flight_ && pending_.empty()) {
      phase = Phase::idle;
    }
    // A new frame begun in the same read as the previous one ended gets its own deadline.
    if (phase == phase_ && (phase != Phase::reading || deadline_frame_ == frames_decoded_)) return;
    phase_ = phase;
    deadline_frame_ = frames_decoded_;
    const ServerOptions& options = server_->options;
    Clock::time_point deadline = Clock::time_point::max();
    if (phase == Phase::reading && options.read_timeout.count() > 0) {
      deadline = Clock::now() + options.read_timeout;
    } else if (phase == Phase::idle && options.idle_timeout.count() > 0) {
      deadline = Clock::now() + options.idle_timeout;
    }
    // Until its first complete request, a connection has the handshake's bound too.
    if (frames_decoded_ == 0) deadline = std::min(deadline, handshake_deadline_);
    set_deadline(deadline);
  }

  std::string describe() const {
    return "connection " + std::to_string(info_.connection_id) + " (" + info_.peer + ")";
  }

  const std::shared_ptr<ServerState> server_;
  const Strand strand_;
  GenericSocket socket_;
  Timer timer_;
  Clock::time_point deadline_ = Clock::time_point::max();  // see set_deadline
  Clock::time_point handshake_deadline_ = Clock::time_point::max();  // for the first complete request
  const ConnectionInfo info_;
  FrameDecoder decoder_;
  std::array<char, kReadBufferSize> read_buffer_{};

  std::deque<Item> pending_;
  std::deque<std::string> writes_;
  std::vector<asio::const_buffer> write_batch_;  // what the write in progress has yet to write
  std::size_t batch_frames_ = 0;                 // the frames it writes, at the front of writes_
  std::size_t queued_write_bytes_ = 0;
  std::atomic<std::size_t> queued_shared_{0};  // queued_write_bytes_, for shed_largest() on other threads
  std::uint64_t last_request_id_ = 0;
  std::uint64_t request_id_ = 0;
  std::uint64_t frames_decoded_ = 0;
  std::uint64_t deadline_frame_ = 0;
  Phase phase_ = Phase::none;
  bool in_flight_ = false;
  bool reading_ = false;
  bool drained_ = false;       // the last read emptied the socket (see start_read)
  bool non_blocking_ = false;  // reads and writes fail rather than block
  bool writing_ = false;
  bool flush_scheduled_ = false;
  bool taking_inbox_ = false;  // take_inbox() writes what on_deliver() queues
  std::vector<Delivery> taken_;  // take_inbox()'s, kept for its capacity
  std::mutex inbox_mutex_;       // guards inbox_
  std::vector<Delivery> inbox_;  // deliveries not yet taken by the strand
  bool eof_ = false;
  bool input_closed_ = false;  // no further requests are taken
  bool draining_ = false;
  bool close_after_write_ = false;
  bool lingering_ = false;
  bool closed_ = false;
  std::atomic<bool> closed_flag_{false};  // closed_, for other threads
};

}  // namespace

std::vector<std::shared_ptr<Connection>> ServerState::open_connections() const {
  std::vector<std::shared_ptr<Connection>> open;
  open.reserve(connections.size());
  for (const auto& entry : connections) {
    if (auto connection = entry.second.connection.lock()) open.push_back(std::move(connection));
  }
  return open;
}

void ServerState::shed_largest() {
  std::shared_ptr<Connection> largest;
  std::size_t most = 0;
  {
    std::lock_guard lock(connections_mutex);
    for (const auto& entry : connections) {
      auto connection = entry.second.connection.lock();
      if (!connection) continue;
      const std::size_t queued = connection->queued_bytes();
      if (queued > most) {
        most = queued;
        largest = std::move(connection);
      }
    }
  }
  if (largest) largest->close_for_replies(most);
}

bool detail::ReplyState::post(std::optional<std::string> frame, bool final) {
  std::lock_guard lock(hub->posts_mutex);
  if (!hub->posts_open) return false;
  const std::shared_ptr<Connection> target = connection.lock();
  if (!target || target->is_closed()) return false;
  target->deliver(request_id, std::move(frame), final);
  return true;
}

// --- WireReply ------------------------------------------------------------------

bool WireReply::send(const Value& frame) {
  if (!state_ || state_->finished.load(std::memory_order_acquire)) return false;
  auto encoded = state_->hub->codec.encode(frame);
  if (!encoded) {
    log_message(LogLevel::warn, kComponent, "reply frame not sent: " + encoded.error().message);
    return false;
  }
  return state_->post(std::move(*encoded), false);
}

bool WireReply::finish(const Value& frame) {
  if (!state_ || state_->finished.exchange(true)) return false;
  const FrameCodec& codec = state_->hub->codec;
  auto encoded = codec.encode(frame);
  if (!encoded) {
    log_message(LogLevel::warn, kComponent, "final reply frame not sent: " + encoded.error().message);
    auto replacement = codec.encode(make_error_response(wire_error::kReplyTooLarge, encoded.error().message));
    state_->post(replacement ? std::optional<std::string>(std::move(*replacement)) : std::nullopt, true);
    return false;
  }
  return state_->post(std::move(*encoded), true);
}

void WireReply::finish() {
  if (state_ && !state_->finished.exchange(true)) state_->post(std::nullopt, true);
}

bool WireReply::is_open() const noexcept {
  if (!state_ || state_->finished.load(std::memory_order_acquire)) return false;
  const std::shared_ptr<Connection> target = state_->connection.lock();
  return target && !target->is_closed();
}

const ConnectionInfo& WireReply::connection() const noexcept {
  static const ConnectionInfo kNone;
  return state_ ? state_->info : kNone;
}

// --- listeners --------------------------------------------------------------------

namespace {

// Sends a refused connection away for almost nothing: the error response in
// one non-blocking write, then closed at once (no connection, no read
// buffer, no linger). A client that sent bytes first may see a reset instead.
void refuse(const std::shared_ptr<ServerState>& server, GenericSocket& socket, const Value& rejection) {
  auto frame = server->codec.encode(rejection);
  error_code ignored;
  socket.non_blocking(true, ignored);
  if (frame) socket.write_some(asio::buffer(*frame), ignored);  // the error instead of the handshake
  socket.shutdown(asio::socket_base::shutdown_both, ignored);
  socket.close(ignored);
}

// Registers `socket` as a connection and starts it, or sends it away when its
// transport or its peer is at its limit, or the server is stopping.
void admit(const std::shared_ptr<ServerState>& server, GenericSocket socket, ConnectionInfo info) {
  info.connection_id = server->next_connection_id.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t id = info.connection_id;
  const bool tcp = info.transport == Transport::tcp;
  std::string address = tcp ? address_of(info.peer) : std::string();
  std::optional<Value> rejection;
  {
    std::lock_guard lock(server->connections_mutex);
    const ServerOptions& options = server->options;
    if (server->draining) {
      rejection = make_error_response(wire_error::kShuttingDown, "the daemon is stopping");
    } else if (!tcp && server->open_unix >= options.max_unix_connections) {
      rejection = make_error_response(wire_error::kBusy, "too many connections on the Unix socket (the limit is " +
                                                             std::to_string(options.max_unix_connections) + ")");
    } else if (tcp && server->open_tcp >= options.max_connections) {
      rejection = make_error_response(wire_error::kBusy, "too many TCP connections (the limit is " +
                                                             std::to_string(options.max_connections) + ")");
    } else if (tcp && server->per_peer[address] >= options.max_connections_per_peer) {
      rejection = make_error_response(wire_error::kBusy, "too many connections from " + address + " (the limit is " +
                                                             std::to_string(options.max_connections_per_peer) + ")");
    }
    if (!rejection) {
      (tcp ? server->open_tcp : server->open_unix) += 1;
      if (tcp) ++server->per_peer[address];
    } else if (tcp && server->per_peer[address] == 0) {
      server->per_peer.erase(address);  // operator[] above made it
    }
  }
  if (rejection) {
    server->connections_rejected.fetch_add(1, std::memory_order_relaxed);
    log_message(LogLevel::warn, kComponent, "connection " + std::to_string(id) + " from " + info.peer + " refused: " +
                                                std::string(rejection->path({"PAYLOAD", "MESSAGE"}).text()));
    refuse(server, socket, *rejection);
    return;
  }
  // Not make_shared: reply sinks may keep weak references long after the
  // connection is gone, and they should not keep its buffers allocated.
  // NOLINTNEXTLINE(modernize-make-shared)
  auto connection = std::shared_ptr<Connection>(new Connection(server, std::move(socket), std::move(info)));
  {
    std::lock_guard lock(server->connections_mutex);
    server->connections.emplace(id, ServerState::Registered{connection, tcp ? Transport::tcp : Transport::unix_socket,
                                                            std::move(address)});
    server->connections_total.fetch_add(1, std::memory_order_relaxed);
  }
  server->connections_changed.notify_all();
  connection->start();
}

// Accepts connections on one endpoint, on its own strand (on the first
// io_context), and hands each new connection to the next io_context in turn.
template <class Protocol>
class Listener : public std::enable_shared_from_this<Listener<Protocol>> {
 public:
  using Acceptor = typename Protocol::acceptor;
  using Socket = typename Protocol::socket::template rebind_executor<Strand>::other;

  Listener(std::vector<asio::io_context*> contexts, std::shared_ptr<ServerState> server, Transport transport)
      : contexts_(std::move(contexts)),
        server_(std::move(server)),
        strand_(asio::make_strand(*contexts_.front())),
        acceptor_(strand_),
        retry_timer_(strand_),
        transport_(transport) {}

  // For setting up before start(), on the starting thread.
  Acceptor& acceptor() noexcept { return acceptor_; }

  void start() {
    asio::post(strand_, [self = this->shared_from_this()] { self->accept(); });
  }
  void close() {
    asio::post(strand_, [self = this->shared_from_this()] {
      self->closed_ = true;
      error_code ignored;
      self->acceptor_.close(ignored);
      self->retry_timer_.cancel();
      std::lock_guard lock(self->close_mutex_);
      self->acceptor_closed_ = true;
      self->close_done_.notify_all();
    });
  }
  // Waits until the acceptor closed (after close()), so the port and socket
  // no longer accept; false when `timeout` passed first (the io_context is
  // not running). Never from an io thread.
  bool wait_closed(std::chrono::milliseconds timeout) {
    std::unique_lock lock(close_mutex_);
    return close_done_.wait_for(lock, timeout, [this] { return acceptor_closed_; });
  }

 private:
  void accept() {
    if (closed_) return;
    asio::io_context& context = *contexts_[next_context_++ % contexts_.size()];
    auto peer = std::make_shared<Socket>(asio::make_strand(context));
    acceptor_.async_accept(*peer, [self = this->shared_from_this(), peer](const error_code& error) {
      self->on_accept(error, std::move(*peer));
    });
  }

  void on_accept(const error_code& error, Socket peer) {
    if (closed_ || error == asio::error::operation_aborted) return;
    if (error) {
      log_message(LogLevel::warn, kComponent, std::string("accept failed: ") + error.message());
      retry_timer_.expires_after(kAcceptRetryDelay);
      retry_timer_.async_wait([self = this->shared_from_this()](const error_code& waited) {
        if (!waited) self->accept();
      });
      return;
    }
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      // Replies are often two small frames (the answer, then the end of the
      // exchange); with Nagle's algorithm the second waits for the peer's
      // delayed ACK, some 40 ms. Frames are written whole, so send at once.
      error_code ignored;
      peer.set_option(asio::ip::tcp::no_delay(true), ignored);
    }
    ConnectionInfo info;
    info.transport = transport_;
    info.peer = peer_name(peer);
    admit(server_, GenericSocket(std::move(peer)), std::move(info));
    accept();
  }

  std::string peer_name(Socket& peer) const {
    if constexpr (std::is_same_v<Protocol, asio::ip::tcp>) {
      error_code error;
      const auto endpoint = peer.remote_endpoint(error);
      if (error) return "tcp";
      return endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
    } else {
      return server_->options.unix_socket_path.string();
    }
  }

  const std::vector<asio::io_context*> contexts_;
  std::size_t next_context_ = 0;  // on the strand
  const std::shared_ptr<ServerState> server_;
  Strand strand_;
  Acceptor acceptor_;
  asio::steady_timer retry_timer_;
  std::mutex close_mutex_;  // guards acceptor_closed_
  std::condition_variable close_done_;
  bool acceptor_closed_ = false;
  const Transport transport_;
  bool closed_ = false;
};

using TcpListener = Listener<asio::ip::tcp>;
using UnixListener = Listener<asio::local::stream_protocol>;

// Makes room for the Unix socket at `path`: nothing there is fine; a socket
// file nobody answers on is stale and removed; anything else is refused.
Result<void> prepare_unix_path(const std::string& path) {
  if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return fail(ErrorCode::invalid_input, "unix socket path '" + path + "' is " + std::to_string(path.size()) +
                                              " bytes, the limit is " +
                                              std::to_string(sizeof(sockaddr_un{}.sun_path) - 1));
  }
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    const int error = errno;
    if (error == ENOENT) return {};
    return fail(ErrorCode::io_error, "cannot inspect unix socket path '" + path + "': " + errno_text(error));
  }
  if (!S_ISSOCK(status.st_mode)) {
    return fail(ErrorCode::refused, "unix socket path '" + path + "' exists and is not a socket; not replacing it");
  }
  // Non-blocking, so a live server with a full backlog answers EAGAIN instead of blocking us.
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe < 0) return fail(ErrorCode::io_error, "cannot create a socket: " + errno_text(errno));
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int connected = ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  const int error = errno;
  ::close(probe);
  if (connected == 0 || error == EAGAIN || error == EINPROGRESS) {
    return fail(ErrorCode::refused, "another server answers on unix socket '" + path + "'");
  }
  if (error != ECONNREFUSED) {
    return fail(ErrorCode::io_error, "cannot probe unix socket '" + path + "': " + errno_text(error));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return fail(ErrorCode::io_error, "cannot remove stale unix socket '" + path + "': " + errno_text(errno));
  }
  log_message(LogLevel::info, kComponent, "removed stale unix socket '" + path + "'");
  return {};
}

}  // namespace

// --- Server -----------------------------------------------------------------------

struct Server::Impl {
  // Declared first: destroyed last, after everything that uses it.
  std::unique_ptr<asio::io_context> owned_context;
  std::vector<asio::io_context*> contexts;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::vector<std::thread> threads;

  std::shared_ptr<ServerState> state;
  std::shared_ptr<TcpListener> tcp_listener;
  std::shared_ptr<UnixListener> unix_listener;
  std::uint16_t tcp_port = 0;
  std::filesystem::path unix_path;
  dev_t unix_device = 0;
  ino_t unix_inode = 0;

  std::mutex stop_mutex;  // serialises stop()
  bool stopped = false;   // guarded by stop_mutex
  std::mutex unix_path_mutex;  // guards unix_path once serving

  // Waits until the listeners have closed (after begin_stop()); false when
  // `timeout` passed first for either.
  bool wait_listeners_closed(std::chrono::milliseconds timeout) {
    bool closed = true;
    if (tcp_listener) closed = tcp_listener->wait_closed(timeout) && closed;
    if (unix_listener) closed = unix_listener->wait_closed(timeout) && closed;
    return closed;
  }

  // Stops accepting and drains the connections; later calls do nothing.
  void begin_stop() {
    std::vector<std::shared_ptr<Connection>> open;
    {
      std::lock_guard lock(state->connections_mutex);
      if (state->draining) return;
      state->draining = true;
      open = state->open_connections();
    }
    if (tcp_listener) tcp_listener->close();
    if (unix_listener) unix_listener->close();
    {
      std::lock_guard lock(unix_path_mutex);
      remove_unix_socket();
    }
    for (const auto& connection : open) connection->drain();
  }

  // Removes the socket file if it is still the one this server bound.
  void remove_unix_socket() {
    if (unix_path.empty()) return;
    struct stat status {};
    if (::lstat(unix_path.c_str(), &status) == 0 && status.st_dev == unix_device && status.st_ino == unix_inode) {
      ::unlink(unix_path.c_str());
    }
    unix_path.clear();
  }

  Result<void> open_unix(const ServerOptions& options) {
    const std::string path = options.unix_socket_path.string();
    if (auto prepared = prepare_unix_path(path); !prepared) return prepared;
    unix_listener = std::make_shared<UnixListener>(contexts, state, Transport::unix_socket);
    auto& acceptor = unix_listener->acceptor();
    error_code error;
    acceptor.open(asio::local::stream_protocol(), error);
    if (error) return fail(ErrorCode::io_error, "cannot open a unix socket: " + error.message());
    // Linux creates the socket file with the socket's own mode (less the
    // umask): set it before bind so the file never grants more than 0600.
    ::fchmod(acceptor.native_handle(), S_IRUSR | S_IWUSR);
    acceptor.bind(asio::local::stream_protocol::endpoint(path), error);
    if (error) return fail(ErrorCode::io_error, "cannot bind unix socket '" + path + "': " + error.message());
    unix_path = options.unix_socket_path;
    struct stat status {};
    if (::lstat(path.c_str(), &status) != 0 || !S_ISSOCK(status.st_mode) || status.st_uid != ::geteuid()) {
      return fail(ErrorCode::io_error, "unix socket '" + path + "' is not the socket just bound");
    }
    unix_device = status.st_dev;
    unix_inode = status.st_ino;
    // Elsewhere the mode is fixed here; nobody can connect before listen().
    if ((status.st_mode & 07777) != (S_IRUSR | S_IWUSR)) {
      if (::chmod(path.c_str(), S_IRUSR | S_IWUSR) != 0) {
        return fail(ErrorCode::io_error, "cannot make unix socket '" + path + "' mode 0600: " + errno_text(errno));
      }
    }
    acceptor.listen(asio::socket_base::max_listen_connections, error);
    if (error) return fail(ErrorCode::io_error, "cannot listen on unix socket '" + path + "': " + error.message());
    return {};
  }

  Result<void> open_tcp(const ServerOptions& options) {
    error_code error;
    const auto address = asio::ip::make_address(options.tcp_address, error);
    if (error) return fail(ErrorCode::invalid_input, "'" + options.tcp_address + "' is not an IP address");
    const std::string where = options.tcp_address + ":" + std::to_string(options.tcp_port);
    if (!address.is_loopback()) {
      log_message(LogLevel::warn, kComponent, "listening on " + where + ", which is not a loopback address");
    }
    tcp_listener = std::make_shared<TcpListener>(contexts, state, Transport::tcp);
    auto& acceptor = tcp_listener->acceptor();
    const asio::ip::tcp::endpoint endpoint(address, options.tcp_port);
    acceptor.open(endpoint.protocol(), error);
    if (!error) acceptor.set_option(asio::socket_base::reuse_address(true), error);
    if (!error) acceptor.bind(endpoint, error);
    if (!error) acceptor.listen(asio::socket_base::max_listen_connections, error);
    if (error) return fail(ErrorCode::io_error, "cannot listen on " + where + ": " + error.message());
    tcp_port = acceptor.local_endpoint(error).port();
    if (error) return fail(ErrorCode::io_error, "cannot read the port of " + where + ": " + error.message());
    return {};
  }
};

namespace {

Result<void> validate(const ServerOptions& options, const std::shared_ptr<RequestHandler>& handler) {
  if (!handler) return fail(ErrorCode::invalid_input, "daemon server: no request handler");
  if (options.unix_socket_path.empty() && !options.listen_tcp) {
    return fail(ErrorCode::invalid_input, "daemon server: neither a unix socket path nor TCP to listen on");
  }
  const std::size_t max_payload = options.frame_limits.max_payload_code_points;
  if (max_payload == 0 || max_payload > kMaxFrameCodePoints) {
    return fail(ErrorCode::invalid_input, "daemon server: the frame limit must be 1.." +
                                              std::to_string(kMaxFrameCodePoints) + " code points, not " +
                                              std::to_string(max_payload));
  }
  if (options.frame_limits.max_depth == 0) return fail(ErrorCode::invalid_input, "daemon server: nesting limit 0");
  if (options.max_connections == 0) return fail(ErrorCode::invalid_input, "daemon server: max_connections is 0");
  if (options.max_queued_requests == 0) {
    return fail(ErrorCode::invalid_input, "daemon server: max_queued_requests is 0");
  }
  return {};
}

}  // namespace

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  try {
    stop();
  } catch (const std::exception& error) {
    log_message(LogLevel::error, kComponent, std::string("stopping the server failed: ") + error.what());
  } catch (...) {
    log_message(LogLevel::error, kComponent, "stopping the server failed");
  }
}

Result<std::unique_ptr<Server>> Server::start(ServerOptions options, std::shared_ptr<RequestHandler> handler,
                                              HealthProbe health) {
  auto context = std::make_unique<asio::io_context>();
  const std::size_t threads = options.threads == 0 ? 1 : options.threads;
  auto server = start({context.get()}, std::move(options), std::move(handler), std::move(health));
  if (!server) return server;
  Impl& impl = *(*server)->impl_;
  impl.owned_context = std::move(context);
  impl.guard.emplace(impl.owned_context->get_executor());
  impl.threads.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) {
    impl.threads.emplace_back([context = impl.owned_context.get()] {
      for (;;) {
        try {
          context->run();
          return;
        } catch (const std::exception& error) {
          log_message(LogLevel::error, kComponent, std::string("io thread: ") + error.what());
        } catch (...) {
          log_message(LogLevel::error, kComponent, "io thread: unknown exception");
        }
      }
    });
  }
  return server;
}

Result<std::unique_ptr<Server>> Server::start(std::vector<asio::io_context*> contexts, ServerOptions options,
                                              std::shared_ptr<RequestHandler> handler, HealthProbe health) {
  if (contexts.empty() || std::find(contexts.begin(), contexts.end(), nullptr) != contexts.end()) {
    return fail(ErrorCode::invalid_input, "the server needs at least one io_context");
  }
  if (auto valid = validate(options, handler); !valid) return Unexpected<Error>(std::move(valid).error());
  if (options.version.empty()) options.version = PASSEPARTOUT_VERSION;

  auto impl = std::make_unique<Impl>();
  impl->contexts = std::move(contexts);
  impl->state = std::make_shared<ServerState>(std::move(options), std::move(handler), std::move(health));
  const ServerOptions& opts = impl->state->options;
  auto handshake = impl->state->codec.encode(make_handshake(opts.version, opts.capabilities));
  if (!handshake) return Unexpected<Error>(std::move(handshake).error());
  impl->state->handshake_frame = std::move(*handshake);

  if (!opts.unix_socket_path.empty()) {
    if (auto opened = impl->open_unix(opts); !opened) {
      impl->remove_unix_socket();
      return Unexpected<Error>(std::move(opened).error());
    }
  }
  if (opts.listen_tcp) {
    if (auto opened = impl->open_tcp(opts); !opened) {
      impl->remove_unix_socket();
      return Unexpected<Error>(std::move(opened).error());
    }
  }
  if (impl->unix_listener) impl->unix_listener->start();
  if (impl->tcp_listener) impl->tcp_listener->start();
  if (impl->tcp_listener) {
    log_message(LogLevel::info, kComponent,
                "listening on " + opts.tcp_address + ":" + std::to_string(impl->tcp_port));
  }
  if (impl->unix_listener) log_message(LogLevel::info, kComponent, "listening on unix socket " + impl->unix_path.string());
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

std::uint16_t Server::tcp_port() const noexcept { return impl_->tcp_port; }

const std::filesystem::path& Server::unix_socket_path() const noexcept {
  return impl_->state->options.unix_socket_path;
}

ServerCounters Server::counters() const {
  const ServerState& state = *impl_->state;
  ServerCounters counters;
  {
    std::lock_guard lock(state.connections_mutex);
    counters.connections_open = state.connections.size();
  }
  counters.connections_total = state.connections_total.load(std::memory_order_relaxed);
  counters.connections_rejected = state.connections_rejected.load(std::memory_order_relaxed);
  counters.frames_in = state.frames_in.load(std::memory_order_relaxed);
  counters.frames_out = state.frames_out.load(std::memory_order_relaxed);
  counters.errors = state.errors.load(std::memory_order_relaxed);
  counters.closed_for_replies = state.closed_for_replies.load(std::memory_order_relaxed);
  counters.queued_write_bytes =
      static_cast<std::uint64_t>(std::max<std::int64_t>(0, state.queued_write_bytes.load(std::memory_order_relaxed)));
  return counters;
}

void Server::begin_stop() { impl_->begin_stop(); }

void Server::stop(std::chrono::milliseconds grace) {
  std::lock_guard stop_lock(impl_->stop_mutex);
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->begin_stop();
  // The listeners close on their strands; wait for that before the io_context
  // may stop, or a stopped server would keep its port accepting.
  impl_->wait_listeners_closed(grace);
  ServerState& state = *impl_->state;
  {
    std::unique_lock lock(state.connections_mutex);
    const auto all_closed = [&state] { return state.connections.empty(); };
    if (!state.connections_changed.wait_for(lock, grace, all_closed)) {
      std::vector<std::shared_ptr<Connection>> left = state.open_connections();
      lock.unlock();
      log_message(LogLevel::warn, kComponent, std::to_string(left.size()) + " connection(s) still busy after " +
                                                  milliseconds_text(grace) + "; closing them");
      for (const auto& connection : left) connection->force_close();
      left.clear();
      lock.lock();
      state.connections_changed.wait_for(lock, kForceCloseWait, all_closed);
    }
  }
  {
    std::lock_guard lock(state.hub->posts_mutex);
    state.hub->posts_open = false;
  }
  if (impl_->owned_context) {
    impl_->guard.reset();
    impl_->owned_context->stop();
    for (std::thread& thread : impl_->threads) {
      if (thread.joinable()) thread.join();
    }
  }
}

bool Server::wait_connections_open_for_test(std::size_t count, std::chrono::milliseconds timeout) const {
  ServerState& state = *impl_->state;
  std::unique_lock lock(state.connections_mutex);
  return state.connections_changed.wait_for(lock, timeout, [&] { return state.connections.size() == count; });
}

bool Server::wait_listeners_closed_for_test(std::chrono::milliseconds timeout) const {
  return impl_->wait_listeners_closed(timeout);
}

}  // namespace passepartout
