// print_sexp: writes straight into the caller's string; lists by bounded
// recursion, short keywords a word at a time, floats through std::to_chars.
#include "value/sexp_printer.hpp"

#include <array>
#include <bit>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "value/sexp_syntax.hpp"
#include "value/value_access.hpp"

namespace passepartout {

namespace {

// 1 for bytes that cannot appear in a bare (unescaped) name and read back as
// themselves: controls, space, lower-case letters, non-ASCII, ( ) " ; ' ` , | \ :
constexpr std::array<unsigned char, 256> kNeedsBars = [] {
  std::array<unsigned char, 256> needs{};
  for (std::size_t c = 0; c < 256; ++c) needs[c] = (c <= 0x20 || c >= 0x7F) ? 1 : 0;
  for (std::size_t c = 'a'; c <= 'z'; ++c) needs[c] = 1;
  for (const char c : {'(', ')', '"', ';', '\'', '`', ',', '|', '\\', ':'}) {
    needs[static_cast<unsigned char>(c)] = 1;
  }
  return needs;
}();

// Writes straight into the caller's string: grows it ahead (resize), writes
// through a raw pointer, and trims it to what was written when destroyed.
class Writer {
 public:
  explicit Writer(std::string& out) : out_(out), start_(out.size()) { grow(256); }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() { out_.resize(static_cast<std::size_t>(cursor_ - out_.data())); }

  // Room for `n` more bytes at the returned cursor; advance() past what was written.
  char* reserve(std::size_t n) {
    if (static_cast<std::size_t>(end_ - cursor_) < n) grow(n);
    return cursor_;
  }
  void advance(char* cursor) noexcept { cursor_ = cursor; }
  void put(char c) { *reserve(1) = c; ++cursor_; }

 private:
  void grow(std::size_t n) {
    const std::size_t used = cursor_ != nullptr ? static_cast<std::size_t>(cursor_ - out_.data()) : out_.size();
    const std::size_t written = used - start_;
    out_.resize(used + n + (written > 256 ? written : 256));
    cursor_ = out_.data() + used;
    end_ = out_.data() + out_.size();
  }

