// Frame encoding (print without the stream keys, validate and count code
// points, prefix) and the incremental decoder (whitespace, prefix, UTF-8
// payload, safe read).
#include "daemon/frame_codec.hpp"

#include <algorithm>
#include <utility>

#include "base/utf8.hpp"
#include "value/sexp_printer.hpp"
#include "value/sexp_reader.hpp"

namespace passepartout {

namespace {

constexpr char kHexDigits[] = "0123456789ABCDEF";
constexpr std::size_t kPrefixSize = 6;
// Payload buffers above this are released after their frame instead of kept.
constexpr std::size_t kKeptPayloadCapacity = std::size_t{64} * 1024;

bool is_frame_whitespace(unsigned char byte) noexcept {
  return byte == ' ' || byte == '\n' || byte == '\t' || byte == '\r';
}

int hex_value(unsigned char byte) noexcept {
  if (byte >= '0' && byte <= '9') return byte - '0';
  if (byte >= 'A' && byte <= 'F') return byte - 'A' + 10;
  if (byte >= 'a' && byte <= 'f') return byte - 'a' + 10;
  return -1;
}

// Printable ASCII as is, everything else as \xNN: messages stay ASCII.
std::string escape_bytes(std::string_view bytes) {
  std::string out;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F && byte != '"' && byte != '\\') {
      out.push_back(c);
    } else {
      out += "\\x";
      out.push_back(kHexDigits[byte >> 4]);
      out.push_back(kHexDigits[byte & 0xF]);
    }
  }
  return out;
}

std::string hex_byte(unsigned char byte) { return std::string("0x") + kHexDigits[byte >> 4] + kHexDigits[byte & 0xF]; }

// The keys no frame carries: the Lisp's stream and socket objects.
constexpr std::string_view kUnsentKeys[] = {"REPLY-STREAM", "SOCKET", "STREAM"};
const KeyFilter kUnsent{kUnsentKeys};  // prepared once, for every frame

}  // namespace

const char* to_string(FrameErrorKind kind) noexcept {
  switch (kind) {
    case FrameErrorKind::bad_prefix:
      return "bad-prefix";
    case FrameErrorKind::too_large:
      return "too-large";
    case FrameErrorKind::whitespace_flood:
      return "whitespace-flood";
    case FrameErrorKind::invalid_utf8:
      return "invalid-utf8";
    case FrameErrorKind::unreadable_payload:
      return "unreadable-payload";
    case FrameErrorKind::too_deep:
      return "too-deep";
    case FrameErrorKind::truncated:
      return "truncated";
  }
  return "bad-prefix";
}

// --- FrameCodec ---------------------------------------------------------------

Result<std::string> FrameCodec::encode(const Value& message) const {
  std::string out;
  auto done = encode_into(message, out);
  if (!done) return Unexpected<Error>(std::move(done).error());
  return out;
}

Result<std::size_t> FrameCodec::payload_code_points(std::string_view payload) const {
  const Utf8Scan scan = scan_utf8(payload);
  if (scan.invalid_at) {
    return fail(ErrorCode::invalid_input, "frame payload: invalid UTF-8 at byte " + std::to_string(*scan.invalid_at));
  }
  return payload_fits(scan.code_points);
}

Result<std::size_t> FrameCodec::payload_fits(std::size_t code_points) const {
  const std::size_t limit = limits_.effective_max_payload();
  if (code_points > limit) {
    return fail(ErrorCode::limit_exceeded, "frame payload is " + std::to_string(code_points) +
                                               " code points, the limit is " + std::to_string(limit));
  }
  return code_points;
}

Result<void> FrameCodec::encode_into(const Value& message, std::string& out) const {
  // Printed in place after a placeholder prefix, which is filled in once the
  // payload is known to fit (or everything appended is dropped again).
  // All-ASCII text (the printer says so) is valid UTF-8 of one code point
  // per byte; any other is scanned.
  const std::size_t start = out.size();
  out.append(kPrefixSize, '0');
  const bool ascii = print_sexp_ascii(message, out, kUnsent);
  const std::string_view payload = std::string_view(out).substr(start + kPrefixSize);
  auto code_points = ascii ? payload_fits(payload.size()) : payload_code_points(payload);
  if (!code_points) {
    out.resize(start);
    return Unexpected<Error>(std::move(code_points).error());
  }
  for (std::size_t i = 0; i < kPrefixSize; ++i) {
    out[start + kPrefixSize - 1 - i] = kHexDigits[(*code_points >> (4 * i)) & 0xF];
  }
  return {};
}

