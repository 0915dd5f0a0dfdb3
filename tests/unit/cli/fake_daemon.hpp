// Test support for the client commands: an in-process Server whose handler
// answers like the daemon does (runtime/daemon/protocol.hpp), and a raw peer
// that sends whatever bytes a test wants and then closes.
#pragma once

#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/client_commands.hpp"
#include "daemon/frame_codec.hpp"
#include "daemon/protocol.hpp"
#include "daemon/server.hpp"
#include "support/sexp.hpp"
#include "support/skill_fixtures.hpp"

namespace passepartout::testing {

inline constexpr std::chrono::seconds kClientWait{20};
inline constexpr const char* kToken = "s3cret-token";
inline constexpr std::int64_t kFakePending = 250;  // approvals the fake daemon has pending

// The skills every fake status and skills answer lists.
inline Value fake_skills() {
  return sexp(
      "((:NAME \"shell-guard\" :VERSION \"1.2.0\" :PRIORITY 90 :STATE :LOADED :SHA256 "
      "\"3f5a1234567890abcdef\" :GATE T :VERIFIED 10 :BLOCKED 2 :FAILED 1 :ISOLATION \"process\" :WORKER-PID 4242 "
      ":RESTARTS 2 :LAST-DEATH \"skill process died: SIGSEGV\" :SANDBOX-DENIALS 3)"
      " (:NAME \"weather\" :VERSION \"0.3.0\" :PRIORITY 10 :STATE :DISABLED :REASON \"depends on 'geo', which failed "
      "to load\" :GATE NIL :VERIFIED 0 :BLOCKED 0 :FAILED 0))");
}

// Answers operator requests and user input the way the daemon's protocol says.
// Records every request it got. Thread-safe.
class FakeDaemon final : public RequestHandler {
 public:
  void handle(Value message, const ConnectionInfo& connection, WireReply reply) override {
    {
      std::lock_guard lock(mutex_);
      requests_.push_back(message);
      connections_.push_back(connection.connection_id);
    }
    if (message.at("TYPE").is_keyword("OPERATOR")) {
      if (!connection.authenticated) {
        reply.finish(
            echo_id(message, make_error_response(wire_error::kUnauthorized, "operator requests need the token")));
        return;
      }
      reply.finish(echo_id(message, operator_answer(message)));
      return;
    }
    user_input(message, reply);
  }

  std::vector<Value> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  // The connection each request came on, in order.
  std::vector<std::uint64_t> request_connections() const {
    std::lock_guard lock(mutex_);
    return connections_;
  }
  Value last_request() const {
    std::lock_guard lock(mutex_);
    return requests_.empty() ? Value() : requests_.back();
  }

 private:
  static Value echo_id(const Value& request, const Value& response) {
    const Value* id = request.get("REQUEST-ID");
    return id != nullptr ? response.with("REQUEST-ID", *id) : response;
  }

  static Value change(std::string_view kind, std::string_view skill, std::string_view outcome) {
    return Value::plist({{"KIND", Value::string(kind)},
                         {"SKILL", Value::string(skill)},
                         {"FROM-VERSION", Value::string("1.0.0")},
                         {"FROM-SHA256", Value::string("aaaabbbbccccdddd")},
                         {"TO-VERSION", Value::string("1.1.0")},
                         {"TO-SHA256", Value::string("eeeeffff00001111")},
                         {"OUTCOME", Value::string(outcome)},
                         {"REQUESTER", Value::string("cli")},
                         {"DURATION-US", Value::integer(1500)},
                         {"AT-UNIX-MS", Value::integer(1700000000000)}});
  }

  // Approval `i` of kFakePending, newest first; the newest is the one whose token APPROVE and DENY know.
  static Value fake_approval(std::int64_t i) {
    const std::string token = i == 0 ? std::string("ab12cd34") : "token-" + std::to_string(i);
    return sexp("(:TOKEN \"" + token +
                "\" :STATE :PENDING :SESSION-ID \"s1\""
                " :ACTION (:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"rm -rf build\"))"
                " :REASON \"deletes files\" :GATES (\"shell-guard@1.2.0\") :CREATED-UNIX-MS 1700000000000"
                " :EXPIRES-UNIX-MS 1700003600000)");
  }

