// Connection: one accepted socket of the server, from its handshake to its
// close; private to runtime/daemon.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/inline_function.hpp"
#include "daemon/frame_codec.hpp"
#include "daemon/server.hpp"
#include "daemon/server_state.hpp"
#include "value/value.hpp"

namespace passepartout::detail {

// One accepted socket: handshake, decoding, the request queue, the write
// queue and the deadlines. Every member runs on the connection's strand (the
// socket's executor) except the public entry points, which post there and
// may be called from any thread.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<ServerState> server, GenericSocket socket, ConnectionInfo info);

  // Sends the handshake and starts reading.
  void start();
  // The server is stopping: queued requests get SHUTTING-DOWN, the one being
  // handled may still reply, then the connection closes.
  void drain();
  void force_close();
  // Hands a frame of request `request_id`'s reply (and, when `final`, the end
  // of that request) to the strand. Deliveries wait in an inbox for one turn
  // of the strand, which takes all that arrived meanwhile (a reply and the
  // end of its request, say) and writes their frames together.
  void deliver(std::uint64_t request_id, std::optional<std::string> frame, bool final);
  const ConnectionInfo& info() const noexcept { return info_; }
  bool is_closed() const noexcept { return closed_flag_.load(std::memory_order_acquire); }
  // Runs `hook` once when the connection closes, on its strand; at once, on
  // the calling thread, when it has closed already. One hook per request: a
  // later one replaces it, null removes it, and the end of the request drops
  // it (a hook for a request that has ended is dropped). Any thread.
  void on_close(std::uint64_t request_id, InlineFunction<void()> hook);
  // Reply bytes queued and not yet written, as of the strand's last change.
  std::size_t queued_bytes() const noexcept { return queued_shared_.load(std::memory_order_relaxed); }
  // Closes the connection for holding `bytes` of unread replies, the most of
  // any, while all together are over the budget.
  void close_for_replies(std::size_t bytes);
  // What admission weighs when a limit is reached (see admit()). Any thread.
  Standing standing() const noexcept;
  // Closed to make room for a new connection: `why` goes to the client as a
  // BUSY error, in one write if the socket takes it, and the connection
  // closes at once, without a linger. Any thread.
  void evict(std::string why);

 private:
  // Where the connection is in its life. It only moves down this list
  // (possibly skipping states); close_now() goes to `closed` from any of them.
  enum class State {
    open,          // requests are read, decoded and handled in turn
    input_closed,  // no further request is taken (the client ended its side, a malformed frame, a
                   // timeout); the ones already taken are still answered
    draining,      // the server is stopping: the request being handled may still reply, queued ones
                   // get SHUTTING-DOWN
    closing,       // the last frames are being written, within `linger`
    lingering,     // FIN sent; reading and dropping until the client closes its side, within `linger`
    closed,        // the socket is closed; deliveries are dropped
  };
  // The deadline that applies (see update_deadline).
  enum class Phase { none, idle, reading, busy };
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

  // Moves to `state` unless the connection is already further along.
  void advance(State state) noexcept {
    if (state > state_) state_ = state;
  }

  void on_start();
  void on_drain();
  void take_inbox();
  void on_deliver(std::uint64_t request_id, std::optional<std::string> frame, bool final);

  void start_read();
  std::size_t read_size() const noexcept;
  void on_readable(const error_code& error);
  void on_read(const error_code& error, std::size_t size);
  void report_frame_error();

  void process_next();
  void dispatch(Value message);
  // The message carries :AUTH with the configured token.
  bool carries_token(const Value& message) const;
  // Records the time when nothing is being handled, pending or unwritten.
  void note_if_caught_up();
  void fail_request(WireReply& reply, std::string_view what);

  void queue_message(const Value& message);
  void queue_frame(std::string frame);
  void schedule_flush();
  void write_next();
  // `caught_up_noted`: write_next noted the moment before a write that left nothing to do.
  void on_write(const error_code& error, bool caught_up_noted = false);

  void begin_close();
  void shutdown_output();
  void close_now();
  // Drops the close hooks of the requests up to `request_id`, which has ended.
  void drop_close_hooks(std::uint64_t request_id);
  void run_close_hooks();

  void wait_deadline();
  void set_deadline(Clock::time_point deadline);
  void check_deadline();
  void on_deadline();
  void expire(const std::string& what);
  void update_deadline();

  static constexpr std::size_t kReadBufferSize = std::size_t{16} * 1024;
  // What one read takes from a TCP connection not authenticated (see read_size()).
  static constexpr std::size_t kUntrustedReadSize = 1024;
  // Unwritten reply bytes past which no further request is read (see start_read).
  static constexpr std::size_t kReadPauseBytes = std::size_t{1024} * 1024;

  const std::shared_ptr<ServerState> server_;
  const Strand strand_;
  GenericSocket socket_;
  Timer timer_;
  Clock::time_point deadline_ = Clock::time_point::max();            // see set_deadline
  Clock::time_point handshake_deadline_ = Clock::time_point::max();  // for the first complete request
  const ConnectionInfo info_;
  FrameDecoder decoder_;
  std::array<char, kReadBufferSize> read_buffer_{};

  State state_ = State::open;
  std::atomic<bool> closed_flag_{false};  // state_ == State::closed, for other threads
  // For standing(), from other threads: set on the strand.
  std::atomic<bool> authenticated_{false};   // a request carried the token (never reset)
  std::atomic<bool> busy_{false};            // handling_ != 0
  std::atomic<bool> spoke_{false};           // frames_decoded_ != 0
  std::atomic<Clock::rep> caught_up_at_{0};  // when it opened, or last had nothing handled nor unwritten
  std::deque<Item> pending_;
  std::uint64_t last_request_id_ = 0;
  std::uint64_t handling_ = 0;  // the id of the request being handled; 0 while none is
  std::uint64_t frames_decoded_ = 0;
  std::uint64_t deadline_frame_ = 0;
  Phase phase_ = Phase::none;

  // The socket's I/O, independent of the state above.
  bool reading_ = false;       // a read (or a wait for readiness) is in flight
  bool writing_ = false;       // a write is in flight
  bool eof_ = false;           // the client has ended its side of the stream
  bool drained_ = false;       // the last read emptied the socket (see start_read)
  bool non_blocking_ = false;  // reads and writes fail rather than block

  std::deque<std::string> writes_;
  std::vector<asio::const_buffer> write_batch_;  // what the write in progress has yet to write
  std::size_t batch_frames_ = 0;                 // the frames it writes, at the front of writes_
  std::size_t queued_write_bytes_ = 0;
  std::atomic<std::size_t> queued_shared_{0};  // queued_write_bytes_, for shed_largest() on other threads
  bool flush_scheduled_ = false;               // schedule_flush()'s write is on the strand's queue
  bool taking_inbox_ = false;                  // take_inbox() writes what on_deliver() queues
  std::vector<Delivery> taken_;                // take_inbox()'s, kept for its capacity
  std::mutex inbox_mutex_;                     // guards inbox_
  std::vector<Delivery> inbox_;                // deliveries not yet taken by the strand

  struct CloseHook {
    std::uint64_t request_id;
    InlineFunction<void()> hook;
  };
  std::mutex close_hooks_mutex_;           // guards close_hooks_, hooks_ended_through_, hooks_run_
  std::vector<CloseHook> close_hooks_;     // at most one per request; a request at a time, mostly
  std::uint64_t hooks_ended_through_ = 0;  // the last request that ended: later hooks for it are dropped
  bool hooks_run_ = false;                 // the connection closed: a new hook runs at once
};

}  // namespace passepartout::detail