Result<void> FrameCodec::frame_payload(std::string_view payload, std::string& out) const {
  auto code_points = payload_code_points(payload);
  if (!code_points) return Unexpected<Error>(std::move(code_points).error());
  out.reserve(out.size() + kPrefixSize + payload.size());
  for (std::size_t i = kPrefixSize; i-- > 0;) out.push_back(kHexDigits[(*code_points >> (4 * i)) & 0xF]);
  out.append(payload);
  return {};
}

// --- FrameDecoder -------------------------------------------------------------

FrameDecoder::FrameDecoder(FrameLimits limits) : limits_(limits) {}

bool FrameDecoder::fail(FrameErrorKind kind, std::string message) {
  error_ = FrameError{kind, std::move(message)};
  std::string().swap(payload_);
  return false;
}

bool FrameDecoder::feed(std::string_view bytes) {
  if (error_) return false;
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t size = bytes.size();
  std::size_t i = 0;
  while (i < size) {
    switch (state_) {
      case State::whitespace:
        if (is_frame_whitespace(data[i])) {
          if (++whitespace_ > limits_.max_leading_whitespace) {
            return fail(FrameErrorKind::whitespace_flood, "byte " + std::to_string(offset_) + ": more than " +
                                                              std::to_string(limits_.max_leading_whitespace) +
                                                              " whitespace characters before a frame");
          }
          ++i;
          ++offset_;
          break;
        }
        state_ = State::prefix;
        prefix_size_ = 0;
        prefix_trailing_space_ = false;
        break;
      case State::prefix:
        if (!prefix_byte(data[i])) return false;
        ++i;
        ++offset_;
        if (prefix_size_ == kPrefixSize && !start_payload()) return false;
        break;
      case State::payload: {
        const std::size_t used = payload_bytes(data + i, size - i);
        i += used;
        offset_ += used;
        if (error_) return false;
        if (code_points_ == announced_ && utf8_needed_ == 0 && !complete_payload()) return false;
        break;
      }
    }
  }
  return true;
}

bool FrameDecoder::prefix_byte(unsigned char byte) {
  const std::size_t position = prefix_size_;
  prefix_[prefix_size_++] = static_cast<char>(byte);
  const bool has_digit = position > (prefix_[0] == '+' ? 1U : 0U);
  bool ok = false;
  if (hex_value(byte) >= 0) {
    ok = !prefix_trailing_space_;
  } else if (byte == '+') {
    ok = position == 0;
  } else if (is_frame_whitespace(byte)) {
    ok = has_digit;
    prefix_trailing_space_ = true;
  }
  if (ok) return true;
  return fail(FrameErrorKind::bad_prefix,
              "byte " + std::to_string(offset_) + ": frame prefix \"" +
                  escape_bytes(std::string_view(prefix_, prefix_size_)) +
                  "\" is not a length (expected 6 hexadecimal digits, optionally after '+')");
}

bool FrameDecoder::start_payload() {
  std::size_t length = 0;
  for (const char c : prefix_) {
    const int digit = hex_value(static_cast<unsigned char>(c));
    if (digit >= 0) length = length * 16 + static_cast<std::size_t>(digit);
  }
  const std::size_t limit = limits_.effective_max_payload();
  if (length > limit) {
    return fail(FrameErrorKind::too_large, "byte " + std::to_string(offset_ - kPrefixSize) + ": frame announces " +
                                               std::to_string(length) + " code points, the limit is " +
                                               std::to_string(limit));
  }
  state_ = State::payload;
  announced_ = length;
  code_points_ = 0;
  utf8_needed_ = 0;
  payload_start_ = offset_;
  payload_.clear();
  // Grown as bytes arrive: an announced length costs nothing until it is sent.
  payload_.reserve(std::min(length, kKeptPayloadCapacity));
  if (length == 0) return complete_payload();
  return true;
}