  std::string& out_;
  std::size_t start_;
  char* cursor_ = nullptr;
  char* end_ = nullptr;
};

bool reads_as_something_else(std::string_view name) noexcept {
  if (sexp::classify_number(name) != sexp::NumberSyntax::none) return true;
  return name == "NIL" || name == "T";
}

// A keyword or symbol name, bare when that reads back identically, else in bars.
void put_name(Writer& writer, std::string_view name, Kind kind) {
  char* const start = writer.reserve(2 * name.size() + 3);
  char* p = start;
  if (kind == Kind::Keyword) *p++ = ':';
  const std::size_t size = name.size();
  unsigned needs_bars = size == 0 || name[0] == '#' ? 1U : 0U;
  for (std::size_t i = 0; i < size; ++i) {
    const char c = name[i];
    needs_bars |= kNeedsBars[static_cast<unsigned char>(c)];
    p[i] = c;
  }
  if (needs_bars == 0 && name[0] == '.' && name.find_first_not_of('.') == std::string_view::npos) needs_bars = 1;
  if (needs_bars == 0 && (kind == Kind::Keyword || !reads_as_something_else(name))) {
    writer.advance(p + size);
    return;
  }
  p = start;
  if (kind == Kind::Keyword) *p++ = ':';
  *p++ = '|';
  for (const char c : name) {
    if (c == '|' || c == '\\') *p++ = '\\';
    *p++ = c;
  }
  *p++ = '|';
  writer.advance(p);
}

// A string in double quotes; only `"` and `\` are escaped.
void put_string(Writer& writer, std::string_view text) {
  const char* const data = text.data();
  const std::size_t size = text.size();
  std::size_t escapes = 0;
  for (std::size_t i = 0; i < size;) {
    if (i + 8 <= size) {
      std::uint64_t word;
      std::memcpy(&word, data + i, sizeof word);
      if (!sexp::word_has_byte(word, '"') && !sexp::word_has_byte(word, '\\')) {
        i += 8;
        continue;
      }
    }
    const std::size_t stop = i + 8 <= size ? i + 8 : size;
    for (; i < stop; ++i) escapes += (data[i] == '"' || data[i] == '\\') ? 1 : 0;
  }
  char* p = writer.reserve(size + escapes + 2);
  *p++ = '"';
  if (escapes == 0) {
    if (size != 0) std::memcpy(p, data, size);
    p += size;
  } else {
    for (std::size_t i = 0; i < size; ++i) {
      if (data[i] == '"' || data[i] == '\\') *p++ = '\\';
      *p++ = data[i];
    }
  }
  *p++ = '"';
  writer.advance(p);
}

void put_integer(Writer& writer, std::int64_t value) {
  constexpr std::size_t kMaxDigits = 20;  // "-9223372036854775808"
  char* p = writer.reserve(kMaxDigits);
  writer.advance(std::to_chars(p, p + kMaxDigits, value).ptr);
}

// Shortest round-trip digits in Lisp syntax (see the header for the rules).
void put_float(Writer& writer, double value) {
  constexpr std::size_t kMaxLength = 48;
  char* const start = writer.reserve(kMaxLength);
  char* p = start;
  if (!std::isfinite(value)) {
    std::memcpy(p, "NIL", 3);
    writer.advance(p + 3);
    return;
  }
  const bool single = std::fabs(value) <= static_cast<double>(FLT_MAX) &&
                      static_cast<double>(static_cast<float>(value)) == value;
  char sci[40];
  const char* const sci_end = std::to_chars(sci, sci + sizeof sci, value, std::chars_format::scientific).ptr;
  // sci holds [-]d[.ddd]e(+|-)xx
  const char* s = sci;
  if (*s == '-') {
    *p++ = '-';
    ++s;
  }
  char digits[24];
  std::size_t count = 0;
  for (; s < sci_end && *s != 'e'; ++s) {
    if (*s != '.') digits[count++] = *s;
  }
  int exponent = 0;
  std::from_chars(s[1] == '+' ? s + 2 : s + 1, sci_end, exponent);

  if (exponent >= -3 && exponent < 7) {
    if (exponent >= 0) {
      const auto whole = static_cast<std::size_t>(exponent) + 1;
      for (std::size_t i = 0; i < whole; ++i) *p++ = i < count ? digits[i] : '0';
      *p++ = '.';
      if (count > whole) {
        for (std::size_t i = whole; i < count; ++i) *p++ = digits[i];
      } else {
        *p++ = '0';
      }
    } else {
      *p++ = '0';
      *p++ = '.';
      for (int i = -1; i > exponent; --i) *p++ = '0';
      for (std::size_t i = 0; i < count; ++i) *p++ = digits[i];
    }
    if (!single) {
      *p++ = 'd';
      *p++ = '0';
    }
  } else {
    *p++ = digits[0];
    *p++ = '.';
    if (count > 1) {
      for (std::size_t i = 1; i < count; ++i) *p++ = digits[i];
    } else {
      *p++ = '0';
    }
    *p++ = single ? 'e' : 'd';
    p = std::to_chars(p, start + kMaxLength, exponent).ptr;
  }
  writer.advance(p);
}

// The high bits of the first `n` (0..8) bytes of a word.
constexpr std::uint64_t first_bytes(std::size_t n) noexcept {
  return n >= 8 ? sexp::kHighBits : sexp::kHighBits & ((std::uint64_t{1} << (8 * n)) - 1);
}

// A keyword. Inline names of upper-case letters, digits and '-' (almost every
// keyword of the protocol) are checked and copied eight bytes at a time.
void put_keyword(Writer& writer, const Value& value) {
  const std::string_view name = ValueAccess::text_of(value);
  const std::size_t size = name.size();
  if (std::endian::native != std::endian::little || size == 0 || size > Value::kInlineCapacity) {
    put_name(writer, name, Kind::Keyword);
    return;
  }
  // Inline text occupies bytes 2..15 of the Value: both loads stay inside it.
  std::uint64_t low;
  std::uint64_t high;
  std::memcpy(&low, name.data(), sizeof low);
  std::memcpy(&high, name.data() + 6, sizeof high);
  high >>= 16;
  const std::uint64_t bad = (sexp::bytes_not_simple(low) & first_bytes(size)) |
                            (size > 8 ? sexp::bytes_not_simple(high) & first_bytes(size - 8) : 0);
  if (bad != 0) {
    put_name(writer, name, Kind::Keyword);
    return;
  }
  char* p = writer.reserve(1 + 2 * sizeof(std::uint64_t));
  *p = ':';
  std::memcpy(p + 1, &low, sizeof low);
  std::memcpy(p + 9, &high, sizeof high);
  writer.advance(p + 1 + size);
}

void put_atom(Writer& writer, const Value& value) {
  switch (value.kind()) {
    case Kind::Nil: {
      char* p = writer.reserve(3);
      std::memcpy(p, "NIL", 3);
      writer.advance(p + 3);
      return;
    }
    case Kind::True: writer.put('T'); return;
    case Kind::Integer: put_integer(writer, value.as_integer()); return;
    case Kind::Float: put_float(writer, value.as_float()); return;
    case Kind::String: put_string(writer, ValueAccess::text_of(value)); return;
    case Kind::Keyword:
    case Kind::Symbol: put_name(writer, ValueAccess::text_of(value), value.kind()); return;
    case Kind::List: return;  // print_sexp opens lists itself
  }
}

// The lists being printed, innermost last; the first levels live on the
// call stack, deeper ones on the heap.
class FrameStack {
 public:
  struct Frame {
    const Value* begin;
    const Value* next;
    const Value* end;
  };

