#include "model_stub.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <utility>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <nlohmann/json.hpp>

namespace passepartout::bench {
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using nlohmann::json;

namespace {

// One server-sent event carrying `text` as the delta of choice 0.
std::string event(std::string_view text) {
  return std::string(R"(data: {"choices":[{"index":0,"delta":{"content":")") + std::string(text) + "\"}}]}\n\n";
}

constexpr std::string_view kDone = "data: [DONE]\n\n";

std::string chunked(std::string_view bytes) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
  return std::string(size) + std::string(bytes) + "\r\n";
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

struct ModelStub::Connection {
  explicit Connection(tcp::socket s) : socket(std::move(s)), timer(socket.get_executor()) {}
  tcp::socket socket;
  asio::steady_timer timer;
  asio::streambuf in;
  std::string out;
  int chunks_left = 0;
};

ModelStub::ModelStub(Mode mode, std::chrono::milliseconds pause, int chunks_per_answer)
    : mode_(mode), pause_(pause), chunks_per_answer_(chunks_per_answer), acceptor_(context_) {
  start();
}

ModelStub::ModelStub(ToolCall call)
    : mode_(Mode::tool_call), pause_(0), chunks_per_answer_(1), acceptor_(context_), call_(std::move(call)) {
  start();
}

void ModelStub::start() {
  const tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), 0);
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen(4096);  // a thousand clients may connect at once
  port_ = acceptor_.local_endpoint().port();
  accept();
  thread_ = std::thread([this] { context_.run(); });
}

ModelStub::~ModelStub() {
  asio::post(context_, [this] {
    acceptor_.close();
    context_.stop();
  });
  thread_.join();
}

std::string ModelStub::base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }

std::vector<std::string> ModelStub::last_headers() const {
  const std::lock_guard lock(mutex_);
  return last_headers_;
}

std::string ModelStub::last_body() const {
  const std::lock_guard lock(mutex_);
  return last_body_;
}

void ModelStub::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& error, tcp::socket socket) {
    if (error) return;  // closed
    socket.set_option(tcp::no_delay(true));
    connections_.fetch_add(1);
    serve(std::make_shared<Connection>(std::move(socket)));
    accept();
  });
}

// Reads one request (head, then a Content-Length body), answers, repeats.
void ModelStub::serve(const std::shared_ptr<Connection>& connection) {
  asio::async_read_until(
      connection->socket, connection->in, "\r\n\r\n",
      [this, connection](const boost::system::error_code& error, std::size_t head_size) {
        if (error) return;  // the client closed: the connection goes with its last handler
        const std::string head(asio::buffers_begin(connection->in.data()),
                               asio::buffers_begin(connection->in.data()) + static_cast<std::ptrdiff_t>(head_size));
        connection->in.consume(head_size);
        std::size_t body_size = 0;
        std::vector<std::string> headers;
        std::size_t at = head.find("\r\n") + 2;  // after the request line
        while (at < head.size()) {
          const std::size_t end = head.find("\r\n", at);
          if (end == std::string::npos || end == at) break;
          const std::string line = head.substr(at, end - at);
          at = end + 2;
          const std::string name = lower(line.substr(0, line.find(':')));
          if (name == "content-length") {
            body_size = std::strtoul(line.c_str() + line.find(':') + 1, nullptr, 10);
          } else if (name != "host") {
            headers.push_back(line);
          }
        }
        const std::size_t buffered = connection->in.size();
        const std::size_t missing = body_size > buffered ? body_size - buffered : 0;
        asio::async_read(connection->socket, connection->in, asio::transfer_exactly(missing),
                         [this, connection, body_size, headers = std::move(headers)](
                             const boost::system::error_code& read_error, std::size_t /*bytes*/) mutable {
                           const auto read_at = std::chrono::steady_clock::now();
                           if (read_error) return;
                           std::string body(
                               asio::buffers_begin(connection->in.data()),
                               asio::buffers_begin(connection->in.data()) + static_cast<std::ptrdiff_t>(body_size));
                           connection->in.consume(body_size);
                           // Tool-call mode answers before it keeps the request: the daemon waits for it.
                           if (mode_ == Mode::tool_call) respond_to_call(connection, body, read_at);
                           {
                             const std::lock_guard lock(mutex_);
                             last_headers_ = std::move(headers);
                             last_body_ = std::move(body);
                           }
                           requests_.fetch_add(1);
                           if (mode_ != Mode::tool_call) respond(connection);
                         });
      });
}