  // :APPROVALS as the daemon pages it, over kFakePending approvals.
  static Value approvals_page(const Value& request) {
    std::int64_t limit = 100, offset = 0;
    if (const Value* n = request.get("LIMIT")) {
      if (!n->is_integer() || n->as_integer() < 1 || n->as_integer() > 1000) {
        return make_error_response(wire_error::kBadRequest, ":LIMIT must be a whole number from 1 to 1000");
      }
      limit = n->as_integer();
    }
    if (const Value* n = request.get("OFFSET")) {
      if (!n->is_integer() || n->as_integer() < 0) {
        return make_error_response(wire_error::kBadRequest, ":OFFSET must be a whole number, 0 or more");
      }
      offset = n->as_integer();
    }
    std::vector<Value> page;
    for (std::int64_t i = offset; i < offset + limit && i < kFakePending; ++i) page.push_back(fake_approval(i));
    return make_ok_response("paged", Value::plist({{"APPROVALS", Value::list(std::span<const Value>(page))},
                                                   {"TOTAL", Value::integer(kFakePending)},
                                                   {"OFFSET", Value::integer(offset)},
                                                   {"LIMIT", Value::integer(limit)}}));
  }

  static Value operator_answer(const Value& request) {
    const Value& command = request.at("COMMAND");
    if (command.is_keyword("STATUS")) {
      return make_ok_response("running", Value::plist({{"VERSION", Value::string("9.9.9")},
                                                       {"UPTIME-S", Value::integer(3725)},
                                                       {"HEALTH", Value::keyword("HEALTHY")},
                                                       {"READY", Value()},
                                                       {"NOT-READY", Value::string("not ready: no skill is loaded")},
                                                       {"CONNECTIONS", Value::integer(2)},
                                                       {"CONNECTIONS-REFUSED", Value::integer(1)},
                                                       {"CONNECTIONS-EVICTED", Value::integer(5)},
                                                       {"METRICS-EVICTED", Value::integer(3)},
                                                       {"SIGNALS-PROCESSED", Value::integer(42)},
                                                       {"IN-FLIGHT", Value::integer(1)},
                                                       {"PENDING-APPROVALS", Value::integer(1)},
                                                       {"APPROVALS-REFUSED", Value::integer(7)},
                                                       {"SKILLS", fake_skills()}}));
    }
    if (command.is_keyword("SKILLS")) return make_ok_response("2 skills", Value::plist({{"SKILLS", fake_skills()}}));
    if (command.is_keyword("LOAD")) {
      const Value& manifest = request.at("MANIFEST");
      if (!manifest.is_string()) return make_error_response(wire_error::kBadRequest, ":MANIFEST must be a string");
      if (manifest.text().find("refused") != std::string_view::npos) {
        return make_error_response(wire_error::kRefused,
                                   "skill 'weather': step self-test: the skill's self-test failed");
      }
      return make_ok_response("loaded weather 1.1.0",
                              Value::plist({{"CHANGES", Value::list({change("swap", "weather", "ok")})}}));
    }
    if (command.is_keyword("RELOAD") || command.is_keyword("UNLOAD")) {
      const Value& name = request.at("NAME");
      if (!name.is_string()) return make_error_response(wire_error::kBadRequest, ":NAME must be a string");
      if (name.text() != "weather")
        return make_error_response(wire_error::kNotFound, "no skill named '" + std::string(name.text()) + "'");
      const bool unload = command.is_keyword("UNLOAD");
      std::vector<Value> changes{change(unload ? "remove" : "swap", "weather", "ok")};
      if (unload && request.at("CASCADE").is_true()) changes.push_back(change("remove", "forecast", "ok"));
      return make_ok_response(unload ? "unloaded" : "reloaded",
                              Value::plist({{"CHANGES", Value::list(std::span<const Value>(changes))}}));
    }
    if (command.is_keyword("RESCAN")) return make_ok_response("nothing changed", Value::plist({{"CHANGES", Value()}}));
    if (command.is_keyword("SHADOW-STATUS")) {
      const Value sample = sexp(
          "(:AT-UNIX-MS 1700000000000 :STAGE \"last-mile\" :KIND \"candidate-blocks\" :LIVE \"passed\" "
          ":CANDIDATE \"blocked\" :LIVE-REASON \"\" :CANDIDATE-REASON \"rm outside the workspace\" "
          ":ACTION-DIGEST \"9f2c01ab34cd56ef\")");
      Value entry = sexp(
          "(:NAME \"shell-guard\" :LIVE-VERSION \"1.4.0\" :CANDIDATE-VERSION \"2.0.0\" :CANDIDATE-SHA256 "
          "\"3f5a0123456789abcdef\" :MANIFEST \"/c/shell-guard-2.yaml\" :SINCE-UNIX-MS 1700000000000 :REQUESTER "
          "\"cli\" :SEEN 120 :AGREEMENTS 117 :DISAGREEMENTS 3 :CANDIDATE-BLOCKS 3 :CANDIDATE-PASSES 0 "
          ":REWRITES-DIFFERENTLY 0 :CANDIDATE-FAILED 0)");
      entry = std::move(entry).with("LATEST", Value::list({sample}));
      const Value* name = request.get("NAME");
      if (name != nullptr && name->text() != "shell-guard") {
        return make_error_response(wire_error::kNotFound,
                                   "skill '" + std::string(name->text()) + "' has no shadow candidate");
      }
      return make_ok_response("1 candidate", Value::plist({{"SHADOWS", Value::list({entry})}}));
    }
    if (command.is_keyword("PROMOTE") || command.is_keyword("SHADOW-STOP") || command.is_keyword("SHADOW")) {
      const std::string kind = command.is_keyword("PROMOTE")  ? "promote"
                               : command.is_keyword("SHADOW") ? "shadow"
                                                              : "shadow-stop";
      return make_ok_response(kind, Value::plist({{"CHANGES", Value::list({change(kind, "weather", "ok")})}}));
    }
    if (command.is_keyword("APPROVALS")) return approvals_page(request);
    if (command.is_keyword("APPROVAL")) {
      if (!request.at("TOKEN").is_string() || request.at("TOKEN").text() != "ab12cd34") {
        return make_error_response(wire_error::kNotFound, "no approval with that token");
      }
      return make_ok_response(
          "approved",
          Value::plist(
              {{"APPROVAL", fake_approval(0)
                                .with("STATE", Value::keyword("APPROVED"))
                                .with("DECIDED-BY", Value::string("wire"))
                                .with("DECIDED-UNIX-MS", Value::integer(1700000100000))
                                .with("RUN", Value::keyword("INTERRUPTED"))
                                .with("RUN-ERROR", Value::string("the daemon stopped while the action ran"))}}));
    }
    if (command.is_keyword("DENY") && request.get("SESSION") != nullptr) {
      const Value& session = request.at("SESSION");
      if (!session.is_string()) return make_error_response(wire_error::kBadRequest, ":SESSION must be a string");
      const std::int64_t denied = session.text() == "s1" ? 4998 : 0;
      const std::string name(session.text());
      return make_ok_response(denied > 0 ? "denied 4998 pending approvals of session '" + name + "'"
                                         : "no pending approvals of session '" + name + "'",
                              Value::plist({{"DENIED", Value::integer(denied)}, {"SESSION", session}}));
    }
    if (command.is_keyword("APPROVE") || command.is_keyword("DENY")) {
      const Value& token = request.at("TOKEN");
      if (!token.is_string() || token.text() != "ab12cd34") {
        return make_error_response(wire_error::kNotFound, "no pending approval with that token");
      }
      if (command.is_keyword("DENY")) return make_ok_response("denied");
      return make_ok_response("approved",
                              Value::plist({{"RESULT", sexp("(:TYPE :EVENT :PAYLOAD (:TEXT \"removed build/\"))")}}));
    }
    if (command.is_keyword("SHUTDOWN")) return make_ok_response("shutting down");
    return make_error_response(wire_error::kBadRequest, "unknown command");
  }

