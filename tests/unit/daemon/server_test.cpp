// Tests for the daemon server over real sockets (loopback TCP on port 0 and a
// Unix socket in a temp dir): handshake, health, handler replies, errors that
// close one connection only, limits, timeouts and the graceful stop.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon/frame_codec.hpp"
#include "daemon/protocol.hpp"
#include "daemon/server.hpp"
#include "support/loopback.hpp"
#include "support/skill_fixtures.hpp"
#include "support/wire_client.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

using namespace passepartout;
using passepartout::testing::TempDir;
using passepartout::testing::WireClient;
using namespace std::chrono_literals;

namespace {

// Generous bound for anything the tests wait for; nothing should come close.
constexpr auto kWait = 20s;

// Records requests; what it replies is up to `on_request` (default: echo).
class TestHandler final : public RequestHandler {
 public:
  using Callback = std::function<void(Value, const ConnectionInfo&, WireReply)>;

  explicit TestHandler(Callback callback = {}) : callback_(std::move(callback)) {}

  void handle(Value message, const ConnectionInfo& connection, WireReply reply) override {
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(message);
    }
    requests_changed_.notify_all();
    if (callback_) {
      callback_(std::move(message), connection, std::move(reply));
      return;
    }
    reply.finish(echo(message, connection));
  }

  static Value echo(const Value& message, const ConnectionInfo& connection) {
    return make_ok_response("echo", Value::plist({{"ECHO", message},
                                                  {"AUTHENTICATED", Value::boolean(connection.authenticated)},
                                                  {"TRANSPORT", Value::keyword(to_string(connection.transport))}}));
  }

  bool wait_for_requests(std::size_t count) {
    std::unique_lock lock(mutex_);
    return requests_changed_.wait_for(lock, kWait, [&] { return requests_.size() >= count; });
  }
  std::size_t request_count() {
    std::lock_guard lock(mutex_);
    return requests_.size();
  }

 private:
  Callback callback_;
  std::mutex mutex_;  // guards requests_
  std::condition_variable requests_changed_;
  std::vector<Value> requests_;
};

// A handler that keeps each reply sink for the test to answer later.
class HoldingHandler final : public RequestHandler {
 public:
  void handle(Value message, const ConnectionInfo&, WireReply reply) override {
    {
      std::lock_guard lock(mutex_);
      held_.push_back({std::move(message), std::move(reply)});
    }
    changed_.notify_all();
  }

  // The `index`th request's sink, once it arrived.
  WireReply wait_sink(std::size_t index) {
    std::unique_lock lock(mutex_);
    REQUIRE(changed_.wait_for(lock, kWait, [&] { return held_.size() > index; }));
    return held_[index].second;
  }
  Value message(std::size_t index) {
    std::lock_guard lock(mutex_);
    return held_.at(index).first;
  }
  std::size_t count() {
    std::lock_guard lock(mutex_);
    return held_.size();
  }
  void release_all() {
    std::lock_guard lock(mutex_);
    held_.clear();
  }

 private:
  std::mutex mutex_;  // guards held_
  std::condition_variable changed_;
  std::vector<std::pair<Value, WireReply>> held_;
};

ServerOptions tcp_options() {
  ServerOptions options;
  options.tcp_port = 0;
  options.version = "9.9.9-test";
  options.linger = 5s;
  return options;
}

std::unique_ptr<Server> start_server(ServerOptions options, std::shared_ptr<RequestHandler> handler,
                                     HealthProbe health = {}) {
  auto server = Server::start(std::move(options), std::move(handler), std::move(health));
  if (!server) FAIL("server did not start: " << server.error().message);
  return std::move(*server);
}

const Value& echoed(const Value& reply) { return reply.path({"PAYLOAD", "ECHO"}); }

// One short client session for the load test, on a worker thread (so without
// Catch assertions): connect, read the handshake, optionally make a request
// and read its reply, close. True when everything arrived.
bool serve_one_connection(std::uint16_t port, bool with_request) {
  const int fd = testing::connect_loopback(port);
  if (fd < 0) return false;
  timeval timeout{};
  timeout.tv_sec = std::chrono::duration_cast<std::chrono::seconds>(kWait).count();
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  FrameDecoder decoder;
  const auto next_frame = [&]() -> std::optional<Value> {
    for (;;) {
      if (auto message = decoder.next()) return message;
      char buffer[1024];
      const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
      if (got <= 0 || !decoder.feed(std::string_view(buffer, static_cast<std::size_t>(got)))) return std::nullopt;
    }
  };
  const auto hello = next_frame();
  bool ok = hello && is_handshake(*hello);
  if (ok && with_request) {
    const std::string request = "000010(:TYPE :REQUEST)";
    ok = ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size());
    const auto reply = ok ? next_frame() : std::nullopt;
    ok = reply && is_ok_response(*reply);
  }
  ::close(fd);
  return ok;
}

}  // namespace

TEST_CASE("server speaks first with the handshake on TCP and on the Unix socket", "[daemon][concurrency]") {
  TempDir dir;
  ServerOptions options = tcp_options();
  options.unix_socket_path = dir.path() / "daemon.sock";
  options.capabilities = {"AUTH", "STREAM-CHUNK"};
  auto server = start_server(options, std::make_shared<TestHandler>());
  REQUIRE(server->tcp_port() != 0);

  WireClient over_tcp = WireClient::tcp(server->tcp_port());
  const Value hello = over_tcp.expect_handshake();
  CHECK(to_sexp(hello) ==
        "(:TYPE :EVENT :PAYLOAD (:ACTION :HANDSHAKE :VERSION \"9.9.9-test\" :CAPABILITIES (:AUTH :STREAM-CHUNK)))");

  WireClient over_unix = WireClient::local(server->unix_socket_path());
  CHECK(over_unix.expect_handshake() == hello);
}

