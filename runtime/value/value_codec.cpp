// The Value codec: an iterative encoder writing straight into the caller's
// string, and an iterative decoder that checks every length against the
// bytes present before it allocates, building lists on a per-thread stack.
#include "value/value_codec.hpp"

#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/utf8.hpp"
#include "value/value_access.hpp"

namespace passepartout {

namespace {

constexpr std::size_t kMaxVarintBytes = 10;

// --- encoding -----------------------------------------------------------------

std::size_t varint_size(std::uint64_t value) noexcept {
  const auto bits = static_cast<std::size_t>(64 - std::countl_zero(value | 1));
  return (bits + 6) / 7;
}

char* put_varint(char* p, std::uint64_t value) noexcept {
  while (value >= 0x80) {
    *p++ = static_cast<char>((value & 0x7F) | 0x80);
    value >>= 7;
  }
  *p++ = static_cast<char>(value);
  return p;
}

std::uint64_t zigzag(std::int64_t value) noexcept {
  const auto n = static_cast<std::uint64_t>(value);
  return (n << 1) ^ (0 - (n >> 63));
}

// The bytes `value`'s own node takes (a list's tag and count, not its elements).
std::size_t node_size(const Value& value) noexcept {
  switch (value.kind()) {
    case Kind::nil:
    case Kind::t:
      return 1;
    case Kind::integer:
      return 1 + varint_size(zigzag(value.as_integer()));
    case Kind::real:
      return 1 + 8;
    case Kind::string:
    case Kind::keyword:
    case Kind::symbol: {
      const std::size_t size = ValueAccess::text_of(value).size();
      return 1 + varint_size(size) + size;
    }
    case Kind::list:
      return 1 + varint_size(ValueAccess::items_of(value).size());
  }
  return 0;
}

// Writes `value`'s own node at `p` (node_size() bytes); returns the end.
char* put_node(const Value& value, char* p) noexcept {
  const Kind kind = value.kind();
  *p++ = static_cast<char>(kind);
  switch (kind) {
    case Kind::nil:
    case Kind::t:
      return p;
    case Kind::integer:
      return put_varint(p, zigzag(value.as_integer()));
    case Kind::real: {
      std::uint64_t bits = 0;
      const double d = value.as_float();
      std::memcpy(&bits, &d, sizeof bits);
      for (std::size_t i = 0; i < 8; ++i) *p++ = static_cast<char>((bits >> (8 * i)) & 0xFF);
      return p;
    }
    case Kind::string:
    case Kind::keyword:
    case Kind::symbol: {
      const std::string_view text = ValueAccess::text_of(value);
      p = put_varint(p, text.size());
      if (!text.empty()) std::memcpy(p, text.data(), text.size());
      return p + text.size();
    }
    case Kind::list:
      return put_varint(p, ValueAccess::items_of(value).size());
  }
  return p;
}

// The lists being walked, innermost last: the next element to visit and the
// end of the elements. Sixty-four levels live on the call stack; deeper ones
// spill to the heap.
class WalkStack {
 public:
  struct Frame {
    const Value* next;
    const Value* end;
  };

  bool empty() const noexcept { return depth_ == 0; }
  Frame& top() noexcept { return depth_ <= kFixed ? fixed_[depth_ - 1] : spill_[depth_ - kFixed - 1]; }
  void push(Frame frame) {
    if (depth_ < kFixed) {
      fixed_[depth_] = frame;
    } else {
      spill_.push_back(frame);
    }
    ++depth_;
  }
  void pop() noexcept {
    if (depth_ > kFixed) spill_.pop_back();
    --depth_;
  }

 private:
  static constexpr std::size_t kFixed = 64;
  // Left uninitialised: only the frames below depth_ are read.
  std::array<Frame, kFixed> fixed_;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  std::vector<Frame> spill_;
  std::size_t depth_ = 0;
};

// Calls `visit` on every node of `root` in the order they are encoded (a
// list before its elements), without recursion.
template <class Visit>
void walk(const Value& root, Visit&& visit) {
  WalkStack stack;
  const Value* v = &root;
  for (;;) {
    visit(*v);
    if (v->kind() == Kind::list) {
      const std::span<const Value> items = ValueAccess::items_of(*v);
      stack.push({items.data() + 1, items.data() + items.size()});  // a list has at least one element
      v = items.data();
      continue;
    }
    for (;;) {
      if (stack.empty()) return;
      WalkStack::Frame& frame = stack.top();
      if (frame.next != frame.end) {
        v = frame.next++;
        break;
      }
      stack.pop();
    }
  }
}

// --- decoding -----------------------------------------------------------------

std::string byte_prefix(std::size_t offset) { return "byte " + std::to_string(offset) + ": "; }

std::string hex_byte(unsigned char byte) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  return std::string("0x") + kHex[byte >> 4] + kHex[byte & 0xF];
}

// Whether every byte of `text` is below 0x80 (then it is valid UTF-8), eight at a time.
bool is_ascii(std::string_view text) noexcept {
  std::uint64_t any = 0;
  std::size_t i = 0;
  for (; i + 8 <= text.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, text.data() + i, sizeof word);
    any |= word;
  }
  for (; i < text.size(); ++i) any |= static_cast<unsigned char>(text[i]);
  return (any & 0x8080808080808080ULL) == 0;
}

