// DaemonHandler: the daemon's request routing, for every request the server
// does not answer itself (operator commands, or signals into the pipeline).
#pragma once

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

 private:
  void inject(Value message, const ConnectionInfo& connection, WireReply reply, const Value& request_id);

  Pipeline& pipeline_;
  OperatorHandler& operators_;
  DaemonConfig::TcpAuth tcp_auth_;
};

}  // namespace passepartout