TEST_CASE("server handshake carries this build's version by default", "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.version.clear();
  auto server = start_server(options, std::make_shared<TestHandler>());
  WireClient client = WireClient::tcp(server->tcp_port());
  const Value hello = client.expect_handshake();
  CHECK_FALSE(hello.path({"PAYLOAD", "VERSION"}).text().empty());
  CHECK(hello.path({"PAYLOAD", "CAPABILITIES"}) ==
        Value::list({Value::keyword("AUTH"), Value::keyword("HEALTH-CHECK"), Value::keyword("STREAM-CHUNK")}));
}

TEST_CASE("server answers a health check itself from the health probe", "[daemon][concurrency]") {
  auto handler = std::make_shared<TestHandler>();
  auto server = start_server(tcp_options(), handler, [] { return HealthReport{"HEALTHY", true}; });
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send_raw("000015(:type :health-check)");
  CHECK(to_sexp(client.expect_frame()) == "(:TYPE :HEALTH-RESPONSE :STATUS :HEALTHY :CHECKED-P T)");
  CHECK(handler->request_count() == 0);
}

TEST_CASE("server reports an unknown health without a probe", "[daemon][concurrency]") {
  auto server = start_server(tcp_options(), std::make_shared<TestHandler>());
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send("(:TYPE :HEALTH-CHECK)");
  CHECK(to_sexp(client.expect_frame()) == "(:TYPE :HEALTH-RESPONSE :STATUS :UNKNOWN :CHECKED-P NIL)");
}

TEST_CASE("server hands other messages to the handler and sends its reply", "[daemon][concurrency]") {
  auto server = start_server(tcp_options(), std::make_shared<TestHandler>());
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send("(:TYPE :EVENT :META (:SOURCE :TUI) :PAYLOAD (:SENSOR :USER-INPUT :TEXT \"naïve café\"))");
  const Value reply = client.expect_frame();
  CHECK(is_ok_response(reply));
  CHECK(echoed(reply).path({"PAYLOAD", "TEXT"}) == Value::string("naïve café"));
  CHECK(reply.path({"PAYLOAD", "TRANSPORT"}) == Value::keyword("TCP"));

  const ServerCounters counters = server->counters();
  CHECK(counters.frames_in == 1);
  CHECK(counters.frames_out >= 1);  // the handshake; the reply may still be on its way out of the counter
  CHECK(counters.connections_open == 1);
  CHECK(counters.connections_total == 1);
}

// After a read that empties the socket the server waits for readiness before
// it reads again; after one that fills its buffer it reads at once. Both must
// lose nothing: a frame dribbled in a byte at a time (each byte its own short
// read, then a wait) and a frame larger than the read buffer (full reads).
TEST_CASE("server reads frames however they arrive: a byte at a time, or larger than its buffer",
          "[daemon][concurrency]") {
  TempDir dir;
  ServerOptions options = tcp_options();
  options.unix_socket_path = dir.path() / "daemon.sock";
  auto server = start_server(options, std::make_shared<TestHandler>());
  for (const bool over_tcp : {true, false}) {
    WireClient client = over_tcp ? WireClient::tcp(server->tcp_port()) : WireClient::local(server->unix_socket_path());
    client.expect_handshake();
    const std::string small = "000015(:TYPE :REQUEST :N 1)";
    for (const char byte : small) {
      client.send_raw(std::string(1, byte));
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // lets the server read each byte alone
    }
    CHECK(echoed(client.expect_frame()).at("N") == Value::integer(1));

    const std::string text(100 * 1024, 'x');  // several reads of a 16 KiB buffer
    client.send("(:TYPE :REQUEST :N 2 :TEXT \"" + text + "\")");
    const Value big = echoed(client.expect_frame());
    CHECK(big.at("N") == Value::integer(2));
    CHECK(big.at("TEXT").text() == text);

    // And the small one again, after the full reads.
    client.send_raw(small);
    CHECK(echoed(client.expect_frame()).at("N") == Value::integer(1));
  }
}

TEST_CASE("server answers pipelined requests in order, stream chunks before each final frame",
          "[daemon][concurrency]") {
  std::mutex workers_mutex;  // guards workers
  std::vector<std::thread> workers;
  auto handler = std::make_shared<TestHandler>([&](Value message, const ConnectionInfo&, WireReply reply) {
    const std::int64_t chunks = message.at("CHUNKS").as_integer();
    // Answered from another thread, as a provider would.
    std::lock_guard lock(workers_mutex);
    workers.emplace_back([message, chunks, reply]() mutable {
      for (std::int64_t i = 0; i < chunks; ++i) reply.send(make_stream_chunk("part " + std::to_string(i)));
      reply.finish(make_ok_response("done", Value::plist({{"N", message.at("N")}})));
    });
  });
  auto server = start_server(tcp_options(), handler);
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  std::string burst;
  for (int n = 0; n < 5; ++n) {
    burst += *FrameCodec().encode(Value::plist(
        {{"TYPE", Value::keyword("REQUEST")}, {"N", Value::integer(n)}, {"CHUNKS", Value::integer(n % 3)}}));
  }
  client.send_raw(burst);
  for (int n = 0; n < 5; ++n) {
    for (int i = 0; i < n % 3; ++i) {
      const Value chunk = client.expect_frame();
      CHECK(is_stream_chunk(chunk));
      CHECK(chunk.path({"PAYLOAD", "TEXT"}) == Value::string("part " + std::to_string(i)));
    }
    const Value final = client.expect_frame();
    CHECK(is_ok_response(final));
    CHECK(final.path({"PAYLOAD", "N"}) == Value::integer(n));
  }
  client.close();
  server->stop();
  for (std::thread& worker : workers) worker.join();
}

