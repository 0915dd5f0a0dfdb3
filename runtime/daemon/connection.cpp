// Connection: the handshake, reading and decoding, the request queue, the
// write queue with its batching, the deadlines and the graceful close.
#include "daemon/connection.hpp"

// See server_state.hpp.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#pragma GCC diagnostic pop

#include <algorithm>
#include <exception>
#include <iterator>
#include <utility>

#include "base/log.hpp"
#include "daemon/reply.hpp"

namespace passepartout::detail {

namespace {

// Frames gathered into one write at most.
constexpr std::size_t kMaxWriteBatch = 64;

// Equal length and content, in time independent of where they differ.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    difference =
        static_cast<unsigned char>(difference | (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i])));
  }
  return difference == 0;
}

}  // namespace

Connection::Connection(std::shared_ptr<ServerState> server, GenericSocket socket, ConnectionInfo info)
    : server_(std::move(server)),
      strand_(socket.get_executor()),
      socket_(std::move(socket)),
      timer_(strand_),
      info_(std::move(info)),
      decoder_(server_->options.frame_limits) {}

void Connection::start() {
  asio::post(strand_, [self = shared_from_this()] { self->on_start(); });
}

void Connection::drain() {
  asio::post(strand_, [self = shared_from_this()] { self->on_drain(); });
}

void Connection::force_close() {
  asio::post(strand_, [self = shared_from_this()] { self->close_now(); });
}

// defer: from a thread of the same io_context (the connections' loop), the
// strand's turn comes once the current task returns, without waking another
// thread; from another (a pipeline loop), it is a post.
void Connection::deliver(std::uint64_t request_id, std::optional<std::string> frame, bool final) {
  bool first = false;
  {
    std::lock_guard lock(inbox_mutex_);
    first = inbox_.empty();
    inbox_.push_back(Delivery{request_id, std::move(frame), final});
  }
  if (first) asio::defer(strand_, [self = shared_from_this()] { self->take_inbox(); });
}

void Connection::on_close(std::uint64_t request_id, InlineFunction<void()> hook) {
  {
    std::lock_guard lock(close_hooks_mutex_);
    if (!hooks_run_) {
      if (request_id <= hooks_ended_through_) return;
      auto found = std::find_if(close_hooks_.begin(), close_hooks_.end(),
                                [request_id](const CloseHook& kept) { return kept.request_id == request_id; });
      if (found != close_hooks_.end()) {
        if (hook) {
          found->hook = std::move(hook);
        } else {
          close_hooks_.erase(found);
        }
      } else if (hook) {
        close_hooks_.push_back(CloseHook{request_id, std::move(hook)});
      }
      return;
    }
  }
  if (hook) hook();  // closed already
}

void Connection::drop_close_hooks(std::uint64_t request_id) {
  std::vector<CloseHook> dropped;  // destroyed after the lock is released
  std::lock_guard lock(close_hooks_mutex_);
  hooks_ended_through_ = std::max(hooks_ended_through_, request_id);
  if (close_hooks_.empty()) return;
  auto ended = std::stable_partition(close_hooks_.begin(), close_hooks_.end(),
                                     [request_id](const CloseHook& kept) { return kept.request_id > request_id; });
  std::move(ended, close_hooks_.end(), std::back_inserter(dropped));
  close_hooks_.erase(ended, close_hooks_.end());
}

// Outside the lock: a hook may register another (it then runs at once).
void Connection::run_close_hooks() {
  std::vector<CloseHook> hooks;
  {
    std::lock_guard lock(close_hooks_mutex_);
    hooks_run_ = true;
    hooks.swap(close_hooks_);
  }
  for (CloseHook& kept : hooks) {
    try {
      kept.hook();
    } catch (const std::exception& error) {
      log_message(LogLevel::error, kComponent, "connection {} ({}): a close hook failed: {}", info_.connection_id,
                  info_.peer, error.what());
    }
  }
}

