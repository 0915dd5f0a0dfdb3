// Tests for HttpClient: transfers over loopback against the HTTP stub, their
// timeouts, failures, cancellation, shutdown and descriptors. Tagged
// [concurrency]: the loop, the stub and the test each run on their own thread,
// so the ThreadSanitizer preset runs them.
#include "providers/http_client.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/executor.hpp"
#include "providers/provider.hpp"
#include "support/async_wait.hpp"
#include "support/http_stub.hpp"
#include "support/loopback.hpp"

using namespace passepartout;
using passepartout::testing::Awaited;
using passepartout::testing::CountDown;
using passepartout::testing::HttpStub;
using passepartout::testing::StubChunk;
using passepartout::testing::StubResponse;
using namespace std::chrono_literals;

namespace {

// What one transfer reported, from the loop's thread.
struct Reported {
  std::mutex mutex;  // guards everything below
  int heads = 0;
  int status = 0;
  HttpHeaders headers;
  std::vector<std::string> pieces;
  int dones = 0;
  std::atomic<bool> cancel_called{false};
  int data_after_cancel = 0;
  Awaited<HttpResult> done;
  Awaited<bool> first_data;

  std::string body() {
    std::lock_guard lock(mutex);
    std::string all;
    for (const std::string& piece : pieces) all += piece;
    return all;
  }
  std::string header(std::string_view name) {
    std::lock_guard lock(mutex);
    for (const auto& [header_name, value] : headers) {
      if (header_name == name) return value;
    }
    return "<absent>";
  }
};

HttpCallbacks report_to(const std::shared_ptr<Reported>& reported) {
  HttpCallbacks callbacks;
  callbacks.on_head = [reported](int status, HttpHeaders&& headers) {
    std::lock_guard lock(reported->mutex);
    ++reported->heads;
    reported->status = status;
    reported->headers = std::move(headers);
  };
  callbacks.on_data = [reported](std::string_view bytes) {
    {
      std::lock_guard lock(reported->mutex);
      if (reported->cancel_called.load()) ++reported->data_after_cancel;
      reported->pieces.emplace_back(bytes);
    }
    reported->first_data.set(true);
  };
  callbacks.on_done = [reported](HttpResult&& result) {
    {
      std::lock_guard lock(reported->mutex);
      ++reported->dones;
    }
    reported->done.set(std::move(result));
  };
  return callbacks;
}

HttpRequest get(std::string url) {
  HttpRequest request;
  request.url = std::move(url);
  return request;
}

// One event loop and its client; the client stops before the loop.
struct Loop {
  EventLoops loops{1};
  std::unique_ptr<HttpClient> client = std::make_unique<HttpClient>(*loops.contexts().front());
};

std::size_t open_descriptors() {
  std::size_t count = 0;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  ::closedir(dir);
  return count - 1;  // the directory's own descriptor
}

// A name /etc/hosts maps to 127.0.0.1, other than localhost (which curl
// resolves without its resolver); empty when there is none.
std::string loopback_name_in_hosts_file() {
  std::ifstream hosts("/etc/hosts");
  std::string line;
  while (std::getline(hosts, line)) {
    std::istringstream fields(line);
    std::string address;
    std::string name;
    if (!(fields >> address) || address != "127.0.0.1") continue;
    while (fields >> name) {
      if (name[0] == '#') break;
      if (name != "localhost" && name.find("localhost") == std::string::npos) return name;
    }
  }
  return {};
}

StubResponse stream(std::vector<std::string> pieces, std::chrono::milliseconds pause) {
  StubResponse response;
  response.headers.emplace_back("Content-Type", "text/event-stream");
  for (std::string& piece : pieces) response.chunks.push_back(StubChunk{std::move(piece), pause});
  return response;
}

}  // namespace

TEST_CASE("an HTTP transfer delivers the head with lower-cased names, the body and completion",
          "[providers][http][concurrency]") {
  HttpStub stub;
  Loop loop;
  StubResponse answer = StubResponse::text("hello", 201);
  answer.headers.emplace_back("X-Request-Id", "req_42");
  stub.enqueue(answer);

  HttpRequest request = get(stub.url("/v1/chat"));
  request.method = "POST";
  request.body = R"({"model":"m"})";
  request.headers.push_back({"Authorization", "Bearer k"});
  request.headers.push_back({"Content-Type", "application/json"});
  auto reported = std::make_shared<Reported>();
  loop.client->start(request, report_to(reported));

  const auto result = reported->done.wait();
  REQUIRE(result.has_value());
  CHECK(result->outcome == HttpOutcome::complete);
  CHECK(result->status == 201);
  CHECK(result->error.empty());
  CHECK(reported->body() == "hello");
  CHECK(reported->header("x-request-id") == "req_42");
  CHECK(reported->header("content-length") == "5");
  CHECK(reported->heads == 1);
  CHECK(reported->status == 201);

  const auto requests = stub.requests();
  REQUIRE(requests.size() == 1);
  CHECK(requests[0].method == "POST");
  CHECK(requests[0].target == "/v1/chat");
  CHECK(requests[0].body == R"({"model":"m"})");
  CHECK(requests[0].header("authorization") == "Bearer k");
  CHECK(requests[0].header("expect").empty());
}

