// read_sexp: an iterative reader over validated UTF-8. Lists are built on a
// per-thread scratch stack and moved into exact-size nodes; short names never allocate.
#include "value/sexp_reader.hpp"

#include <array>
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "base/ascii.hpp"
#include "base/utf8.hpp"
#include "value/sexp_syntax.hpp"
#include "value/value_access.hpp"

namespace passepartout {

namespace {

using sexp::char_class;
using sexp::CharClass;
using sexp::NumberSyntax;

struct Frame {
  std::size_t items_base;   // index in Scratch::items of the list's first element
  std::size_t open_offset;  // byte offset of its '('
};

// A stack of Values that hands out NIL slots to be filled in place and lets
// a closing list take its elements by relocating their bytes (no per-element
// move or destructor), which std::vector cannot express.
class ValueStack {
 public:
  ValueStack() = default;
  ValueStack(const ValueStack&) = delete;
  ValueStack& operator=(const ValueStack&) = delete;
  ~ValueStack() {
    truncate(0);
    ::operator delete(static_cast<void*>(data_));
  }

  std::size_t size() const noexcept { return size_; }
  Value* data() noexcept { return data_; }

  // A new NIL on top.
  Value& push_nil() {
    if (size_ == capacity_) grow();
    auto* slot = new (data_ + size_) Value();
    ++size_;
    return *slot;
  }
  // Destroys the Values from index `size` up.
  void truncate(std::size_t size) noexcept {
    while (size_ > size) data_[--size_].~Value();
  }
  // Drops the Values from index `size` up without destroying them: their bytes
  // were relocated into a list that now owns them.
  void forget_relocated(std::size_t size) noexcept { size_ = size; }
  // Frees the storage when empty and unusually large.
  void trim() noexcept {
    constexpr std::size_t kKeptCapacity = std::size_t{64} * 1024;
    if (size_ == 0 && capacity_ > kKeptCapacity) {
      ::operator delete(static_cast<void*>(data_));
      data_ = nullptr;
      capacity_ = 0;
    }
  }

 private:
  void grow() {
    const std::size_t capacity = capacity_ == 0 ? 64 : capacity_ * 2;
    auto* data = static_cast<Value*>(::operator new(capacity * sizeof(Value)));
    if (size_ != 0) {
      std::memcpy(static_cast<void*>(data), static_cast<const void*>(data_), size_ * sizeof(Value));
    }
    ::operator delete(static_cast<void*>(data_));
    data_ = data;
    capacity_ = capacity;
  }

  Value* data_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

// Elements of the lists still open, innermost last. Per thread, reused across
// reads; each read leaves it as it found it.
struct Scratch {
  ValueStack items;
  std::vector<Frame> frames;
};

thread_local Scratch t_scratch;

// Restores the scratch stacks on every exit path (errors leave partial lists),
// and gives back memory after an unusually large read.
class ScratchGuard {
 public:
  explicit ScratchGuard(Scratch& scratch)
      : scratch_(scratch), items_base_(scratch.items.size()), frames_base_(scratch.frames.size()) {}
  ScratchGuard(const ScratchGuard&) = delete;
  ScratchGuard& operator=(const ScratchGuard&) = delete;
  ~ScratchGuard() {
    scratch_.items.truncate(items_base_);
    scratch_.frames.resize(frames_base_);
    scratch_.items.trim();
  }

