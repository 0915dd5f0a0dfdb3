// The Value codec: a compact binary encoding of Value, for values crossing a
// process boundary (a skill's worker process and the host, over a private
// channel). Decoding is for untrusted bytes: nothing is evaluated, every
// error names its byte offset, and no claimed length is allocated before it
// is checked against the bytes actually present.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

// The format, version 1.
//
// A message is the version byte 0x01 followed by one or more encoded values
// (encode_message() writes one; a frame may append more with encode()). The
// version byte comes once per message, not per value, so a reader built for
// one version refuses another version's bytes up front instead of misreading
// them.
//
// A value is one tag byte, the kind (the numbers of enum Kind), and what
// that kind carries:
//
//   0x00 NIL       nothing
//   0x01 T         nothing
//   0x02 integer   varint of the zig-zag form: (n << 1) ^ (n >> 63), so
//                  0 -> 0, -1 -> 1, 1 -> 2, -2 -> 3 ... (int64)
//   0x03 float     the IEEE-754 double's 8 bytes, least significant first
//                  (-0.0, infinities and NaN payloads are kept bit for bit)
//   0x04 string    varint byte length, then that many bytes of UTF-8
//   0x05 keyword   the same; the name as stored (upper-case, no ':')
//   0x06 symbol    the same; the name as stored
//   0x07 list      varint element count (at least 1: the empty list is
//                  NIL), then that many values
//
// A varint is unsigned LEB128: 7 bits per byte, least significant group
// first, the high bit set on every byte but the last; at most 10 bytes, and
// in its shortest form (a value has exactly one encoding).
//
// Example: (:A -1 "é") is the bytes 07 03  05 01 41  02 01  04 02 c3 a9 (hex).
//
// The decoder accepts exactly what encode() writes for the Values the
// s-expression reader can build, so a decoded Value is the one read_sexp
// makes of its printed form: strings, keywords and symbols must be valid
// UTF-8, a keyword's name may not hold a lower-case ASCII letter (the reader
// upper-cases them), a list has at least one element, and varints are
// shortest. Floats are the one exception: a NaN or an infinity (which
// Value allows and the printer writes as NIL) crosses as itself.

inline constexpr std::uint8_t kValueCodecVersion = 1;

// Bounds on one decoded value, checked before anything is allocated for the
// part that would pass them.
struct DecodeLimits {
  std::size_t max_bytes = 16 * 1024 * 1024;  // the bytes one value's encoding may take
  std::size_t max_depth = 256;               // nested lists; the top-level list is depth 1
  std::size_t max_nodes = 1024 * 1024;       // atoms and lists in one value, the top one included
};

// Appends the encoding of `value` (no version byte) to `out`. Allocates
// nothing but out's growth (and, past 64 levels of nesting, one stack).
// Safe to call from any number of threads at once.
void encode(const Value& value, std::string& out);

// Appends the version byte and the encoding of `value` to `out`.
void encode_message(const Value& value, std::string& out);

// Decodes a whole message: the version byte, one value, nothing after it.
// Errors read `byte <offset>: <what was found, what was expected>`; the
// code is limit_exceeded for max_bytes, max_depth and max_nodes (and lengths
// the runtime cannot hold), invalid_input otherwise.
Result<Value> decode(std::string_view bytes, const DecodeLimits& limits = {});

// Decodes values one after another from a buffer (a frame carrying several).
// Offsets in errors and offset() count from the start of `bytes`. After an
// error the decoder stays where the failed value started. Thread-compatible:
// one decoder per thread; any number of decoders may run at once.
class ValueDecoder {
 public:
  explicit ValueDecoder(std::string_view bytes, const DecodeLimits& limits = {}) noexcept
      : bytes_(bytes), limits_(limits) {}

  // Reads the version byte at offset(); an error unless it is kValueCodecVersion.
  Result<void> read_version();
  // Decodes the value at offset() and moves past it.
  Result<Value> next();

  std::size_t offset() const noexcept { return offset_; }
  bool at_end() const noexcept { return offset_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  DecodeLimits limits_;
  std::size_t offset_ = 0;
};

}  // namespace passepartout
