// Test support: the loopback HTTP/1.1 stub. Requests are parsed by Beast; the
// responses are written as raw bytes so that chunks, pauses and resets are exact.
#include "support/http_stub.hpp"

#include <algorithm>
// GCC 12 reports a "potential null pointer dereference" inside Asio's epoll
// reactor (a false positive); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#pragma GCC diagnostic pop
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

namespace passepartout::testing {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;

StubResponse StubResponse::text(std::string body, int status) {
  StubResponse response;
  response.status = status;
  response.chunked = false;
  response.chunks.push_back(StubChunk{std::move(body), {}});
  return response;
}

std::string StubRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (key == name) return value;
  }
  return {};
}

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  return out;
}

}  // namespace

struct HttpStub::Impl {
  asio::io_context context{1};
  tcp::acceptor acceptor{context};
  std::thread thread;
  std::uint16_t port = 0;

  mutable std::mutex mutex;  // guards everything below
  mutable std::condition_variable changed;
  std::deque<StubResponse> queue;
  StubResponse fallback = StubResponse::text("ok");
  std::vector<StubRequest> requests;
  std::size_t accepted = 0;
  std::size_t closed = 0;

  StubResponse take() {
    std::lock_guard lock(mutex);
    if (queue.empty()) return fallback;
    StubResponse next = std::move(queue.front());
    queue.pop_front();
    return next;
  }
  void accept();
};

namespace {

// One accepted connection, on the stub's thread. A read is always pending, so
// the client closing is seen at once, even in the middle of a response.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpStub::Impl& stub, tcp::socket socket, std::size_t id)
      : stub_(stub), socket_(std::move(socket)), pause_(socket_.get_executor()), id_(id) {}

  void read() {
    parser_.emplace();
    parser_->body_limit(std::uint64_t{64} << 20U);
    http::async_read(
        socket_, buffer_, *parser_,
        [self = shared_from_this()](boost::system::error_code error, std::size_t) { self->on_read(error); });
  }

 private:
  void on_read(boost::system::error_code error) {
    if (error) {
      if (!closed_by_us_) {
        std::lock_guard lock(stub_.mutex);
        ++stub_.closed;
        stub_.changed.notify_all();
      }
      shut();
      return;
    }
    const auto& message = parser_->get();
    StubRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    for (const auto& field : message) {
      request.headers.emplace_back(lower(std::string_view(field.name_string().data(), field.name_string().size())),
                                   std::string(field.value()));
    }
    request.body = message.body();
    request.connection = id_;
    {
      std::lock_guard lock(stub_.mutex);
      stub_.requests.push_back(std::move(request));
      stub_.changed.notify_all();
    }
    pending_.push_back(stub_.take());
    if (!writing_) write_next();
    read();
  }