// A reply is written at once when the socket takes it all, and what it does
// not take is written later: frames far larger than the socket's buffers
// (8 x 900 KiB against Linux's default 4 MiB most for a TCP send buffer),
// sent to a client that reads only after a while, arrive whole and in order.
TEST_CASE("replies larger than the socket takes at once reach a late reader whole and in order",
          "[daemon][concurrency]") {
  constexpr std::size_t kChunk = 900 * 1024;  // under the default 1 MiB frame limit
  auto handler = std::make_shared<TestHandler>([](Value, const ConnectionInfo&, WireReply reply) {
    for (const char fill : std::string_view("abcdefgh")) reply.send(make_stream_chunk(std::string(kChunk, fill)));
    reply.finish(make_ok_response("done"));
  });
  auto server = start_server(tcp_options(), handler);
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send("(:TYPE :REQUEST)");
  REQUIRE(handler->wait_for_requests(1));
  std::this_thread::sleep_for(300ms);  // let the server's writes find the socket full
  for (const char fill : std::string_view("abcdefgh")) {
    const Value chunk = client.expect_frame();
    REQUIRE(is_stream_chunk(chunk));
    const Value& text = chunk.path({"PAYLOAD", "TEXT"});
    REQUIRE(text.is_string());
    CHECK(text.text().size() == kChunk);
    CHECK(text.text().find_first_not_of(fill) == std::string_view::npos);
  }
  CHECK(client.expect_frame().path({"PAYLOAD", "MESSAGE"}) == Value::string("done"));
  client.send("(:TYPE :REQUEST)");  // the connection still serves
  CHECK(is_stream_chunk(client.expect_frame()));
}

TEST_CASE("server holds later requests until the current one is answered", "[daemon][concurrency]") {
  auto handler = std::make_shared<HoldingHandler>();
  auto server = start_server(tcp_options(), handler);
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send("(:TYPE :REQUEST :N 1)");
  client.send("(:TYPE :REQUEST :N 2)");
  WireReply first = handler->wait_sink(0);
  CHECK(handler->count() == 1);  // the second waits for the first reply
  CHECK(first.is_open());
  CHECK(first.finish(make_ok_response("one")));
  CHECK_FALSE(first.is_open());
  CHECK_FALSE(first.finish(make_ok_response("again")));
  CHECK(client.expect_frame().path({"PAYLOAD", "MESSAGE"}) == Value::string("one"));
  WireReply second = handler->wait_sink(1);
  CHECK(handler->message(1).at("N") == Value::integer(2));
  second.finish(make_ok_response("two"));
  CHECK(client.expect_frame().path({"PAYLOAD", "MESSAGE"}) == Value::string("two"));
}

TEST_CASE("server pauses reading while requests queue up and answers them all in order", "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.max_queued_requests = 2;
  auto handler = std::make_shared<HoldingHandler>();
  auto server = start_server(options, handler);
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  std::string burst;
  for (int n = 0; n < 8; ++n) {
    burst += *FrameCodec().encode(Value::plist({{"TYPE", Value::keyword("REQUEST")}, {"N", Value::integer(n)}}));
  }
  client.send_raw(burst);
  for (std::size_t n = 0; n < 8; ++n) {
    WireReply reply = handler->wait_sink(n);
    CHECK(handler->message(n).at("N") == Value::integer(static_cast<std::int64_t>(n)));
    reply.finish(make_ok_response("answer " + std::to_string(n)));
    CHECK(client.expect_frame().path({"PAYLOAD", "MESSAGE"}) == Value::string("answer " + std::to_string(n)));
  }
  CHECK(server->counters().errors == 0);
}

TEST_CASE("server moves on when a handler drops its reply without answering", "[daemon][concurrency]") {
  auto handler = std::make_shared<TestHandler>([](Value message, const ConnectionInfo& connection, WireReply reply) {
    if (message.at("QUIET")) return;  // the sink goes out of scope unanswered
    reply.finish(TestHandler::echo(message, connection));
  });
  auto server = start_server(tcp_options(), handler);
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send("(:TYPE :EVENT :QUIET T)");
  client.send("(:TYPE :EVENT :N 2)");
  CHECK(echoed(client.expect_frame()).at("N") == Value::integer(2));
}

TEST_CASE("server answers INTERNAL when the handler throws and keeps the connection", "[daemon][concurrency]") {
  auto handler = std::make_shared<TestHandler>([](Value message, const ConnectionInfo& connection, WireReply reply) {
    if (message.at("THROW")) throw std::runtime_error("boom");
    reply.finish(TestHandler::echo(message, connection));
  });
  auto server = start_server(tcp_options(), handler);
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send("(:TYPE :REQUEST :THROW T)");
  const Value failed = client.expect_frame();
  CHECK(error_response_code(failed) == "INTERNAL");
  CHECK(failed.path({"PAYLOAD", "MESSAGE"}) == Value::string("request failed: boom"));
  client.send("(:TYPE :REQUEST :N 3)");
  CHECK(echoed(client.expect_frame()).at("N") == Value::integer(3));
  CHECK(server->counters().errors == 1);
}

TEST_CASE("TCP requests authenticate with the :AUTH token and the Unix socket always counts", "[daemon][concurrency]") {
  TempDir dir;
  ServerOptions options = tcp_options();
  options.unix_socket_path = dir.path() / "auth.sock";
  options.auth_token = "s3cret-token";
  auto server = start_server(options, std::make_shared<TestHandler>());

  WireClient over_tcp = WireClient::tcp(server->tcp_port());
  over_tcp.expect_handshake();
  over_tcp.send("(:TYPE :REQUEST :N 1)");
  CHECK(over_tcp.expect_frame().path({"PAYLOAD", "AUTHENTICATED"}).is_nil());
  over_tcp.send("(:TYPE :REQUEST :AUTH \"wrong-token!\" :N 2)");
  CHECK(over_tcp.expect_frame().path({"PAYLOAD", "AUTHENTICATED"}).is_nil());
  over_tcp.send("(:TYPE :REQUEST :auth \"s3cret-token\" :N 3)");
  const Value accepted = over_tcp.expect_frame();
  CHECK(accepted.path({"PAYLOAD", "AUTHENTICATED"}).is_true());
  CHECK(to_sexp(echoed(accepted)) == "(:TYPE :REQUEST :N 3)");  // the token is removed

  WireClient over_unix = WireClient::local(server->unix_socket_path());
  over_unix.expect_handshake();
  over_unix.send("(:TYPE :REQUEST :N 4)");
  const Value local = over_unix.expect_frame();
  CHECK(local.path({"PAYLOAD", "AUTHENTICATED"}).is_true());
  CHECK(local.path({"PAYLOAD", "TRANSPORT"}) == Value::keyword("UNIX"));
}

