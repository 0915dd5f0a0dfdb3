// DaemonHandler: who may send what (the token over TCP, --tcp-auth), then
// operator requests to the OperatorHandler and the rest into the pipeline.
#include "daemon/daemon_handler.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "base/ascii.hpp"
#include "base/log.hpp"
#include "daemon/operator_handler.hpp"
#include "daemon/protocol.hpp"
#include "daemon/wire_sink.hpp"
#include "pipeline/pipeline.hpp"
#include "pipeline/signal.hpp"

namespace passepartout {

using namespace key_literals;

namespace {

constexpr std::string_view kComponent = "daemon";

// What an unauthenticated TCP client may send under --tcp-auth user-input:
// an event of the user's own words, aimed nowhere.
bool is_plain_user_input(const Value& message) {
  if (!message.is_list() || message_type(message) != "EVENT" || message.get("TARGET"_key) != nullptr) return false;
  const Value& sensor = message.path("PAYLOAD"_key, "SENSOR"_key);
  return sensor.is_keyword("USER-INPUT"_key) || sensor.is_keyword("CHAT-MESSAGE"_key);
}

Value with_request_id(Value response, const Value& request_id) {
  if (request_id.is_nil()) return response;
  return std::move(response).with("REQUEST-ID", request_id);
}

}  // namespace

void DaemonHandler::handle(Value message, const ConnectionInfo& connection, WireReply reply) {
  const Value request_id = message.at("REQUEST-ID"_key);
  const bool is_operator = message_type(message) == "OPERATOR";
  // The :INTERRUPT sensor stops every loop and then the daemon (F3, H7): a
  // shutdown, so it needs what an operator's :SHUTDOWN needs.
  const bool is_interrupt = message.is_list() && message.path("PAYLOAD"_key, "SENSOR"_key).is_keyword("INTERRUPT"_key);
  const bool privileged = is_operator || is_interrupt;
  const bool tokenless_ok = connection.transport == Transport::tcp && tcp_auth_ == DaemonConfig::TcpAuth::user_input &&
                            !privileged && is_plain_user_input(message);
  if ((privileged || (connection.transport == Transport::tcp && !tokenless_ok)) && !connection.authenticated) {
    log_message(LogLevel::warn, kComponent, "refused an unauthenticated {} from {}",
                is_operator    ? "operator request"
                : is_interrupt ? "interrupt"
                               : "request",
                connection.peer);
    reply.finish(with_request_id(
        make_error_response(wire_error::kUnauthorized,
                            "this request needs :AUTH \"<token>\" over TCP (the token is in the daemon's state "
                            "folder, file 'token'; `passepartout chat` sends it); the Unix socket needs none"),
        request_id));
    return;
  }
  if (is_operator) {
    operators_.handle(std::move(message), connection.requester.empty() ? std::string("wire") : connection.requester,
                      [reply](const Value& response) mutable { reply.finish(response); });
    return;
  }
  inject(std::move(message), connection, std::move(reply), request_id);
}

void DaemonHandler::inject(Value message, const ConnectionInfo& connection, WireReply reply, const Value& request_id) {
  Value signal = message.is_list() ? message.without("REQUEST-ID") : as_signal(std::move(message));
  // Without a session of its own, the connection is the session: signals
  // of one connection stay in order, connections run in parallel.
  signal = with_session(std::move(signal), "conn-" + std::to_string(connection.connection_id));
  carried(connection.connection_id, session_id_of(signal));
  pipeline_.inject(
      std::move(signal), std::make_shared<WireSink>(reply), [reply, request_id](const LoopReport& report) mutable {
        if (request_id.is_nil()) {
          reply.finish();
          return;
        }
        const std::string stopped_by = ascii_upper(report.stopped_by.empty() ? "done" : report.stopped_by);
        reply.finish(
            with_request_id(make_ok_response("done", Value::plist({{"STOPPED-BY", Value::keyword(stopped_by)},
                                                                   {"CYCLES", Value::integer(report.cycles)}})),
                            request_id));
      });
}

void DaemonHandler::carried(std::uint64_t connection, std::string_view session) {
  const std::lock_guard lock(sessions_mutex_);
  std::vector<std::string>& sessions = sessions_of_[connection];
  if (std::find(sessions.begin(), sessions.end(), session) != sessions.end()) return;
  // A connection that names ever more sessions is not followed past this:
  // those it names later count as not open (no session rule is taught for them).
  if (sessions.size() >= kMaxSessionsPerConnection) return;
  sessions.emplace_back(session);
  ++carriers_[std::string(session)];
}

void DaemonHandler::closed(const ConnectionInfo& connection) {
  std::vector<std::string> ended;
  {
    const std::lock_guard lock(sessions_mutex_);
    auto found = sessions_of_.find(connection.connection_id);
    if (found == sessions_of_.end()) return;
    for (std::string& session : found->second) {
      auto carrier = carriers_.find(session);
      if (carrier == carriers_.end() || --carrier->second > 0) continue;
      carriers_.erase(carrier);
      ended.push_back(std::move(session));
    }
    sessions_of_.erase(found);
  }
  if (!session_ended_) return;
  for (const std::string& session : ended) session_ended_(session);
}

bool DaemonHandler::session_open(std::string_view session) const {
  const std::lock_guard lock(sessions_mutex_);
  return carriers_.find(std::string(session)) != carriers_.end();
}

}  // namespace passepartout