TEST_CASE("an HTTP stream is delivered chunk by chunk in order", "[providers][http][concurrency]") {
  HttpStub stub;
  Loop loop;
  stub.enqueue(stream({"data: a\n\n", "data: bb\n\n", "data: ccc\n\n", "data: [DONE]\n\n"}, 30ms));
  auto reported = std::make_shared<Reported>();
  loop.client->start(get(stub.url("/stream")), report_to(reported));

  const auto result = reported->done.wait();
  REQUIRE(result.has_value());
  CHECK(result->outcome == HttpOutcome::complete);
  CHECK(result->status == 200);
  CHECK(reported->header("content-type") == "text/event-stream");
  std::lock_guard lock(reported->mutex);
  CHECK(reported->pieces ==
        std::vector<std::string>{"data: a\n\n", "data: bb\n\n", "data: ccc\n\n", "data: [DONE]\n\n"});
}

TEST_CASE("an HTTP transfer reaches the stub by address and by host name", "[providers][http][concurrency]") {
  HttpStub stub;
  Loop loop;
  std::string host;
  SECTION("127.0.0.1") { host = "127.0.0.1"; }
  SECTION("localhost, which curl resolves itself") { host = "localhost"; }
  SECTION("a name of /etc/hosts, resolved by curl's resolver thread") {
    // Debian's libcurl hands the resolver thread's socketpair to the socket
    // callback while it resolves a name.
    host = loopback_name_in_hosts_file();
    if (host.empty()) {
      WARN("no name other than localhost maps to 127.0.0.1 in /etc/hosts: section skipped");
      return;
    }
  }
  for (int round = 0; round < 3; ++round) {
    auto reported = std::make_shared<Reported>();
    loop.client->start(get(stub.url("/", host)), report_to(reported));
    const auto result = reported->done.wait();
    REQUIRE(result.has_value());
    CHECK(result->outcome == HttpOutcome::complete);
    CHECK(reported->body() == "ok");
  }
}

TEST_CASE("two HTTP transfers one after the other reuse one connection", "[providers][http][concurrency]") {
  HttpStub stub;
  Loop loop;
  for (int round = 0; round < 2; ++round) {
    auto reported = std::make_shared<Reported>();
    loop.client->start(get(stub.url("/again")), report_to(reported));
    const auto result = reported->done.wait();
    REQUIRE(result.has_value());
    CHECK(result->outcome == HttpOutcome::complete);
  }
  CHECK(stub.requests().size() == 2);
  CHECK(stub.connections_accepted() == 1);
}

TEST_CASE("a hundred concurrent HTTP transfers on one loop all complete", "[providers][http][concurrency]") {
  HttpStub stub;
  stub.set_default(stream({"one ", "two"}, 5ms));
  Loop loop;
  constexpr int kTransfers = 100;
  std::vector<std::shared_ptr<Reported>> all;
  for (int i = 0; i < kTransfers; ++i) {
    all.push_back(std::make_shared<Reported>());
    loop.client->start(get(stub.url("/n/" + std::to_string(i))), report_to(all.back()));
  }
  for (const auto& reported : all) {
    const auto result = reported->done.wait();
    REQUIRE(result.has_value());
    CHECK(result->outcome == HttpOutcome::complete);
    CHECK(reported->body() == "one two");
  }
  CHECK(stub.requests().size() == kTransfers);
}

TEST_CASE("an HTTP transfer to a port nothing listens on is a transport error", "[providers][http][concurrency]") {
  Loop loop;
  auto reported = std::make_shared<Reported>();
  const std::uint16_t closed = passepartout::testing::closed_loopback_port();  // nothing listens
  REQUIRE(closed != 0);
  loop.client->start(get("http://127.0.0.1:" + std::to_string(closed) + "/"), report_to(reported));
  const auto result = reported->done.wait();
  REQUIRE(result.has_value());
  CHECK(result->outcome == HttpOutcome::transport_error);
  CHECK(result->status == 0);
  CHECK_FALSE(result->error.empty());
  CHECK(reported->heads == 0);
}

