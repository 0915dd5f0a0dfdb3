// Tests for McpClient over the Streamable HTTP transport, against a loopback
// server written here whose every answer a test scripts: JSON and event
// stream answers, the session id and protocol version sent back, a session
// that ends, a stream resumed with Last-Event-ID, the server's own stream,
// answers too large, errors and refusals. The client's io_context runs on the
// test's thread, the server on threads of its own; each wait is bounded.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "mcp/mcp_client.hpp"
#include "support/loopback.hpp"

using namespace passepartout;
using namespace passepartout::mcp;
using namespace std::chrono_literals;
using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// One request as the server read it.
struct Seen {
  std::string method;
  std::string target;
  std::vector<std::pair<std::string, std::string>> headers;  // names lower case
  std::string body;
  Clock::time_point at;

  std::string header(std::string_view name) const {
    for (const auto& [key, value] : headers) {
      if (key == name) return value;
    }
    return {};
  }
  bool has_header(std::string_view name) const {
    for (const auto& [key, value] : headers) {
      if (key == name) return true;
    }
    return false;
  }
  Json json() const { return Json::parse(body, nullptr, false); }
  std::string rpc_method() const {
    const Json message = json();
    return message.is_object() ? message.value("method", "") : "";
  }
};

// What the server answers: a status, headers, the body in pieces (each after
// its pause, chunked), and how the answer ends.
struct Reply {
  enum class End : std::uint8_t {
    finish,  // the last chunk: the answer is complete, the connection kept
    drop,    // the connection is closed with the body unfinished
    hold,    // nothing more is written until the client closes (counted) or the server stops
  };
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::vector<std::pair<std::chrono::milliseconds, std::string>> pieces;
  End end = End::finish;
  std::function<void()> on_end;  // on the server's thread, as the answer ends (before its last bytes)
};

const char* reason_phrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 202:
      return "Accepted";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 500:
      return "Internal Server Error";
    default:
      return "Status";
  }
}

// HTTP/1.1 on 127.0.0.1, port 0: a thread accepts, a thread per connection
// reads requests and writes what the handler says (calls to it are
// serialised, so its state needs no lock of its own). Blocking sockets,
// polled so that the destructor ends every thread at once.
class McpHttpServer {
 public:
  using Handler = std::function<Reply(const Seen&)>;