 private:
  Scratch& scratch_;
  std::size_t items_base_;
  std::size_t frames_base_;
};

// For each byte that may continue a token on the fast path, its upper-case
// form; 0 for bytes that end it: whitespace, terminating macro characters,
// escapes, ':' and NUL (the slow path handles the last four).
constexpr std::array<char, 256> kPlainTokenUpper = [] {
  std::array<char, 256> upper{};
  for (std::size_t c = 1; c < 256; ++c) {
    const auto byte = static_cast<unsigned char>(c);
    const char ch = static_cast<char>(byte);
    if (sexp::kCharClasses[c] != CharClass::constituent || ch == ':') continue;
    upper[c] = (ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - ('a' - 'A')) : ch;
  }
  return upper;
}();

bool ends_token(char c) noexcept {
  const CharClass cls = char_class(c);
  return cls == CharClass::whitespace || cls == CharClass::terminating;
}

// A token for an error message: quoted, cut at a code-point boundary when long.
std::string describe(std::string_view token) {
  constexpr std::size_t kMaxShown = 40;
  std::string out = "'";
  if (token.size() <= kMaxShown) {
    out.append(token);
  } else {
    std::size_t cut = kMaxShown;
    while (cut > 0 && (static_cast<unsigned char>(token[cut]) & 0xC0) == 0x80) --cut;
    out.append(token.substr(0, cut));
    out.append("...");
  }
  out.push_back('\'');
  return out;
}

std::string byte_prefix(std::size_t offset) { return "byte " + std::to_string(offset) + ": "; }

// Parses [sign] digits [.] into `out`; false when it does not fit in 64 bits.
bool parse_int64(std::string_view token, std::int64_t& out) noexcept {
  std::size_t i = 0;
  bool negative = false;
  if (token[0] == '+' || token[0] == '-') {
    negative = token[0] == '-';
    i = 1;
  }
  const std::uint64_t limit = negative ? std::uint64_t{1} << 63 : (std::uint64_t{1} << 63) - 1;
  std::uint64_t magnitude = 0;
  for (; i < token.size() && sexp::is_digit(token[i]); ++i) {
    const auto digit = static_cast<std::uint64_t>(token[i] - '0');
    if (magnitude > (limit - digit) / 10) return false;
    magnitude = magnitude * 10 + digit;
  }
  out = negative ? static_cast<std::int64_t>(0 - magnitude) : static_cast<std::int64_t>(magnitude);
  return true;
}

// The first byte at or after `p` that is neither whitespace nor in a `;` comment.
const char* skip_blank(const char* p, const char* end) noexcept {
  while (p < end) {
    const char c = *p;
    if (char_class(c) == CharClass::whitespace) {
      ++p;
    } else if (c == ';') {
      const void* newline = std::memchr(p, '\n', static_cast<std::size_t>(end - p));
      p = newline != nullptr ? static_cast<const char*>(newline) + 1 : end;
    } else {
      break;
    }
  }
  return p;
}

class Reader {
 public:
  Reader(std::string_view text, Scratch& scratch, std::size_t max_depth) noexcept
      : text_(text), scratch_(scratch), max_depth_(max_depth) {}

  std::size_t pos() const noexcept { return pos_; }
  Error& error() noexcept { return error_; }

  // Moves pos() past whitespace and `;` comments.
  void skip_blank_at_pos() noexcept {
    const char* const begin = text_.data();
    pos_ = static_cast<std::size_t>(skip_blank(begin + pos_, begin + text_.size()) - begin);
  }

  // Reads one datum from pos(); on success `out` holds it and pos() is just past it.
  // The cursor lives in a local so it can stay in a register; strings and
  // short plain keywords, symbols and integers are read inline, everything
  // else through pos_ by read_atom.
  bool read_datum(Value& out) {
    ValueStack& items = scratch_.items;
    std::vector<Frame>& frames = scratch_.frames;
    const char* const begin = text_.data();
    const char* const end = begin + text_.size();
    const char* p = begin + pos_;
    std::size_t depth = 0;
    const auto offset = [begin](const char* at) { return static_cast<std::size_t>(at - begin); };
    for (;;) {
      p = skip_blank(p, end);
      if (p == end) {
        if (depth == 0) return fail(offset(p), "end of input, expected a datum");
        return fail(offset(p), "unterminated list (started at byte " + std::to_string(frames.back().open_offset) +
                                   "), expected ')'");
      }
      const char c = *p;
      if (c == '(') {
        if (depth >= max_depth_) {
          return fail(offset(p), "nesting deeper than " + std::to_string(max_depth_), ErrorCode::limit_exceeded);
        }
        frames.push_back(Frame{items.size(), offset(p)});
        ++depth;
        ++p;
        continue;
      }
      if (c == ')') {
        if (depth == 0) return fail(offset(p), "found ')' with no list open");
        const std::size_t base = frames.back().items_base;
        frames.pop_back();
        --depth;
        Value list;
        ValueAccess::init_list_relocated(list, items.data() + base, items.size() - base);
        items.forget_relocated(base);
        items.push_nil() = std::move(list);
        ++p;
      } else {
        Value& slot = items.push_nil();
        const char* next = nullptr;
        if (c == ':') {
          next = read_plain_keyword(p, end, slot);
        } else if (c == '"') {
          next = read_terminated_string(p, end, slot);
        } else if (sexp::is_digit(c) || c == '-' || c == '+') {
          next = read_plain_integer(p, end, slot);
        } else if (c != '#' && c != '.' && kPlainTokenUpper[static_cast<unsigned char>(c)] != 0) {
          // '#' starting a token is a dispatch macro (read_atom rejects it);
          // a leading '.' may make a number or a dot.
          next = read_plain_symbol(p, end, slot);
        }
        if (next == nullptr) {
          pos_ = offset(p);
          if (!read_atom(c, slot)) return false;
          next = begin + pos_;
        }
        p = next;
      }
      if (depth == 0) {
        pos_ = offset(p);
        out = std::move(items.data()[items.size() - 1]);
        items.truncate(items.size() - 1);
        return true;
      }
    }
  }