TEST_CASE("an HTTP server that never answers ends the transfer at the first-byte timeout",
          "[providers][http][concurrency]") {
  HttpStub stub;
  Loop loop;
  StubResponse late = StubResponse::text("late");
  late.head_pause = 10s;
  stub.enqueue(late);
  HttpRequest request = get(stub.url("/slow"));
  request.timeouts.first_byte = 200ms;
  auto reported = std::make_shared<Reported>();
  const auto started = std::chrono::steady_clock::now();
  loop.client->start(request, report_to(reported));
  const auto result = reported->done.wait();
  REQUIRE(result.has_value());
  CHECK(result->outcome == HttpOutcome::first_byte_timeout);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  CHECK(reported->heads == 0);
  CHECK(stub.wait_connections_closed(1, testing::kAsyncTimeout));
}

TEST_CASE("an HTTP stream that stalls between chunks ends at the idle timeout", "[providers][http][concurrency]") {
  HttpStub stub;
  Loop loop;
  SECTION("a stall") {
    StubResponse stalled = stream({"first", "never"}, 0ms);
    stalled.chunks[1].pause = 10s;
    stub.enqueue(stalled);
    HttpRequest request = get(stub.url("/stall"));
    request.timeouts.idle = 200ms;
    auto reported = std::make_shared<Reported>();
    loop.client->start(request, report_to(reported));
    const auto result = reported->done.wait();
    REQUIRE(result.has_value());
    CHECK(result->outcome == HttpOutcome::idle_timeout);
    CHECK(result->status == 200);
    CHECK(reported->body() == "first");
  }
  SECTION("a slow but steady stream longer than the idle timeout completes") {
    stub.enqueue(stream({"a", "b", "c", "d", "e", "f", "g", "h"}, 100ms));
    HttpRequest request = get(stub.url("/steady"));
    request.timeouts.idle = 400ms;
    request.timeouts.first_byte = 400ms;
    auto reported = std::make_shared<Reported>();
    loop.client->start(request, report_to(reported));
    const auto result = reported->done.wait();
    REQUIRE(result.has_value());
    CHECK(result->outcome == HttpOutcome::complete);
    CHECK(reported->body() == "abcdefgh");
  }
}

TEST_CASE("an HTTP connection reset in the middle of the body is a transport error", "[providers][http][concurrency]") {
  HttpStub stub;
  Loop loop;
  StubResponse broken = stream({"data: part", "ial\n"}, 10ms);
  broken.ending = StubResponse::Ending::reset;
  stub.enqueue(broken);
  auto reported = std::make_shared<Reported>();
  loop.client->start(get(stub.url("/reset")), report_to(reported));
  const auto result = reported->done.wait();
  REQUIRE(result.has_value());
  CHECK(result->outcome == HttpOutcome::transport_error);
  CHECK(result->status == 200);
  CHECK_FALSE(result->error.empty());
}

TEST_CASE("an HTTP server that closes without answering is a transport error", "[providers][http][concurrency]") {
  HttpStub stub;
  Loop loop;
  StubResponse silent;
  silent.ending = StubResponse::Ending::close_unanswered;
  stub.enqueue(silent);
  auto reported = std::make_shared<Reported>();
  loop.client->start(get(stub.url("/silent")), report_to(reported));
  const auto result = reported->done.wait();
  REQUIRE(result.has_value());
  CHECK(result->outcome == HttpOutcome::transport_error);
}

TEST_CASE("an HTTP body over its cap ends the transfer as too large", "[providers][http][concurrency]") {
  HttpStub stub;
  Loop loop;
  SECTION("streamed") { stub.enqueue(stream({std::string(600, 'x'), std::string(600, 'y')}, 10ms)); }
  SECTION("with a length") { stub.enqueue(StubResponse::text(std::string(5000, 'z'))); }
  HttpRequest request = get(stub.url("/big"));
  request.max_body = 1000;
  auto reported = std::make_shared<Reported>();
  loop.client->start(request, report_to(reported));
  const auto result = reported->done.wait();
  REQUIRE(result.has_value());
  CHECK(result->outcome == HttpOutcome::too_large);
  CHECK(reported->body().size() <= 1000);
}

TEST_CASE("an HTTP stream cancelled from another thread completes once as cancelled",
          "[providers][http][concurrency]") {
  HttpStub stub;
  Loop loop;
  std::vector<std::string> pieces(50, "data: more\n\n");
  stub.enqueue(stream(pieces, 50ms));
  auto reported = std::make_shared<Reported>();
  auto signal = std::make_shared<CancelSignal>();
  const HttpTransfer transfer = loop.client->start(get(stub.url("/long")), report_to(reported));
  signal->on_cancel([transfer] { transfer.cancel(); });
  REQUIRE(reported->first_data.wait().has_value());

  reported->cancel_called.store(true);
  signal->cancel();
  const auto result = reported->done.wait();
  REQUIRE(result.has_value());
  CHECK(result->outcome == HttpOutcome::cancelled);
  CHECK(stub.wait_connections_closed(1, testing::kAsyncTimeout));

  transfer.cancel();    // after completion: nothing
  loop.client->stop();  // no callback can run after this
  std::lock_guard lock(reported->mutex);
  CHECK(reported->dones == 1);
  CHECK(reported->data_after_cancel == 0);
  CHECK(reported->done.times_set() == 1);
}