TEST_CASE("TCP requests are never authenticated when no token is configured", "[daemon][concurrency]") {
  auto server = start_server(tcp_options(), std::make_shared<TestHandler>());
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send("(:TYPE :REQUEST :AUTH \"\")");
  CHECK(client.expect_frame().path({"PAYLOAD", "AUTHENTICATED"}).is_nil());
}

TEST_CASE("a malformed frame gets an error frame and closes that connection only", "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.frame_limits.max_payload_code_points = 1000;
  auto server = start_server(options, std::make_shared<TestHandler>());
  WireClient bystander = WireClient::tcp(server->tcp_port());
  bystander.expect_handshake();

  struct Case {
    std::string bytes;
    std::string code;
  };
  const std::vector<Case> cases = {
      {"zzzzzz(:TYPE :EVENT)", "BAD-FRAME"}, {"0003E9", "FRAME-TOO-LARGE"},  // 1001 code points announced
      {"FFFFFF", "FRAME-TOO-LARGE"},         {"00000E(#.(run \"rm\"))", "BAD-FRAME"},
      {"000003\"\xFF\"", "BAD-FRAME"},       {std::string(5000, ' '), "BAD-FRAME"},
      {"000004(a b", "BAD-FRAME"},
  };
  for (const Case& c : cases) {
    INFO("sending " << c.bytes.substr(0, 40));
    WireClient offender = WireClient::tcp(server->tcp_port());
    offender.expect_handshake();
    offender.send_raw(c.bytes);
    const Value error = offender.expect_frame();
    CHECK(error_response_code(error) == c.code);
    CHECK(offender.closed_by_server());

    bystander.send("(:TYPE :REQUEST :STILL :HERE)");
    CHECK(echoed(bystander.expect_frame()).at("STILL") == Value::keyword("HERE"));
  }
  CHECK(server->counters().errors == cases.size());
}

TEST_CASE("requests before a malformed frame are answered before its error frame", "[daemon][concurrency]") {
  auto server = start_server(tcp_options(), std::make_shared<TestHandler>());
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send_raw(*FrameCodec().encode(read_sexp("(:TYPE :REQUEST :N 1)").value()) + "garbage");
  CHECK(echoed(client.expect_frame()).at("N") == Value::integer(1));
  CHECK(error_response_code(client.expect_frame()) == "BAD-FRAME");
  CHECK(client.closed_by_server());
}

TEST_CASE("a frame cut short by the client's end of stream gets an error frame", "[daemon][concurrency]") {
  auto server = start_server(tcp_options(), std::make_shared<TestHandler>());
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send("(:TYPE :REQUEST :N 1)");
  client.send_raw("00002C(:TYPE :EVENT");
  // Half-closed: the server sees the end of the stream and still answers.
  client.shutdown_write();
  CHECK(echoed(client.expect_frame()).at("N") == Value::integer(1));
  const Value error = client.expect_frame();
  CHECK(error_response_code(error) == "BAD-FRAME");
  CHECK(error.path({"PAYLOAD", "MESSAGE"}).text().find("the stream ended after 13 of 44 payload code points") !=
        std::string_view::npos);
  CHECK(client.closed_by_server());
}

TEST_CASE("the Unix socket is created with mode 0600", "[daemon][concurrency]") {
  TempDir dir;
  ServerOptions options;
  options.listen_tcp = false;
  options.unix_socket_path = dir.path() / "mode.sock";
  auto server = start_server(options, std::make_shared<TestHandler>());
  struct stat status {};
  REQUIRE(::lstat(options.unix_socket_path.c_str(), &status) == 0);
  CHECK(S_ISSOCK(status.st_mode));
  CHECK((status.st_mode & 07777) == 0600);
  CHECK(server->tcp_port() == 0);
  server->stop();
  CHECK_FALSE(std::filesystem::exists(options.unix_socket_path));  // removed on stop
}

TEST_CASE("a stale Unix socket file is replaced, a live one or another file is not", "[daemon][concurrency]") {
  TempDir dir;
  const auto path = dir.path() / "stale.sock";
  {
    // Bound and closed without unlinking: a file nobody answers on.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.string().size());
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    ::close(fd);
  }
  REQUIRE(std::filesystem::exists(path));
  ServerOptions options;
  options.listen_tcp = false;
  options.unix_socket_path = path;
  auto first = start_server(options, std::make_shared<TestHandler>());
  WireClient::local(path).expect_handshake();

  auto second = Server::start(options, std::make_shared<TestHandler>());
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().code == ErrorCode::refused);
  CHECK(second.error().message == "another server answers on unix socket '" + path.string() + "'");
  WireClient::local(path).expect_handshake();  // the first still serves

  const auto file = dir.path() / "not-a-socket";
  std::ofstream(file) << "keep me";
  options.unix_socket_path = file;
  auto refused = Server::start(options, std::make_shared<TestHandler>());
  REQUIRE_FALSE(refused.has_value());
  CHECK(refused.error().code == ErrorCode::refused);
  CHECK(std::filesystem::file_size(file) == 7);
}

