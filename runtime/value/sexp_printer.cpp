// print_sexp: writes straight into the caller's string; lists by bounded
// recursion, short keywords a word at a time, floats through std::to_chars.
#include "value/sexp_printer.hpp"

#include <algorithm>
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
  // Starts with the room the string already has (a reused buffer has what
  // its last message needed), at least 512 bytes and at most 4 KiB (the room
  // is zero-filled).
  explicit Writer(std::string& out) : out_(out), start_(out.size()) {
    const std::size_t spare = std::min<std::size_t>(out.capacity() - start_, 4096);
    grow(spare > 512 ? spare - 256 : 256);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer() { out_.resize(static_cast<std::size_t>(cursor_ - out_.data())); }

  // Room for `n` more bytes at the returned cursor; advance() past what was written.
  char* reserve(std::size_t n) {
    if (static_cast<std::size_t>(end_ - cursor_) < n) grow(n);
    return cursor_;
  }
  void advance(char* cursor) noexcept { cursor_ = cursor; }
  void put(char c) {
    *reserve(1) = c;
    ++cursor_;
  }
  void append(std::string_view bytes) {
    char* p = reserve(bytes.size());
    std::memcpy(p, bytes.data(), bytes.size());
    advance(p + bytes.size());
  }
  // Where the next byte goes, as an offset that survives growth; rewind() returns there.
  std::size_t offset() const noexcept { return static_cast<std::size_t>(cursor_ - out_.data()); }
  void rewind(std::size_t offset) noexcept { cursor_ = out_.data() + offset; }

  // Whether all that was written is ASCII: every writer of text that may not
  // be notes its bytes (OR-ed into words) here.
  void note(std::uint64_t bytes) noexcept { high_ |= bytes; }
  bool ascii() const noexcept { return (high_ & sexp::kHighBits) == 0; }

 private:
  [[gnu::noinline]] void grow(std::size_t n) {
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
  std::uint64_t high_ = 0;
};

bool reads_as_something_else(std::string_view name) noexcept {
  if (sexp::classify_number(name) != sexp::NumberSyntax::none) return true;
  return name == "NIL" || name == "T";
}

// A keyword or symbol name, bare when that reads back identically, else in bars.
// Out of line: put_keyword's fast path covers almost every keyword.
[[gnu::noinline]] void put_name(Writer& writer, std::string_view name, Kind kind) {
  char* const start = writer.reserve(2 * name.size() + 3);
  char* p = start;
  if (kind == Kind::keyword) *p++ = ':';
  const std::size_t size = name.size();
  unsigned needs_bars = size == 0 || name[0] == '#' ? 1U : 0U;
  unsigned bytes = 0;
  for (std::size_t i = 0; i < size; ++i) {
    const char c = name[i];
    needs_bars |= kNeedsBars[static_cast<unsigned char>(c)];
    bytes |= static_cast<unsigned char>(c);
    p[i] = c;
  }
  writer.note(bytes);
  if (needs_bars == 0 && name[0] == '.' && name.find_first_not_of('.') == std::string_view::npos) needs_bars = 1;
  if (needs_bars == 0 && (kind == Kind::keyword || !reads_as_something_else(name))) {
    writer.advance(p + size);
    return;
  }
  p = start;
  if (kind == Kind::keyword) *p++ = ':';
  *p++ = '|';
  for (const char c : name) {
    if (c == '|' || c == '\\') *p++ = '\\';
    *p++ = c;
  }
  *p++ = '|';
  writer.advance(p);
}

bool word_needs_escape(std::uint64_t word) noexcept {
  return sexp::word_has_byte(word, '"') || sexp::word_has_byte(word, '\\');
}

// A string in double quotes; only `"` and `\` are escaped.
void put_string(Writer& writer, std::string_view text) {
  const std::size_t size = text.size();
  unsigned high = 0;
  if (sexp::find_quote_or_backslash(text.data(), size, high) == size) {
    writer.note(high);
    char* p = writer.reserve(size + 2);
    *p++ = '"';
    if (size != 0) std::memcpy(p, text.data(), size);
    p += size;
    *p++ = '"';
    writer.advance(p);
    return;
  }
  char* p = writer.reserve(2 * size + 2);
  *p++ = '"';
  unsigned all = 0;
  for (const char c : text) {
    if (c == '"' || c == '\\') *p++ = '\\';
    *p++ = c;
    all |= static_cast<unsigned char>(c);
  }
  *p++ = '"';
  writer.advance(p);
  writer.note(all);
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
    std::memcpy(p, "NIL", 3);  // NOLINT(bugprone-not-null-terminated-result): a buffer of bytes, not a C string
    writer.advance(p + 3);
    return;
  }
  const bool single =
      std::fabs(value) <= static_cast<double>(FLT_MAX) && static_cast<double>(static_cast<float>(value)) == value;
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
constexpr std::uint64_t first_bytes(std::size_t n) noexcept { return sexp::kHighBits & sexp::first_bytes_mask(n); }

// Inline text (at most Value::kInlineCapacity bytes, stored in bytes 2..15 of
// its Value) as two words, bytes past its end zero; both loads stay inside
// the Value.
struct InlineWords {
  std::uint64_t low;   // bytes 0..7
  std::uint64_t high;  // bytes 8..13
};

InlineWords load_inline(std::string_view text) noexcept {
  InlineWords words;
  std::memcpy(&words.low, text.data(), sizeof words.low);
  std::memcpy(&words.high, text.data() + 6, sizeof words.high);
  words.high >>= 16;
  words.low &= sexp::first_bytes_mask(text.size());
  words.high &= text.size() > 8 ? sexp::first_bytes_mask(text.size() - 8) : 0;
  return words;
}

// `open`, then the `size` bytes of `words` (copied as two whole words).
void put_inline(Writer& writer, char open, const InlineWords& words, std::size_t size) {
  char* p = writer.reserve(1 + 2 * sizeof(std::uint64_t));
  *p = open;
  std::memcpy(p + 1, &words.low, sizeof words.low);
  std::memcpy(p + 9, &words.high, sizeof words.high);
  writer.advance(p + 1 + size);
}

bool fits_inline(std::size_t size) noexcept {
  return std::endian::native == std::endian::little && size <= Value::kInlineCapacity;
}

// A keyword. Inline names of upper-case letters, digits and '-' (almost every
// keyword of the protocol) are checked and copied eight bytes at a time.
[[gnu::always_inline]] inline void put_keyword(Writer& writer, const Value& value) {
  const std::string_view name = ValueAccess::text_of(value);
  const std::size_t size = name.size();
  if (ValueAccess::is_plain_keyword(value)) {  // known plain: the reader, Key and keyword() saw to that
    put_inline(writer, ':', load_inline(name), size);
    return;
  }
  if (size == 0 || !fits_inline(size)) {
    put_name(writer, name, Kind::keyword);
    return;
  }
  const InlineWords words = load_inline(name);
  const std::uint64_t bad = (sexp::bytes_not_simple(words.low) & first_bytes(size)) |
                            (size > 8 ? sexp::bytes_not_simple(words.high) & first_bytes(size - 8) : 0);
  if (bad != 0) {
    put_name(writer, name, Kind::keyword);
    return;
  }
  put_inline(writer, ':', words, size);
}

// A string; inline ones (most strings of the protocol) eight bytes at a time.
void put_any_string(Writer& writer, const Value& value) {
  const std::string_view text = ValueAccess::text_of(value);
  if (!fits_inline(text.size())) {
    put_string(writer, text);
    return;
  }
  const InlineWords words = load_inline(text);
  if (word_needs_escape(words.low) || word_needs_escape(words.high)) {
    put_string(writer, text);
    return;
  }
  writer.note(words.low | words.high);
  put_inline(writer, '"', words, text.size());
  writer.put('"');
}

void put_atom(Writer& writer, const Value& value) {
  switch (value.kind()) {
    case Kind::nil:
      writer.append("NIL");
      return;
    case Kind::t:
      writer.put('T');
      return;
    case Kind::integer:
      put_integer(writer, value.as_integer());
      return;
    case Kind::real:
      put_float(writer, value.as_float());
      return;
    case Kind::string:
      put_any_string(writer, value);
      return;
    case Kind::keyword:
    case Kind::symbol:
      put_name(writer, ValueAccess::text_of(value), value.kind());
      return;
    case Kind::list:
      return;  // print_sexp opens lists itself
  }
}

// With a key filter, a property list (even length, a keyword at every even
// position) loses the pairs whose key the filter selects; one left empty prints
// as NIL. Whether a list is a property list is only asked when a selected key
// turns up, which on the wire is almost never.
bool is_property_list(std::span<const Value> items) noexcept {
  if (items.size() % 2 != 0) return false;
  for (std::size_t i = 0; i < items.size(); i += 2) {
    if (!items[i].is_keyword()) return false;
  }
  return true;
}

enum class Plist : std::uint8_t { unknown, yes, no };

}  // namespace