  // User input: what the text asks for decides the frames.
  static void user_input(const Value& message, WireReply& reply) {
    const Value& text = message.path({"PAYLOAD", "TEXT"});
    const std::string input = text.is_string() ? std::string(text.text()) : std::string();
    const Value& id = message.at("REQUEST-ID");
    auto end = [&](std::string_view stopped_by) {
      Value done = make_ok_response(
          "done", Value::plist({{"STOPPED-BY", Value::keyword(stopped_by)}, {"CYCLES", Value::integer(1)}}));
      if (id.is_string()) done = done.with("REQUEST-ID", id);
      reply.finish(done);
    };
    if (input == "hello") {
      reply.send(make_stream_chunk("Hello "));
      reply.send(make_stream_chunk("there"));
      reply.send(
          sexp("(:TYPE :REQUEST :TARGET :TUI :META (:SOURCE :TUI) :PAYLOAD (:ACTION :MESSAGE :TEXT \"Hello there\" "
               ":RULE-COUNT 0)"
               " :GATE-TRACE ((:GATE \"policy\" :VERSION \"1.0.0\" :RESULT :PASSED)"
               " (:GATE \"shell-guard\" :VERSION \"1.2.0\" :RESULT :REWRITTEN :REWRITTEN T :REASON \"quoted the "
               "argument\")))"));
      end("DONE");
    } else if (input == "date") {
      // What a daemon tells the user once an actuator ran, then the model's answer.
      reply.send(
          sexp("(:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:ACTION :MESSAGE :TEXT \"Ran date -u on :SHELL:\nThu Nov 26\n\""
               " :ACTED (:TARGET :SHELL :WHAT \"date -u\" :STATUS :OK :MS 3.5)))"));
      reply.send(sexp("(:TYPE :REQUEST :TARGET :TUI :PAYLOAD (:ACTION :MESSAGE :TEXT \"It is Thursday.\"))"));
      end("DONE");
    } else if (input == "rm") {
      reply.send(
          sexp("(:TYPE :LOG :PAYLOAD (:LEVEL :ERROR :TEXT \"Action blocked: rm -rf is destructive\")"
               " :GATE-TRACE ((:GATE \"shell-guard\" :VERSION \"1.2.0\" :RESULT :BLOCKED :REASON \"rm -rf is "
               "destructive\")))"));
      end("DONE");
    } else if (input == "deploy") {
      reply.send(sexp(
          "(:TYPE :EVENT :LEVEL :APPROVAL-REQUIRED :GATE-TRACE ((:GATE \"shell-guard\" :VERSION \"1.2.0\" :RESULT "
          ":APPROVAL"
          " :REASON \"deploys need a human\")) :PAYLOAD (:SENSOR :APPROVAL-REQUIRED :TEXT \"Approval required: deploys "
          "need"
          " a human.\" :TOKEN \"ab12cd34\" :ACTION (:TYPE :REQUEST :TARGET :SHELL :PAYLOAD (:CMD \"./deploy\"))))"));
      end("DONE");
    } else if (input == "odd") {
      // Frames with missing or unexpected keys; none may crash the client.
      reply.send(sexp("(:TYPE :STREAM-CHUNK)"));
      reply.send(sexp("(:TYPE :STREAM-CHUNK :PAYLOAD (:TEXT 42))"));
      reply.send(sexp("(:TYPE :REQUEST)"));
      reply.send(sexp("(:TYPE :REQUEST :PAYLOAD (:TEXT (1 2)) :GATE-TRACE (junk (:RESULT 7) (:GATE 5)))"));
      reply.send(sexp("(:TYPE :EVENT :LEVEL :APPROVAL-REQUIRED :PAYLOAD NIL)"));
      reply.send(sexp("(:TYPE :RESPONSE :STATUS :OK :REQUEST-ID \"someone-else\")"));
      reply.send(sexp("(1 2 3)"));
      reply.send(Value::integer(42));
      reply.send(sexp("(:TYPE :REQUEST :PAYLOAD (:TEXT \"bell \x07 and escape \x1b[31m\"))"));
      Value done = sexp("(:TYPE :RESPONSE :STATUS :OK)");
      if (id.is_string()) done = done.with("REQUEST-ID", id);
      reply.finish(done);
    } else if (input == "silence") {
      // No frame at all: dropping the sink finishes the reply without one.
    } else if (input == "stopping") {
      // What a daemon on its way down answers: the client must not reuse the connection.
      Value stopping = make_error_response(wire_error::kShuttingDown, "the daemon is stopping");
      if (id.is_string()) stopping = stopping.with("REQUEST-ID", id);
      reply.finish(stopping);
    } else if (input == "fail") {
      Value failed = make_error_response(wire_error::kInternal, "the pipeline failed");
      if (id.is_string()) failed = failed.with("REQUEST-ID", id);
      reply.finish(failed);
    } else {
      reply.send(Value::plist({{"TYPE", Value::keyword("REQUEST")},
                               {"PAYLOAD", Value::plist({{"TEXT", Value::string("echo: " + input)}})}}));
      end("DONE");
    }
  }