TEST_CASE("server refuses options it cannot serve", "[daemon]") {
  auto handler = std::make_shared<TestHandler>();
  ServerOptions none = tcp_options();
  none.listen_tcp = false;
  CHECK_FALSE(Server::start(none, handler).has_value());
  ServerOptions huge = tcp_options();
  huge.frame_limits.max_payload_code_points = kMaxFrameCodePoints + 1;
  CHECK_FALSE(Server::start(huge, handler).has_value());
  CHECK_FALSE(Server::start(tcp_options(), nullptr).has_value());
  ServerOptions bad_address = tcp_options();
  bad_address.tcp_address = "localhost:80";
  CHECK(Server::start(bad_address, handler).error().code == ErrorCode::invalid_input);
  TempDir dir;
  ServerOptions long_path = tcp_options();
  long_path.unix_socket_path = dir.path() / std::string(120, 'x');
  CHECK(Server::start(long_path, handler).error().code == ErrorCode::invalid_input);
}

TEST_CASE("server reports a TCP port already in use", "[daemon][concurrency]") {
  auto handler = std::make_shared<TestHandler>();
  auto first = start_server(tcp_options(), handler);
  ServerOptions same = tcp_options();
  same.tcp_port = first->tcp_port();
  auto second = Server::start(same, handler);
  REQUIRE_FALSE(second.has_value());
  CHECK(second.error().code == ErrorCode::io_error);
  CHECK(second.error().message.find("cannot listen on 127.0.0.1:" + std::to_string(first->tcp_port())) == 0);
}

TEST_CASE("server serves 1,000 connections opened and closed", "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.threads = 3;
  auto server = start_server(options, std::make_shared<TestHandler>());
  constexpr int kThreads = 4;
  constexpr int kPerThread = 250;
  std::vector<std::future<int>> done;
  for (int t = 0; t < kThreads; ++t) {
    done.push_back(std::async(std::launch::async, [port = server->tcp_port()] {
      int served = 0;
      for (int i = 0; i < kPerThread; ++i) {
        if (serve_one_connection(port, i % 10 == 0)) ++served;  // some also make a request
      }
      return served;
    }));
  }
  int served = 0;
  for (auto& result : done) served += result.get();
  CHECK(served == kThreads * kPerThread);
  REQUIRE(server->wait_connections_open_for_test(0, kWait));
  const ServerCounters counters = server->counters();
  CHECK(counters.connections_total == kThreads * kPerThread);
  CHECK(counters.connections_open == 0);
  CHECK(counters.connections_rejected == 0);
  CHECK(counters.errors == 0);
}

TEST_CASE("at the TCP limit a new connection is served and the silent one is closed to make room",
          "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.max_connections = 2;
  auto server = start_server(options, std::make_shared<TestHandler>());
  WireClient silent = WireClient::tcp(server->tcp_port());
  silent.expect_handshake();
  WireClient talker = WireClient::tcp(server->tcp_port());
  talker.expect_handshake();
  talker.send("(:TYPE :REQUEST)");
  REQUIRE(is_ok_response(talker.expect_frame()));

  WireClient newcomer = WireClient::tcp(server->tcp_port());
  newcomer.expect_handshake();
  newcomer.send("(:TYPE :REQUEST)");
  CHECK(is_ok_response(newcomer.expect_frame()));
  // The one that never spoke goes first, though it was opened before the talker.
  const Value busy = silent.expect_frame();
  CHECK(error_response_code(busy) == "BUSY");
  CHECK(busy.path({"PAYLOAD", "MESSAGE"}) ==
        Value::string("closed to make room for a newer connection: too many TCP connections (the limit is 2)"));
  CHECK(silent.closed_by_server());
  talker.send("(:TYPE :REQUEST)");
  CHECK(is_ok_response(talker.expect_frame()));
  const ServerCounters counters = server->counters();
  CHECK(counters.connections_evicted == 1);
  CHECK(counters.connections_rejected == 0);
}

TEST_CASE("of connections that spoke, the one longest without progress is closed to make room",
          "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.max_connections = 2;
  auto server = start_server(options, std::make_shared<TestHandler>());
  WireClient older = WireClient::tcp(server->tcp_port());
  older.expect_handshake();
  older.send("(:TYPE :REQUEST)");
  REQUIRE(is_ok_response(older.expect_frame()));
  WireClient newer = WireClient::tcp(server->tcp_port());
  newer.expect_handshake();
  newer.send("(:TYPE :REQUEST)");
  REQUIRE(is_ok_response(newer.expect_frame()));
  // `older` caught up again last: `newer` is now the one longest without progress.
  older.send("(:TYPE :REQUEST)");
  REQUIRE(is_ok_response(older.expect_frame()));

  WireClient third = WireClient::tcp(server->tcp_port());
  third.expect_handshake();
  CHECK(error_response_code(newer.expect_frame()) == "BUSY");
  CHECK(newer.closed_by_server());
  older.send("(:TYPE :REQUEST)");
  CHECK(is_ok_response(older.expect_frame()));
}

TEST_CASE("when every connection at the limit is authenticated or busy, a new one gets BUSY and is closed",
          "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.max_connections = 2;
  options.auth_token = "s3cret";
  auto handler = std::make_shared<HoldingHandler>();
  auto server = start_server(options, handler);
  // One authenticated by its request (answered), one busy with a request the handler holds.
  WireClient authenticated = WireClient::tcp(server->tcp_port());
  authenticated.expect_handshake();
  authenticated.send("(:TYPE :HEALTH-CHECK :AUTH \"s3cret\")");  // a health check with the token counts too
  REQUIRE(is_health_response(authenticated.expect_frame()));
  WireClient busy = WireClient::tcp(server->tcp_port());
  busy.expect_handshake();
  busy.send("(:TYPE :REQUEST)");
  WireReply held = handler->wait_sink(0);

  WireClient third = WireClient::tcp(server->tcp_port());
  const Value refused = third.expect_frame();
  CHECK(error_response_code(refused) == "BUSY");
  CHECK(refused.path({"PAYLOAD", "MESSAGE"}) ==
        Value::string("too many TCP connections (the limit is 2); every one of them is authenticated or busy"));
  CHECK(third.closed_by_server());
  CHECK(server->counters().connections_rejected == 1);
  CHECK(server->counters().connections_evicted == 0);

  // Once the busy one's request is answered it may make room again.
  held.finish(make_ok_response("done"));
  REQUIRE(is_ok_response(busy.expect_frame()));
  WireClient fourth = WireClient::tcp(server->tcp_port());
  fourth.expect_handshake();
  CHECK(error_response_code(busy.expect_frame()) == "BUSY");
  authenticated.send("(:TYPE :HEALTH-CHECK)");
  CHECK(is_health_response(authenticated.expect_frame()));
}