  bool empty() const noexcept { return size_ == 0; }
  Frame& top() noexcept { return size_ <= kInline ? inline_[size_ - 1] : overflow_.back(); }
  void push(Frame frame) {
    if (size_ < kInline) {
      inline_[size_] = frame;
    } else {
      overflow_.push_back(frame);
    }
    ++size_;
  }
  void pop() noexcept {
    if (size_ > kInline) overflow_.pop_back();
    --size_;
  }

 private:
  static constexpr std::size_t kInline = 32;
  std::array<Frame, kInline> inline_;
  std::vector<Frame> overflow_;
  std::size_t size_ = 0;
};

// A list of any depth, on an explicit stack.
void put_deep_list(Writer& writer, const Value& list) {
  FrameStack stack;
  std::span<const Value> items = ValueAccess::items_of(list);
  writer.put('(');
  stack.push({items.data(), items.data(), items.data() + items.size()});
  while (!stack.empty()) {
    FrameStack::Frame& frame = stack.top();
    if (frame.next == frame.end) {
      writer.put(')');
      stack.pop();
      continue;
    }
    if (frame.next != frame.begin) writer.put(' ');
    const Value& item = *frame.next++;
    if (item.is_list()) {
      items = ValueAccess::items_of(item);
      writer.put('(');
      stack.push({items.data(), items.data(), items.data() + items.size()});
    } else {
      put_atom(writer, item);
    }
  }
}

// A list by recursion, the fast way for the shallow lists of the protocol;
// past kMaxRecursion levels the rest goes to put_deep_list.
constexpr int kMaxRecursion = 48;

void put_list(Writer& writer, const Value& list, int depth) {
  if (depth >= kMaxRecursion) {
    put_deep_list(writer, list);
    return;
  }
  const std::span<const Value> items = ValueAccess::items_of(list);
  writer.put('(');
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i != 0) writer.put(' ');
    const Value& item = items[i];
    switch (item.kind()) {
      case Kind::Keyword: put_keyword(writer, item); break;
      case Kind::List: put_list(writer, item, depth + 1); break;
      default: put_atom(writer, item); break;
    }
  }
  writer.put(')');
}

}  // namespace

void print_sexp(const Value& value, std::string& out) {
  Writer writer(out);
  if (value.is_list()) {
    put_list(writer, value, 0);
  } else {
    put_atom(writer, value);
  }
}

std::string to_sexp(const Value& value) {
  std::string out;
  print_sexp(value, out);
  return out;
}

}  // namespace passepartout