  mutable std::mutex mutex_;  // guards requests_, connections_
  std::vector<Value> requests_;
  std::vector<std::uint64_t> connections_;
};

// A Server on a Unix socket in a temp dir and on loopback TCP (port 0), with a FakeDaemon.
class FakeDaemonServer {
 public:
  explicit FakeDaemonServer(HealthProbe health = {}) : daemon_(std::make_shared<FakeDaemon>()) {
    ServerOptions options;
    options.unix_socket_path = dir_.path() / "daemon.sock";
    options.tcp_port = 0;
    options.auth_token = kToken;
    options.version = "9.9.9";
    options.threads = 1;
    auto started = Server::start(options, daemon_, std::move(health));
    REQUIRE(started.has_value());
    server_ = std::move(*started);
  }
  ~FakeDaemonServer() { server_->stop(std::chrono::seconds(5)); }

  cli::Target unix_target() const {
    cli::Target target;
    target.endpoint.socket_path = server_->unix_socket_path();
    target.reply_timeout = kClientWait;
    return target;
  }
  cli::Target tcp_target(std::string token = kToken) const {
    cli::Target target;
    target.endpoint.port = server_->tcp_port();
    target.token = std::move(token);
    target.token_source = "the test";
    target.reply_timeout = kClientWait;
    return target;
  }
  FakeDaemon& daemon() { return *daemon_; }
  Server& server() { return *server_; }