TEST_CASE("a frame not finished within the read timeout gets TIMEOUT and closes", "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.read_timeout = 200ms;
  auto server = start_server(options, std::make_shared<TestHandler>());
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send_raw("0000");
  const Value timeout = client.expect_frame();
  CHECK(error_response_code(timeout) == "TIMEOUT");
  CHECK(timeout.path({"PAYLOAD", "MESSAGE"}) == Value::string("a frame was not complete within 200 ms"));
  CHECK(client.closed_by_server());
}

TEST_CASE("an idle connection gets TIMEOUT and closes after the idle timeout", "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.idle_timeout = 300ms;
  auto server = start_server(options, std::make_shared<TestHandler>());
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  const Value timeout = client.expect_frame();
  CHECK(error_response_code(timeout) == "TIMEOUT");
  CHECK(timeout.path({"PAYLOAD", "MESSAGE"}) == Value::string("the connection was idle for 300 ms"));
  CHECK(client.closed_by_server());
}

TEST_CASE("stop answers a request in flight before closing", "[daemon][concurrency]") {
  auto handler = std::make_shared<HoldingHandler>();
  auto server = start_server(tcp_options(), handler);
  WireClient busy = WireClient::tcp(server->tcp_port());
  busy.expect_handshake();
  WireClient idle = WireClient::tcp(server->tcp_port());
  idle.expect_handshake();
  // Both in one write, so the second is queued when the first reaches the handler.
  busy.send_raw(*FrameCodec().encode(read_sexp("(:TYPE :REQUEST :N 1)").value()) +
                *FrameCodec().encode(read_sexp("(:TYPE :REQUEST :N 2)").value()));
  WireReply in_flight = handler->wait_sink(0);

  server->begin_stop();
  auto stopped = std::async(std::launch::async, [&server] { server->stop(kWait); });
  CHECK(idle.closed_by_server());  // nothing to finish: closed at once

  in_flight.send(make_stream_chunk("almost"));
  CHECK(in_flight.finish(make_ok_response("finished during stop")));
  CHECK(is_stream_chunk(busy.expect_frame()));
  CHECK(busy.expect_frame().path({"PAYLOAD", "MESSAGE"}) == Value::string("finished during stop"));
  CHECK(error_response_code(busy.expect_frame()) == "SHUTTING-DOWN");  // the queued one was not started
  CHECK(busy.closed_by_server());
  REQUIRE(stopped.wait_for(kWait) == std::future_status::ready);
  stopped.get();
  CHECK(handler->count() == 1);
  CHECK(server->counters().connections_open == 0);
  CHECK_FALSE(in_flight.send(make_stream_chunk("late")));
}

TEST_CASE("stop closes connections whose handler never answers once the grace period ends", "[daemon][concurrency]") {
  auto handler = std::make_shared<HoldingHandler>();
  auto server = start_server(tcp_options(), handler);
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send("(:TYPE :REQUEST)");
  WireReply never = handler->wait_sink(0);
  server->stop(100ms);
  CHECK(client.closed_by_server());
  CHECK(server->counters().connections_open == 0);
  CHECK_FALSE(never.finish(make_ok_response("too late")));
  handler->release_all();
}

TEST_CASE("a connection arriving while the server stops is never served", "[daemon][concurrency]") {
  auto handler = std::make_shared<HoldingHandler>();
  auto server = start_server(tcp_options(), handler);
  WireClient holder = WireClient::tcp(server->tcp_port());
  holder.expect_handshake();
  holder.send("(:TYPE :REQUEST)");
  WireReply held = handler->wait_sink(0);
  server->begin_stop();
  // The listener closes asynchronously: a late client is accepted and told
  // that the daemon is stopping, dropped with the listener, or refused. Or,
  // once the listener has closed and freed its port, it reaches whatever
  // another process (tests run in parallel) has since bound to that port: so
  // its answer is only judged when the server counts it as its own.
  std::optional<WireClient> late = WireClient::try_tcp(server->tcp_port());
  REQUIRE(server->wait_listeners_closed_for_test(kWait));
  const ServerCounters counters = server->counters();
  CHECK(counters.connections_total == 1);  // only the holder was ever admitted
  if (late && counters.connections_rejected == 1) {
    const auto first = late->read_frame();
    REQUIRE(first.has_value());
    CHECK(error_response_code(*first) == "SHUTTING-DOWN");
  }
  held.finish(make_ok_response("bye"));
  CHECK(holder.expect_frame().path({"PAYLOAD", "MESSAGE"}) == Value::string("bye"));
  CHECK(holder.closed_by_server());
  server->stop();
  CHECK(handler->count() == 1);
}

TEST_CASE("a reply sink outliving its connection does nothing", "[daemon][concurrency]") {
  auto handler = std::make_shared<HoldingHandler>();
  auto server = start_server(tcp_options(), handler);
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();
  client.send("(:TYPE :REQUEST)");
  handler->wait_sink(0);
  client.reset();
  REQUIRE(server->wait_connections_open_for_test(0, kWait));
  WireReply orphan = handler->wait_sink(0);
  CHECK_FALSE(orphan.is_open());
  CHECK_FALSE(orphan.send(make_stream_chunk("x")));
  CHECK_FALSE(orphan.finish(make_ok_response("x")));
  CHECK(orphan.connection().transport == Transport::tcp);
  CHECK_FALSE(WireReply().send(make_stream_chunk("x")));
}