KeyFilter::KeyFilter(std::span<const std::string_view> names) noexcept : names_(names) {
  for (const std::string_view name : names) {
    marks_ |= detail::keyword_mark(name);
    if (name.size() < 64) {
      sizes_ |= std::uint64_t{1} << name.size();
    } else {
      has_long_ = true;
    }
    if (fits_inline(name.size()) && short_count_ < kMaxShort) {
      char bytes[16] = {};  // as load_inline() reads a name inside a Value
      std::memcpy(bytes, name.data(), name.size());
      Short& entry = short_[short_count_++];
      entry.size = name.size();
      std::memcpy(&entry.low, bytes, sizeof entry.low);
      std::memcpy(&entry.high, bytes + 8, sizeof entry.high);
    } else {
      all_short_ = false;
    }
  }
}

struct KeyFilterProbe {
  [[gnu::always_inline]] static bool contains(const KeyFilter& filter, const Value& key) noexcept {
    if (!key.is_keyword()) return false;
    const std::string_view name = ValueAccess::text_of(key);
    if (name.size() < 64 ? ((filter.sizes_ >> name.size()) & 1U) == 0 : !filter.has_long_) return false;
    if (fits_inline(name.size())) {
      const InlineWords words = load_inline(name);
      for (std::size_t i = 0; i < filter.short_count_; ++i) {
        const KeyFilter::Short& entry = filter.short_[i];
        if (entry.size == name.size() && entry.low == words.low && entry.high == words.high) return true;
      }
      if (filter.all_short_) return false;
    }
    return std::find(filter.names_.begin(), filter.names_.end(), name) != filter.names_.end();
  }
};

