// McpClient: requests by id with a deadline each, the initialize handshake,
// paged tools/list, tools/call with cancellation, and the server's own
// requests (ping answered, anything else refused as not found).
#include "mcp/mcp_client.hpp"

// GCC 12 reports a "potential null pointer dereference" inside Asio's
// scheduler (a false positive); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#pragma GCC diagnostic pop
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "mcp/json_rpc.hpp"

namespace passepartout::mcp {

namespace {

namespace asio = boost::asio;
using Json = nlohmann::json;

std::string duration_text(std::chrono::milliseconds duration) {
  const auto ms = duration.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  return std::to_string(ms) + " ms";
}

// How many tools/list pages a session follows before it calls the server's cursor a loop.
constexpr std::size_t kMaxPages = 256;

}  // namespace

struct McpClient::Impl {
  // A request in flight: what to do with its answer, and its deadline.
  struct Pending {
    std::string method;
    std::function<void(Result<std::string> result_json)> done;
    std::unique_ptr<asio::steady_timer> timer;
  };

  Impl(asio::io_context& context, ClientOptions options_in, ClientEvents events_in)
      : io(context), options(std::move(options_in)), events(std::move(events_in)) {}

  asio::io_context& io;
  ClientOptions options;
  ClientEvents events;
  std::weak_ptr<McpClient> self;
  std::shared_ptr<Transport> transport;
  std::unordered_map<std::int64_t, Pending> pending;
  std::int64_t next_id = 1;
  bool is_ready = false;
  bool closed = false;
  std::string closed_reason;
  ServerInfo server;

  std::string who() const { return "mcp server '" + options.name + "'"; }

  void send(const std::string& message) {
    if (options.on_exchange) options.on_exchange(true, message);
    transport->send(message);
  }

  // Sends `method` and arms its deadline; `done` runs exactly once.
  std::int64_t request(std::string_view method, std::string_view params_json, std::chrono::milliseconds timeout,
                       std::function<void(Result<std::string>)> done) {
    if (closed) {
      done(fail(ErrorCode::failed, closed_reason));
      return 0;
    }
    const std::int64_t id = next_id++;
    Pending entry{std::string(method), std::move(done), std::make_unique<asio::steady_timer>(io, timeout)};
    entry.timer->async_wait([weak = self, id, timeout](const boost::system::error_code& error) {
      if (error) return;
      if (auto client = weak.lock()) {
        client->impl_->abandon(id, "no answer in " + duration_text(timeout), true);
      }
    });
    pending.emplace(id, std::move(entry));
    send(request_text(id, method, params_json));
    return id;
  }

  // Fails request `id` with `reason`, telling the server when `tell` (a
  // timeout or a cancel; not when the server is gone).
  void abandon(std::int64_t id, const std::string& reason, bool tell) {
    const auto it = pending.find(id);
    if (it == pending.end()) return;
    Pending entry = std::move(it->second);
    pending.erase(it);
    entry.timer->cancel();
    // The initialize request is not cancellable (the protocol says so).
    if (tell && !closed && entry.method != "initialize") {
      Json params = {{"requestId", id}, {"reason", reason}};
      send(notification_text("notifications/cancelled", params.dump()));
    }
    entry.done(fail(ErrorCode::failed, who() + ": " + entry.method + ": " + reason));
  }

  void on_message(const std::string& text) {
    if (options.on_exchange) options.on_exchange(false, text);
    auto parsed = parse_message(text);
    if (!parsed) {
      fail_session(who() + " wrote something that is not a JSON-RPC message: " + parsed.error().message);
      return;
    }
    RpcMessage& message = *parsed;
    switch (message.kind) {
      case RpcMessage::Kind::response:
      case RpcMessage::Kind::error: {
        const auto it = pending.find(message.id);
        if (it == pending.end()) return;  // late: its request timed out or was cancelled
        Pending entry = std::move(it->second);
        pending.erase(it);
        entry.timer->cancel();
        if (message.kind == RpcMessage::Kind::error) {
          entry.done(fail(ErrorCode::failed, who() + ": " + entry.method + " failed: " + message.error_message +
                                                 " (error " + std::to_string(message.error_code) + ")"));
        } else {
          entry.done(std::move(message.result_json));
        }
        return;
      }
      case RpcMessage::Kind::request:
        if (message.method == "ping") {
          send(result_text(message.id_json, "{}"));
        } else {
          send(error_text(message.id_json, kMethodNotFound, "this client does not offer " + message.method));
        }
        return;
      case RpcMessage::Kind::notification:
        if (message.method == "notifications/tools/list_changed" && is_ready && events.on_tools_changed) {
          events.on_tools_changed();
        } else if (message.method == "notifications/cancelled") {
          // The server gave up on one of its own requests; this client has none in flight.
        }
        return;
    }
  }