 private:
  bool fail(std::size_t offset, const std::string& what, ErrorCode code = ErrorCode::invalid_input) {
    error_ = Error{code, byte_prefix(offset) + what};
    return false;
  }

  bool fail_dispatch() {
    std::string found = "#";
    if (pos_ + 1 < text_.size()) {
      const char next = text_[pos_ + 1];
      const auto byte = static_cast<unsigned char>(next);
      if (byte > 0x20 && byte < 0x7F) found.push_back(next);
    }
    return fail(pos_, "found '" + found + "', but '#' reader macros are not supported");
  }

  // A string from the '"' at `open`: one pass finds the end and counts
  // escapes, a second copies straight into `out`. Returns the end of the
  // string, or nullptr when it is unterminated (read_string reports that).
  static const char* read_terminated_string(const char* open, const char* end, Value& out) {
    const char* p = open + 1;
    std::size_t escapes = 0;
    for (;;) {
      unsigned high = 0;  // not needed: the text was checked
      p += sexp::find_quote_or_backslash(p, static_cast<std::size_t>(end - p), high);
      if (p == end) return nullptr;
      if (*p == '"') break;
      if (end - p < 2) return nullptr;  // a backslash with nothing to escape
      ++escapes;
      p += 2;  // the backslash and the byte it escapes
    }
    const auto raw_size = static_cast<std::size_t>(p - open - 1);
    char* dst = ValueAccess::init_text(out, Kind::string, raw_size - escapes);
    const char* src = open + 1;
    if (escapes == 0) {
      if (raw_size != 0) std::memcpy(dst, src, raw_size);
    } else {
      while (src < p) {
        if (*src == '\\') ++src;
        *dst++ = *src++;
      }
    }
    return p + 1;
  }

  bool read_string(Value& out) {
    const char* const begin = text_.data();
    const char* const next = read_terminated_string(begin + pos_, begin + text_.size(), out);
    if (next == nullptr) {
      return fail(text_.size(), "unterminated string (started at byte " + std::to_string(pos_) + ")");
    }
    pos_ = static_cast<std::size_t>(next - begin);
    return true;
  }

  // Any datum but a list, from its first character `c` at pos(), into `out` (NIL).
  bool read_atom(char c, Value& out) {
    switch (c) {
      case '"':
        return read_string(out);
      case '#':
        return fail_dispatch();
      case '\'':
        return fail(pos_, "found a quote ('), but reader macros are not supported");
      case '`':
        return fail(pos_, "found a backquote (`), but reader macros are not supported");
      case ',':
        return fail(pos_, "found a comma (,), but reader macros are not supported");
      default:
        return read_token(out);
    }
  }

