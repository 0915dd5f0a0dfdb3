// WireSink: the pipeline's ReplySink on top of one request's WireReply, so
// what a signal's loop sends goes out as frames on its connection, and the
// connection's closing cancels the signal's model call in flight.
#pragma once

#include <utility>

#include "daemon/server.hpp"
#include "pipeline/pipeline.hpp"

namespace passepartout {

// What the :TUI actuator sends, approval notices and stream chunks go out as
// frames on the connection the signal came from. Any thread, as WireReply.
class WireSink final : public ReplySink {
 public:
  explicit WireSink(WireReply reply) : reply_(std::move(reply)) {}
  void send(const Value& message) override { reply_.send(message); }
  bool is_open() const override { return reply_.is_open(); }
  void on_close(InlineFunction<void()> hook) override { reply_.on_close(std::move(hook)); }
  bool may_request_approval() const override { return reply_.connection().authenticated; }

 private:
  WireReply reply_;
};

}  // namespace passepartout