std::size_t FrameDecoder::payload_bytes(const unsigned char* bytes, std::size_t size) {
  std::size_t i = 0;
  while (i < size && (code_points_ < announced_ || utf8_needed_ > 0)) {
    if (utf8_needed_ == 0) {
      const std::size_t end = i + std::min(announced_ - code_points_, size - i);
      std::size_t j = i;
      while (j < end && bytes[j] < 0x80) ++j;
      if (j > i) {
        payload_.append(reinterpret_cast<const char*>(bytes + i), j - i);
        code_points_ += j - i;
        i = j;
        continue;
      }
      const unsigned char lead = bytes[i];
      utf8_low_ = 0x80;
      utf8_high_ = 0xBF;
      if (lead >= 0xC2 && lead <= 0xDF) {
        utf8_needed_ = 1;
      } else if (lead == 0xE0) {
        utf8_needed_ = 2;
        utf8_low_ = 0xA0;
      } else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) {
        utf8_needed_ = 2;
      } else if (lead == 0xED) {
        utf8_needed_ = 2;
        utf8_high_ = 0x9F;
      } else if (lead == 0xF0) {
        utf8_needed_ = 3;
        utf8_low_ = 0x90;
      } else if (lead >= 0xF1 && lead <= 0xF3) {
        utf8_needed_ = 3;
      } else if (lead == 0xF4) {
        utf8_needed_ = 3;
        utf8_high_ = 0x8F;
      } else {
        fail(FrameErrorKind::invalid_utf8, "byte " + std::to_string(payload_start_ + payload_.size()) +
                                               ": invalid UTF-8 in the frame payload (byte " + hex_byte(lead) + ")");
        return i;
      }
      utf8_lead_offset_ = payload_.size();
      payload_.push_back(static_cast<char>(lead));
      ++i;
      continue;
    }
    const unsigned char byte = bytes[i];
    if (byte < utf8_low_ || byte > utf8_high_) {
      const auto lead = static_cast<unsigned char>(payload_[utf8_lead_offset_]);
      fail(FrameErrorKind::invalid_utf8, "byte " + std::to_string(payload_start_ + utf8_lead_offset_) +
                                             ": invalid UTF-8 in the frame payload (sequence starting with " +
                                             hex_byte(lead) + ", then " + hex_byte(byte) + ")");
      return i;
    }
    payload_.push_back(static_cast<char>(byte));
    ++i;
    utf8_low_ = 0x80;
    utf8_high_ = 0xBF;
    if (--utf8_needed_ == 0) ++code_points_;
  }
  return i;
}

bool FrameDecoder::complete_payload() {
  ReaderLimits reader_limits;
  reader_limits.max_bytes = payload_.size();
  reader_limits.max_depth = limits_.max_depth;
  auto message = read_sexp_prefix(payload_, nullptr, reader_limits, Utf8::checked);  // payload_bytes() checked it
  if (!message) {
    const FrameErrorKind kind = message.error().code == ErrorCode::limit_exceeded ? FrameErrorKind::too_deep
                                                                                  : FrameErrorKind::unreadable_payload;
    return fail(kind, "frame payload at byte " + std::to_string(payload_start_) +
                          " is no readable s-expression: " + message.error().message);
  }
  messages_.push_back(std::move(*message));
  state_ = State::whitespace;
  whitespace_ = 0;
  if (payload_.capacity() > kKeptPayloadCapacity) {
    std::string().swap(payload_);
  } else {
    payload_.clear();
  }
  return true;
}

bool FrameDecoder::finish() {
  if (error_) return false;
  if (state_ == State::prefix) {
    return fail(FrameErrorKind::truncated, "byte " + std::to_string(offset_) + ": the stream ended after " +
                                               std::to_string(prefix_size_) + " of 6 frame prefix characters");
  }
  if (state_ == State::payload) {
    return fail(FrameErrorKind::truncated, "byte " + std::to_string(offset_) + ": the stream ended after " +
                                               std::to_string(code_points_) + " of " + std::to_string(announced_) +
                                               " payload code points");
  }
  return true;
}

std::optional<Value> FrameDecoder::next() {
  if (messages_.empty()) return std::nullopt;
  Value message = std::move(messages_.front());
  messages_.pop_front();
  return message;
}

}  // namespace passepartout
