// The SSE and NDJSON parsers: fields, comments, line ends, caps, and the same
// events whatever the split of the bytes.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "base/utf8.hpp"
#include "providers/stream_parser.hpp"

using namespace passepartout;

namespace {

struct Parsed {
  std::vector<SseEvent> events;
  bool failed = false;
};

Parsed parse_sse(const std::vector<std::string_view>& chunks, std::size_t cap = SseParser::kDefaultMaxEventBytes) {
  SseParser parser(cap);
  Parsed parsed;
  auto on_event = [&](const SseEvent& event) { parsed.events.push_back(event); };
  for (std::string_view chunk : chunks) {
    if (!parser.feed(chunk, on_event)) parsed.failed = true;
  }
  parser.finish(on_event);
  return parsed;
}

// The events of `stream` fed at once; REQUIREs that feeding it byte by byte
// and split in two at every offset gives the same.
std::vector<SseEvent> sse_events(std::string_view stream) {
  const Parsed whole = parse_sse({stream});
  REQUIRE_FALSE(whole.failed);
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < stream.size(); ++i) bytes.push_back(stream.substr(i, 1));
  CHECK(parse_sse(bytes).events == whole.events);
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    INFO("split at " << cut);
    REQUIRE(parse_sse({stream.substr(0, cut), stream.substr(cut)}).events == whole.events);
  }
  return whole.events;
}

std::vector<std::string> parse_ndjson(const std::vector<std::string_view>& chunks, bool* failed = nullptr,
                                      std::size_t cap = NdjsonParser::kDefaultMaxLineBytes) {
  NdjsonParser parser(cap);
  std::vector<std::string> lines;
  auto on_line = [&](std::string_view line) { lines.emplace_back(line); };
  for (std::string_view chunk : chunks) {
    if (!parser.feed(chunk, on_line) && failed != nullptr) *failed = true;
  }
  parser.finish(on_line);
  return lines;
}

std::vector<std::string> ndjson_lines(std::string_view stream) {
  const auto whole = parse_ndjson({stream});
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < stream.size(); ++i) bytes.push_back(stream.substr(i, 1));
  CHECK(parse_ndjson(bytes) == whole);
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    INFO("split at " << cut);
    REQUIRE(parse_ndjson({stream.substr(0, cut), stream.substr(cut)}) == whole);
  }
  return whole;
}

SseEvent event(std::string name, std::string data, std::string id = {}) {
  return SseEvent{std::move(name), std::move(data), std::move(id)};
}

}  // namespace

TEST_CASE("SSE parser dispatches data events on a blank line with the default name message", "[providers]") {
  const auto events = sse_events("data: {\"a\":1}\n\ndata: [DONE]\n\n");
  REQUIRE(events.size() == 2);
  CHECK(events[0] == event("message", "{\"a\":1}"));
  CHECK(events[1] == event("message", "[DONE]"));
}

TEST_CASE("SSE parser reads event names, multi-line data and ids, and keeps the last id", "[providers]") {
  const auto events = sse_events(
      "event: content_block_delta\ndata: line one\ndata: line two\nid: 7\n\n"
      "data:no space\ndata:  two spaces\n\n");
  REQUIRE(events.size() == 2);
  CHECK(events[0] == event("content_block_delta", "line one\nline two", "7"));
  CHECK(events[1] == event("message", "no space\n two spaces", "7"));
}

TEST_CASE("SSE parser skips comments, unknown fields and events without data", "[providers]") {
  const auto events =
      sse_events(": OPENROUTER PROCESSING\n\n:\n\nretry: 3000\nfoo: bar\n\nevent: ping\n\ndata\n\ndata: x\n\n");
  REQUIRE(events.size() == 2);
  CHECK(events[0] == event("message", ""));   // a `data` line without a colon: empty data
  CHECK(events[1] == event("message", "x"));  // the ping without data set no name for the next event
}

TEST_CASE("SSE parser accepts LF, CRLF and CR line ends, a CRLF split across two chunks being one", "[providers]") {
  const std::string lf = "event: a\ndata: 1\n\ndata: 2\ndata: 3\n\n";
  std::string crlf;
  std::string cr;
  for (char c : lf) {
    crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    cr += c == '\n' ? '\r' : c;
  }
  const auto expected = sse_events(lf);
  REQUIRE(expected.size() == 2);
  CHECK(sse_events(crlf) == expected);
  CHECK(sse_events(cr) == expected);
  // The CR ends one chunk, the LF starts the next: one line end, not a blank line.
  CHECK(parse_sse({"data: 1\r", "\ndata: 2\r\n\r\n"}).events == std::vector<SseEvent>{event("message", "1\n2")});
}

TEST_CASE("SSE parser keeps a UTF-8 character split between two chunks whole", "[providers]") {
  const std::string stream = "data: caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\n\n";
  const auto events = sse_events(stream);
  REQUIRE(events.size() == 1);
  CHECK(events[0].data == "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  CHECK(is_valid_utf8(events[0].data));
}

TEST_CASE("SSE parser at the end dispatches an event whose lines ended and drops a partial line", "[providers]") {
  CHECK(parse_sse({"data: [DONE]\n"}).events == std::vector<SseEvent>{event("message", "[DONE]")});
  CHECK(parse_sse({"data: {\"a\":"}).events.empty());
  CHECK(parse_sse({"data: 1\ndata: {\"a\":"}).events.empty());
  SseParser parser;
  REQUIRE(parser.feed("data: 1", [](const SseEvent&) {}));
  CHECK(parser.has_pending());
}

TEST_CASE("SSE parser fails an event past its cap and every feed after it", "[providers]") {
  SseParser parser(16);
  std::vector<SseEvent> events;
  auto on_event = [&](const SseEvent& e) { events.push_back(e); };
  REQUIRE(parser.feed("data: short\n\n", on_event));
  auto over = parser.feed("data: 0123456789\ndata: 0123456789\n", on_event);
  REQUIRE_FALSE(over);
  CHECK(over.error().code == ErrorCode::limit_exceeded);
  CHECK(over.error().message == "server-sent event larger than 16 bytes");
  CHECK_FALSE(parser.feed("\n", on_event));
  CHECK(events.size() == 1);
  // A line without its end counts too: the cap bounds memory before any line end.
  SseParser line_parser(16);
  CHECK_FALSE(line_parser.feed(std::string(17, 'x'), on_event));
}

TEST_CASE("NDJSON parser yields complete lines, skipping empty ones and a CR before the LF", "[providers]") {
  const auto lines = ndjson_lines("{\"a\":1}\n\n{\"b\":\"caf\xC3\xA9\"}\r\n\r\n  \n{\"c\":3}\n");
  CHECK(lines == std::vector<std::string>{"{\"a\":1}", "{\"b\":\"caf\xC3\xA9\"}", "{\"c\":3}"});
}

TEST_CASE("NDJSON parser yields a last line without its LF at the end", "[providers]") {
  CHECK(ndjson_lines("{\"a\":1}\n{\"done\":true}") == std::vector<std::string>{"{\"a\":1}", "{\"done\":true}"});
}

TEST_CASE("NDJSON parser fails a line past its cap", "[providers]") {
  bool failed = false;
  const auto lines = parse_ndjson({"{\"a\":1}\n", "0123456789", "0123456789\n"}, &failed, 16);
  CHECK(failed);
  CHECK(lines == std::vector<std::string>{"{\"a\":1}"});
}