struct Frame {
  std::size_t items_base;   // index in Scratch::items of the list's first element
  std::size_t remaining;    // elements still to read
  std::size_t open_offset;  // offset of the list's tag
};

// Elements of the lists still open, innermost last. Per thread, reused across
// decodes; each decode leaves it as it found it.
struct Scratch {
  std::vector<Value> items;
  std::vector<Frame> frames;
};

thread_local Scratch t_scratch;

// Restores the scratch stacks on every exit path (errors leave partial
// lists), and gives back memory after an unusually large value.
class ScratchGuard {
 public:
  explicit ScratchGuard(Scratch& scratch)
      : scratch_(scratch), items_base_(scratch.items.size()), frames_base_(scratch.frames.size()) {}
  ScratchGuard(const ScratchGuard&) = delete;
  ScratchGuard& operator=(const ScratchGuard&) = delete;
  ~ScratchGuard() {
    scratch_.items.resize(items_base_);
    scratch_.frames.resize(frames_base_);
    constexpr std::size_t kKeptCapacity = std::size_t{64} * 1024;
    if (scratch_.items.empty() && scratch_.items.capacity() > kKeptCapacity) {
      std::vector<Value>().swap(scratch_.items);
    }
  }

 private:
  Scratch& scratch_;
  std::size_t items_base_;
  std::size_t frames_base_;
};

class Decoder {
 public:
  // Decodes one value from `start`, reading no further than `start + max_bytes`.
  Decoder(std::string_view bytes, std::size_t start, const DecodeLimits& limits) noexcept
      : bytes_(bytes),
        limits_(limits),
        pos_(start),
        start_(start),
        window_end_(limits.max_bytes < bytes.size() - start ? start + limits.max_bytes : bytes.size()) {}

  std::size_t pos() const noexcept { return pos_; }
  Error& error() noexcept { return error_; }

  bool decode(Value& out) {
    Scratch& scratch = t_scratch;
    const ScratchGuard guard(scratch);
    std::vector<Value>& items = scratch.items;
    std::vector<Frame>& frames = scratch.frames;
    const std::size_t frames_base = frames.size();
    std::size_t nodes = 0;
    for (;;) {
      const std::size_t at = pos_;
      if (pos_ == window_end_) {
        if (pos_ < bytes_.size()) return fail_window(at);
        if (frames.size() == frames_base) return fail(at, "input ends, expected a value");
        return fail(at, "input ends inside a list (started at byte " + std::to_string(frames.back().open_offset) +
                            "), expected " + std::to_string(frames.back().remaining) + " more elements");
      }
      const auto tag = static_cast<unsigned char>(bytes_[pos_]);
      ++pos_;
      if (++nodes > limits_.max_nodes) {
        return fail(at, "more than " + std::to_string(limits_.max_nodes) + " nodes in one value",
                    ErrorCode::limit_exceeded);
      }
      if (tag > static_cast<unsigned char>(Kind::list)) {
        return fail(at, "unknown tag " + hex_byte(tag) + ", expected 0x00 to 0x07");
      }
      const auto kind = static_cast<Kind>(tag);
      if (kind == Kind::list) {
        const std::size_t depth = frames.size() - frames_base + 1;
        if (depth > limits_.max_depth) {
          return fail(at, "nesting deeper than " + std::to_string(limits_.max_depth), ErrorCode::limit_exceeded);
        }
        std::uint64_t count = 0;
        if (!read_varint(count, "a list's element count")) return false;
        if (!check_count(at, count, nodes)) return false;
        frames.push_back(Frame{items.size(), static_cast<std::size_t>(count), at});
        continue;
      }
      Value& slot = items.emplace_back();
      if (!read_atom(kind, at, slot)) return false;
      // Close every list this element completes.
      for (;;) {
        if (frames.size() == frames_base) {
          out = std::move(items.back());
          items.pop_back();
          return true;
        }
        Frame& frame = frames.back();
        if (--frame.remaining != 0) break;
        const std::size_t base = frame.items_base;
        Value list = ValueAccess::list_from_moved(std::span<Value>(items.data() + base, items.size() - base));
        items.resize(base);  // the moved-from slots are NIL
        items.push_back(std::move(list));
        frames.pop_back();
      }
    }
  }

