// Stream parsers for LLM APIs: server-sent events (OpenAI, Anthropic) and
// newline-delimited JSON (Ollama), fed bytes in whatever pieces they arrive.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/inline_function.hpp"
#include "base/result.hpp"

namespace passepartout {

// One dispatched server-sent event.
struct SseEvent {
  std::string event = "message";  // the `event:` field, "message" when none was given
  std::string data;               // the `data:` lines joined with '\n'
  std::string id;                 // the last `id:` seen on the stream (it persists across events)
  friend bool operator==(const SseEvent&, const SseEvent&) = default;
};

// The event stream format of the HTML standard ("Server-sent events",
// "Interpreting an event stream"), minus the BOM and `retry:` (a client that
// reconnects is not what an API call wants). Lines end with LF, CRLF or CR
// (a CR ending one chunk and the LF starting the next are one line end);
// `:` starts a comment; one space after a field's colon is dropped; a blank
// line dispatches the event, when it has data. Bytes are kept as bytes until
// their line is complete, so a chunk may end anywhere, even inside a UTF-8
// character. Not thread-safe: one per stream.
class SseParser {
 public:
  using OnEvent = InlineFunction<void(const SseEvent&)>;

  // `max_event_bytes` bounds what an event not yet dispatched may hold (its
  // data, name and the line being read).
  explicit SseParser(std::size_t max_event_bytes = kDefaultMaxEventBytes) : max_event_bytes_(max_event_bytes) {}

  // Parses `bytes`, calling `on_event` for each event they complete. After
  // an error (an event over the cap) every later call fails the same way.
  Result<void> feed(std::string_view bytes, const OnEvent& on_event);
  // The stream ended: dispatches an event whose last line was complete but
  // that no blank line followed (lenient: a server that closes right after
  // `data: [DONE]\n`); a partial line is dropped, as the standard says.
  void finish(const OnEvent& on_event);
  // Whether bytes of an undispatched event or an unfinished line are held.
  bool has_pending() const noexcept { return !line_.empty() || has_data_; }

  static constexpr std::size_t kDefaultMaxEventBytes = std::size_t{1} << 20;

 private:
  void process_line(std::string_view line, const OnEvent& on_event);
  void dispatch(const OnEvent& on_event);
  std::size_t pending_bytes() const noexcept { return line_.size() + event_.data.size() + event_.event.size(); }

  std::size_t max_event_bytes_;
  std::string line_;        // the current line, not yet ended
  SseEvent event_;          // the event being built
  bool has_data_ = false;   // a `data:` field was seen since the last dispatch
  bool has_event_ = false;  // an `event:` field was seen since the last dispatch
  bool skip_lf_ = false;    // the last byte was a CR ending a line: an LF next is part of that line end
  std::string error_;       // set once the cap was passed
};

// Newline-delimited JSON: yields each complete line (without its LF and a CR
// before it), skipping empty lines; bytes are kept until their line is
// complete. Not thread-safe: one per stream.
class NdjsonParser {
 public:
  using OnLine = InlineFunction<void(std::string_view)>;

  explicit NdjsonParser(std::size_t max_line_bytes = kDefaultMaxLineBytes) : max_line_bytes_(max_line_bytes) {}

  // Parses `bytes`, calling `on_line` for each line they complete. After an
  // error (a line over the cap) every later call fails the same way.
  Result<void> feed(std::string_view bytes, const OnLine& on_line);
  // The stream ended: yields a last line that no LF ended, if any.
  void finish(const OnLine& on_line);
  bool has_pending() const noexcept { return !line_.empty(); }

  static constexpr std::size_t kDefaultMaxLineBytes = std::size_t{1} << 20;

 private:
  void emit(const OnLine& on_line);

  std::size_t max_line_bytes_;
  std::string line_;
  std::string error_;
};

}  // namespace passepartout