  // A keyword at `colon` made of plain characters (no escapes, no inner ':')
  // that fits inline: scanned, upper-cased and stored in one pass straight into
  // `out`. Returns the end of the token, or nullptr (leaving `out` NIL) for
  // any other keyword, which read_token handles.
  static const char* read_plain_keyword(const char* colon, const char* end, Value& out) noexcept {
    const char* const src = colon + 1;
    const auto available = static_cast<std::size_t>(end - src);
    char* const dst = ValueAccess::inline_bytes(out);
    // Almost every keyword of the protocol is upper-case letters, digits and
    // '-', at most 14 of them, followed by more input: checked and copied
    // eight bytes at a time.
    if (std::endian::native == std::endian::little && available >= 16) {
      std::uint64_t words[2];
      std::memcpy(words, src, sizeof words);
      // The length of the run of plain bytes; the second word is looked at
      // only when the first is all plain.
      const std::uint64_t odd_low = sexp::bytes_not_simple(words[0]);
      std::size_t n = static_cast<std::size_t>(std::countr_zero(odd_low)) / 8;
      if (odd_low == 0) n = 8 + static_cast<std::size_t>(std::countr_zero(sexp::bytes_not_simple(words[1]))) / 8;
      if (n != 0 && n <= Value::kInlineCapacity && ends_token(src[n])) {
        std::memcpy(dst, words, Value::kInlineCapacity);  // bytes past n are not part of the text
        ValueAccess::set_plain_keyword(out, n);
        return src + n;
      }
    }
    const std::size_t fits = available < Value::kInlineCapacity ? available : Value::kInlineCapacity;
    std::size_t n = 0;
    for (; n < fits; ++n) {
      const char upper = kPlainTokenUpper[static_cast<unsigned char>(src[n])];
      if (upper == 0) break;
      dst[n] = upper;
    }
    if (n == 0 || (src + n < end && !ends_token(src[n]))) {
      out = Value();
      return nullptr;
    }
    ValueAccess::set_inline_text(out, Kind::keyword, n);
    ValueAccess::mark_if_plain(out);
    return src + n;
  }

  // An integer of at most 18 digits with an optional sign (it cannot
  // overflow) at `p`. Returns the end of the token, or nullptr (leaving `out`
  // NIL) for any other token, which read_token handles.
  static const char* read_plain_integer(const char* p, const char* end, Value& out) noexcept {
    constexpr std::ptrdiff_t kSafeDigits = 18;
    const char* q = p;
    const bool negative = *q == '-';
    if (*q == '-' || *q == '+') ++q;
    const char* const digits = q;
    std::uint64_t magnitude = 0;
    while (q < end && sexp::is_digit(*q) && q - digits < kSafeDigits) {
      magnitude = magnitude * 10 + static_cast<std::uint64_t>(*q - '0');
      ++q;
    }
    if (q == digits || (q < end && !ends_token(*q))) return nullptr;
    const auto value = static_cast<std::int64_t>(magnitude);
    ValueAccess::init_integer(out, negative ? -value : value);
    return q;
  }

  // A symbol at `p` made of plain characters that fits inline, NIL or T, as
  // read_plain_keyword does for keywords. The caller excludes tokens that
  // may be numbers (a leading digit, sign or dot).
  static const char* read_plain_symbol(const char* p, const char* end, Value& out) noexcept {
    const auto available = static_cast<std::size_t>(end - p);
    const std::size_t fits = available < Value::kInlineCapacity ? available : Value::kInlineCapacity;
    char* const dst = ValueAccess::inline_bytes(out);
    std::size_t n = 0;
    for (; n < fits; ++n) {
      const char upper = kPlainTokenUpper[static_cast<unsigned char>(p[n])];
      if (upper == 0) break;
      dst[n] = upper;
    }
    if (n == 0 || (p + n < end && !ends_token(p[n]))) {
      out = Value();
      return nullptr;
    }
    if (n == 3 && dst[0] == 'N' && dst[1] == 'I' && dst[2] == 'L') {
      out = Value();
    } else if (n == 1 && dst[0] == 'T') {
      out = Value::t();
    } else {
      ValueAccess::set_inline_text(out, Kind::symbol, n);
    }
    return p + n;
  }

  // A token from pos(): a number, NIL, T, a keyword or a symbol.
  bool read_token(Value& out) {
    if (text_[pos_] == ':') {
      const char* const begin = text_.data();
      const char* const end = begin + text_.size();
      if (const char* next = read_plain_keyword(begin + pos_, end, out)) {
        pos_ = static_cast<std::size_t>(next - begin);
        return true;
      }
      return read_long_keyword(out);
    }
    return read_general_token(out);
  }

  // A keyword of plain characters too long to be inline; any other goes to
  // read_general_token.
  bool read_long_keyword(Value& out) {
    const char* const data = text_.data();
    const std::size_t size = text_.size();
    const std::size_t name_start = pos_ + 1;
    std::size_t end = name_start;
    while (end < size && kPlainTokenUpper[static_cast<unsigned char>(data[end])] != 0) ++end;
    if (end == name_start || (end < size && !ends_token(data[end]))) return read_general_token(out);
    char* dst = ValueAccess::init_text(out, Kind::keyword, end - name_start);
    for (std::size_t k = name_start; k < end; ++k) *dst++ = kPlainTokenUpper[static_cast<unsigned char>(data[k])];
    ValueAccess::mark_if_plain(out);
    pos_ = end;
    return true;
  }