bool KeyFilter::contains(const Value& key) const noexcept { return KeyFilterProbe::contains(*this, key); }

namespace {

// True when items[i] is a key to leave out, with its value, of `items`.
[[gnu::always_inline]] inline bool drops_pair(const KeyFilter& drop, std::span<const Value> items, std::size_t i,
                                              Plist& plist) noexcept {
  if (i % 2 != 0 || !KeyFilterProbe::contains(drop, items[i])) return false;
  if (plist == Plist::unknown) plist = is_property_list(items) ? Plist::yes : Plist::no;
  return plist == Plist::yes;
}

// Ends a list opened at `open`: ')' after its items, or NIL in place of a
// list whose every pair was left out.
void close_list(Writer& writer, std::size_t open, bool any) {
  if (any) {
    writer.put(')');
    return;
  }
  writer.rewind(open);
  writer.append("NIL");
}

// The lists being printed, innermost last; the first levels live on the
// call stack, deeper ones on the heap.
class FrameStack {
 public:
  struct Frame {
    const Value* begin;
    const Value* next;
    const Value* end;
    std::size_t open;  // offset of the list's '('
    bool any;          // an item has been printed
    Plist plist;
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
void put_deep_list(Writer& writer, const Value& list, const KeyFilter& drop) {
  FrameStack stack;
  const auto open = [&](const Value& inner) {
    const std::span<const Value> items = ValueAccess::items_of(inner);
    stack.push({items.data(), items.data(), items.data() + items.size(), writer.offset(), false, Plist::unknown});
    writer.put('(');
  };
  open(list);
  while (!stack.empty()) {
    FrameStack::Frame& frame = stack.top();
    if (frame.next == frame.end) {
      close_list(writer, frame.open, frame.any);
      stack.pop();
      continue;
    }
    const std::span<const Value> items(frame.begin, frame.end);
    const auto index = static_cast<std::size_t>(frame.next - frame.begin);
    if (!drop.empty() && drops_pair(drop, items, index, frame.plist)) {
      frame.next += 2;  // a property list: the value is there
      continue;
    }
    if (frame.any) writer.put(' ');
    frame.any = true;
    const Value& item = *frame.next++;
    if (item.is_list()) {
      open(item);  // `frame` may dangle from here on
    } else {
      put_atom(writer, item);
    }
  }
}

// A list by recursion, the fast way for the shallow lists of the protocol;
// past kMaxRecursion levels the rest goes to put_deep_list.
constexpr int kMaxRecursion = 48;

template <bool kFiltered>
void put_list(Writer& writer, const Value& list, int depth, const KeyFilter& drop) {
  if (depth >= kMaxRecursion) {
    put_deep_list(writer, list, drop);
    return;
  }
  const detail::ListNode& node = ValueAccess::list_node(list);
  if (node.preprinted()) [[unlikely]] {
    const detail::PrintedForm* form = node.printed_form();
    if (!kFiltered || (form->keyword_marks & drop.marks()) == 0) {
      writer.append(std::string_view(form->text, form->size));
      if (!form->ascii) writer.note(sexp::kHighBits);
      return;
    }
  }
  const std::span<const Value> items = ValueAccess::items_of(list);
  [[maybe_unused]] const std::size_t open = writer.offset();
  [[maybe_unused]] Plist plist = Plist::unknown;
  [[maybe_unused]] bool any = false;
  writer.put('(');
  for (std::size_t i = 0; i < items.size(); ++i) {
    if constexpr (kFiltered) {
      if (drops_pair(drop, items, i, plist)) {
        ++i;  // and its value
        continue;
      }
      if (any) writer.put(' ');
      any = true;
    } else {
      if (i != 0) writer.put(' ');
    }
    const Value& item = items[i];
    switch (item.kind()) {
      case Kind::keyword:
        put_keyword(writer, item);
        break;
      case Kind::list:
        put_list<kFiltered>(writer, item, depth + 1, drop);
        break;
      default:
        put_atom(writer, item);
        break;
    }
  }
  if constexpr (kFiltered) {
    close_list(writer, open, any);
  } else {
    writer.put(')');
  }
}

}  // namespace

void print_sexp(const Value& value, std::string& out) { static_cast<void>(print_sexp_ascii(value, out, KeyFilter())); }

void print_sexp(const Value& value, std::string& out, std::span<const std::string_view> drop) {
  static_cast<void>(print_sexp_ascii(value, out, drop));
}

bool print_sexp_ascii(const Value& value, std::string& out, std::span<const std::string_view> drop) {
  return print_sexp_ascii(value, out, drop.empty() ? KeyFilter() : KeyFilter(drop));
}

bool print_sexp_ascii(const Value& value, std::string& out, const KeyFilter& drop) {
  Writer writer(out);
  if (!value.is_list()) {
    put_atom(writer, value);
  } else if (drop.empty()) {
    put_list<false>(writer, value, 0, drop);
  } else {
    put_list<true>(writer, value, 0, drop);
  }
  return writer.ascii();
}

Value preprint(const Value& value) {
  if (!value.is_list()) return value;
  std::string text;
  print_sexp(value, text);
  std::uint64_t marks = 0;
  std::vector<const Value*> pending{&value};  // a stack: no depth exhausts the call stack
  while (!pending.empty()) {
    const Value* list = pending.back();
    pending.pop_back();
    for (const Value& item : ValueAccess::items_of(*list)) {
      if (item.is_keyword()) marks |= detail::keyword_mark(ValueAccess::text_of(item));
      if (item.is_list()) pending.push_back(&item);
    }
  }
  return ValueAccess::preprinted_list(value, text, marks);
}

Value preprinted_copy(const Value& preprinted) {
  if (!preprinted.is_list() || !ValueAccess::list_node(preprinted).preprinted()) return preprinted;
  const detail::PrintedForm& form = *ValueAccess::list_node(preprinted).printed_form();
  return ValueAccess::preprinted_list(preprinted, std::string_view(form.text, form.size), form.keyword_marks);
}

std::string to_sexp(const Value& value) {
  std::string out;
  print_sexp(value, out);
  return out;
}

}  // namespace passepartout