void Connection::close_for_replies(std::size_t bytes) {
  asio::post(strand_, [self = shared_from_this(), bytes] {
    if (self->state_ == State::closed) return;
    self->server_->closed_for_replies.fetch_add(1, std::memory_order_relaxed);
    self->server_->errors.fetch_add(1, std::memory_order_relaxed);
    log_message(LogLevel::warn, kComponent,
                "connection {} ({}): closed: its {} bytes of unread replies were the most while all connections "
                "together held more than {} bytes",
                self->info_.connection_id, self->info_.peer, bytes,
                self->server_->options.max_total_queued_write_bytes);
    self->close_now();
  });
}

Standing Connection::standing() const noexcept {
  Standing standing;
  standing.evictable = !authenticated_.load(std::memory_order_relaxed) && !busy_.load(std::memory_order_relaxed);
  standing.spoke = spoke_.load(std::memory_order_relaxed);
  standing.since = Clock::time_point(Clock::duration(caught_up_at_.load(std::memory_order_relaxed)));
  standing.id = info_.connection_id;
  return standing;
}

void Connection::evict(std::string why) {
  asio::post(strand_, [self = shared_from_this(), why = std::move(why)] {
    if (self->state_ == State::closed) return;
    // One attempt at telling the client, never a wait: the socket takes the
    // frame now or the client never sees it.
    if (self->non_blocking_ && !self->writing_ && self->writes_.empty()) {
      if (auto frame = self->server_->codec.encode(make_error_response(wire_error::kBusy, why))) {
        error_code ignored;
        self->socket_.write_some(asio::buffer(*frame), ignored);
      }
    }
    error_code ignored;
    self->socket_.shutdown(asio::socket_base::shutdown_both, ignored);
    self->close_now();
  });
}

void Connection::note_if_caught_up() {
  if (handling_ == 0 && pending_.empty() && writes_.empty() && !writing_) {
    caught_up_at_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  }
}

void Connection::on_start() {
  caught_up_at_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  if (server_->options.handshake_timeout.count() > 0) {
    handshake_deadline_ = Clock::now() + server_->options.handshake_timeout;
  }
  timer_.expires_at(Clock::time_point::max());
  wait_deadline();
  // Reads after a wait for readiness must not block: see start_read.
  error_code not_set;
  socket_.non_blocking(true, not_set);
  non_blocking_ = !not_set;
  log_message(LogLevel::debug, kComponent, "connection {} from {} ({}) opened", info_.connection_id, info_.peer,
              to_string(info_.transport));
  queue_frame(server_->handshake_frame);
  update_deadline();
  start_read();
}

void Connection::on_drain() {
  if (state_ >= State::draining) return;
  state_ = State::draining;
  process_next();
}

void Connection::take_inbox() {
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
  if (state_ != State::closed && !writing_ && !writes_.empty()) write_next();
}

void Connection::on_deliver(std::uint64_t request_id, std::optional<std::string> frame, bool final) {
  if (state_ == State::closed || request_id != handling_) return;
  if (frame) queue_frame(std::move(*frame));
  if (final) {
    drop_close_hooks(request_id);
    handling_ = 0;
    busy_.store(false, std::memory_order_relaxed);
    process_next();
  }
}

// --- reading ---------------------------------------------------------------

void Connection::start_read() {
  if (reading_ || state_ == State::closed || eof_) return;
  // Too many requests waiting: stop reading until the handler catches up.
  // Replies piling up unread (a client pipelining health checks it never
  // reads, say): stop reading until it takes them; TCP's flow control then
  // holds the client, and its replies cost at most kReadPauseBytes. Reading
  // resumes outside a read's handler, so what drained_ knew is stale then.
  if (state_ == State::open &&
      (pending_.size() >= server_->options.max_queued_requests || queued_write_bytes_ >= kReadPauseBytes)) {
    drained_ = false;
    return;
  }
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
  socket_.async_read_some(
      asio::buffer(read_buffer_.data(), read_size()),
      [self = shared_from_this()](const error_code& error, std::size_t size) { self->on_read(error, size); });
}

// A connection that has not shown the token reads a little at a time, so
// that one flooding the daemon with requests (health checks it pipelines,
// say) takes a short turn of the connections' loop and every other
// connection, a new one included, gets its turn soon after.
std::size_t Connection::read_size() const noexcept {
  const bool trusted = info_.transport == Transport::unix_socket || authenticated_.load(std::memory_order_relaxed);
  return trusted ? read_buffer_.size() : kUntrustedReadSize;
}