 private:
  bool fail(std::size_t offset, const std::string& what, ErrorCode code = ErrorCode::invalid_input) {
    error_ = Error{code, byte_prefix(offset) + what};
    return false;
  }

  // Whether `n` more bytes are present from pos() within the value's window;
  // when not, the error says whether the buffer ended or max_bytes did.
  bool need(std::size_t n, std::size_t what_offset, const char* what) {
    if (window_end_ - pos_ >= n) return true;
    if (bytes_.size() - pos_ >= n) return fail_window(what_offset);
    return fail(what_offset, std::string("input ends after ") + std::to_string(bytes_.size() - pos_) +
                                 (bytes_.size() - pos_ == 1 ? " byte" : " bytes") + ", expected " + what + " of " +
                                 std::to_string(n) + (n == 1 ? " byte" : " bytes"));
  }

  bool fail_window(std::size_t offset) {
    return fail(offset,
                "the value is longer than " + std::to_string(limits_.max_bytes) + " bytes (it started at byte " +
                    std::to_string(start_) + ")",
                ErrorCode::limit_exceeded);
  }

  // An unsigned LEB128 varint in its shortest form, of at most 64 bits.
  bool read_varint(std::uint64_t& out, const char* what) {
    const std::size_t at = pos_;
    std::uint64_t value = 0;
    for (std::size_t i = 0;; ++i) {
      if (pos_ == window_end_) {
        if (pos_ < bytes_.size()) return fail_window(at);
        return fail(at, std::string("input ends inside a varint, expected ") + what);
      }
      const auto byte = static_cast<unsigned char>(bytes_[pos_]);
      ++pos_;
      const std::uint64_t group = byte & 0x7FU;
      // The tenth byte holds bit 63 alone, and ends the varint.
      if (i == kMaxVarintBytes - 1 && byte > 1) {
        return fail(at, std::string("a varint of more than 64 bits, expected ") + what);
      }
      value |= group << (7 * i);
      if ((byte & 0x80U) == 0) {
        if (byte == 0 && i != 0) {
          return fail(at, std::string("a varint with a redundant zero byte (not its shortest form), expected ") + what);
        }
        out = value;
        return true;
      }
    }
  }

  // A list's element count: at least one, and at most what the remaining
  // bytes (one per element at the least), the node limit and a list can hold.
  bool check_count(std::size_t at, std::uint64_t count, std::size_t nodes) {
    if (count == 0) return fail(at, "a list of 0 elements, expected NIL's tag 0x00 for the empty list");
    const std::size_t left = bytes_.size() - pos_;
    const std::size_t left_in_window = window_end_ - pos_;
    if (count > left_in_window) {
      if (count <= left) return fail_window(at);
      return fail(
          at, "a list of " + std::to_string(count) + " elements, but only " + std::to_string(left) + " bytes follow");
    }
    if (count > limits_.max_nodes - nodes) {
      return fail(at,
                  "a list of " + std::to_string(count) + " elements, which makes more than " +
                      std::to_string(limits_.max_nodes) + " nodes in one value",
                  ErrorCode::limit_exceeded);
    }
    if (count > detail::ListNode::kMaxSize) {
      return fail(at, "a list of " + std::to_string(count) + " elements, more than a list can hold",
                  ErrorCode::limit_exceeded);
    }
    return true;
  }

  bool read_atom(Kind kind, std::size_t at, Value& out) {
    switch (kind) {
      case Kind::nil:
        return true;
      case Kind::t:
        out = Value::t();
        return true;
      case Kind::integer: {
        std::uint64_t zigzag = 0;
        if (!read_varint(zigzag, "an integer")) return false;
        ValueAccess::init_integer(out, static_cast<std::int64_t>((zigzag >> 1) ^ (0 - (zigzag & 1))));
        return true;
      }
      case Kind::real: {
        if (!need(8, at, "a float")) return false;
        std::uint64_t bits = 0;
        for (std::size_t i = 0; i < 8; ++i) {
          bits |= std::uint64_t{static_cast<unsigned char>(bytes_[pos_ + i])} << (8 * i);
        }
        pos_ += 8;
        double d = 0.0;
        std::memcpy(&d, &bits, sizeof d);
        out = Value::real(d);
        return true;
      }
      case Kind::string:
      case Kind::keyword:
      case Kind::symbol:
        return read_text(kind, at, out);
      case Kind::list:
        break;  // decode() opens lists
    }
    return fail(at, "internal error: a list tag reached read_atom");
  }