  explicit McpHttpServer(Handler handler) : handler_(std::move(handler)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    REQUIRE(::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener_, 64) == 0);
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &size) == 0);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~McpHttpServer() {
    stopping_ = true;
    acceptor_.join();
    {
      std::lock_guard lock(mutex_);
      for (const int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }
    for (std::thread& thread : connections_) thread.join();
    ::close(listener_);
  }

  McpHttpServer(const McpHttpServer&) = delete;
  McpHttpServer& operator=(const McpHttpServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }

  std::vector<Seen> requests() const {
    std::lock_guard lock(mutex_);
    return seen_;
  }

  // The requests that `match`, in the order they arrived.
  std::vector<Seen> requests(const std::function<bool(const Seen&)>& match) const {
    std::vector<Seen> out;
    for (Seen& seen : requests()) {
      if (match(seen)) out.push_back(std::move(seen));
    }
    return out;
  }

  // Held answers whose connection the client closed.
  std::size_t held_closed() const { return held_closed_.load(); }

 private:
  void accept_loop() {
    while (!stopping_) {
      pollfd entry{listener_, POLLIN, 0};
      if (::poll(&entry, 1, 20) != 1) continue;
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard lock(mutex_);
      open_.push_back(fd);
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  }

  // Waits until `fd` is readable; false when the server stops first.
  bool wait_readable(int fd) const {
    while (!stopping_) {
      pollfd entry{fd, POLLIN, 0};
      if (::poll(&entry, 1, 20) == 1) return true;
    }
    return false;
  }

  // Reads one request into `out`, keeping what follows it in `buffer`.
  bool read_request(int fd, std::string& buffer, Seen& out) {
    char chunk[65536];
    std::size_t head_end = std::string::npos;
    while ((head_end = buffer.find("\r\n\r\n")) == std::string::npos) {
      if (!wait_readable(fd)) return false;
      const ssize_t got = ::read(fd, chunk, sizeof chunk);
      if (got <= 0) return false;
      buffer.append(chunk, static_cast<std::size_t>(got));
    }
    const std::string head = buffer.substr(0, head_end);
    buffer.erase(0, head_end + 4);
    std::size_t line_end = head.find("\r\n");
    const std::string request_line = head.substr(0, line_end);
    out.method = request_line.substr(0, request_line.find(' '));
    out.target = request_line.substr(out.method.size() + 1, request_line.rfind(' ') - out.method.size() - 1);
    std::size_t length = 0;
    while (line_end != std::string::npos) {
      const std::size_t start = line_end + 2;
      line_end = head.find("\r\n", start);
      const std::string line = head.substr(start, line_end == std::string::npos ? std::string::npos : line_end - start);
      const std::size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      value.erase(0, value.find_first_not_of(' '));
      if (name == "content-length") length = std::stoul(value);
      out.headers.emplace_back(std::move(name), std::move(value));
    }
    while (buffer.size() < length) {
      if (!wait_readable(fd)) return false;
      const ssize_t got = ::read(fd, chunk, sizeof chunk);
      if (got <= 0) return false;
      buffer.append(chunk, static_cast<std::size_t>(got));
    }
    out.body = buffer.substr(0, length);
    buffer.erase(0, length);
    out.at = Clock::now();
    return true;
  }

  static bool write_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t put = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (put <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(put));
    }
    return true;
  }

  // Answers `reply`; false when the connection is over.
  bool answer(int fd, const Reply& reply) {
    const bool empty = reply.pieces.empty() && reply.end == Reply::End::finish;
    std::string head = "HTTP/1.1 " + std::to_string(reply.status) + " " + reason_phrase(reply.status) + "\r\n";
    for (const auto& [name, value] : reply.headers) head += name + ": " + value + "\r\n";
    head += empty ? "Content-Length: 0\r\n\r\n" : "Transfer-Encoding: chunked\r\n\r\n";
    if (!write_all(fd, head)) return false;
    for (const auto& [pause, bytes] : reply.pieces) {
      if (pause.count() > 0) std::this_thread::sleep_for(pause);
      char size[32];
      const int n = std::snprintf(size, sizeof size, "%zx\r\n", bytes.size());
      if (!write_all(fd, std::string(size, static_cast<std::size_t>(n)) + bytes + "\r\n")) return false;
    }
    if (reply.on_end) reply.on_end();
    switch (reply.end) {
      case Reply::End::finish:
        return empty || write_all(fd, "0\r\n\r\n");
      case Reply::End::drop:
        return false;
      case Reply::End::hold:
        // The client closing shows as the end of what it sends.
        while (!stopping_) {
          pollfd entry{fd, POLLIN, 0};
          if (::poll(&entry, 1, 20) != 1) continue;
          char byte = 0;
          if (::read(fd, &byte, 1) <= 0) {
            ++held_closed_;
            return false;
          }
        }
        return false;
    }
    return false;
  }

  void serve(int fd) {
    std::string buffer;
    for (;;) {
      Seen seen;
      if (!read_request(fd, buffer, seen)) break;
      Reply reply;
      {
        std::lock_guard handling(handler_mutex_);
        {
          std::lock_guard lock(mutex_);
          seen_.push_back(seen);
        }
        reply = handler_(seen);
      }
      if (!answer(fd, reply)) break;
    }
    std::lock_guard lock(mutex_);
    open_.erase(std::find(open_.begin(), open_.end(), fd));
    ::close(fd);
  }

  Handler handler_;
  std::mutex handler_mutex_;  // one handler call at a time
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<std::size_t> held_closed_{0};
  std::thread acceptor_;
  mutable std::mutex mutex_;  // guards seen_, open_ and connections_
  std::vector<Seen> seen_;
  std::vector<int> open_;
  std::vector<std::thread> connections_;
};

// --- what the scripted server says -------------------------------------------

Json rpc_result(const Json& id, Json result) { return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}; }

Json text_result(std::string_view text) { return {{"content", Json::array({{{"type", "text"}, {"text", text}}})}}; }

Reply status_only(int status) {
  Reply reply;
  reply.status = status;
  return reply;
}

Reply json_reply(const Json& body, std::vector<std::pair<std::string, std::string>> headers = {}) {
  Reply reply;
  reply.headers = std::move(headers);
  reply.headers.emplace_back("Content-Type", "application/json");
  reply.pieces.emplace_back(0ms, body.dump());
  return reply;
}