  // The session is over: every request fails with `reason`.
  void fail_session(const std::string& reason) {
    if (closed) return;
    closed = true;
    closed_reason = reason;
    is_ready = false;
    if (transport) transport->close();
    fail_pending(reason);
    if (events.on_closed) events.on_closed(reason);
  }

  void fail_pending(const std::string& reason) {
    auto requests = std::move(pending);
    pending.clear();
    for (auto& [id, entry] : requests) {
      entry.timer->cancel();
      entry.done(fail(ErrorCode::failed, reason));
    }
  }

  // Reads the initialize result: a version this client speaks, the server's name.
  Result<ServerInfo> read_initialize(const std::string& result_json) const {
    const Json result = Json::parse(result_json, nullptr, false);
    if (result.is_discarded() || !result.is_object()) {
      return fail(ErrorCode::invalid_input, who() + ": an initialize result that is not an object");
    }
    const auto version = result.find("protocolVersion");
    if (version == result.end() || !version->is_string()) {
      return fail(ErrorCode::invalid_input, who() + ": an initialize result without \"protocolVersion\"");
    }
    ServerInfo info;
    info.protocol_version = version->get<std::string>();
    bool spoken = false;
    for (const std::string_view ours : kProtocolVersions) spoken = spoken || ours == info.protocol_version;
    if (!spoken) {
      std::string list;
      for (std::size_t i = 0; i < std::size(kProtocolVersions); ++i) {
        list += (i == 0                                  ? ""
                 : i + 1 == std::size(kProtocolVersions) ? " and "
                                                         : ", ") +
                std::string(kProtocolVersions[i]);
      }
      return fail(ErrorCode::refused,
                  who() + " speaks MCP " + info.protocol_version.substr(0, 32) + "; this client speaks " + list);
    }
    if (const auto it = result.find("serverInfo"); it != result.end() && it->is_object()) {
      if (const auto name = it->find("name"); name != it->end() && name->is_string()) info.name = *name;
      if (const auto v = it->find("version"); v != it->end() && v->is_string()) info.version = *v;
    }
    if (const auto it = result.find("instructions"); it != result.end() && it->is_string()) info.instructions = *it;
    if (const auto caps = result.find("capabilities"); caps != result.end() && caps->is_object()) {
      if (const auto tools = caps->find("tools"); tools != caps->end() && tools->is_object()) {
        info.tools = true;
        const auto changed = tools->find("listChanged");
        info.tools_list_changed = changed != tools->end() && changed->is_boolean() && changed->get<bool>();
      }
    }
    return info;
  }