void Connection::on_readable(const error_code& error) {
  if (error || state_ == State::closed) {
    on_read(error, 0);
    return;
  }
  error_code read_error;
  const std::size_t size = socket_.read_some(asio::buffer(read_buffer_.data(), read_size()), read_error);
  if (read_error == asio::error::would_block || read_error == asio::error::try_again) {
    reading_ = false;  // readiness without bytes: still empty, wait again
    drained_ = true;
    start_read();
    return;
  }
  on_read(read_error, size);
}

void Connection::on_read(const error_code& error, std::size_t size) {
  reading_ = false;
  if (state_ == State::closed) return;
  if (error) {
    if (state_ == State::lingering || error != asio::error::eof) {
      if (state_ != State::lingering && error != asio::error::connection_reset) {
        log_message(LogLevel::debug, kComponent, "connection {} ({}): read failed: {}", info_.connection_id, info_.peer,
                    error.message());
      }
      close_now();
      return;
    }
    // The client has finished sending; what it sent is still answered.
    eof_ = true;
    if (state_ == State::open) {
      state_ = State::input_closed;
      if (!decoder_.finish()) report_frame_error();
    }
    process_next();
    return;
  }
  drained_ = size < read_size();  // for the next start_read, in this handler
  // Once input is closed (error, drain, closing) bytes are read only to be dropped.
  if (state_ == State::open) {
    decoder_.feed(std::string_view(read_buffer_.data(), size));
    while (auto message = decoder_.next()) {
      server_->frames_in.fetch_add(1, std::memory_order_relaxed);
      if (frames_decoded_++ == 0) spoke_.store(true, std::memory_order_relaxed);
      pending_.push_back(Item{std::move(*message), std::nullopt});
    }
    if (decoder_.failed()) report_frame_error();
    process_next();
  }
  start_read();
}

void Connection::report_frame_error() {
  const FrameError& error = *decoder_.error();
  server_->errors.fetch_add(1, std::memory_order_relaxed);
  log_message(LogLevel::warn, kComponent, "connection {} ({}): malformed frame ({}): {}", info_.connection_id,
              info_.peer, to_string(error.kind), error.message);
  advance(State::input_closed);
  pending_.push_back(Item{Value(), make_frame_error_response(error)});
}

// --- requests --------------------------------------------------------------

void Connection::process_next() {
  while (state_ < State::closing && handling_ == 0 && !pending_.empty()) {
    Item item = std::move(pending_.front());
    pending_.pop_front();
    if (item.final_error) {
      pending_.clear();
      advance(State::input_closed);
      queue_message(*item.final_error);
      break;
    }
    if (is_health_check(item.message)) {
      if (info_.transport == Transport::tcp && carries_token(item.message)) {
        authenticated_.store(true, std::memory_order_relaxed);
      }
      queue_message(make_health_response(server_->health_report()));
      continue;
    }
    if (state_ == State::draining) {
      queue_message(make_error_response(wire_error::kShuttingDown, "the daemon is stopping; request not handled"));
      continue;
    }
    dispatch(std::move(item.message));
  }
  if ((state_ == State::input_closed || state_ == State::draining) && handling_ == 0 && pending_.empty()) {
    begin_close();
  }
  note_if_caught_up();
  update_deadline();
  start_read();
}

bool Connection::carries_token(const Value& message) const {
  const auto token = auth_token(message);
  const std::string& expected = server_->options.auth_token;
  return token.has_value() && !expected.empty() && constant_time_equal(*token, expected);
}