 private:
  TempDir dir_;
  std::shared_ptr<FakeDaemon> daemon_;
  std::unique_ptr<Server> server_;
};

// One connection on a Unix socket: sends the handshake (unless told not
// to), reads one frame (unless told not to), sends `then` (raw bytes, already
// framed), and closes. For daemons that
// misbehave in ways a Server never would.
class RawPeer {
 public:
  explicit RawPeer(std::string then, bool read_request = true, bool handshake = true)
      : path_(dir_.path() / "raw.sock") {
    listener_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(listener_ >= 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string native = path_.string();
    std::memcpy(address.sun_path, native.data(), native.size());
    REQUIRE(::bind(listener_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener_, 4) == 0);
    thread_ = std::thread([this, then = std::move(then), read_request, handshake] {
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      if (handshake) {
        const std::string hello = *FrameCodec().encode(make_handshake("raw", {}));
        ::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
      }
      if (read_request) {
        FrameDecoder decoder;
        char buffer[4096];
        while (decoder.pending() == 0 && !decoder.failed()) {
          const ssize_t got = ::recv(fd, buffer, sizeof buffer, 0);
          if (got <= 0) break;
          decoder.feed(std::string_view(buffer, static_cast<std::size_t>(got)));
        }
      }
      ::send(fd, then.data(), then.size(), MSG_NOSIGNAL);
      ::close(fd);
    });
  }
  ~RawPeer() {
    ::shutdown(listener_, SHUT_RDWR);
    thread_.join();
    ::close(listener_);
  }

  cli::Target target() const {
    cli::Target target;
    target.endpoint.socket_path = path_;
    target.reply_timeout = kClientWait;
    return target;
  }

  static std::string frame(std::string_view message) { return *FrameCodec().encode(sexp(message)); }

 private:
  TempDir dir_;
  std::filesystem::path path_;
  int listener_ = -1;
  std::thread thread_;
};

// Captures what a command writes.
struct Captured {
  std::ostringstream out;
  std::ostringstream err;
  cli::Output output(bool json = false) { return cli::Output{out, err, json}; }
};

}  // namespace passepartout::testing