  void list_page(const std::string& cursor, std::vector<ToolDefinition> so_far, std::size_t pages, ToolsDone done) {
    Json params = Json::object();
    if (!cursor.empty()) params["cursor"] = cursor;
    request(
        "tools/list", params.dump(), options.request_timeout,
        [weak = self, so_far = std::move(so_far), pages, done = std::move(done)](Result<std::string> result) mutable {
          auto client = weak.lock();
          if (!client) return;
          Impl& impl = *client->impl_;
          if (!result) {
            done(fail(result.error().code, result.error().message));
            return;
          }
          auto page = parse_tools_page(*result);
          if (!page) {
            done(fail(page.error().code, impl.who() + ": " + page.error().message));
            return;
          }
          for (ToolDefinition& tool : page->tools) so_far.push_back(std::move(tool));
          if (so_far.size() > impl.options.max_tools) {
            done(fail(ErrorCode::limit_exceeded,
                      impl.who() + " lists over " + std::to_string(impl.options.max_tools) + " tools"));
            return;
          }
          if (page->next_cursor.empty()) {
            done(std::move(so_far));
            return;
          }
          if (pages + 1 >= kMaxPages) {
            done(fail(ErrorCode::limit_exceeded,
                      impl.who() + " lists over " + std::to_string(kMaxPages) + " pages of tools"));
            return;
          }
          impl.list_page(page->next_cursor, std::move(so_far), pages + 1, std::move(done));
        });
  }
};

std::shared_ptr<McpClient> McpClient::create(asio::io_context& io, ClientOptions options, ClientEvents events) {
  std::shared_ptr<McpClient> client(new McpClient(io, std::move(options), std::move(events)));
  client->impl_->self = client;
  return client;
}

McpClient::McpClient(asio::io_context& io, ClientOptions options, ClientEvents events)
    : impl_(std::make_unique<Impl>(io, std::move(options), std::move(events))) {}

McpClient::~McpClient() {
  if (impl_->transport) impl_->transport->close();
}

void McpClient::start(const StartTransport& start_transport, InitializeDone done) {
  Impl& impl = *impl_;
  TransportEvents transport_events;
  transport_events.on_message = [weak = impl.self](const std::string& message) {
    if (auto client = weak.lock()) client->impl_->on_message(message);
  };
  transport_events.on_closed = [weak = impl.self](const std::string& reason) {
    if (auto client = weak.lock()) client->impl_->fail_session(reason);
  };
  transport_events.on_stderr = [weak = impl.self](std::string line) {
    if (auto client = weak.lock(); client && client->impl_->events.on_stderr) {
      client->impl_->events.on_stderr(std::move(line));
    }
  };
  auto transport = start_transport(std::move(transport_events));
  if (!transport) {
    impl.closed = true;
    impl.closed_reason = transport.error().message;
    done(fail(transport.error().code, transport.error().message));
    return;
  }
  impl.transport = std::move(*transport);
  Json params = {{"protocolVersion", kProtocolVersions[0]},
                 {"capabilities", Json::object()},
                 {"clientInfo", {{"name", "passepartout"}, {"version", PASSEPARTOUT_VERSION}}}};
  impl.request("initialize", params.dump(), impl.options.initialize_timeout,
               [weak = impl.self, done = std::move(done)](Result<std::string> result) {
                 auto client = weak.lock();
                 if (!client) return;
                 Impl& self = *client->impl_;
                 if (!result) {
                   done(fail(result.error().code, result.error().message));
                   return;
                 }
                 auto info = self.read_initialize(*result);
                 if (!info) {
                   self.fail_session(info.error().message);
                   done(std::move(info));
                   return;
                 }
                 self.server = *info;
                 self.transport->negotiated(self.server.protocol_version);
                 self.send(notification_text("notifications/initialized", "{}"));
                 self.is_ready = true;
                 done(std::move(info));
               });
}

void McpClient::list_tools(ToolsDone done) { impl_->list_page("", {}, 0, std::move(done)); }

std::int64_t McpClient::call_tool(std::string_view tool, std::string_view arguments_json,
                                  std::chrono::milliseconds timeout, CallDone done) {
  Json arguments = Json::parse(arguments_json, nullptr, false);
  if (arguments.is_discarded() || !arguments.is_object()) {
    done(fail(ErrorCode::invalid_input, "the arguments of a tool call must be a JSON object"));
    return 0;
  }
  Json params = {{"name", tool}, {"arguments", std::move(arguments)}};
  return impl_->request("tools/call", params.dump(-1, ' ', false, Json::error_handler_t::replace), timeout,
                        [weak = impl_->self, done = std::move(done)](Result<std::string> result) {
                          auto client = weak.lock();
                          if (!client) return;
                          if (!result) {
                            done(fail(result.error().code, result.error().message));
                            return;
                          }
                          auto rendered = render_tool_result(*result, client->impl_->options.max_result_bytes);
                          if (!rendered) {
                            done(fail(rendered.error().code, client->impl_->who() + ": " + rendered.error().message));
                            return;
                          }
                          done(std::move(rendered));
                        });
}

void McpClient::cancel(std::int64_t id, std::string_view reason) { impl_->abandon(id, std::string(reason), true); }

void McpClient::ping(PingDone done) {
  impl_->request("ping", "{}", impl_->options.request_timeout,
                 [done = std::move(done)](const Result<std::string>& result) {
                   if (!result) {
                     done(fail(result.error().code, result.error().message));
                     return;
                   }
                   done({});
                 });
}

void McpClient::close() {
  Impl& impl = *impl_;
  if (impl.closed) return;
  impl.closed = true;
  impl.closed_reason = impl.who() + ": closed";
  impl.is_ready = false;
  impl.events = {};
  if (impl.transport) impl.transport->close();
  impl.fail_pending(impl.closed_reason);
}

bool McpClient::ready() const noexcept { return impl_->is_ready; }
const ServerInfo& McpClient::server() const noexcept { return impl_->server; }
pid_t McpClient::pid() const noexcept { return impl_->transport ? impl_->transport->pid() : 0; }

}  // namespace passepartout::mcp
