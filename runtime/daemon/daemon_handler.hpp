// DaemonHandler: the daemon's request routing, for every request the server
// does not answer itself (operator commands, or signals into the pipeline).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "daemon/daemon_config.hpp"
#include "daemon/server.hpp"

namespace passepartout {

class OperatorHandler;
class Pipeline;

// Routes operator requests to the OperatorHandler (when authenticated),
// everything else into the pipeline with this connection's reply. A request
// that needs the token and came without it is refused here. Called on io
// threads; never blocks. `pipeline` and `operators` outlive it.
class DaemonHandler final : public RequestHandler {
 public:
  DaemonHandler(Pipeline& pipeline, OperatorHandler& operators, DaemonConfig::TcpAuth tcp_auth)
      : pipeline_(pipeline), operators_(operators), tcp_auth_(tcp_auth) {}

  void handle(Value message, const ConnectionInfo& connection, WireReply reply) override;
  void closed(const ConnectionInfo& connection) override;

  // Sessions followed per connection (a connection naming more is not followed further).
  static constexpr std::size_t kMaxSessionsPerConnection = 1024;

  // Whether a connection that is open has carried signals of `session`. Any thread.
  bool session_open(std::string_view session) const;
  // Called with a session's id when the last open connection that carried
  // its signals closes (a session's rules end then). Set before the server starts.
  void on_session_ended(std::function<void(std::string_view)> hook) { session_ended_ = std::move(hook); }

 private:
  void inject(Value message, const ConnectionInfo& connection, WireReply reply, const Value& request_id);
  void carried(std::uint64_t connection, std::string_view session);

  Pipeline& pipeline_;
  OperatorHandler& operators_;
  DaemonConfig::TcpAuth tcp_auth_;
  std::function<void(std::string_view)> session_ended_;
  // Which sessions each open connection carried, and how many open
  // connections carry each session.
  mutable std::mutex sessions_mutex_;  // guards the two maps
  std::unordered_map<std::uint64_t, std::vector<std::string>> sessions_of_;
  std::unordered_map<std::string, std::size_t> carriers_;
};

}  // namespace passepartout
