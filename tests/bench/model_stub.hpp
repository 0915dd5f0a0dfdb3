// A loopback model API for the provider benchmarks: an OpenAI-compatible
// `/chat/completions` that answers every request with a streamed "pong"
// (server-sent events), at once or after a pause, on Asio in its own thread.
// Like tests/support/http_stub.hpp it serves any number of connections at
// once, each pause a timer; unlike it, it answers the same way for ever and
// keeps only the last request (a benchmark sends tens of thousands), and can
// stream chunks one at a time on the caller's cue while it notes when each
// was written, or play a model that calls a tool and notes how long the
// daemon took to bring the call's result back.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

namespace passepartout::bench {

class ModelStub {
 public:
  enum class Mode : std::uint8_t {
    answer,    // the whole answer after `pause` (zero: at once), Content-Length
    stepped,   // the head at once, then one chunk each time release_chunk() is called
    tool_call  // non-streamed JSON: a call of the ToolCall's tool, or "pong" to a request carrying its result
  };
  ModelStub(Mode mode, std::chrono::milliseconds pause = {}, int chunks_per_answer = 1);

  // Tool-call mode: the tool the model calls (OpenAI's chat completions,
  // not streamed), with `arguments` (a JSON object's text); `expect` is text
  // the call's result must hold.
  struct ToolCall {
    std::string name;
    std::string arguments;
    std::string expect;
  };
  explicit ModelStub(ToolCall call);
  ~ModelStub();
  ModelStub(const ModelStub&) = delete;
  ModelStub& operator=(const ModelStub&) = delete;

  std::uint16_t port() const noexcept { return port_; }
  std::string base_url() const;  // http://127.0.0.1:<port>/v1

  // The last request: its header lines (without Host, Content-Length) and body.
  std::vector<std::string> last_headers() const;
  std::string last_body() const;
  std::size_t requests() const noexcept { return requests_.load(); }
  std::size_t connections() const noexcept { return connections_.load(); }

  // Stepped mode: lets the stream write its next chunk (now, or when it is
  // ready); written_at() is when the stub began writing the latest one.
  void release_chunk();
  std::chrono::steady_clock::time_point written_at() const noexcept {
    return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(written_at_.load()));
  }

  // Tool-call mode: for each request that carried a call's result, the
  // microseconds from the stub's writing the answer that made the call to
  // its having read the whole request; and how many results lacked `expect`
  // (a call refused or failed, which would be timed as if it had run).
  std::vector<double> call_gaps() const;
  void clear_call_gaps();
  std::size_t unexpected_results() const noexcept { return unexpected_results_.load(); }

  struct Connection;

 private:
  void start();  // binds, listens and starts the thread: the last thing each constructor does
  void accept();
  void serve(const std::shared_ptr<Connection>& connection);
  void respond(const std::shared_ptr<Connection>& connection);
  void respond_to_call(const std::shared_ptr<Connection>& connection, const std::string& body,
                       std::chrono::steady_clock::time_point read_at);
  void step(const std::shared_ptr<Connection>& connection);

  Mode mode_;
  std::chrono::milliseconds pause_;
  int chunks_per_answer_;
  boost::asio::io_context context_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<std::size_t> requests_{0};
  std::atomic<std::size_t> connections_{0};
  std::atomic<std::chrono::steady_clock::rep> written_at_{0};
  mutable std::mutex mutex_;
  std::vector<std::string> last_headers_;
  std::string last_body_;
  // Stepped mode, on the stub's thread only.
  int credits_ = 0;
  std::shared_ptr<Connection> waiting_;
  // Tool-call mode: the call, and (the stub's thread only) when the last one
  // was written and whether its result is still to come.
  ToolCall call_;
  std::chrono::steady_clock::time_point call_written_at_{};
  bool awaiting_result_ = false;
  std::size_t calls_made_ = 0;
  std::vector<double> call_gaps_;  // under mutex_
  std::atomic<std::size_t> unexpected_results_{0};
};

}  // namespace passepartout::bench