TEST_CASE("stopping the HTTP client ends every transfer in flight once as cancelled",
          "[providers][http][concurrency]") {
  HttpStub stub;
  stub.set_default(stream(std::vector<std::string>(100, "tick\n"), 50ms));
  Loop loop;
  constexpr std::size_t kTransfers = 5;
  std::vector<std::shared_ptr<Reported>> all;
  for (std::size_t i = 0; i < kTransfers; ++i) {
    all.push_back(std::make_shared<Reported>());
    loop.client->start(get(stub.url("/forever")), report_to(all.back()));
  }
  REQUIRE(stub.wait_requests(kTransfers, testing::kAsyncTimeout));
  loop.client->stop();
  for (const auto& reported : all) {
    REQUIRE(reported->done.is_set());
    CHECK(reported->done.wait()->outcome == HttpOutcome::cancelled);
    CHECK(reported->done.times_set() == 1);
  }
  CHECK(stub.wait_connections_closed(kTransfers, testing::kAsyncTimeout));

  auto late = std::make_shared<Reported>();
  loop.client->start(get(stub.url("/late")), report_to(late));
  REQUIRE(late->done.is_set());
  CHECK(late->done.wait()->outcome == HttpOutcome::cancelled);
}

TEST_CASE("an HTTP client destroyed after its loop stopped cancels its transfer and closes its socket",
          "[providers][http][concurrency]") {
  HttpStub stub;
  stub.set_default(stream(std::vector<std::string>(100, "tick\n"), 50ms));
  boost::asio::io_context context(1);
  auto guard = boost::asio::make_work_guard(context);
  std::thread thread([&context] { context.run(); });
  auto client = std::make_unique<HttpClient>(context);
  auto reported = std::make_shared<Reported>();
  client->start(get(stub.url("/forever")), report_to(reported));
  REQUIRE(reported->first_data.wait().has_value());
  context.stop();
  thread.join();

  client.reset();  // on this thread: the loop no longer runs
  REQUIRE(reported->done.is_set());
  CHECK(reported->done.wait()->outcome == HttpOutcome::cancelled);
  CHECK(stub.wait_connections_closed(1, testing::kAsyncTimeout));
}

TEST_CASE("HttpClients starts transfers on the loops from any thread and from a loop",
          "[providers][http][concurrency]") {
  HttpStub stub;
  EventLoops loops(2);
  HttpClients clients(loops);
  REQUIRE(clients.size() == 2);
  auto first = std::make_shared<Reported>();
  auto second = std::make_shared<Reported>();
  HttpCallbacks chained = report_to(first);
  chained.on_done = [&clients, &stub, first, second, done = chained.on_done](HttpResult&& result) {
    clients.start(get(stub.url("/second")), report_to(second));  // from the loop's thread
    done(std::move(result));
  };
  clients.start(get(stub.url("/first")), chained);
  REQUIRE(second->done.wait().has_value());
  CHECK(first->done.wait()->outcome == HttpOutcome::complete);
  CHECK(second->done.wait()->outcome == HttpOutcome::complete);
  CHECK(stub.connections_accepted() == 1);  // the same loop, so the same kept connection
  clients.stop();
}

TEST_CASE("two hundred HTTP transfers leave no descriptor open", "[providers][http][concurrency]") {
  const auto run = [](int transfers) {
    HttpStub stub;
    Loop loop;
    for (int batch = 0; batch < transfers / 20; ++batch) {
      std::vector<std::shared_ptr<Reported>> all;
      for (int i = 0; i < 20; ++i) {
        all.push_back(std::make_shared<Reported>());
        const std::string host = i % 2 == 0 ? "localhost" : "127.0.0.1";
        const HttpTransfer transfer = loop.client->start(get(stub.url("/fd", host)), report_to(all.back()));
        if (i % 5 == 0) transfer.cancel();
      }
      for (const auto& reported : all) REQUIRE(reported->done.wait().has_value());
    }
  };
  run(20);  // whatever the first use opens for good (curl's and the resolver's set-up)
  const std::size_t before = open_descriptors();
  run(200);
  CHECK(open_descriptors() == before);
}
