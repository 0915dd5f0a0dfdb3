// FrameCodec and FrameDecoder: the framed wire protocol shared with Lisp peers
// (6 hex digits giving the payload length in code points, then one s-expression).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

// The largest length 6 hex digits can announce.
inline constexpr std::size_t kMaxFrameCodePoints = 0xFFFFFF;

// Bounds on one frame, checked before anything is allocated for it.
struct FrameLimits {
  // Payload length in Unicode code points, on send and on receive. Values
  // above kMaxFrameCodePoints act as kMaxFrameCodePoints.
  std::size_t max_payload_code_points = std::size_t{1024} * 1024;
  // Nesting of lists in a received payload; the top-level list is depth 1.
  std::size_t max_depth = 128;
  // Space, Newline, Tab and Return characters skipped before each frame.
  std::size_t max_leading_whitespace = 4096;

  std::size_t effective_max_payload() const noexcept {
    return max_payload_code_points < kMaxFrameCodePoints ? max_payload_code_points : kMaxFrameCodePoints;
  }
};

// What was wrong with the bytes a peer sent.
enum class FrameErrorKind {
  bad_prefix,          // the 6 characters are not an optional '+' then hex digits
  too_large,           // the announced length is over the limit
  whitespace_flood,    // too much whitespace before a frame
  invalid_utf8,        // the payload is not well-formed UTF-8
  unreadable_payload,  // the payload is no readable s-expression (includes `#.`)
  too_deep,            // the payload nests lists deeper than the limit
  truncated,           // the stream ended inside a frame
};

const char* to_string(FrameErrorKind kind) noexcept;

struct FrameError {
  FrameErrorKind kind = FrameErrorKind::bad_prefix;
  // Names the byte offset in the stream and what was found; ASCII only.
  std::string message;
};

// Encodes messages as frames. Stateless apart from its limits; any thread.
//
// A frame is the payload length as 6 upper-case hex digits counting Unicode
// code points (a Lisp peer counts characters, not bytes), then the payload:
// `message` printed by print_sexp, in UTF-8, without the keys :REPLY-STREAM,
// :SOCKET and :STREAM (and their values) in any property list at any depth,
// as a Lisp peer strips them before sending. A property list is a list of
// even length with a keyword at every even position; any other list keeps all
// its elements (and its length). A property list left empty prints as NIL.
class FrameCodec {
 public:
  explicit FrameCodec(FrameLimits limits = {}) : limits_(limits) {}

  // The frame for `message`. Fails with limit_exceeded, writing nothing, when
  // the payload is longer than the limit (at most 0xFFFFFF code points).
  Result<std::string> encode(const Value& message) const;
  // Appends the frame for `message` to `out`; on failure `out` is unchanged.
  Result<void> encode_into(const Value& message, std::string& out) const;
  // Appends a frame carrying `payload` as it is (already printed; must be
  // valid UTF-8, else invalid_input); on failure `out` is unchanged.
  Result<void> frame_payload(std::string_view payload, std::string& out) const;

  const FrameLimits& limits() const noexcept { return limits_; }

 private:
  // The code points of a payload, checked for UTF-8 and the size limit.
  Result<std::size_t> payload_code_points(std::string_view payload) const;
  // `code_points`, or the error when they exceed the size limit.
  Result<std::size_t> payload_fits(std::size_t code_points) const;

  FrameLimits limits_;
};

// Turns a byte stream into messages, incrementally: feed() bytes in pieces
// of any size as they arrive, take complete messages with next().
//
// Receiving follows the Lisp peer: up to max_leading_whitespace Space,
// Newline, Tab or Return characters are skipped before each frame; the
// prefix is 6 characters, an optional '+' then hex digits of either case,
// possibly followed by whitespace (`+0002C`, `00002c`, `2C    `); then as
// many code points as announced are read and parsed with read_sexp_prefix
// (nothing evaluated, `#` dispatch refused), ignoring whatever follows the
// first datum inside the payload. A payload that is not a list (`42`) is a
// message too. Checks happen as early as possible: a bad prefix character as
// soon as it arrives, an announced length over the limit before any payload
// byte is stored, invalid UTF-8 at the offending byte.
//
// The first error is final: later bytes are ignored and error() describes
// it; messages completed before it can still be taken. Not thread-safe: one
// decoder per connection, used from one strand.
class FrameDecoder {
 public:
  explicit FrameDecoder(FrameLimits limits = {});

  // Consumes all of `bytes`. Returns false once the decoder has failed.
  bool feed(std::string_view bytes);
  // The stream has ended: fails with `truncated` when a frame was begun (its
  // prefix or payload incomplete); whitespace alone is no frame.
  bool finish();

  // The oldest complete message not yet taken, if any.
  std::optional<Value> next();
  std::size_t pending() const noexcept { return messages_.size(); }

  bool failed() const noexcept { return error_.has_value(); }
  const std::optional<FrameError>& error() const noexcept { return error_; }
  // True from the first character of a prefix to the last of its payload.
  bool in_frame() const noexcept { return state_ != State::whitespace; }
  // Bytes consumed since construction (the stream offset errors name).
  std::uint64_t offset() const noexcept { return offset_; }

 private:
  enum class State { whitespace, prefix, payload };

  bool prefix_byte(unsigned char byte);
  bool start_payload();
  std::size_t payload_bytes(const unsigned char* bytes, std::size_t size);
  bool complete_payload();
  bool fail(FrameErrorKind kind, std::string message);

  FrameLimits limits_;
  State state_ = State::whitespace;
  std::uint64_t offset_ = 0;
  std::size_t whitespace_ = 0;
  char prefix_[6] = {};
  std::size_t prefix_size_ = 0;
  bool prefix_trailing_space_ = false;
  std::size_t announced_ = 0;    // code points in the current payload
  std::size_t code_points_ = 0;  // code points of it received so far
  std::uint64_t payload_start_ = 0;
  std::string payload_;
  // The UTF-8 sequence in progress: continuation bytes still expected and the
  // range the next one must fall in (Unicode Table 3-7).
  int utf8_needed_ = 0;
  unsigned char utf8_low_ = 0x80;
  unsigned char utf8_high_ = 0xBF;
  std::size_t utf8_lead_offset_ = 0;  // in payload_
  std::deque<Value> messages_;
  std::optional<FrameError> error_;
};

}  // namespace passepartout