  // Any token, escapes included.
  bool read_general_token(Value& out) {
    const std::size_t start = pos_;
    const std::size_t size = text_.size();
    std::size_t i = start;
    while (i < size && char_class(text_[i]) == CharClass::constituent) ++i;
    bool escaped = false;
    while (i < size) {
      const CharClass cls = char_class(text_[i]);
      if (cls == CharClass::constituent) {
        ++i;
      } else if (cls == CharClass::single_escape) {
        escaped = true;
        if (i + 1 >= size) return fail(i, "input ends after '\\', expected a character to escape");
        i += 2;
      } else if (cls == CharClass::multiple_escape) {
        escaped = true;
        const std::size_t bar = i;
        ++i;
        while (i < size && text_[i] != '|') i += text_[i] == '\\' ? 2U : 1U;
        if (i >= size) {
          return fail(size, "unterminated |...| (started at byte " + std::to_string(bar) + ")");
        }
        ++i;
      } else {
        break;
      }
    }
    pos_ = i;
    const std::string_view token = text_.substr(start, i - start);
    return escaped ? escaped_token(start, token, out) : plain_token(start, token, out);
  }

  bool fail_package_marker(std::size_t start, std::string_view token) {
    return fail(start, "found the symbol " + describe(token) +
                           " with a package marker, but package prefixes are not supported");
  }

  bool plain_token(std::size_t start, std::string_view token, Value& out) {
    const char first = token[0];
    if (first == ':') {
      const std::string_view name = token.substr(1);
      if (name.empty()) return fail(start, "found ':' alone, expected a keyword name after it");
      char* dst = ValueAccess::init_text(out, Kind::keyword, name.size());
      for (const char c : name) {
        if (c == ':') return fail_package_marker(start, token);
        *dst++ = ascii_upper(c);
      }
      ValueAccess::mark_if_plain(out);
      return true;
    }
    if (sexp::is_digit(first) || first == '+' || first == '-' || first == '.') {
      switch (sexp::classify_number(token)) {
        case NumberSyntax::integer:
          return read_integer(start, token, out);
        case NumberSyntax::ratio:
          return read_ratio(start, token, out);
        case NumberSyntax::floating:
          return read_float(start, token, out);
        case NumberSyntax::none:
          break;
      }
      if (token.find_first_not_of('.') == std::string_view::npos) {
        if (token.size() == 1) {
          return fail(start, "found a dotted pair, but only proper lists are supported");
        }
        return fail(start, "found the token " + describe(token) + ", but a token of only dots is not allowed");
      }
    }
    if (token.size() == 3 && equals_ignore_case(token, "NIL")) {
      out = Value();
      return true;
    }
    if (token.size() == 1 && (first == 'T' || first == 't')) {
      out = Value::t();
      return true;
    }
    char* dst = ValueAccess::init_text(out, Kind::symbol, token.size());
    for (const char c : token) {
      if (c == ':') return fail_package_marker(start, token);
      *dst++ = ascii_upper(c);
    }
    return true;
  }

  // Decodes a token with escapes: `|...|` and `\x` keep characters verbatim
  // (keywords are upper-cased regardless). Counts when `dst` is null.
  static std::size_t decode_escaped(std::string_view name, bool keyword, char* dst, bool* package_marker) noexcept {
    std::size_t n = 0;
    bool in_bars = false;
    for (std::size_t k = 0; k < name.size();) {
      char c = name[k];
      bool verbatim = in_bars;
      if (c == '|') {
        in_bars = !in_bars;
        ++k;
        continue;
      }
      if (c == '\\') {
        c = name[k + 1];  // read_token guarantees an escaped character follows
        k += 2;
        verbatim = true;
      } else {
        ++k;
      }
      if (!verbatim && c == ':') *package_marker = true;
      if (dst != nullptr) dst[n] = keyword || !verbatim ? ascii_upper(c) : c;
      ++n;
    }
    return n;
  }

