// libFuzzer target for the SSE and NDJSON parsers: arbitrary bytes split at a
// point the fuzzer chooses must give the same events as the same bytes fed at once.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "providers/stream_parser.hpp"

namespace {

[[noreturn]] void fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "%s on %zu input bytes\n", what, input.size());
  std::abort();
}

// Every dispatched event flattened: name, id and data with their sizes.
std::string sse_events(const std::vector<std::string_view>& chunks) {
  passepartout::SseParser parser;
  std::string out;
  auto on_event = [&](const passepartout::SseEvent& event) {
    for (const std::string* field : {&event.event, &event.id, &event.data}) {
      out += std::to_string(field->size()) + ':' + *field;
    }
  };
  for (std::string_view chunk : chunks) {
    if (!parser.feed(chunk, on_event)) out += "!error";
  }
  parser.finish(on_event);
  return out;
}

std::string ndjson_lines(const std::vector<std::string_view>& chunks) {
  passepartout::NdjsonParser parser;
  std::string out;
  auto on_line = [&](std::string_view line) {
    if (line.empty() || line.find('\n') != std::string_view::npos) std::abort();  // never empty, never holds an LF
    out += std::to_string(line.size()) + ':' + std::string(line);
  };
  for (std::string_view chunk : chunks) {
    if (!parser.feed(chunk, on_line)) out += "!error";
  }
  parser.finish(on_line);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  // The first two bytes choose the split; the rest is the stream. Inputs stay
  // far below the parsers' default caps, so neither fails on size.
  const std::size_t choice = static_cast<std::size_t>(data[0]) << 8U | data[1];
  const std::string_view stream(reinterpret_cast<const char*>(data + 2), size - 2);
  const std::size_t cut = stream.empty() ? 0 : choice % (stream.size() + 1);
  const std::vector<std::string_view> split = {stream.substr(0, cut), stream.substr(cut)};

  if (sse_events({stream}) != sse_events(split)) fail("SSE events depend on the split", stream);
  if (ndjson_lines({stream}) != ndjson_lines(split)) fail("NDJSON lines depend on the split", stream);
  return 0;
}