void Connection::dispatch(Value message) {
  ConnectionInfo info = info_;
  info.authenticated = info_.transport == Transport::unix_socket || carries_token(message);
  if (message.get("AUTH") != nullptr) message = message.without("AUTH");
  if (info.transport == Transport::tcp && info.authenticated) {
    authenticated_.store(true, std::memory_order_relaxed);
    const std::string& label = server_->options.auth_token_label;
    info.requester = "wire token=" + (label.empty() ? std::string("token") : label) + " peer=" + info_.peer;
  }

  handling_ = ++last_request_id_;
  busy_.store(true, std::memory_order_relaxed);
  WireReply sink(std::make_shared<ReplyState>(weak_from_this(), server_->hub, handling_, info));
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

void Connection::fail_request(WireReply& reply, std::string_view what) {
  server_->errors.fetch_add(1, std::memory_order_relaxed);
  log_message(LogLevel::error, kComponent, "connection {} ({}): request handler failed: {}", info_.connection_id,
              info_.peer, what);
  reply.finish(make_error_response(wire_error::kInternal, "request failed: " + std::string(what)));
}

// --- writing ---------------------------------------------------------------

void Connection::queue_message(const Value& message) {
  auto frame = server_->codec.encode(message);
  if (!frame) {
    log_message(LogLevel::error, kComponent, "connection {} ({}): cannot encode a reply: {}", info_.connection_id,
                info_.peer, frame.error().message);
    return;
  }
  queue_frame(std::move(*frame));
}

void Connection::queue_frame(std::string frame) {
  if (state_ == State::closed) return;
  queued_write_bytes_ += frame.size();
  queued_shared_.store(queued_write_bytes_, std::memory_order_relaxed);
  const bool over_total = server_->add_queued(static_cast<std::int64_t>(frame.size()));
  if (queued_write_bytes_ > server_->options.max_queued_write_bytes) {
    server_->errors.fetch_add(1, std::memory_order_relaxed);
    log_message(LogLevel::warn, kComponent,
                "connection {} ({}): the client is not reading ({} bytes of replies queued); closing",
                info_.connection_id, info_.peer, queued_write_bytes_);
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
void Connection::schedule_flush() {
  if (writing_ || flush_scheduled_ || taking_inbox_) return;
  flush_scheduled_ = true;
  asio::defer(strand_, [self = shared_from_this()] {
    self->flush_scheduled_ = false;
    if (self->state_ != State::closed && !self->writing_ && !self->writes_.empty()) self->write_next();
  });
}

// Writes every queued frame (up to kMaxWriteBatch) with one gathering write:
// at once when the socket takes it all (the usual case), otherwise what is
// left asynchronously.
void Connection::write_next() {
  writing_ = true;
  write_batch_.clear();
  batch_frames_ = std::min(writes_.size(), kMaxWriteBatch);
  for (std::size_t i = 0; i < batch_frames_; ++i) write_batch_.emplace_back(asio::buffer(writes_[i]));
  if (non_blocking_) {
    // When this write leaves nothing to do, the connection has caught up the
    // moment the client can read its last reply: noted before the write, so
    // that a client which has read it never finds its connection judged by
    // an older moment (an admission on another thread may look at once).
    const bool catches_up = batch_frames_ == writes_.size() && handling_ == 0 && pending_.empty();
    const auto before = caught_up_at_.load(std::memory_order_relaxed);
    if (catches_up) caught_up_at_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    error_code error;
    std::size_t written = socket_.write_some(write_batch_, error);
    if (error != asio::error::would_block && error != asio::error::try_again) {
      if (error || written == asio::buffer_size(write_batch_)) {
        on_write(error, catches_up);  // done (or failed) without a turn of the reactor
        return;
      }
    } else {
      written = 0;
    }
    if (catches_up) caught_up_at_.store(before, std::memory_order_relaxed);  // not yet: on_write notes it
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

void Connection::on_write(const error_code& error, bool caught_up_noted) {
  writing_ = false;
  if (state_ == State::closed) return;
  if (error) {
    log_message(LogLevel::debug, kComponent, "connection {} ({}): write failed: {}", info_.connection_id, info_.peer,
                error.message());
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
  } else if (state_ >= State::closing) {
    shutdown_output();
  } else if (!caught_up_noted) {
    note_if_caught_up();
  }
  if (queued_write_bytes_ < kReadPauseBytes) start_read();  // reading resumes once the client has caught up
}

// --- closing ---------------------------------------------------------------

// Closes once the queued frames are written; a client that does not read
// them within `linger` is cut off.
void Connection::begin_close() {
  if (state_ >= State::closing) return;
  state_ = State::closing;
  if (!writing_ && writes_.empty()) {
    shutdown_output();
  } else {
    set_deadline(Clock::now() + server_->options.linger);
  }
}

// Everything is written: send FIN and drain what the client still sends
// until it closes (bounded by `linger`), so closing with unread input does
// not reset the connection and destroy the last frame in flight.
void Connection::shutdown_output() {
  error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_send, ignored);
  state_ = State::lingering;
  if (eof_) {
    close_now();
    return;
  }
  set_deadline(Clock::now() + server_->options.linger);
  start_read();
}

void Connection::close_now() {
  if (state_ == State::closed) return;
  state_ = State::closed;
  closed_flag_.store(true, std::memory_order_release);
  server_->add_queued(-static_cast<std::int64_t>(queued_write_bytes_));  // dropped with the connection
  queued_write_bytes_ = 0;
  queued_shared_.store(0, std::memory_order_relaxed);
  error_code ignored;
  socket_.close(ignored);
  timer_.cancel();
  pending_.clear();
  log_message(LogLevel::debug, kComponent, "connection {} ({}) closed", info_.connection_id, info_.peer);
  server_->unregister(info_.connection_id);
  server_->handler->closed(info_);
  run_close_hooks();
}

// --- deadlines -------------------------------------------------------------

// One wait is always outstanding while the connection is open; moving the
// expiry cancels it, and the handler simply waits again for the new one.
void Connection::wait_deadline() {
  timer_.async_wait([self = shared_from_this()](const error_code&) { self->check_deadline(); });
}

// The deadline of the current phase. The timer fires at or before it, and
// is moved only when the deadline comes earlier: a request that pushes the
// idle deadline later leaves the timer alone (moving it costs the reactor a
// wake-up), and the timer, when it fires early, waits again for the rest.
void Connection::set_deadline(Clock::time_point deadline) {
  deadline_ = deadline;
  if (deadline < timer_.expiry()) timer_.expires_at(deadline);  // the pending wait ends; check_deadline waits anew
}

void Connection::check_deadline() {
  if (state_ == State::closed) return;
  const Clock::time_point now = Clock::now();
  if (deadline_ <= now) {
    deadline_ = Clock::time_point::max();
    timer_.expires_at(Clock::time_point::max());
    on_deadline();
    if (state_ == State::closed) return;
  } else if (timer_.expiry() <= now) {
    timer_.expires_at(deadline_);
  }
  wait_deadline();
}

void Connection::on_deadline() {
  if (state_ >= State::closing) {
    close_now();
    return;
  }
  if (frames_decoded_ == 0 && Clock::now() >= handshake_deadline_) {
    server_->errors.fetch_add(1, std::memory_order_relaxed);
    const std::string what =
        "no complete request within " + milliseconds_text(server_->options.handshake_timeout) + " of connecting";
    log_message(LogLevel::warn, kComponent, "connection {} ({}): {}", info_.connection_id, info_.peer, what);
    expire(what);
  } else if (phase_ == Phase::reading) {
    server_->errors.fetch_add(1, std::memory_order_relaxed);
    const std::string what = "a frame was not complete within " + milliseconds_text(server_->options.read_timeout);
    log_message(LogLevel::warn, kComponent, "connection {} ({}): {}", info_.connection_id, info_.peer, what);
    expire(what);
  } else if (phase_ == Phase::idle) {
    const std::string what = "the connection was idle for " + milliseconds_text(server_->options.idle_timeout);
    log_message(LogLevel::debug, kComponent, "connection {} ({}): {}", info_.connection_id, info_.peer, what);
    expire(what);
  }
}

void Connection::expire(const std::string& what) {
  advance(State::input_closed);
  pending_.push_back(Item{Value(), make_error_response(wire_error::kTimeout, what)});
  process_next();
}

void Connection::update_deadline() {
  if (state_ >= State::closing) return;
  // While reading is paused for a slow handler, a half-received frame is
  // the server's delay, not the client's: no read deadline then.
  const bool paused = pending_.size() >= server_->options.max_queued_requests;
  Phase phase = Phase::busy;
  if (state_ == State::open && decoder_.in_frame() && !paused) {
    phase = Phase::reading;
  } else if (state_ == State::open && handling_ == 0 && pending_.empty()) {
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

}  // namespace passepartout::detail