  bool read_text(Kind kind, std::size_t at, Value& out) {
    std::uint64_t length = 0;
    const char* const what = kind == Kind::string    ? "a string's byte length"
                             : kind == Kind::keyword ? "a keyword's byte length"
                                                     : "a symbol's byte length";
    if (!read_varint(length, what)) return false;
    const std::size_t left = bytes_.size() - pos_;
    if (length > window_end_ - pos_) {
      if (length <= left) return fail_window(at);
      return fail(at, "a " + std::string(to_string(kind)) + " of " + std::to_string(length) + " bytes, but only " +
                          std::to_string(left) + " bytes follow");
    }
    if (length > std::numeric_limits<std::uint32_t>::max()) {
      return fail(at,
                  "a " + std::string(to_string(kind)) + " of " + std::to_string(length) +
                      " bytes, more than the runtime holds (4 GiB)",
                  ErrorCode::limit_exceeded);
    }
    const std::size_t text_offset = pos_;
    const std::string_view text = bytes_.substr(pos_, static_cast<std::size_t>(length));
    const bool ascii = is_ascii(text);
    if (const auto bad = ascii ? std::nullopt : find_invalid_utf8(text)) {
      return fail(text_offset + *bad, "invalid UTF-8 sequence starting with " +
                                          hex_byte(static_cast<unsigned char>(text[*bad])) + " in a " +
                                          to_string(kind) + " (which starts at byte " + std::to_string(at) + ")");
    }
    // A keyword's name is checked for lower-case letters and for the plain
    // name the reader marks (see Value) in the same pass.
    bool plain = kind == Kind::keyword && !text.empty() && text.size() <= Value::kInlineCapacity;
    if (kind == Kind::keyword) {
      for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c >= 'a' && c <= 'z') {
          return fail(text_offset + i, std::string("the lower-case letter '") + c +
                                           "' in a keyword's name (which starts at byte " + std::to_string(at) +
                                           "), but keyword names are upper-case");
        }
        plain = plain && detail::is_plain_name_byte(c);
      }
    }
    if (plain) {
      char* dst = ValueAccess::inline_bytes(out);
      std::memcpy(dst, text.data(), text.size());
      ValueAccess::set_plain_keyword(out, text.size());
    } else {
      char* dst = ValueAccess::init_text(out, kind, text.size());
      if (!text.empty()) std::memcpy(dst, text.data(), text.size());
    }
    pos_ += text.size();
    return true;
  }

  std::string_view bytes_;
  const DecodeLimits& limits_;
  std::size_t pos_;
  std::size_t start_;
  std::size_t window_end_;
  Error error_;
};

}  // namespace

void encode(const Value& value, std::string& out) {
  // One pass sizes the encoding, a second writes it in place: no append per node.
  std::size_t size = 0;
  walk(value, [&size](const Value& node) { size += node_size(node); });
  const std::size_t start = out.size();
  out.resize(start + size);
  char* p = out.data() + start;
  walk(value, [&p](const Value& node) { p = put_node(node, p); });
}

void encode_message(const Value& value, std::string& out) {
  out.push_back(static_cast<char>(kValueCodecVersion));
  encode(value, out);
}

Result<void> ValueDecoder::read_version() {
  if (offset_ == bytes_.size()) {
    return fail(ErrorCode::invalid_input,
                byte_prefix(offset_) + "input ends, expected the version byte " + hex_byte(kValueCodecVersion));
  }
  const auto version = static_cast<unsigned char>(bytes_[offset_]);
  if (version != kValueCodecVersion) {
    return fail(ErrorCode::invalid_input, byte_prefix(offset_) + "version " + hex_byte(version) +
                                              ", but this decoder reads version " + hex_byte(kValueCodecVersion));
  }
  ++offset_;
  return {};
}

Result<Value> ValueDecoder::next() {
  Decoder decoder(bytes_, offset_, limits_);
  Value value;
  if (!decoder.decode(value)) return Unexpected<Error>(std::move(decoder.error()));
  offset_ = decoder.pos();
  return value;
}

Result<Value> decode(std::string_view bytes, const DecodeLimits& limits) {
  ValueDecoder decoder(bytes, limits);
  if (auto version = decoder.read_version(); !version) return Unexpected<Error>(std::move(version).error());
  auto value = decoder.next();
  if (!value) return value;
  if (!decoder.at_end()) {
    return fail(ErrorCode::invalid_input, byte_prefix(decoder.offset()) +
                                              std::to_string(bytes.size() - decoder.offset()) +
                                              " bytes after the value, expected the end of the message");
  }
  return value;
}

}  // namespace passepartout