void ModelStub::respond(const std::shared_ptr<Connection>& connection) {
  if (mode_ == Mode::stepped) {
    connection->out = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
    connection->chunks_left = chunks_per_answer_;
    asio::async_write(connection->socket, asio::buffer(connection->out),
                      [this, connection](const boost::system::error_code& error, std::size_t /*bytes*/) {
                        if (!error) step(connection);
                      });
    return;
  }
  auto answer = [this, connection] {
    const std::string body = event("pong") + std::string(kDone);
    connection->out =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: " + std::to_string(body.size()) +
        "\r\n\r\n" + body;
    asio::async_write(connection->socket, asio::buffer(connection->out),
                      [this, connection](const boost::system::error_code& error, std::size_t /*bytes*/) {
                        if (!error) serve(connection);
                      });
  };
  if (pause_.count() == 0) {
    answer();
    return;
  }
  connection->timer.expires_after(pause_);
  connection->timer.async_wait([answer](const boost::system::error_code& error) {
    if (!error) answer();
  });
}

// Stepped mode: the next chunk once one is released, then the end.
void ModelStub::step(const std::shared_ptr<Connection>& connection) {
  if (connection->chunks_left == 0) {
    connection->out = chunked(kDone) + "0\r\n\r\n";
    asio::async_write(connection->socket, asio::buffer(connection->out),
                      [this, connection](const boost::system::error_code& error, std::size_t /*bytes*/) {
                        if (!error) serve(connection);
                      });
    return;
  }
  if (credits_ == 0) {
    waiting_ = connection;
    return;
  }
  --credits_;
  --connection->chunks_left;
  connection->out = chunked(event("c"));
  written_at_.store(std::chrono::steady_clock::now().time_since_epoch().count());
  asio::async_write(connection->socket, asio::buffer(connection->out),
                    [this, connection](const boost::system::error_code& error, std::size_t /*bytes*/) {
                      if (!error) step(connection);
                    });
}

// Tool-call mode: a request whose last message is a tool's result ends the
// chat with "pong" (and closes the gap opened when the call was written);
// any other starts it with a call of the tool.
void ModelStub::respond_to_call(const std::shared_ptr<Connection>& connection, const std::string& body,
                                std::chrono::steady_clock::time_point read_at) {
  bool carries_result = false;
  bool expected = false;
  const json request = json::parse(body, nullptr, false);
  if (request.is_object() && request.contains("messages") && request["messages"].is_array() &&
      !request["messages"].empty()) {
    const json& last = request["messages"].back();
    carries_result = last.is_object() && last.value("role", "") == "tool";
    expected = carries_result && last.dump().find(call_.expect) != std::string::npos;
  } else {
    carries_result = true;  // not a chat request: counted as unexpected, answered with the end
  }
  json answer;
  if (carries_result) {
    if (awaiting_result_) {
      const std::lock_guard lock(mutex_);
      call_gaps_.push_back(std::chrono::duration<double, std::micro>(read_at - call_written_at_).count());
    }
    awaiting_result_ = false;
    if (!expected) unexpected_results_.fetch_add(1);
    answer = {{"id", "chatcmpl-2"},
              {"object", "chat.completion"},
              {"choices",
               {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", "pong"}}}, {"finish_reason", "stop"}}}},
              {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 5}}}};
  } else {
    const std::string id = "call_" + std::to_string(++calls_made_);
    answer = {{"id", "chatcmpl-1"},
              {"object", "chat.completion"},
              {"choices",
               {{{"index", 0},
                 {"message",
                  {{"role", "assistant"},
                   {"content", nullptr},
                   {"tool_calls",
                    {{{"id", id},
                      {"type", "function"},
                      {"function", {{"name", call_.name}, {"arguments", call_.arguments}}}}}}}},
                 {"finish_reason", "tool_calls"}}}},
              {"usage", {{"prompt_tokens", 10}, {"completion_tokens", 5}}}};
  }
  const std::string text = answer.dump();
  connection->out =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(text.size()) +
      "\r\n\r\n" + text;
  if (!carries_result) {
    awaiting_result_ = true;
    call_written_at_ = std::chrono::steady_clock::now();  // the write starts now, on this thread
  }
  asio::async_write(connection->socket, asio::buffer(connection->out),
                    [this, connection](const boost::system::error_code& error, std::size_t /*bytes*/) {
                      if (!error) serve(connection);
                    });
}

std::vector<double> ModelStub::call_gaps() const {
  const std::lock_guard lock(mutex_);
  return call_gaps_;
}

void ModelStub::clear_call_gaps() {
  const std::lock_guard lock(mutex_);
  call_gaps_.clear();
}

void ModelStub::release_chunk() {
  asio::post(context_, [this] {
    ++credits_;
    if (auto connection = std::exchange(waiting_, nullptr)) step(connection);
  });
}

}  // namespace passepartout::bench
