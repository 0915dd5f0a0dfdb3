// The Streamable HTTP transport (MCP 2025-06-18 and 2025-11-25): every message
// a POST whose answer is JSON or an event stream, the server's own messages on
// a GET stream, and a stream that drops before its answer resumed by a GET
// with Last-Event-ID. Every transfer runs on the transport's own HttpClient,
// on the io_context's thread.
//
// What ends the transport (on_closed) and what fails one request: the
// transport is over when there is no session to go on with (the initialize
// POST got no answer at all: "mcp server 'fs' at URL: <curl's reason>"), when
// the server ended the session (a 404 to a request that carried its
// Mcp-Session-Id) and when a message passes max_message_bytes. Anything else
// that goes wrong with one request (an HTTP error status, an unexpected
// content type, a refused or broken connection, a stream that ends before its
// answer and cannot be resumed) fails that request alone: the transport hands
// the session a JSON-RPC error answer for its id, saying what HTTP said
// ("HTTP 500: <the server's message>"), so the call fails at once with that
// and the next may succeed. A notification or response that fails is logged.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>

// GCC 12 reports a "potential null pointer dereference" inside Asio's
// scheduler (a false positive); silenced for Asio's headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnull-dereference"
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#pragma GCC diagnostic pop
#include <nlohmann/json.hpp>

#include "base/ascii.hpp"
#include "base/log.hpp"
#include "base/utf8.hpp"
#include "mcp/json_rpc.hpp"
#include "mcp/transport.hpp"
#include "providers/http_client.hpp"