Reply event_stream(std::vector<std::string> pieces, Reply::End end) {
  Reply reply;
  reply.headers.emplace_back("Content-Type", "text/event-stream");
  for (std::string& piece : pieces) reply.pieces.emplace_back(0ms, std::move(piece));
  reply.end = end;
  return reply;
}

std::string event(const Json& message, std::string_view id = "") {
  std::string text = id.empty() ? "" : "id: " + std::string(id) + "\n";
  return text + "data: " + message.dump() + "\n\n";
}

constexpr const char* kSession = "session-1";

// A well-behaved server: initialize opens session-1 in the version the client
// offered, notifications and responses are accepted, one tool (echo), no
// stream of its own (GET 405), DELETE ends the session.
Reply standard(const Seen& request) {
  if (request.method == "GET") return status_only(405);
  if (request.method == "DELETE") return status_only(200);
  const Json message = request.json();
  if (!message.is_object() || !message.contains("id") || !message.contains("method")) return status_only(202);
  const Json& id = message["id"];
  const std::string method = message["method"];
  if (method == "initialize") {
    return json_reply(rpc_result(id, {{"protocolVersion", message["params"]["protocolVersion"]},
                                      {"capabilities", {{"tools", {{"listChanged", true}}}}},
                                      {"serverInfo", {{"name", "http-stub"}, {"version", "1.0"}}}}),
                      {{"Mcp-Session-Id", kSession}});
  }
  if (method == "tools/list") {
    return json_reply(rpc_result(
        id, {{"tools", Json::array({{{"name", "echo"},
                                     {"description", "Echoes its message"},
                                     {"inputSchema",
                                      {{"type", "object"}, {"properties", {{"message", {{"type", "string"}}}}}}}}})}}));
  }
  if (method == "tools/call") {
    return json_reply(rpc_result(id, text_result("echo: " + message["params"]["arguments"].value("message", ""))));
  }
  return json_reply({{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", -32601}, {"message", "no " + method}}}});
}

bool is_call(const Seen& request) { return request.method == "POST" && request.rpc_method() == "tools/call"; }

// --- the client --------------------------------------------------------------

// A session over HTTP with `url`, and what it reported.
struct Session {
  boost::asio::io_context io;
  std::shared_ptr<McpClient> client;
  HttpEndpoint endpoint;
  std::optional<std::string> closed;
  int tools_changed = 0;

  explicit Session(std::string url, ClientOptions options = {}) {
    options.name = "stub";
    ClientEvents events;
    events.on_tools_changed = [this] { ++tools_changed; };
    events.on_closed = [this](std::string reason) { closed = std::move(reason); };
    client = McpClient::create(io, std::move(options), std::move(events));
    endpoint.name = "stub";
    endpoint.url = std::move(url);
  }

  ~Session() {
    // The transport's HTTP client is destroyed with its loop stopped.
    io.stop();
    client.reset();
  }

  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  template <class Predicate>
  bool run_until(Predicate done, std::chrono::milliseconds limit = 10s) {
    const auto deadline = Clock::now() + limit;
    while (!done() && Clock::now() < deadline) {
      if (io.stopped()) io.restart();
      io.run_one_for(20ms);
    }
    return done();
  }

  void run_for(std::chrono::milliseconds time) {
    run_until([] { return false; }, time);
  }

  std::optional<Result<ServerInfo>> start() {
    std::optional<Result<ServerInfo>> info;
    client->start([this](TransportEvents events) { return start_http(io, endpoint, std::move(events)); },
                  [&info](Result<ServerInfo> result) { info = std::move(result); });
    run_until([&] { return info.has_value(); });
    return info;
  }

  std::optional<Result<std::vector<ToolDefinition>>> list() {
    std::optional<Result<std::vector<ToolDefinition>>> tools;
    client->list_tools([&tools](Result<std::vector<ToolDefinition>> result) { tools = std::move(result); });
    run_until([&] { return tools.has_value(); });
    return tools;
  }

  std::optional<Result<ToolResult>> call(const std::string& arguments, std::chrono::milliseconds timeout = 10s) {
    std::optional<Result<ToolResult>> result;
    client->call_tool("echo", arguments, timeout, [&result](Result<ToolResult> r) { result = std::move(r); });
    run_until([&] { return result.has_value(); }, timeout + 10s);
    return result;
  }
};

// Starts `session` and requires it ready.
void require_ready(Session& session) {
  auto info = session.start();
  REQUIRE(info.has_value());
  INFO((info->has_value() ? std::string() : info->error().message));
  REQUIRE(info->has_value());
}

}  // namespace

TEST_CASE("mcp over HTTP: JSON answers, the session id and protocol version sent back, the session ended by close",
          "[mcp][concurrency]") {
  McpHttpServer server(standard);
  Session session(server.url());
  session.endpoint.headers = {{"Authorization", "Bearer test-token"}};
  auto info = session.start();
  REQUIRE(info.has_value());
  REQUIRE(info->has_value());
  CHECK((*info)->protocol_version == "2025-11-25");
  CHECK((*info)->name == "http-stub");

  auto tools = session.list();
  REQUIRE(tools.has_value());
  REQUIRE(tools->has_value());
  REQUIRE((*tools)->size() == 1);
  CHECK((**tools)[0].name == "echo");

  auto echo = session.call(R"({"message":"hi"})");
  REQUIRE(echo.has_value());
  REQUIRE(echo->has_value());
  CHECK((*echo)->text == "echo: hi");

  const auto posts = server.requests([](const Seen& r) { return r.method == "POST"; });
  REQUIRE(posts.size() == 4);
  CHECK(posts[0].rpc_method() == "initialize");
  CHECK(posts[0].target == "/mcp");
  CHECK(posts[0].header("content-type") == "application/json");
  CHECK(posts[0].header("accept") == "application/json, text/event-stream");
  CHECK(posts[0].header("authorization") == "Bearer test-token");
  CHECK_FALSE(posts[0].has_header("mcp-session-id"));
  CHECK_FALSE(posts[0].has_header("mcp-protocol-version"));
  // notifications/initialized is answered before anything else is sent.
  CHECK(posts[1].rpc_method() == "notifications/initialized");
  CHECK(posts[2].rpc_method() == "tools/list");
  CHECK(posts[3].rpc_method() == "tools/call");
  for (std::size_t i = 1; i < posts.size(); ++i) {
    INFO("POST " << i << ": " << posts[i].body);
    CHECK(posts[i].header("mcp-session-id") == kSession);
    CHECK(posts[i].header("mcp-protocol-version") == "2025-11-25");
    CHECK(posts[i].header("authorization") == "Bearer test-token");
  }

  // The server's own stream was asked for, once, and its 405 is no failure.
  const auto gets = server.requests([](const Seen& r) { return r.method == "GET"; });
  REQUIRE(gets.size() == 1);
  CHECK(gets[0].header("accept") == "text/event-stream");
  CHECK(gets[0].header("mcp-session-id") == kSession);
  CHECK_FALSE(gets[0].has_header("last-event-id"));
  CHECK(session.client->ready());
  CHECK_FALSE(session.closed.has_value());

  session.client->close();
  const auto deleted = [&] { return server.requests([](const Seen& r) { return r.method == "DELETE"; }); };
  REQUIRE(session.run_until([&] { return !deleted().empty(); }));
  CHECK(deleted()[0].header("mcp-session-id") == kSession);
  CHECK(deleted()[0].header("authorization") == "Bearer test-token");
  CHECK_FALSE(session.closed.has_value());  // close() reports nothing
}

TEST_CASE("mcp over HTTP: an event stream answer carries the server's request first, and a batch answer each message",
          "[mcp][concurrency]") {
  McpHttpServer server([](const Seen& request) {
    const Json message = request.json();
    if (is_call(request)) {
      const std::string answer = event(rpc_result(message["id"], text_result("streamed")), "e-2");
      Reply reply =
          event_stream({": a comment, as a keep-alive\n\n",
                        event({{"jsonrpc", "2.0"}, {"id", "server-ping-1"}, {"method", "ping"}}, "e-1"),
                        // An event split anywhere, lines ended with CRLF.
                        "event: message\r\nda", "ta: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",",
                        "\"params\":{}}\r\n\r\n", answer},
                       Reply::End::finish);
      return reply;
    }
    if (request.method == "POST" && request.rpc_method() == "tools/list") {
      Json batch = Json::array({{{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}},
                                rpc_result(message["id"], {{"tools", Json::array()}})});
      return json_reply(batch);
    }
    return standard(request);
  });
  Session session(server.url());
  require_ready(session);

  auto tools = session.list();
  REQUIRE(tools.has_value());
  REQUIRE(tools->has_value());
  CHECK((*tools)->empty());
  CHECK(session.tools_changed == 1);  // the notification in the batch

  auto result = session.call(R"({"message":"x"})");
  REQUIRE(result.has_value());
  INFO((result->has_value() ? std::string() : result->error().message));
  REQUIRE(result->has_value());
  CHECK((*result)->text == "streamed");
  // The client answered the server's ping with a POST of its own.
  const auto pong = [&] {
    return server.requests([](const Seen& r) {
      const Json body = r.json();
      return r.method == "POST" && body.is_object() && body.value("id", Json()) == "server-ping-1" &&
             body.contains("result");
    });
  };
  REQUIRE(session.run_until([&] { return !pong().empty(); }));
  CHECK(pong()[0].header("mcp-session-id") == kSession);
  CHECK_FALSE(session.closed.has_value());
}

TEST_CASE("mcp over HTTP: a 404 to a request that carried the session id ends the session", "[mcp][concurrency]") {
  McpHttpServer server([](const Seen& request) { return is_call(request) ? status_only(404) : standard(request); });
  Session session(server.url());
  require_ready(session);

  auto result = session.call(R"({"message":"x"})");
  REQUIRE(result.has_value());
  REQUIRE_FALSE(result->has_value());
  CHECK(result->error().message == "mcp server 'stub' ended its session (HTTP 404)");
  REQUIRE(session.closed.has_value());
  CHECK(*session.closed == "mcp server 'stub' ended its session (HTTP 404)");
  CHECK_FALSE(session.client->ready());
  // A session the server ended is not ended again.
  session.run_for(200ms);
  CHECK(server.requests([](const Seen& r) { return r.method == "DELETE"; }).empty());
}

TEST_CASE("mcp over HTTP: a stream that stops before its answer is resumed with Last-Event-ID after the server's retry",
          "[mcp][concurrency]") {
  const bool breaks = GENERATE(true, false);
  INFO((breaks ? "the connection breaks" : "the stream ends"));
  std::mutex mutex;  // guards ended
  std::optional<Clock::time_point> ended;
  McpHttpServer server([&](const Seen& request) {
    const Json message = request.json();
    if (is_call(request)) {
      // The priming event (an id, empty data) with the retry, then progress, then nothing.
      Reply reply = event_stream(
          {"id: call-1\nretry: 300\ndata:\n\n",
           event({{"jsonrpc", "2.0"}, {"method", "notifications/progress"}, {"params", {{"progress", 1}}}}, "call-2")},
          breaks ? Reply::End::drop : Reply::End::finish);
      reply.on_end = [&] {
        std::lock_guard lock(mutex);
        ended = Clock::now();
      };
      return reply;
    }
    if (request.method == "GET" && request.header("last-event-id") == "call-2") {
      // The answer, on a stream the server then keeps open.
      return event_stream({event(rpc_result(2, text_result("resumed")), "call-3")}, Reply::End::hold);
    }
    return standard(request);
  });
  Session session(server.url());
  require_ready(session);

  auto result = session.call(R"({"message":"x"})");
  REQUIRE(result.has_value());
  INFO((result->has_value() ? std::string() : result->error().message));
  REQUIRE(result->has_value());
  CHECK((*result)->text == "resumed");

  const auto resumed =
      server.requests([](const Seen& r) { return r.method == "GET" && r.has_header("last-event-id"); });
  REQUIRE(resumed.size() == 1);
  CHECK(resumed[0].header("accept") == "text/event-stream");
  CHECK(resumed[0].header("mcp-session-id") == kSession);
  CHECK(resumed[0].header("mcp-protocol-version") == "2025-11-25");
  {
    std::lock_guard lock(mutex);
    REQUIRE(ended.has_value());
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(resumed[0].at - *ended);
    INFO("resumed " << waited.count() << " ms after the stream stopped");
    CHECK(waited >= 300ms);
    CHECK(waited < 900ms);  // without the server's retry it would be 1 s
  }
  // Once its answer came, the client lets go of the stream the server kept open.
  CHECK(session.run_until([&] { return server.held_closed() == 1; }));
  CHECK_FALSE(session.closed.has_value());
}

TEST_CASE("mcp over HTTP: the server's own stream carries its notifications and is reopened with Last-Event-ID",
          "[mcp][concurrency]") {
  McpHttpServer server([](const Seen& request) {
    const Json changed = {{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}};
    if (request.method == "GET" && !request.has_header("last-event-id")) {
      return event_stream({"retry: 200\n\n", event(changed, "own-1")}, Reply::End::finish);
    }
    if (request.method == "GET" && request.header("last-event-id") == "own-1") {
      return event_stream({event(changed, "own-2")}, Reply::End::hold);
    }
    return standard(request);
  });
  Session session(server.url());
  require_ready(session);

  REQUIRE(session.run_until([&] { return session.tools_changed == 2; }));
  const auto gets = server.requests([](const Seen& r) { return r.method == "GET"; });
  REQUIRE(gets.size() == 2);
  CHECK(gets[1].header("last-event-id") == "own-1");
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(gets[1].at - gets[0].at);
  CHECK(waited >= 200ms);
  CHECK(waited < 900ms);  // without the server's retry it would be 1 s
  CHECK_FALSE(session.closed.has_value());
}

TEST_CASE("mcp over HTTP: an answer over the message cap ends the session", "[mcp][concurrency]") {
  const bool streamed = GENERATE(false, true);
  INFO((streamed ? "an event" : "a JSON body"));
  const std::string huge(std::size_t{4} * 1024 * 1024 + 1, 'x');
  McpHttpServer server([&](const Seen& request) {
    if (!is_call(request)) return standard(request);
    const Json answer = rpc_result(request.json()["id"], text_result(huge));
    if (streamed) return event_stream({event(answer, "big-1")}, Reply::End::finish);
    return json_reply(answer);
  });
  Session session(server.url());
  require_ready(session);

  auto result = session.call(R"({"message":"x"})");
  REQUIRE(result.has_value());
  REQUIRE_FALSE(result->has_value());
  CHECK(result->error().message == "mcp server 'stub' answered over 4 MiB in one message");
  REQUIRE(session.closed.has_value());
  CHECK(*session.closed == "mcp server 'stub' answered over 4 MiB in one message");
}

TEST_CASE("mcp over HTTP: a refused connection fails the start with curl's reason", "[mcp][concurrency]") {
  const std::uint16_t port = testing::closed_loopback_port();
  REQUIRE(port != 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(port) + "/mcp";
  Session session(url + "?token=secret");
  auto info = session.start();
  REQUIRE(info.has_value());
  REQUIRE_FALSE(info->has_value());
  const std::string& message = info->error().message;
  CHECK_THAT(message, Catch::StartsWith("mcp server 'stub' at " + url + ": "));
  CHECK_THAT(message, Catch::Contains("onnect"));   // curl's words: "Couldn't connect", ...
  CHECK_THAT(message, !Catch::Contains("secret"));  // a URL's query is not shown
  REQUIRE(session.closed.has_value());
  CHECK(*session.closed == message);
}

TEST_CASE("mcp over HTTP: a failed request fails alone, with what HTTP said, and the session goes on",
          "[mcp][concurrency]") {
  int calls = 0;
  McpHttpServer server([&](const Seen& request) {
    if (!is_call(request)) return standard(request);
    switch (++calls) {
      case 1: {
        Reply reply = json_reply(
            {{"jsonrpc", "2.0"}, {"id", nullptr}, {"error", {{"code", -32603}, {"message", "the tool crashed"}}}});
        reply.status = 500;
        return reply;
      }
      case 2: {
        Reply reply;
        reply.status = 400;
        reply.headers = {{"Content-Type", "text/plain; charset=utf-8"}};
        reply.pieces.emplace_back(0ms, "Bad MCP-Protocol-Version\nmore lines");
        return reply;
      }
      case 3: {  // Express's page for an exception
        Reply reply;
        reply.status = 500;
        reply.headers = {{"Content-Type", "text/html; charset=utf-8"}};
        reply.pieces.emplace_back(0ms,
                                  "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                                  "<title>Error</title>\n</head>\n<body>\n<pre>Error: Already connected &amp; "
                                  "stuck<br> &nbsp; &nbsp;at Server.connect</pre>\n</body>\n</html>\n");
        return reply;
      }
      case 4:  // a stream that ends without the answer, and without an id to resume from
        return event_stream(
            {event({{"jsonrpc", "2.0"}, {"method", "notifications/progress"}, {"params", Json::object()}})},
            Reply::End::finish);
      case 5:
        return status_only(202);
      default:
        return standard(request);
    }
  });
  Session session(server.url());
  require_ready(session);

  auto first = session.call(R"({"message":"x"})");
  REQUIRE_FALSE(first->has_value());
  CHECK(first->error().message == "mcp server 'stub': tools/call failed: HTTP 500: the tool crashed (error -32603)");
  auto second = session.call(R"({"message":"x"})");
  REQUIRE_FALSE(second->has_value());
  CHECK(second->error().message ==
        "mcp server 'stub': tools/call failed: HTTP 400: Bad MCP-Protocol-Version (error -32000)");
  auto html = session.call(R"({"message":"x"})");
  REQUIRE_FALSE(html->has_value());
  CHECK(html->error().message ==
        "mcp server 'stub': tools/call failed: HTTP 500: Error: Already connected & stuck at Server.connect "
        "(error -32000)");
  auto third = session.call(R"({"message":"x"})");
  REQUIRE_FALSE(third->has_value());
  CHECK(third->error().message ==
        "mcp server 'stub': tools/call failed: the event stream ended before the answer, with no event id to resume "
        "it from (error -32000)");
  auto fourth = session.call(R"({"message":"x"})");
  REQUIRE_FALSE(fourth->has_value());
  CHECK(fourth->error().message ==
        "mcp server 'stub': tools/call failed: HTTP 202 with no Content-Type, neither JSON nor an event stream "
        "(error -32000)");
  auto fifth = session.call(R"({"message":"x"})");
  REQUIRE(fifth->has_value());
  CHECK((*fifth)->text == "echo: x");
  CHECK_FALSE(session.closed.has_value());
}

TEST_CASE("mcp over HTTP: a call that times out is cancelled and its stream let go", "[mcp][concurrency]") {
  McpHttpServer server([](const Seen& request) {
    if (is_call(request)) return event_stream({"id: slow-1\ndata:\n\n"}, Reply::End::hold);
    return standard(request);
  });
  Session session(server.url());
  require_ready(session);

  auto result = session.call(R"({"message":"x"})", 300ms);
  REQUIRE(result.has_value());
  REQUIRE_FALSE(result->has_value());
  CHECK_THAT(result->error().message, Catch::Contains("no answer in 300 ms"));
  const auto cancelled = [&] {
    return server.requests([](const Seen& r) { return r.rpc_method() == "notifications/cancelled"; });
  };
  REQUIRE(session.run_until([&] { return !cancelled().empty() && server.held_closed() == 1; }));
  CHECK(cancelled()[0].json()["params"]["requestId"] == 2);  // initialize was 1
  CHECK_FALSE(session.closed.has_value());
}

TEST_CASE("start_http refuses what is no HTTP URL and headers that are not the endpoint's to give", "[mcp]") {
  boost::asio::io_context io;
  io.stop();  // a transport that is made is destroyed at once, off a loop that no longer runs
  auto attempt = [&](std::string url, std::vector<std::pair<std::string, std::string>> headers) {
    HttpEndpoint endpoint;
    endpoint.name = "bad";
    endpoint.url = std::move(url);
    endpoint.headers = std::move(headers);
    auto transport = start_http(io, endpoint, {});
    return transport ? std::string() : transport.error().message;
  };
  CHECK(attempt("ftp://example.org/mcp", {}) ==
        "mcp server 'bad': the URL must start with http:// or https://: ftp://example.org/mcp");
  CHECK(attempt("example.org/mcp", {}) ==
        "mcp server 'bad': the URL must start with http:// or https://: example.org/mcp");
  CHECK(attempt("http://127.0.0.1:1/mcp", {{"Accept", "*/*"}}) ==
        "mcp server 'bad': header Accept is the transport's own to send");
  CHECK(attempt("http://127.0.0.1:1/mcp", {{"mcp-session-id", "x"}}) ==
        "mcp server 'bad': header mcp-session-id is the transport's own to send");
  CHECK(attempt("http://127.0.0.1:1/mcp", {{"X-Token", "a\r\nHost: evil"}}) ==
        "mcp server 'bad': header X-Token holds a line break or a NUL");
  CHECK(attempt("http://127.0.0.1:1/mcp", {{"Bad Name", "x"}}) == "mcp server 'bad': 'Bad Name' is no header name");
  CHECK(attempt("HTTPS://127.0.0.1:1/mcp", {{"X-Token", "fine"}}).empty());
}
