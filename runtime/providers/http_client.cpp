// HttpClient: libcurl's multi socket interface driven by one Asio io_context,
// in the way of libcurl's own event-loop examples (hiperfifo.c, ghiper.c).
#include "providers/http_client.hpp"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cassert>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <unordered_map>
#include <utility>

// GCC 12 reports a "potential null pointer dereference" inside Asio's epoll
// reactor (a false positive); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#pragma GCC diagnostic pop

#include "base/executor.hpp"
#include "base/log.hpp"
#include "providers/curl_library.hpp"

namespace passepartout {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

const char* to_string(HttpOutcome outcome) noexcept {
  switch (outcome) {
    case HttpOutcome::complete:
      return "complete";
    case HttpOutcome::cancelled:
      return "cancelled";
    case HttpOutcome::connect_timeout:
      return "connect_timeout";
    case HttpOutcome::first_byte_timeout:
      return "first_byte_timeout";
    case HttpOutcome::idle_timeout:
      return "idle_timeout";
    case HttpOutcome::transport_error:
      return "transport_error";
    case HttpOutcome::too_large:
      return "too_large";
  }
  return "transport_error";
}

namespace detail {

// What a handle shares with its transfer: the cancel mark, set from any
// thread, and the client to post the removal to.
struct HttpTransferState {
  std::atomic<bool> cancelled{false};
  std::weak_ptr<HttpClientCore> core;
};

}  // namespace detail

namespace {

// libcurl, loaded and set up by the first client (curl_library.hpp); every
// call below goes through it, once HttpClientCore::open() found it loaded.
const CurlLibrary& curl() noexcept { return *curl_library(nullptr); }

// The identity of the socket behind a descriptor number: a number curl closed
// (without telling, as its resolver's socketpair once did) and reused for a
// new socket has another inode.
ino_t inode_of(int fd) noexcept {
  struct stat info {};
  return ::fstat(fd, &info) == 0 ? info.st_ino : 0;
}

// Whether `fd` is ready now for the curl directions in `what`.
int ready_now(int fd, int what) noexcept {
  pollfd entry{fd, 0, 0};
  if ((what & CURL_POLL_IN) != 0) entry.events |= POLLIN;
  if ((what & CURL_POLL_OUT) != 0) entry.events |= POLLOUT;
  if (::poll(&entry, 1, 0) != 1) return 0;
  int ready = 0;
  if ((entry.revents & (POLLIN | POLLHUP | POLLERR)) != 0 && (what & CURL_POLL_IN) != 0) ready |= CURL_CSELECT_IN;
  if ((entry.revents & (POLLOUT | POLLHUP | POLLERR)) != 0 && (what & CURL_POLL_OUT) != 0) ready |= CURL_CSELECT_OUT;
  return ready;
}

std::string lower_case(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r' || text.back() == '\n')) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

namespace detail {

// One socket curl asked to watch. The descriptor is curl's: released, never
// closed. Waits hold the Watch, so it outlives its last handler.
struct SocketWatch {
  SocketWatch(asio::io_context& context, int socket) : descriptor(context), fd(socket), inode(inode_of(socket)) {}
  ~SocketWatch() {
    if (descriptor.is_open()) descriptor.release();
  }
  SocketWatch(const SocketWatch&) = delete;
  SocketWatch& operator=(const SocketWatch&) = delete;

  asio::posix::stream_descriptor descriptor;
  int fd;
  ino_t inode;
  int what = 0;  // CURL_POLL_IN, _OUT, _INOUT: what curl wants now
  bool reading = false;
  bool writing = false;
  bool removed = false;
};

// One transfer, owned by its client from start to on_done.
struct Transfer {
  Transfer(asio::io_context& context, std::shared_ptr<HttpTransferState> shared, HttpRequest&& asked,
           HttpCallbacks&& reports)
      : state(std::move(shared)), request(std::move(asked)), callbacks(std::move(reports)), watchdog(context) {}
  ~Transfer() {
    if (easy != nullptr) curl().easy_cleanup(easy);
    if (header_list != nullptr) curl().slist_free_all(header_list);
  }
  Transfer(const Transfer&) = delete;
  Transfer& operator=(const Transfer&) = delete;

  enum class Phase : std::uint8_t { connecting, first_byte, streaming };

  std::shared_ptr<HttpTransferState> state;
  HttpRequest request;
  HttpCallbacks callbacks;
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  // first_byte and idle timeouts: one timer, re-armed lazily to `deadline`.
  asio::steady_timer watchdog;
  Clock::time_point deadline;
  // The response head being read (a 1xx head is dropped), then delivered once.
  HttpHeaders headers;
  std::size_t received = 0;
  int status = 0;
  Phase phase = Phase::connecting;
  bool watchdog_armed = false;
  bool added = false;
  bool head_sent = false;
  bool too_large = false;
  char error_text[CURL_ERROR_SIZE] = {};
};

struct HttpClientCore : std::enable_shared_from_this<HttpClientCore> {
  explicit HttpClientCore(asio::io_context& loop) : context(loop), timer(loop) {}
  ~HttpClientCore() { assert(multi == nullptr && "stop() ran before the client is destroyed"); }
  HttpClientCore(const HttpClientCore&) = delete;
  HttpClientCore& operator=(const HttpClientCore&) = delete;

  void open();
  void begin(const std::shared_ptr<HttpTransferState>& state, HttpRequest&& request, HttpCallbacks&& callbacks);
  void cancel(const HttpTransferState* state);
  void finish(Transfer& transfer, HttpResult result);
  void act(curl_socket_t fd, int events);
  void drain();
  void stop_here();
  void cancel_all_marks();

  // curl's callbacks.
  static int on_socket(CURL* easy, curl_socket_t fd, int what, void* self, void* socket_data);
  static int on_timer(CURLM* multi, long timeout_ms, void* self);  // curl's type
  static int on_prereq(void* transfer, char* conn_primary_ip, char* conn_local_ip, int conn_primary_port,
                       int conn_local_port);
  static std::size_t on_header(char* bytes, std::size_t size, std::size_t count, void* transfer);
  static std::size_t on_body(char* bytes, std::size_t size, std::size_t count, void* transfer);

  void watch(curl_socket_t fd, int what);
  void forget(curl_socket_t fd);
  void arm(const std::shared_ptr<SocketWatch>& watch);
  void act_soon(const std::shared_ptr<SocketWatch>& watch, int events);
  void push_deadline(Transfer& transfer, Transfer::Phase phase, std::chrono::milliseconds timeout);
  void arm_watchdog(Transfer& transfer);
  void deliver_head(Transfer& transfer);

  asio::io_context& context;
  CURLM* multi = nullptr;
  asio::steady_timer timer;
  std::unordered_map<curl_socket_t, std::shared_ptr<SocketWatch>> watches;
  std::unordered_map<const HttpTransferState*, std::unique_ptr<Transfer>> transfers;
  int in_curl = 0;                    // curl calls on the stack: no handle is removed, no multi call made, meanwhile
  bool stopped = false;               // loop thread: stop_here ran or is pending
  bool closing = false;               // curl_multi_cleanup is running
  std::atomic<bool> stopping{false};  // any thread: stop() was called
};

void HttpClientCore::open() {
  const char* error = nullptr;
  if (curl_library(&error) == nullptr) {
    throw std::runtime_error(error != nullptr ? error : "libcurl could not be loaded");
  }
  multi = curl().multi_init();
  if (multi == nullptr) throw std::runtime_error("curl_multi_init failed");
  curl().multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, &HttpClientCore::on_socket);
  curl().multi_setopt(multi, CURLMOPT_SOCKETDATA, this);
  curl().multi_setopt(multi, CURLMOPT_TIMERFUNCTION, &HttpClientCore::on_timer);
  curl().multi_setopt(multi, CURLMOPT_TIMERDATA, this);
  curl().multi_setopt(multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
}

// --- sockets and the timer ---------------------------------------------------

int HttpClientCore::on_socket(CURL* /*easy*/, curl_socket_t fd, int what, void* self, void* /*socket_data*/) {
  auto& core = *static_cast<HttpClientCore*>(self);
  if (what == CURL_POLL_REMOVE || core.closing) {
    core.forget(fd);
  } else {
    core.watch(fd, what);
  }
  return 0;
}

void HttpClientCore::watch(curl_socket_t fd, int what) {
  auto found = watches.find(fd);
  if (found != watches.end() && found->second->inode != inode_of(fd)) {
    forget(fd);  // a number curl closed without saying, now another socket
    found = watches.end();
  }
  int wanted_before = 0;
  std::shared_ptr<SocketWatch> entry;
  if (found == watches.end()) {
    entry = std::make_shared<SocketWatch>(context, fd);
    boost::system::error_code error;
    entry->descriptor.assign(fd, error);
    if (error) {
      log_message(LogLevel::warn, "http", "cannot watch descriptor {}: {}", fd, error.message());
      return;
    }
    watches.emplace(fd, entry);
  } else {
    entry = found->second;
    wanted_before = entry->what;
  }
  entry->what = what;
  arm(entry);
  // The reactor reports a change of readiness, not a state: a direction curl
  // wants anew on a socket that is already ready would wait for ever.
  const int fresh = what & ~wanted_before;
  if (fresh != 0) {
    if (const int ready = ready_now(fd, fresh); ready != 0) act_soon(entry, ready);
  }
}

void HttpClientCore::forget(curl_socket_t fd) {
  const auto found = watches.find(fd);
  if (found == watches.end()) return;
  found->second->removed = true;
  found->second->descriptor.release();  // cancels its waits; curl closes the socket
  watches.erase(found);
}

void HttpClientCore::arm(const std::shared_ptr<SocketWatch>& entry) {
  const std::weak_ptr<HttpClientCore> weak = weak_from_this();
  if ((entry->what & CURL_POLL_IN) != 0 && !entry->reading) {
    entry->reading = true;
    entry->descriptor.async_wait(asio::posix::stream_descriptor::wait_read,
                                 [weak, entry](const boost::system::error_code& error) {
                                   entry->reading = false;
                                   if (error || entry->removed || (entry->what & CURL_POLL_IN) == 0) return;
                                   const auto core = weak.lock();
                                   if (core == nullptr) return;
                                   core->act(entry->fd, CURL_CSELECT_IN);
                                   if (!entry->removed) core->arm(entry);
                                 });
  }
  if ((entry->what & CURL_POLL_OUT) != 0 && !entry->writing) {
    entry->writing = true;
    entry->descriptor.async_wait(asio::posix::stream_descriptor::wait_write,
                                 [weak, entry](const boost::system::error_code& error) {
                                   entry->writing = false;
                                   if (error || entry->removed || (entry->what & CURL_POLL_OUT) == 0) return;
                                   const auto core = weak.lock();
                                   if (core == nullptr) return;
                                   core->act(entry->fd, CURL_CSELECT_OUT);
                                   if (!entry->removed) core->arm(entry);
                                 });
  }
}

void HttpClientCore::act_soon(const std::shared_ptr<SocketWatch>& entry, int events) {
  asio::post(context, [weak = weak_from_this(), entry, events] {
    const auto core = weak.lock();
    if (core == nullptr || entry->removed || core->stopped) return;
    const int wanted = ((entry->what & CURL_POLL_IN) != 0 ? CURL_CSELECT_IN : 0) |
                       ((entry->what & CURL_POLL_OUT) != 0 ? CURL_CSELECT_OUT : 0);
    if ((events & wanted) != 0) core->act(entry->fd, events & wanted);
  });
}

int HttpClientCore::on_timer(CURLM* /*multi*/, long timeout_ms, void* self) {
  auto& core = *static_cast<HttpClientCore*>(self);
  if (core.closing) return 0;
  if (timeout_ms < 0) {
    core.timer.cancel();
    return 0;
  }
  // 0 too goes through the timer: curl wants to be called soon, never from
  // inside this callback.
  core.timer.expires_after(std::chrono::milliseconds(timeout_ms));
  core.timer.async_wait([weak = core.weak_from_this()](const boost::system::error_code& error) {
    if (error) return;
    const auto alive = weak.lock();
    if (alive == nullptr || alive->stopped) return;
    alive->act(CURL_SOCKET_TIMEOUT, 0);
  });
  return 0;
}

void HttpClientCore::act(curl_socket_t fd, int events) {
  if (multi == nullptr) return;
  int running = 0;
  ++in_curl;
  curl().multi_socket_action(multi, fd, events, &running);
  --in_curl;
  drain();
}

// Completed transfers, removed here: outside every curl callback.
void HttpClientCore::drain() {
  int left = 0;
  while (multi != nullptr && !stopped) {
    CURLMsg* message = curl().multi_info_read(multi, &left);
    if (message == nullptr) break;
    if (message->msg != CURLMSG_DONE) continue;
    char* data = nullptr;
    curl().easy_getinfo(message->easy_handle, CURLINFO_PRIVATE, &data);
    auto& transfer = *static_cast<Transfer*>(static_cast<void*>(data));
    const CURLcode code = message->data.result;
    HttpResult result;
    if (transfer.too_large) {
      result.outcome = HttpOutcome::too_large;
      result.error = fmt::format("response body over {} bytes", transfer.request.max_body);
    } else if (code == CURLE_OK) {
      result.outcome = HttpOutcome::complete;
    } else if (code == CURLE_OPERATION_TIMEDOUT) {
      // The only curl timeout set is the connect one.
      result.outcome = HttpOutcome::connect_timeout;
      result.error = transfer.error_text[0] != '\0' ? transfer.error_text : curl().easy_strerror(code);
    } else {
      result.outcome = HttpOutcome::transport_error;
      result.error = transfer.error_text[0] != '\0' ? transfer.error_text : curl().easy_strerror(code);
    }
    finish(transfer, std::move(result));
  }
}

// --- transfers ---------------------------------------------------------------

void HttpClientCore::begin(const std::shared_ptr<HttpTransferState>& state, HttpRequest&& request,
                           HttpCallbacks&& callbacks) {
  if (stopped || state->cancelled.load(std::memory_order_acquire)) {
    if (callbacks.on_done) callbacks.on_done(HttpResult{HttpOutcome::cancelled, 0, "cancelled"});
    return;
  }
  auto owned = std::make_unique<Transfer>(context, state, std::move(request), std::move(callbacks));
  Transfer& transfer = *owned;
  transfer.easy = curl().easy_init();
  if (transfer.easy == nullptr) {
    if (transfer.callbacks.on_done) {
      transfer.callbacks.on_done(HttpResult{HttpOutcome::transport_error, 0, "curl_easy_init failed"});
    }
    return;
  }
  CURL* easy = transfer.easy;
  const HttpRequest& req = transfer.request;
  curl().easy_setopt(easy, CURLOPT_URL, req.url.c_str());
  curl().easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl().easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl().easy_setopt(easy, CURLOPT_PRIVATE, &transfer);
  curl().easy_setopt(easy, CURLOPT_ERRORBUFFER, transfer.error_text);
  curl().easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(req.timeouts.connect.count()));
  curl().easy_setopt(easy, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  curl().easy_setopt(easy, CURLOPT_TCP_KEEPALIVE, 1L);
  curl().easy_setopt(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
  if (req.url.rfind("https:", 0) == 0) curl().easy_setopt(easy, CURLOPT_PIPEWAIT, 1L);
  curl().easy_setopt(easy, CURLOPT_PREREQFUNCTION, &HttpClientCore::on_prereq);
  curl().easy_setopt(easy, CURLOPT_PREREQDATA, &transfer);
  curl().easy_setopt(easy, CURLOPT_HEADERFUNCTION, &HttpClientCore::on_header);
  curl().easy_setopt(easy, CURLOPT_HEADERDATA, &transfer);
  curl().easy_setopt(easy, CURLOPT_WRITEFUNCTION, &HttpClientCore::on_body);
  curl().easy_setopt(easy, CURLOPT_WRITEDATA, &transfer);
  if (req.method == "HEAD") {
    curl().easy_setopt(easy, CURLOPT_NOBODY, 1L);
  } else if (req.method == "POST" || !req.body.empty()) {
    curl().easy_setopt(easy, CURLOPT_POSTFIELDS, req.body.data());
    curl().easy_setopt(easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
  }
  if (req.method != "GET" && req.method != "POST" && req.method != "HEAD") {
    curl().easy_setopt(easy, CURLOPT_CUSTOMREQUEST, req.method.c_str());
  }
  for (const auto& [name, value] : req.headers) {
    std::string line = name;
    line.append(": ").append(value);
    transfer.header_list = curl().slist_append(transfer.header_list, line.c_str());
  }
  // No "Expect: 100-continue" round trip before a large body.
  transfer.header_list = curl().slist_append(transfer.header_list, "Expect:");
  curl().easy_setopt(easy, CURLOPT_HTTPHEADER, transfer.header_list);

  transfers.emplace(state.get(), std::move(owned));
  ++in_curl;
  const CURLMcode code = curl().multi_add_handle(multi, easy);
  --in_curl;
  if (code != CURLM_OK) {
    finish(transfer, HttpResult{HttpOutcome::transport_error, 0, curl().multi_strerror(code)});
    return;
  }
  transfer.added = true;
}

void HttpClientCore::cancel(const HttpTransferState* state) {
  const auto found = transfers.find(state);
  if (found == transfers.end()) return;  // already done
  finish(*found->second, HttpResult{HttpOutcome::cancelled, 0, "cancelled"});
}

// Ends `transfer`: removes it from the multi (never from inside a curl
// callback), then runs on_done once. A cancelled transfer reports cancelled
// whatever else ended it.
void HttpClientCore::finish(Transfer& transfer, HttpResult result) {
  assert(in_curl == 0 && "a transfer is removed outside curl's callbacks");
  auto node = transfers.extract(transfer.state.get());
  if (node.empty()) return;
  std::unique_ptr<Transfer> owned = std::move(node.mapped());
  if (owned->state->cancelled.load(std::memory_order_acquire) && result.outcome != HttpOutcome::cancelled) {
    result = HttpResult{HttpOutcome::cancelled, 0, "cancelled"};
  }
  if (result.outcome != HttpOutcome::cancelled) result.status = owned->status;
  owned->watchdog.cancel();
  if (owned->added) {
    ++in_curl;
    curl().multi_remove_handle(multi, owned->easy);
    --in_curl;
    owned->added = false;
  }
  HttpCallbacks callbacks = std::move(owned->callbacks);
  owned.reset();
  if (!callbacks.on_done) return;
  try {
    callbacks.on_done(std::move(result));
  } catch (const std::exception& error) {
    log_message(LogLevel::error, "http", "an HTTP completion threw: {}", error.what());
  } catch (...) {
    log_message(LogLevel::error, "http", "an HTTP completion threw");
  }
}

void HttpClientCore::push_deadline(Transfer& transfer, Transfer::Phase phase, std::chrono::milliseconds timeout) {
  transfer.phase = phase;
  transfer.deadline = Clock::now() + timeout;
  // A later deadline waits for the armed one to fire; an earlier one (idle
  // after first byte) re-arms at once, cancelling the wait in flight.
  if (!transfer.watchdog_armed || transfer.deadline < transfer.watchdog.expiry()) arm_watchdog(transfer);
}

// One wait per transfer, to its deadline; a deadline pushed back meanwhile
// re-arms it when it fires, so a chunk costs no timer operation.
void HttpClientCore::arm_watchdog(Transfer& transfer) {
  transfer.watchdog_armed = true;
  transfer.watchdog.expires_at(transfer.deadline);
  transfer.watchdog.async_wait(
      [weak = weak_from_this(), state = transfer.state](const boost::system::error_code& error) {
        if (error) return;
        const auto core = weak.lock();
        if (core == nullptr) return;
        const auto found = core->transfers.find(state.get());
        if (found == core->transfers.end()) return;
        Transfer& current = *found->second;
        current.watchdog_armed = false;
        if (Clock::now() < current.deadline) {
          core->arm_watchdog(current);
          return;
        }
        const bool first = current.phase == Transfer::Phase::first_byte;
        const auto waited = first ? current.request.timeouts.first_byte : current.request.timeouts.idle;
        core->finish(current, HttpResult{first ? HttpOutcome::first_byte_timeout : HttpOutcome::idle_timeout, 0,
                                         fmt::format("no {} within {} ms", first ? "response" : "data from the server",
                                                     waited.count())});
      });
}

int HttpClientCore::on_prereq(void* data, char* /*primary_ip*/, char* /*local_ip*/, int /*primary_port*/,
                              int /*local_port*/) {
  auto& transfer = *static_cast<Transfer*>(data);
  if (transfer.phase == Transfer::Phase::connecting) {
    const auto core = transfer.state->core.lock();
    if (core != nullptr)
      core->push_deadline(transfer, Transfer::Phase::first_byte, transfer.request.timeouts.first_byte);
  }
  return CURL_PREREQFUNC_OK;
}

void HttpClientCore::deliver_head(Transfer& transfer) {
  transfer.head_sent = true;
  if (transfer.status == 0) {
    long code = 0;  // curl's type
    curl().easy_getinfo(transfer.easy, CURLINFO_RESPONSE_CODE, &code);
    transfer.status = static_cast<int>(code);
  }
  if (transfer.callbacks.on_head) transfer.callbacks.on_head(transfer.status, std::move(transfer.headers));
  transfer.headers.clear();
}

std::size_t HttpClientCore::on_header(char* bytes, std::size_t size, std::size_t count, void* data) {
  auto& transfer = *static_cast<Transfer*>(data);
  const std::size_t length = size * count;
  if (transfer.state->cancelled.load(std::memory_order_acquire)) return 0;
  const auto core = transfer.state->core.lock();
  if (core == nullptr) return 0;
  if (transfer.head_sent) return length;  // trailers
  core->push_deadline(transfer, Transfer::Phase::streaming, transfer.request.timeouts.idle);
  const std::string_view line(bytes, length);
  if (line.rfind("HTTP/", 0) == 0) {
    transfer.headers.clear();
    transfer.status = 0;
    const std::size_t space = line.find(' ');
    if (space != std::string_view::npos) {
      for (std::size_t i = space + 1; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) {
        transfer.status = transfer.status * 10 + (line[i] - '0');
      }
    }
    return length;
  }
  if (trim(line).empty()) {
    if (transfer.status >= 100 && transfer.status < 200) {  // an interim head (100 Continue): the real one follows
      transfer.headers.clear();
      transfer.status = 0;
      return length;
    }
    core->deliver_head(transfer);
    return length;
  }
  const std::size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    transfer.headers.emplace_back(lower_case(trim(line.substr(0, colon))), std::string(trim(line.substr(colon + 1))));
  }
  return length;
}

std::size_t HttpClientCore::on_body(char* bytes, std::size_t size, std::size_t count, void* data) {
  auto& transfer = *static_cast<Transfer*>(data);
  const std::size_t length = size * count;
  if (transfer.state->cancelled.load(std::memory_order_acquire)) return 0;
  const auto core = transfer.state->core.lock();
  if (core == nullptr) return 0;
  if (!transfer.head_sent) core->deliver_head(transfer);
  transfer.received += length;
  if (transfer.received > transfer.request.max_body) {
    transfer.too_large = true;
    return 0;
  }
  core->push_deadline(transfer, Transfer::Phase::streaming, transfer.request.timeouts.idle);
  if (transfer.callbacks.on_data) transfer.callbacks.on_data(std::string_view(bytes, length));
  return length;
}

// --- stopping ----------------------------------------------------------------

void HttpClientCore::cancel_all_marks() {
  for (auto& [state, transfer] : transfers) transfer->state->cancelled.store(true, std::memory_order_release);
}

// On the loop's thread (or with the loop no longer running), outside curl.
void HttpClientCore::stop_here() {
  if (multi == nullptr) return;
  stopped = true;
  cancel_all_marks();
  while (!transfers.empty()) finish(*transfers.begin()->second, HttpResult{HttpOutcome::cancelled, 0, "cancelled"});
  timer.cancel();
  while (!watches.empty()) forget(watches.begin()->first);
  closing = true;
  ++in_curl;
  curl().multi_cleanup(multi);  // closes the kept connections
  --in_curl;
  multi = nullptr;
}

}  // namespace detail

// --- HttpTransfer ----------------------------------------------------------

void HttpTransfer::cancel() const {
  if (state_ == nullptr) return;
  if (state_->cancelled.exchange(true, std::memory_order_acq_rel)) return;
  const auto core = state_->core.lock();
  if (core == nullptr) return;
  asio::post(core->context, [weak = state_->core, state = state_] {
    if (const auto alive = weak.lock()) alive->cancel(state.get());
  });
}

// --- HttpClient ------------------------------------------------------------

HttpClient::HttpClient(asio::io_context& context) : core_(std::make_shared<detail::HttpClientCore>(context)) {
  core_->open();
}

HttpClient::~HttpClient() {
  try {
    stop();
  } catch (...) {  // only an allocation or a lock can fail here; nothing is left to report to
    log_message(LogLevel::error, "http", "stopping an HTTP client failed");
  }
}

asio::io_context& HttpClient::context() noexcept { return core_->context; }

HttpTransfer HttpClient::start(HttpRequest request, HttpCallbacks callbacks) {
  auto state = std::make_shared<detail::HttpTransferState>();
  state->core = core_;
  if (core_->stopping.load(std::memory_order_acquire)) {
    if (callbacks.on_done) callbacks.on_done(HttpResult{HttpOutcome::cancelled, 0, "cancelled"});
    return HttpTransfer(std::move(state));
  }
  if (core_->context.get_executor().running_in_this_thread() && core_->in_curl == 0) {
    core_->begin(state, std::move(request), std::move(callbacks));
  } else {
    asio::post(core_->context, [weak = std::weak_ptr<detail::HttpClientCore>(core_), state,
                                request = std::move(request), callbacks = std::move(callbacks)]() mutable {
      if (const auto core = weak.lock()) {
        core->begin(state, std::move(request), std::move(callbacks));
      } else if (callbacks.on_done) {
        callbacks.on_done(HttpResult{HttpOutcome::cancelled, 0, "cancelled"});
      }
    });
  }
  return HttpTransfer(std::move(state));
}

void HttpClient::stop() {
  const std::shared_ptr<detail::HttpClientCore> core = core_;
  if (core->stopping.exchange(true, std::memory_order_acq_rel)) return;
  if (core->context.get_executor().running_in_this_thread()) {
    if (core->in_curl == 0) {
      core->stop_here();
    } else {
      // Inside a curl callback (an on_data that stops): nothing more is
      // delivered but the cancellations, which run once curl has returned.
      core->cancel_all_marks();
      asio::post(core->context, [core] { core->stop_here(); });
    }
    return;
  }
  if (core->context.stopped()) {
    core->stop_here();
    return;
  }
  // Whoever claims the work does it: the loop, or this thread once the loop
  // no longer runs.
  struct Handoff {
    std::atomic<bool> claimed{false};
    std::mutex mutex;  // guards done
    std::condition_variable finished;
    bool done = false;
  };
  auto handoff = std::make_shared<Handoff>();
  asio::post(core->context, [core, handoff] {
    if (!handoff->claimed.exchange(true)) core->stop_here();
    std::lock_guard lock(handoff->mutex);
    handoff->done = true;
    handoff->finished.notify_all();
  });
  std::unique_lock lock(handoff->mutex);
  while (!handoff->finished.wait_for(lock, std::chrono::milliseconds(50), [&] { return handoff->done; })) {
    if (core->context.stopped() && !handoff->claimed.exchange(true)) {
      lock.unlock();
      core->stop_here();
      return;
    }
  }
}

// --- HttpClients -----------------------------------------------------------

HttpClients::HttpClients(const EventLoops& loops) {
  for (asio::io_context* context : loops.contexts()) clients_.push_back(std::make_unique<HttpClient>(*context));
}

HttpClients::~HttpClients() {
  try {
    stop();
  } catch (...) {  // as ~HttpClient
    log_message(LogLevel::error, "http", "stopping the HTTP clients failed");
  }
}

HttpTransfer HttpClients::start(HttpRequest request, HttpCallbacks callbacks) {
  for (const auto& client : clients_) {
    if (client->context().get_executor().running_in_this_thread()) {
      return client->start(std::move(request), std::move(callbacks));
    }
  }
  HttpClient& next = *clients_[turn_.fetch_add(1, std::memory_order_relaxed) % clients_.size()];
  return next.start(std::move(request), std::move(callbacks));
}

void HttpClients::stop() {
  for (const auto& client : clients_) client->stop();
}

}  // namespace passepartout