  bool escaped_token(std::size_t start, std::string_view token, Value& out) {
    const bool keyword = token[0] == ':';
    const std::string_view name = keyword ? token.substr(1) : token;
    bool package_marker = false;
    const std::size_t length = decode_escaped(name, keyword, nullptr, &package_marker);
    if (package_marker) return fail_package_marker(start, token);
    decode_escaped(name, keyword, ValueAccess::init_text(out, keyword ? Kind::keyword : Kind::symbol, length),
                   &package_marker);
    ValueAccess::mark_if_plain(out);
    return true;
  }

  bool read_integer(std::size_t start, std::string_view token, Value& out) {
    std::int64_t value = 0;
    if (!parse_int64(token, value)) {
      return fail(start, "found the integer " + describe(token) + ", which does not fit in 64 bits");
    }
    out = Value::integer(value);
    return true;
  }

  bool read_ratio(std::size_t start, std::string_view token, Value& out) {
    const std::size_t slash = token.find('/');
    std::int64_t numerator = 0;
    std::int64_t denominator = 0;
    if (!parse_int64(token.substr(0, slash), numerator) || !parse_int64(token.substr(slash + 1), denominator)) {
      return fail(start, "found the ratio " + describe(token) + ", whose parts do not fit in 64 bits");
    }
    if (denominator == 0) return fail(start, "found the ratio " + describe(token) + ", which divides by zero");
    if (numerator % denominator == 0) {
      out = Value::integer(numerator / denominator);
    } else {
      out = Value::real(static_cast<double>(numerator) / static_cast<double>(denominator));
    }
    return true;
  }

  // Lisp float syntax to what std::from_chars reads: no leading '+', and
  // every exponent marker becomes 'e'.
  bool read_float(std::size_t start, std::string_view token, Value& out) {
    char small[64];
    std::string large;
    char* buffer = small;
    if (token.size() > sizeof small) {
      large.resize(token.size());
      buffer = large.data();
    }
    std::size_t n = 0;
    for (std::size_t k = token[0] == '+' ? 1 : 0; k < token.size(); ++k) {
      const char c = token[k];
      buffer[n++] = sexp::is_exponent_marker(c) ? 'e' : c;
    }
    double value = 0.0;
    const auto [end, ec] = std::from_chars(buffer, buffer + n, value);
    if (ec == std::errc::result_out_of_range) {
      return fail(start, "found the float " + describe(token) + ", which is out of the double range");
    }
    if (ec != std::errc() || end != buffer + n) {
      return fail(start, "found " + describe(token) + ", which is not a valid float");
    }
    out = Value::real(value);
    return true;
  }

  std::string_view text_;
  Scratch& scratch_;
  std::size_t max_depth_;
  std::size_t pos_ = 0;
  Error error_;
};

Result<Value> read(std::string_view text, std::size_t* consumed, bool whole_input, const ReaderLimits& limits,
                   Utf8 utf8) {
  if (text.size() > limits.max_bytes) {
    return fail(ErrorCode::limit_exceeded, "byte 0: input is " + std::to_string(text.size()) + " bytes, the limit is " +
                                               std::to_string(limits.max_bytes));
  }
  if (const auto bad = utf8 == Utf8::checked ? std::nullopt : find_invalid_utf8(text)) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    const auto byte = static_cast<unsigned char>(text[*bad]);
    return fail(ErrorCode::invalid_input,
                byte_prefix(*bad) + "invalid UTF-8 sequence starting with 0x" + kHex[byte >> 4] + kHex[byte & 0xF]);
  }
  Scratch& scratch = t_scratch;
  const ScratchGuard guard(scratch);
  Reader reader(text, scratch, limits.max_depth);
  Value value;
  if (!reader.read_datum(value)) return Unexpected<Error>(std::move(reader.error()));
  if (consumed != nullptr) *consumed = reader.pos();
  if (whole_input) {
    reader.skip_blank_at_pos();
    if (reader.pos() != text.size()) {
      return fail(ErrorCode::invalid_input, byte_prefix(reader.pos()) + "unexpected text after the datum");
    }
  }
  return value;
}

}  // namespace

Result<Value> read_sexp(std::string_view text, const ReaderLimits& limits) {
  return read(text, nullptr, true, limits, Utf8::unchecked);
}

Result<Value> read_sexp_prefix(std::string_view text, std::size_t* consumed, const ReaderLimits& limits, Utf8 utf8) {
  return read(text, consumed, false, limits, utf8);
}

}  // namespace passepartout