  void shut() {
    done_ = true;
    pause_.cancel();
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  void close_by_us(bool reset) {
    closed_by_us_ = true;
    if (reset) {
      boost::system::error_code ignored;
      socket_.set_option(asio::socket_base::linger(true, 0), ignored);
    }
    shut();
  }

  void after(std::chrono::milliseconds pause, void (Connection::*next)()) {
    if (pause.count() <= 0) {
      (this->*next)();
      return;
    }
    pause_.expires_after(pause);
    pause_.async_wait([self = shared_from_this(), next](boost::system::error_code error) {
      if (!error && !self->done_) ((*self).*next)();
    });
  }

  void send(std::string bytes, void (Connection::*next)()) {
    out_ = std::move(bytes);
    asio::async_write(socket_, asio::buffer(out_),
                      [self = shared_from_this(), next](boost::system::error_code error, std::size_t) {
                        if (!error && !self->done_) ((*self).*next)();
                      });
  }

  void write_next() {
    if (done_ || pending_.empty()) {
      writing_ = false;
      return;
    }
    writing_ = true;
    current_ = std::move(pending_.front());
    pending_.pop_front();
    next_chunk_ = 0;
    if (current_.ending == StubResponse::Ending::close_unanswered) {
      close_by_us(false);
      return;
    }
    after(current_.head_pause, &Connection::write_head);
  }

  void write_head() {
    std::string head = "HTTP/1.1 " + std::to_string(current_.status) + " " +
                       std::string(http::obsolete_reason(http::int_to_status(static_cast<unsigned>(current_.status)))) +
                       "\r\n";
    for (const auto& [name, value] : current_.headers) head += name + ": " + value + "\r\n";
    if (current_.chunked) {
      head += "Transfer-Encoding: chunked\r\n";
    } else {
      std::size_t length = 0;
      for (const StubChunk& chunk : current_.chunks) length += chunk.bytes.size();
      head += "Content-Length: " + std::to_string(length) + "\r\n";
    }
    head += "\r\n";
    send(std::move(head), &Connection::write_chunk);
  }

  void write_chunk() {
    if (next_chunk_ == current_.chunks.size()) {
      end_body();
      return;
    }
    after(current_.chunks[next_chunk_].pause, &Connection::send_chunk);
  }

  void send_chunk() {
    const std::string& bytes = current_.chunks[next_chunk_++].bytes;
    if (bytes.empty()) {
      write_chunk();
      return;
    }
    if (!current_.chunked) {
      send(bytes, &Connection::write_chunk);
      return;
    }
    char size[32];
    const int length = std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
    send(std::string(size, static_cast<std::size_t>(length)) + bytes + "\r\n", &Connection::write_chunk);
  }

  void end_body() {
    if (current_.ending == StubResponse::Ending::reset) {
      close_by_us(true);
      return;
    }
    if (current_.chunked) {
      send("0\r\n\r\n", &Connection::write_next);
    } else {
      write_next();
    }
  }

  HttpStub::Impl& stub_;
  tcp::socket socket_;
  asio::steady_timer pause_;
  std::size_t id_;
  boost::beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<StubResponse> pending_;
  StubResponse current_;
  std::size_t next_chunk_ = 0;
  std::string out_;
  bool writing_ = false;
  bool done_ = false;
  bool closed_by_us_ = false;
};

}  // namespace

void HttpStub::Impl::accept() {
  acceptor.async_accept([this](boost::system::error_code error, tcp::socket socket) {
    if (error) return;  // the stub stops
    std::size_t id = 0;
    {
      std::lock_guard lock(mutex);
      id = ++accepted;
    }
    std::make_shared<Connection>(*this, std::move(socket), id)->read();
    accept();
  });
}

HttpStub::HttpStub() : impl_(std::make_shared<Impl>()) {
  const tcp::endpoint endpoint(asio::ip::address_v4::loopback(), 0);
  impl_->acceptor.open(endpoint.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(endpoint);
  impl_->acceptor.listen();
  impl_->port = impl_->acceptor.local_endpoint().port();
  impl_->accept();
  impl_->thread = std::thread([impl = impl_.get()] { impl->context.run(); });
}

HttpStub::~HttpStub() {
  impl_->context.stop();
  impl_->thread.join();
}

std::uint16_t HttpStub::port() const noexcept { return impl_->port; }

std::string HttpStub::url(std::string_view target, std::string_view host) const {
  return "http://" + std::string(host) + ":" + std::to_string(impl_->port) + std::string(target);
}

void HttpStub::enqueue(StubResponse response) {
  std::lock_guard lock(impl_->mutex);
  impl_->queue.push_back(std::move(response));
}

void HttpStub::set_default(StubResponse response) {
  std::lock_guard lock(impl_->mutex);
  impl_->fallback = std::move(response);
}

std::vector<StubRequest> HttpStub::requests() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->requests;
}

std::size_t HttpStub::connections_accepted() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->accepted;
}

std::size_t HttpStub::connections_closed() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->closed;
}

bool HttpStub::wait_connections_closed(std::size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex);
  return impl_->changed.wait_for(lock, timeout, [&] { return impl_->closed >= count; });
}

bool HttpStub::wait_requests(std::size_t count, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(impl_->mutex);
  return impl_->changed.wait_for(lock, timeout, [&] { return impl_->requests.size() >= count; });
}

}  // namespace passepartout::testing