TEST_CASE("server runs on the io_contexts the caller shares, each new connection on the next",
          "[daemon][concurrency]") {
  constexpr std::size_t kContexts = 2;
  std::vector<std::unique_ptr<boost::asio::io_context>> contexts;
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::vector<std::thread> runners;
  for (std::size_t i = 0; i < kContexts; ++i) {
    contexts.push_back(std::make_unique<boost::asio::io_context>(1));
    work.push_back(boost::asio::make_work_guard(*contexts.back()));
  }
  for (auto& context : contexts) runners.emplace_back([&context] { context->run(); });

  std::mutex mutex;
  std::set<std::thread::id> handled_on;
  auto handler = std::make_shared<TestHandler>([&](Value message, const ConnectionInfo& connection, WireReply reply) {
    {
      std::lock_guard lock(mutex);
      handled_on.insert(std::this_thread::get_id());
    }
    reply.finish(TestHandler::echo(message, connection));
  });
  {
    auto started = Server::start({contexts[0].get(), contexts[1].get()}, tcp_options(), handler);
    REQUIRE(started.has_value());
    std::unique_ptr<Server> server = std::move(*started);
    std::vector<WireClient> clients;
    for (std::size_t i = 0; i < 2 * kContexts; ++i) {
      clients.push_back(WireClient::tcp(server->tcp_port()));
      clients.back().expect_handshake();
      clients.back().send("(:TYPE :REQUEST :N " + std::to_string(i) + ")");
      CHECK(echoed(clients.back().expect_frame()).at("N") == Value::integer(static_cast<std::int64_t>(i)));
    }
    server->begin_stop();
    for (auto& client : clients) CHECK(client.closed_by_server());
    server->stop();
    CHECK(server->counters().connections_open == 0);
  }
  {
    std::lock_guard lock(mutex);
    std::set<std::thread::id> runner_ids;
    for (const auto& runner : runners) runner_ids.insert(runner.get_id());
    CHECK(handled_on == runner_ids);  // every context served connections, nothing else did
  }
  work.clear();
  for (auto& runner : runners) runner.join();
}

TEST_CASE("server refuses to start without an io_context", "[daemon]") {
  CHECK(Server::start(std::vector<boost::asio::io_context*>{}, tcp_options(), std::make_shared<TestHandler>())
            .error()
            .code == ErrorCode::invalid_input);
  CHECK(Server::start({nullptr}, tcp_options(), std::make_shared<TestHandler>()).error().code ==
        ErrorCode::invalid_input);
}

namespace passepartout {

TEST_CASE("a stopped server no longer accepts on its port, even with no connection open", "[daemon][concurrency]") {
  auto server = start_server(tcp_options(), std::make_shared<TestHandler>());
  const std::uint16_t port = server->tcp_port();
  REQUIRE(serve_one_connection(port, false));  // positive control: it accepts while serving
  REQUIRE(server->wait_connections_open_for_test(0, kWait));
  server->stop();
  const int fd = testing::connect_loopback(port);
  if (fd >= 0) ::close(fd);
  CHECK(fd == -ECONNREFUSED);
}

}  // namespace passepartout

TEST_CASE("the Unix socket has connections of its own: TCP clients at their limit cannot lock it out",
          "[daemon][concurrency]") {
  testing::TempDir dir;
  ServerOptions options = tcp_options();
  options.unix_socket_path = dir.path() / "s.sock";
  options.max_connections = 2;
  options.max_unix_connections = 1;
  auto server = start_server(options, std::make_shared<TestHandler>());
  WireClient first = WireClient::tcp(server->tcp_port());
  first.expect_handshake();
  WireClient second = WireClient::tcp(server->tcp_port());
  second.expect_handshake();
  WireClient third = WireClient::tcp(server->tcp_port());
  third.expect_handshake();
  CHECK(error_response_code(first.expect_frame()) == "BUSY");  // closed to make room for the third

  WireClient operator_client = WireClient::local(options.unix_socket_path);
  operator_client.expect_handshake();
  operator_client.send("(:TYPE :REQUEST)");
  CHECK(is_ok_response(operator_client.expect_frame()));
  WireClient another = WireClient::local(options.unix_socket_path);
  const Value busy = another.expect_frame();
  CHECK(busy.path({"PAYLOAD", "MESSAGE"}) == Value::string("too many connections on the Unix socket (the limit is 1)"));
  CHECK(server->counters().connections_rejected == 1);
  CHECK(server->counters().connections_evicted == 1);
}

TEST_CASE("one local user's connections at their limit make room among themselves", "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.max_connections_per_peer = 2;
  auto server = start_server(options, std::make_shared<TestHandler>());
  WireClient first = WireClient::tcp(server->tcp_port());
  first.expect_handshake();
  WireClient second = WireClient::tcp(server->tcp_port());
  second.expect_handshake();
  WireClient third = WireClient::tcp(server->tcp_port());
  third.expect_handshake();
  const Value busy = first.expect_frame();  // the oldest silent one
  CHECK(busy.path({"PAYLOAD", "MESSAGE"}) ==
        Value::string("closed to make room for a newer connection: too many connections from local user " +
                      std::to_string(::geteuid()) + " (the limit is 2)"));
  CHECK(first.closed_by_server());
  third.send("(:TYPE :REQUEST)");
  CHECK(is_ok_response(third.expect_frame()));
  second.send("(:TYPE :REQUEST)");
  CHECK(is_ok_response(second.expect_frame()));
}