namespace passepartout::mcp {

namespace {

namespace asio = boost::asio;
using Json = nlohmann::json;

// JSON-RPC leaves -32000 to -32099 to the implementation: the code of the
// error this transport answers a request with when HTTP failed it and the
// server gave no JSON-RPC error of its own.
constexpr std::int64_t kTransportError = -32000;
// Without a `retry` from the server, a reconnection waits as the reference
// client (the TypeScript SDK) does: 1 s, half as long again after each failed
// attempt, at most 30 s.
constexpr std::chrono::milliseconds kFirstDelay{1000};
constexpr std::chrono::milliseconds kMaxDelay{30'000};
// A `retry: 0` from a server that then closes at once would make a loop of
// GETs as fast as the loop runs: no reconnection comes sooner than this.
constexpr std::chrono::milliseconds kMinDelay{50};
// Failed reconnections in a row after which a stream is given up.
constexpr int kMaxFailedReconnects = 3;
// A request's stream may be quiet as long as its tool runs, and the server's
// own stream as long as it has nothing to say: the session's deadlines bound
// a request, not HTTP's. A dead connection is found by TCP keepalive.
constexpr std::chrono::hours kQuietStream{24};
// A notification or a response is answered at once (202 Accepted).
constexpr std::chrono::milliseconds kAcceptWait{30'000};
// The DELETE that ends a session is not waited for; it gets this long.
constexpr std::chrono::milliseconds kDeleteWait{5'000};
// What of an error answer's body is kept, and how much of its message quoted.
constexpr std::size_t kMaxErrorBody = std::size_t{64} * 1024;
constexpr std::size_t kMaxQuote = 200;
// Header names a transport sets itself: an endpoint may not give them.
constexpr std::string_view kOwnHeaders[] = {"accept",           "content-type",         "content-length",
                                            "mcp-session-id",   "mcp-protocol-version", "last-event-id",
                                            "transfer-encoding"};

std::string mebibytes(std::size_t bytes) {
  constexpr std::size_t kMiB = std::size_t{1024} * 1024;
  if (bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// `url` as messages show it: without user information, query or fragment,
// which is where a URL carries secrets.
std::string shown_url(std::string_view url) {
  const std::size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return std::string(url.substr(0, url.find_first_of("?#")));
  std::string_view rest = url.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find_first_of("?#"));
  const std::size_t path_start = rest.find('/');
  std::string_view authority = rest.substr(0, path_start);
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string shown(url.substr(0, scheme_end + 3));
  shown.append(authority);
  if (path_start != std::string_view::npos) shown.append(rest.substr(path_start));
  return shown;
}

// Untrusted text fit for a message: valid UTF-8, one line, at most kMaxQuote bytes.
std::string excerpt(std::string_view text) {
  std::string clean = replace_invalid_utf8(text.substr(0, kMaxQuote + 4));
  if (clean.size() > kMaxQuote || text.size() > kMaxQuote + 4) {
    std::size_t cut = std::min(clean.size(), kMaxQuote);
    while (cut > 0 && (static_cast<unsigned char>(clean[cut]) & 0xC0U) == 0x80U) --cut;
    clean.resize(cut);
    clean += "...";
  }
  for (char& c : clean) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) c = ' ';
  }
  return clean;
}

// The media type of a Content-Type value, lower case, without parameters.
std::string media_type(std::string_view value) {
  value = value.substr(0, value.find(';'));
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  return ascii_lower(value);
}

// A header field name is an RFC 9110 token.
bool is_token(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// The spec allows visible ASCII only (0x21 to 0x7E) in a session id.
bool is_session_id(std::string_view id) {
  return !id.empty() && std::all_of(id.begin(), id.end(), [](char c) { return c >= 0x21 && c <= 0x7E; });
}

// Whether `message` answers the request whose id prints as `id`.
bool answers(const Json& message, std::string_view id) {
  if (!message.is_object() || message.contains("method")) return false;
  if (!message.contains("result") && !message.contains("error")) return false;
  const auto it = message.find("id");
  return it != message.end() && it->dump() == id;
}

// The event stream format of the HTML standard ("Interpreting an event
// stream") with the two things SseParser (providers/stream_parser.hpp)
// leaves out on purpose and MCP needs: the `retry:` field, and an event id
// taken even from an event without data, which is how a 2025-11-25 server
// primes a stream for resumption. Bytes may arrive split anywhere.
class EventStreamReader {
 public:
  enum class Fed : std::uint8_t { ok, stopped, too_large };

  EventStreamReader(std::size_t max_event_bytes, std::string last_event_id)
      : max_(max_event_bytes), id_buffer_(last_event_id), last_event_id_(std::move(last_event_id)) {}

  // Reads `bytes`, calling `on_event(type, data)` for each event with data;
  // it returns false to stop reading. An event over the cap ends the stream.
  template <class OnEvent>
  Fed feed(std::string_view bytes, OnEvent&& on_event) {
    std::size_t pos = 0;
    if (skip_lf_ && !bytes.empty()) {
      if (bytes.front() == '\n') pos = 1;
      skip_lf_ = false;
    }
    while (pos < bytes.size()) {
      const std::size_t end = bytes.find_first_of("\r\n", pos);
      const std::size_t stop = end == std::string_view::npos ? bytes.size() : end;
      line_.append(bytes.substr(pos, stop - pos));
      if (line_.size() + data_.size() > max_) return Fed::too_large;
      if (end == std::string_view::npos) break;
      pos = end + 1;
      if (bytes[end] == '\r') {
        if (pos == bytes.size()) {
          skip_lf_ = true;  // the LF of a CRLF may start the next piece
        } else if (bytes[pos] == '\n') {
          ++pos;
        }
      }
      std::string line = std::move(line_);
      line_.clear();
      if (!process(line, on_event)) return Fed::stopped;
    }
    return Fed::ok;
  }

  // The id of the last event dispatched, "" when none had one.
  const std::string& last_event_id() const noexcept { return last_event_id_; }
  // The last `retry:` the stream gave.
  std::optional<std::chrono::milliseconds> retry() const noexcept { return retry_; }

 private:
  template <class OnEvent>
  bool process(std::string_view line, OnEvent& on_event) {
    if (first_line_) {
      first_line_ = false;
      if (line.substr(0, 3) == "\xEF\xBB\xBF") line.remove_prefix(3);
    }
    if (line.empty()) return dispatch(on_event);
    if (line.front() == ':') return true;  // a comment: a keep-alive
    std::string_view field = line;
    std::string_view value;
    if (const std::size_t colon = line.find(':'); colon != std::string_view::npos) {
      field = line.substr(0, colon);
      value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    if (field == "data") {
      data_.append(value);
      data_.push_back('\n');
    } else if (field == "event") {
      type_.assign(value);
    } else if (field == "id") {
      if (value.find('\0') == std::string_view::npos) id_buffer_.assign(value);
    } else if (field == "retry") {
      // Digits only, as the standard says; more than nine is no delay anyone means.
      if (!value.empty() && value.size() <= 9 &&
          std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        retry_ = std::chrono::milliseconds(std::stoll(std::string(value)));
      }
    }
    return true;
  }

  template <class OnEvent>
  bool dispatch(OnEvent& on_event) {
    last_event_id_ = id_buffer_;
    std::string type = std::move(type_);
    type_.clear();
    if (data_.empty()) return true;
    data_.pop_back();  // the LF after the last data line
    std::string data = std::move(data_);
    data_.clear();
    return on_event(type.empty() ? std::string_view("message") : std::string_view(type), std::move(data));
  }

  std::size_t max_;
  std::string line_;
  std::string data_;
  std::string type_;
  std::string id_buffer_;
  std::string last_event_id_;
  std::optional<std::chrono::milliseconds> retry_;
  bool skip_lf_ = false;
  bool first_line_ = true;
};

// What an HTTP answer that is not the expected one says: its status and,
// when its body is a JSON-RPC error or text, the server's own words.
struct HttpFailure {
  std::int64_t code = kTransportError;
  std::string message;
};

// The words of an HTML error page (a web framework's default one: Express
// answers an exception with "<!DOCTYPE html>...<pre>Error: ...</pre>"): its
// body's text, tags dropped, the common entities read, spaces collapsed.
std::string html_text(std::string_view html) {
  if (const std::size_t body = html.find("<body"); body != std::string_view::npos) html.remove_prefix(body);
  std::string text;
  bool in_tag = false;
  for (std::size_t i = 0; i < html.size() && text.size() <= kMaxQuote; ++i) {
    const char c = html[i];
    if (in_tag) {
      in_tag = c != '>';
      continue;
    }
    if (c == '<') {
      in_tag = true;
      if (!text.empty() && text.back() != ' ') text.push_back(' ');
      continue;
    }
    if (c == '&') {
      static constexpr std::pair<std::string_view, char> kEntities[] = {
          {"&nbsp;", ' '}, {"&lt;", '<'}, {"&gt;", '>'}, {"&amp;", '&'}, {"&quot;", '"'}, {"&#39;", '\''}};
      const auto entity = std::find_if(std::begin(kEntities), std::end(kEntities), [&](const auto& known) {
        return html.substr(i, known.first.size()) == known.first;
      });
      if (entity != std::end(kEntities)) {
        i += entity->first.size() - 1;
        if (entity->second != ' ' || (!text.empty() && text.back() != ' ')) text.push_back(entity->second);
        continue;
      }
    }
    const bool space = c == ' ' || c == '\t' || c == '\r' || c == '\n';
    if (space) {
      if (!text.empty() && text.back() != ' ') text.push_back(' ');
    } else {
      text.push_back(c);
    }
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

HttpFailure describe_failure(int status, std::string_view type, std::string_view body) {
  HttpFailure failure{kTransportError, "HTTP " + std::to_string(status)};
  const Json parsed = Json::parse(body, nullptr, false);
  if (parsed.is_object()) {
    if (const auto error = parsed.find("error"); error != parsed.end() && error->is_object()) {
      if (const auto code = error->find("code"); code != error->end() && code->is_number_integer()) {
        failure.code = code->get<std::int64_t>();
      }
      if (const auto text = error->find("message"); text != error->end() && text->is_string()) {
        failure.message += ": " + excerpt(text->get<std::string>());
      }
      return failure;
    }
  }
  if (type == "text/html") {
    if (const std::string text = html_text(body); !text.empty()) failure.message += ": " + excerpt(text);
  } else if (type.substr(0, 5) == "text/" && !body.empty()) {
    failure.message += ": " + excerpt(body.substr(0, body.find('\n')));
  }
  return failure;
}

class HttpTransport final : public Transport, public std::enable_shared_from_this<HttpTransport> {
 public:
  HttpTransport(asio::io_context& io, const HttpEndpoint& endpoint, TransportEvents events,
                std::unique_ptr<HttpClient> http)
      : io_(io),
        name_(endpoint.name),
        url_(endpoint.url),
        shown_url_(shown_url(endpoint.url)),
        headers_(endpoint.headers),
        max_message_(endpoint.max_message_bytes),
        connect_timeout_(endpoint.connect_timeout),
        events_(std::move(events)),
        http_(std::move(http)) {}

  ~HttpTransport() override {
    // Every transfer ends here (cancelled); the callbacks find no transport to call.
    http_.reset();
  }

  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  void send(std::string message) override {
    asio::dispatch(io_, [weak = weak_from_this(), message = std::move(message)]() mutable {
      if (auto self = weak.lock()) self->post(std::move(message));
    });
  }

  // Stops every stream and, when the server gave a session, sends the DELETE
  // that ends it. That goes out while this transport lives and its loop
  // runs; destroying the transport cancels what is left of it.
  void close() override {
    if (closed_) return;
    closed_ = true;
    events_ = {};
    stop_streams();
    end_session();
  }

  void negotiated(std::string_view version) override { protocol_version_ = version; }

 private:
  // One logical stream: a POST and its answer, then, if its event stream
  // dropped before the answer, the GETs that resume it; or the GET stream
  // that carries what the server sends unasked. Each transfer of it has an
  // attempt number of its own, so a late callback of an earlier one is
  // recognised and dropped.
  struct Stream {
    enum class Kind : std::uint8_t { post, resume, listen };
    enum class Body : std::uint8_t { ignored, json, events, failure };

    Kind kind = Kind::post;
    std::uint64_t id = 0;
    std::uint64_t attempt = 0;
    std::string method;   // the POSTed message's, "" for a response
    std::string awaited;  // the id (its JSON) of the request this stream answers, "" for none
    bool answered = false;
    bool carried_session = false;  // this transfer sent Mcp-Session-Id: a 404 means the session ended
    HttpTransfer transfer;
    std::unique_ptr<asio::steady_timer> pause;  // before a reconnection
    // The answer being read.
    int status = 0;
    Body body = Body::ignored;
    std::string content_type;
    std::string bytes;  // a JSON body, or the start of an error's
    std::optional<EventStreamReader> reader;
    // What carries over from one transfer to the next.
    std::string last_event_id;
    std::optional<std::chrono::milliseconds> retry;
    int failures = 0;  // reconnections in a row that failed
  };
  using StreamPtr = std::shared_ptr<Stream>;

  std::string who() const { return "mcp server '" + name_ + "'"; }

  // A request to the endpoint with what every one carries: the session,
  // the protocol version, the endpoint's own headers.
  HttpRequest http_request(std::string method) const {
    HttpRequest out;
    out.method = std::move(method);
    out.url = url_;
    out.timeouts.connect = connect_timeout_;
    out.timeouts.first_byte = kQuietStream;
    out.timeouts.idle = kQuietStream;
    // Each message is held to max_message_ as it is read: a stream as a whole has no cap.
    out.max_body = std::numeric_limits<std::size_t>::max();
    if (!session_id_.empty()) out.headers.emplace_back("Mcp-Session-Id", session_id_);
    if (!protocol_version_.empty()) out.headers.emplace_back("MCP-Protocol-Version", protocol_version_);
    for (const auto& header : headers_) out.headers.push_back(header);
    return out;
  }

  StreamPtr find(std::uint64_t id, std::uint64_t attempt) const {
    const auto it = streams_.find(id);
    if (it == streams_.end() || it->second->attempt != attempt) return nullptr;
    return it->second;
  }

  bool is_current(const Stream& stream) const {
    const auto it = streams_.find(stream.id);
    return !closed_ && it != streams_.end() && it->second.get() == &stream;
  }

  void begin(const StreamPtr& stream, HttpRequest request) {
    stream->attempt = next_attempt_++;
    stream->status = 0;
    stream->body = Stream::Body::ignored;
    stream->content_type.clear();
    stream->bytes.clear();
    stream->reader.reset();
    stream->carried_session = !session_id_.empty();
    HttpCallbacks callbacks;
    const std::weak_ptr<HttpTransport> weak = weak_from_this();
    const std::uint64_t id = stream->id;
    const std::uint64_t attempt = stream->attempt;
    callbacks.on_head = [weak, id, attempt](int status, HttpHeaders&& headers) {
      if (auto self = weak.lock()) self->on_head(id, attempt, status, headers);
    };
    callbacks.on_data = [weak, id, attempt](std::string_view bytes) {
      if (auto self = weak.lock()) self->on_data(id, attempt, bytes);
    };
    callbacks.on_done = [weak, id, attempt](HttpResult&& result) {
      if (auto self = weak.lock()) self->on_done(id, attempt, result);
    };
    stream->transfer = http_->start(std::move(request), std::move(callbacks));
  }

  // POSTs one message. Until the POST of notifications/initialized has been
  // answered, later messages wait: the server must not see a request before
  // it, and concurrent POSTs may arrive in any order.
  void post(std::string message) {
    if (closed_) return;
    if (holding_) {
      held_.push_back(std::move(message));
      return;
    }
    auto stream = std::make_shared<Stream>();
    stream->id = next_stream_++;
    std::string gives_up;  // the request a notifications/cancelled abandons
    const Json parsed = Json::parse(message, nullptr, false);
    if (parsed.is_object()) {
      if (const auto method = parsed.find("method"); method != parsed.end() && method->is_string()) {
        stream->method = method->get<std::string>();
        if (const auto id = parsed.find("id"); id != parsed.end()) stream->awaited = id->dump();
      }
      if (stream->method == "notifications/cancelled") {
        if (const auto params = parsed.find("params"); params != parsed.end() && params->is_object()) {
          if (const auto id = params->find("requestId"); id != params->end()) gives_up = id->dump();
        }
      }
    }
    HttpRequest out = http_request("POST");
    out.headers.emplace_back("Content-Type", "application/json");
    out.headers.emplace_back("Accept", "application/json, text/event-stream");
    out.body = std::move(message);
    if (stream->awaited.empty()) {
      out.timeouts.first_byte = kAcceptWait;
      out.timeouts.idle = kAcceptWait;
    }
    // Set before the start, which may end the transfer at once.
    if (stream->method == "notifications/initialized") holding_ = true;
    streams_.emplace(stream->id, stream);
    begin(stream, std::move(out));
    // Disconnecting is not cancelling (the spec says so): the server was told
    // first; now the stream that would have carried the answer goes.
    if (!gives_up.empty()) {
      StreamPtr abandoned;
      for (const auto& [id, other] : streams_) {
        if (other->awaited == gives_up) abandoned = other;
      }
      if (abandoned) drop(abandoned);
    }
  }

  void open_listen() {
    if (listening_ || closed_) return;
    listening_ = true;
    auto stream = std::make_shared<Stream>();
    stream->id = next_stream_++;
    stream->kind = Stream::Kind::listen;
    streams_.emplace(stream->id, stream);
    reopen(stream);
  }

  // A GET for `stream`'s events, from its last event id.
  void reopen(const StreamPtr& stream) {
    HttpRequest out = http_request("GET");
    out.headers.emplace_back("Accept", "text/event-stream");
    if (!stream->last_event_id.empty()) out.headers.emplace_back("Last-Event-ID", stream->last_event_id);
    begin(stream, std::move(out));
  }

  // Waits the server's `retry` (else the backoff), then reopens `stream`.
  void reconnect(const StreamPtr& stream) {
    auto delay = kFirstDelay;
    if (stream->retry) {
      delay = std::max(*stream->retry, kMinDelay);
    } else {
      for (int i = 0; i < stream->failures && delay < kMaxDelay; ++i) delay += delay / 2;
      delay = std::min(delay, kMaxDelay);
    }
    if (!stream->pause) stream->pause = std::make_unique<asio::steady_timer>(io_);
    stream->pause->expires_after(delay);
    stream->pause->async_wait(
        [weak = weak_from_this(), id = stream->id, attempt = stream->attempt](const boost::system::error_code& error) {
          if (error) return;
          auto self = weak.lock();
          if (!self || self->closed_) return;
          if (auto current = self->find(id, attempt)) self->reopen(current);
        });
  }

  void on_head(std::uint64_t id, std::uint64_t attempt, int status, const HttpHeaders& headers) {
    const StreamPtr stream = find(id, attempt);
    if (!stream || closed_) return;
    stream->status = status;
    for (const auto& [name, value] : headers) {
      if (name == "content-type") stream->content_type = media_type(value);
      // The session is the initialize answer's to give (the spec says so).
      if (name == "mcp-session-id" && stream->method == "initialize" && status / 100 == 2) {
        if (!is_session_id(value)) {
          finish(who() + " assigned a session id that is not visible ASCII", false);
          return;
        }
        session_id_ = value;
      }
    }
    // A 404 on the server's own GET stream is left out: servers that route no
    // GET answer 404 where the spec says 405, and a POST tells soon enough.
    if (status == 404 && stream->carried_session && stream->kind != Stream::Kind::listen) {
      finish(who() + " ended its session (HTTP 404)", true);
      return;
    }
    const bool ok = status / 100 == 2;
    if (stream->kind == Stream::Kind::post) {
      if (stream->awaited.empty()) {
        stream->body = ok ? Stream::Body::ignored : Stream::Body::failure;
      } else if (ok && stream->content_type == "text/event-stream") {
        stream->body = Stream::Body::events;
        stream->reader.emplace(max_message_, stream->last_event_id);
      } else if (ok && stream->content_type == "application/json") {
        stream->body = Stream::Body::json;
      } else {
        stream->body = Stream::Body::failure;
      }
      return;
    }
    if (ok && stream->content_type == "text/event-stream") {
      stream->body = Stream::Body::events;
      stream->reader.emplace(max_message_, stream->last_event_id);
      stream->failures = 0;
    } else {
      stream->body = Stream::Body::failure;
    }
  }

  void on_data(std::uint64_t id, std::uint64_t attempt, std::string_view bytes) {
    const StreamPtr stream = find(id, attempt);
    if (!stream || closed_) return;
    switch (stream->body) {
      case Stream::Body::ignored:
        return;
      case Stream::Body::failure:
        stream->bytes.append(bytes.substr(0, kMaxErrorBody - std::min(kMaxErrorBody, stream->bytes.size())));
        return;
      case Stream::Body::json:
        if (stream->bytes.size() + bytes.size() > max_message_) {
          finish(oversized(), false);
          return;
        }
        stream->bytes.append(bytes);
        return;
      case Stream::Body::events: {
        const auto fed = stream->reader->feed(bytes, [&](std::string_view type, std::string data) {
          // Other event types are not MCP's, and an event with empty data
          // ("data:" alone, a priming event) carries only its id: the
          // reference client skips both too.
          if (type != "message" || data.empty()) return true;
          stream->last_event_id = stream->reader->last_event_id();
          return deliver(*stream, std::move(data));
        });
        if (!is_current(*stream)) return;
        stream->last_event_id = stream->reader->last_event_id();
        if (stream->reader->retry()) stream->retry = stream->reader->retry();
        if (fed == EventStreamReader::Fed::too_large) finish(oversized(), false);
        return;
      }
    }
  }

  void on_done(std::uint64_t id, std::uint64_t attempt, const HttpResult& result) {
    const StreamPtr stream = find(id, attempt);
    if (!stream || closed_ || result.outcome == HttpOutcome::cancelled) return;
    stream->transfer = {};
    if (stream->kind == Stream::Kind::post) {
      post_done(stream, result);
    } else {
      get_done(stream, result);
    }
  }

  void post_done(const StreamPtr& stream, const HttpResult& result) {
    const bool complete = result.outcome == HttpOutcome::complete;
    if (stream->awaited.empty()) {
      forget(*stream);
      if (!complete) {
        log_message(LogLevel::warn, "mcp", "{} at {}: {} not delivered: {}", who(), shown_url_,
                    stream->method.empty() ? "a response" : stream->method, result.error);
      } else if (stream->body == Stream::Body::failure) {
        log_message(LogLevel::warn, "mcp", "{} refused {}: {}", who(),
                    stream->method.empty() ? "a response" : stream->method,
                    describe_failure(stream->status, stream->content_type, stream->bytes).message);
      }
      if (stream->method == "notifications/initialized") release(complete && stream->body != Stream::Body::failure);
      return;
    }
    if (stream->answered) {
      forget(*stream);
      return;
    }
    const std::string transport_failure = shown_url_ + ": " + result.error;
    if (stream->status == 0) {
      // No answer at all. Without a session there is nothing to go on with;
      // within one, the request fails and the next may get through.
      if (stream->method == "initialize") {
        finish(who() + " at " + transport_failure, false);
      } else {
        fail_request(stream, kTransportError, transport_failure);
      }
      return;
    }
    switch (stream->body) {
      case Stream::Body::json:
        if (!complete) {
          fail_request(stream, kTransportError, transport_failure);
          return;
        }
        if (stream->bytes.find_first_not_of(" \t\r\n") == std::string::npos) {
          fail_request(stream, kTransportError, "HTTP " + std::to_string(stream->status) + " with an empty body");
          return;
        }
        if (!deliver(*stream, std::move(stream->bytes))) return;
        if (!stream->answered) {
          fail_request(stream, kTransportError,
                       "HTTP " + std::to_string(stream->status) + " without an answer to the request");
          return;
        }
        forget(*stream);
        return;
      case Stream::Body::events:
        if (!stream->last_event_id.empty()) {
          stream->kind = Stream::Kind::resume;
          reconnect(stream);
          return;
        }
        fail_request(stream, kTransportError,
                     (complete ? "the event stream ended before the answer"
                               : "the event stream broke before the answer (" + transport_failure + ")") +
                         std::string(", with no event id to resume it from"));
        return;
      case Stream::Body::failure:
        if (stream->status / 100 == 2) {
          fail_request(stream, kTransportError,
                       "HTTP " + std::to_string(stream->status) + " with " +
                           (stream->content_type.empty() ? "no Content-Type"
                                                         : "Content-Type '" + excerpt(stream->content_type) + "'") +
                           ", neither JSON nor an event stream");
          return;
        }
        {
          const HttpFailure failure = describe_failure(stream->status, stream->content_type, stream->bytes);
          fail_request(stream, failure.code, failure.message);
        }
        return;
      case Stream::Body::ignored:
        forget(*stream);
        return;
    }
  }

  void get_done(const StreamPtr& stream, const HttpResult& result) {
    const bool complete = result.outcome == HttpOutcome::complete;
    if (stream->body == Stream::Body::events) {
      // It was open: it ended or broke, and goes on from its last event id.
      reconnect(stream);
      return;
    }
    const bool answered_http = complete && stream->status != 0;
    const std::string why =
        answered_http ? describe_failure(stream->status, stream->content_type, stream->bytes).message : result.error;
    if (stream->kind == Stream::Kind::listen) {
      if (answered_http) {
        // 405 is the spec's "no stream here"; any other answer means the same in practice.
        if (stream->status != 405) {
          log_message(LogLevel::debug, "mcp", "{} offers no stream of its own: GET answered {}", who(), why);
        }
        forget(*stream);
        return;
      }
      if (++stream->failures >= kMaxFailedReconnects) {
        log_message(LogLevel::warn, "mcp", "{} at {}: its own stream is given up after {} failed reconnections: {}",
                    who(), shown_url_, stream->failures, why);
        forget(*stream);
        return;
      }
      reconnect(stream);
      return;
    }
    // A 4xx will not change by asking again; a 5xx or a broken connection may.
    ++stream->failures;
    if (stream->status / 100 == 4 || stream->failures >= kMaxFailedReconnects) {
      fail_request(stream, kTransportError,
                   "its event stream dropped before the answer and resuming it failed (" +
                       std::to_string(stream->failures) + (stream->failures == 1 ? " attempt" : " attempts") +
                       ", the last: " + (answered_http ? why : shown_url_ + ": " + why) + ")");
      return;
    }
    reconnect(stream);
  }

  // Hands on one message, or each of a batch (a JSON array: 2025-03-26
  // servers may answer so). False when the transport closed or `stream`
  // ended meanwhile: stop reading it.
  bool deliver(Stream& stream, std::string text) {
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '[') {
      const Json batch = Json::parse(text, nullptr, false);
      if (batch.is_array()) {
        for (const Json& item : batch) {
          if (!hand_on(stream, item.dump(-1, ' ', false, Json::error_handler_t::replace), &item)) return false;
        }
        return is_current(stream);
      }
    }
    return hand_on(stream, std::move(text), nullptr);
  }

  bool hand_on(Stream& stream, std::string text, const Json* parsed) {
    Json local;
    if (parsed == nullptr && awaiting_any()) {
      local = Json::parse(text, nullptr, false);
      parsed = &local;
    }
    // An answer may come on another stream than its request's (a replay on
    // the GET stream): whichever stream awaited it has it.
    StreamPtr resumed;
    if (parsed != nullptr) {
      for (const auto& [id, other] : streams_) {
        if (!other->awaited.empty() && !other->answered && answers(*parsed, other->awaited)) {
          other->answered = true;
          if (other->kind == Stream::Kind::resume) resumed = other;
        }
      }
    }
    if (events_.on_message) events_.on_message(std::move(text));
    // A resumed stream has served its purpose once its answer came; servers
    // may keep a GET open after it.
    if (resumed && is_current(*resumed)) drop(resumed);
    return is_current(stream);
  }

  bool awaiting_any() const {
    return std::any_of(streams_.begin(), streams_.end(),
                       [](const auto& entry) { return !entry.second->awaited.empty() && !entry.second->answered; });
  }

  // Fails the request `stream` carries with an error answer made here, as if
  // the server had sent it: the session's call fails, with this reason.
  void fail_request(const StreamPtr& stream, std::int64_t code, const std::string& message) {
    stream->answered = true;
    drop(stream);
    if (events_.on_message) events_.on_message(error_text(stream->awaited, code, message));
  }

  // Lets go of `stream`: its transfer and its pause end.
  void drop(const StreamPtr& stream) {
    stream->transfer.cancel();
    if (stream->pause) stream->pause->cancel();
    forget(*stream);
  }

  void forget(const Stream& stream) {
    const auto it = streams_.find(stream.id);
    if (it != streams_.end() && it->second.get() == &stream) streams_.erase(it);
  }

  // The POST of notifications/initialized was answered: what waited goes,
  // and the server's own stream opens (as the reference client does it).
  void release(bool accepted) {
    holding_ = false;
    std::vector<std::string> held = std::move(held_);
    held_.clear();
    if (accepted) open_listen();
    for (std::string& message : held) {
      post(std::move(message));
      if (closed_) return;
    }
  }

  void stop_streams() {
    auto streams = std::move(streams_);
    streams_.clear();
    held_.clear();
    for (auto& [id, stream] : streams) {
      stream->transfer.cancel();
      if (stream->pause) stream->pause->cancel();
    }
  }

  void end_session() {
    if (session_id_.empty()) return;
    HttpRequest out = http_request("DELETE");
    out.timeouts.connect = std::min(connect_timeout_, kDeleteWait);
    out.timeouts.first_byte = kDeleteWait;
    out.timeouts.idle = kDeleteWait;
    http_->start(std::move(out), {});
  }

  std::string oversized() const { return who() + " answered over " + mebibytes(max_message_) + " in one message"; }

  // The transport is over: the session is told why, once.
  void finish(const std::string& reason, bool session_ended) {
    if (closed_) return;
    closed_ = true;
    stop_streams();
    if (!session_ended) end_session();
    auto on_closed = std::move(events_.on_closed);
    events_ = {};
    if (on_closed) on_closed(reason);
  }

  asio::io_context& io_;
  std::string name_;
  std::string url_;
  std::string shown_url_;
  std::vector<std::pair<std::string, std::string>> headers_;
  std::size_t max_message_;
  std::chrono::milliseconds connect_timeout_;
  TransportEvents events_;
  std::unique_ptr<HttpClient> http_;
  std::string session_id_;
  std::string protocol_version_;
  std::unordered_map<std::uint64_t, StreamPtr> streams_;
  std::uint64_t next_stream_ = 1;
  std::uint64_t next_attempt_ = 1;
  std::vector<std::string> held_;
  bool holding_ = false;
  bool listening_ = false;
  bool closed_ = false;
};

}  // namespace

Result<std::shared_ptr<Transport>> start_http(asio::io_context& io, const HttpEndpoint& endpoint,
                                              TransportEvents events) {
  const std::string what = "mcp server '" + endpoint.name + "'";
  const std::string scheme = ascii_lower(endpoint.url.substr(0, endpoint.url.find("://")));
  if ((scheme != "http" && scheme != "https") || endpoint.url.find("://") == std::string::npos) {
    return fail(ErrorCode::invalid_input,
                what + ": the URL must start with http:// or https://: " + excerpt(shown_url(endpoint.url)));
  }
  auto refused = [&what](const std::string& why) -> Result<std::shared_ptr<Transport>> {
    return fail(ErrorCode::invalid_input, what + ": " + why);
  };
  for (const auto& [name, value] : endpoint.headers) {
    if (!is_token(name)) return refused("'" + excerpt(name) + "' is no header name");
    if (value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) {
      return refused("header " + name + " holds a line break or a NUL");
    }
    const std::string lower = ascii_lower(name);
    if (std::find(std::begin(kOwnHeaders), std::end(kOwnHeaders), lower) != std::end(kOwnHeaders)) {
      return refused("header " + name + " is the transport's own to send");
    }
  }
  if (endpoint.max_message_bytes == 0) return fail(ErrorCode::invalid_input, what + ": max_message_bytes is 0");
  std::unique_ptr<HttpClient> http;
  try {
    http = std::make_unique<HttpClient>(io);
  } catch (const std::exception& error) {  // libcurl could not be loaded or set up
    return fail(ErrorCode::io_error, "cannot reach " + what + ": " + error.what());
  }
  return std::shared_ptr<Transport>(std::make_shared<HttpTransport>(io, endpoint, std::move(events), std::move(http)));
}

}  // namespace passepartout::mcp