TEST_CASE("another local user's connections do not count against this user's limit", "[daemon][concurrency]") {
  if (::geteuid() != 0) {
    WARN("skipped: needs root to open connections as another user");
    return;
  }
  ServerOptions options = tcp_options();
  options.max_connections_per_peer = 2;
  auto server = start_server(options, std::make_shared<TestHandler>());
  // A child as nobody holds two connections (its whole limit) open until told to go.
  int ready[2];
  int go[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(go, O_CLOEXEC) == 0);
  const std::uint16_t port = server->tcp_port();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Only async-signal-safe calls from here: the parent has threads.
    ::close(go[1]);  // or its read below would never see the parent's end
    ::close(ready[0]);
    char ok = 'n';
    if (::setgid(65534) == 0 && ::setuid(65534) == 0) {
      const int a = testing::connect_loopback(port);
      const int b = testing::connect_loopback(port);
      if (a >= 0 && b >= 0) ok = 'y';
    }
    (void)!::write(ready[1], &ok, 1);
    char done = 0;
    (void)!::read(go[0], &done, 1);
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(go[0]);
  char ok = 0;
  REQUIRE(::read(ready[0], &ok, 1) == 1);
  REQUIRE(ok == 'y');
  REQUIRE(server->wait_connections_open_for_test(2, kWait));

  // This user's own two fit beside them: nobody's connections are not closed for them.
  WireClient first = WireClient::tcp(server->tcp_port());
  first.expect_handshake();
  WireClient second = WireClient::tcp(server->tcp_port());
  second.expect_handshake();
  first.send("(:TYPE :REQUEST)");
  CHECK(is_ok_response(first.expect_frame()));
  CHECK(server->counters().connections_evicted == 0);
  CHECK(server->counters().connections_open_tcp == 4);

  ::close(go[1]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ::close(ready[0]);
}

TEST_CASE("a connection that sends no complete request soon after it opens is closed, one that spoke stays",
          "[daemon][concurrency]") {
  ServerOptions options = tcp_options();
  options.handshake_timeout = 200ms;
  auto server = start_server(options, std::make_shared<TestHandler>());
  WireClient silent = WireClient::tcp(server->tcp_port());
  silent.expect_handshake();
  WireClient talker = WireClient::tcp(server->tcp_port());
  talker.expect_handshake();
  talker.send("(:TYPE :REQUEST)");
  CHECK(is_ok_response(talker.expect_frame()));

  const Value timeout = silent.expect_frame();
  CHECK(error_response_code(timeout) == "TIMEOUT");
  CHECK(timeout.path({"PAYLOAD", "MESSAGE"}) == Value::string("no complete request within 200 ms of connecting"));
  CHECK(silent.closed_by_server());
  SECTION("half a frame does not count as speaking") {
    WireClient slow = WireClient::tcp(server->tcp_port());
    slow.expect_handshake();
    slow.send_raw("0000");
    CHECK(error_response_code(slow.expect_frame()) == "TIMEOUT");
  }
  talker.send("(:TYPE :REQUEST)");  // long past the handshake's bound: idle connections keep the idle timeout
  CHECK(is_ok_response(talker.expect_frame()));
}

TEST_CASE("past the total reply budget the connection holding the most unread replies is closed, the others served",
          "[daemon][concurrency]") {
  constexpr std::size_t kChunk = 900 * 1024;
  auto handler = std::make_shared<TestHandler>([](Value message, const ConnectionInfo& connection, WireReply reply) {
    if (message.get("BIG") == nullptr) {
      reply.finish(TestHandler::echo(message, connection));
      return;
    }
    for (int i = 0; i < 24; ++i) reply.send(make_stream_chunk(std::string(kChunk, 'x')));  // ~21 MB
    reply.finish(make_ok_response("done"));
  });
  ServerOptions options = tcp_options();
  options.max_total_queued_write_bytes = std::size_t{2} * 1024 * 1024;
  auto server = start_server(options, handler);
  WireClient hog = WireClient::tcp(server->tcp_port());
  hog.expect_handshake();
  WireClient polite = WireClient::tcp(server->tcp_port());
  polite.expect_handshake();
  hog.send("(:TYPE :REQUEST :BIG T)");  // and never reads
  const auto deadline = std::chrono::steady_clock::now() + kWait;
  while (server->counters().closed_for_replies == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);  // polling a counter, bounded by the deadline
  }
  CHECK(server->counters().closed_for_replies == 1);
  bool closed = false;  // what the socket held before the close comes first
  for (int frames = 0; frames <= 25 && !closed; ++frames) closed = hog.closed_by_server();
  CHECK(closed);
  polite.send("(:TYPE :REQUEST)");
  CHECK(is_ok_response(polite.expect_frame()));
  CHECK(server->counters().queued_write_bytes < options.max_total_queued_write_bytes);
}

TEST_CASE("a reply's close hook runs once when its client resets, at once when registered after, never after the reply",
          "[daemon][cancel][concurrency]") {
  auto handler = std::make_shared<HoldingHandler>();
  auto server = start_server(tcp_options(), handler);
  WireClient client = WireClient::tcp(server->tcp_port());
  client.expect_handshake();

  // A reply that finished drops its hook: the request's end is not the client's.
  client.send("(:TYPE :REQUEST :N 1)");
  WireReply answered = handler->wait_sink(0);
  std::atomic<int> answered_hooks{0};
  answered.on_close([&answered_hooks] { ++answered_hooks; });
  REQUIRE(answered.finish(make_ok_response("done")));
  REQUIRE(client.read_frame().has_value());

  client.send("(:TYPE :REQUEST :N 2)");
  WireReply pending = handler->wait_sink(1);
  std::promise<void> closed;
  std::atomic<int> hooks{0};
  std::atomic<int> replaced_hooks{0};
  pending.on_close([&replaced_hooks] { ++replaced_hooks; });  // replaced by the next one
  pending.on_close([&hooks, &closed] {
    if (++hooks == 1) closed.set_value();
  });
  client.reset();
  REQUIRE(closed.get_future().wait_for(kWait) == std::future_status::ready);
  CHECK_FALSE(pending.is_open());
  bool late = false;
  pending.on_close([&late] { late = true; });  // the connection has closed: on this thread, at once
  CHECK(late);
  CHECK(hooks == 1);
  CHECK(replaced_hooks == 0);
  CHECK(answered_hooks == 0);
  handler->release_all();
}
