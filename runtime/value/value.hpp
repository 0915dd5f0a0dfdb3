// Value: the immutable, reference-counted tree everything in Passepartout flows as
// (signals, actions, rejections, wire messages): the property lists of the Lisp system.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace passepartout {

// The kinds of value. `t` is Lisp's T, the true value; `real` a double.
enum class Kind : std::uint8_t { nil, t, integer, real, string, keyword, symbol, list };

const char* to_string(Kind kind) noexcept;

namespace detail {
struct TextNode;
struct ListNode;
struct PrintedForm;
}  // namespace detail

// A property-list key fixed at compile time, written "PAYLOAD"_key (using
// namespace passepartout::key_literals). Looking one up does no work on the
// name: a key of up to 14 bytes is matched as the keyword stands inside a
// Value (kind, length and upper-case text in its two words), two masked word
// compares per candidate. The runtime's own lookups on every signal use it;
// a name that arrives at run time goes through the string_view overloads.
namespace detail {
// Whether `c` may appear in a keyword's name that prints bare without a
// check (Value::kPlainName): 'A'-'Z', '0'-'9' and '-', nearly every name of
// the protocol.
constexpr bool is_plain_name_byte(char c) noexcept {
  return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}
}  // namespace detail

class Key {
 public:
  consteval Key(const char* name, std::size_t size) : name_(name), size_(size) {
    if (size_ != 0 && name_[0] == ':') {
      ++name_;
      --size_;
    }
    if (std::endian::native != std::endian::little || size_ > 14) return;  // Value::kInlineCapacity
    bool plain = size_ != 0;
    for (std::size_t i = 0; i < size_; ++i) {
      const char c = name_[i];
      plain = plain && detail::is_plain_name_byte(c >= 'a' && c <= 'z' ? static_cast<char>(c - ('a' - 'A')) : c);
    }
    const std::size_t used = size_ + 2;  // the bytes that must match: kind, length, text
    for (std::size_t i = 0; i < used; ++i) {
      unsigned char byte = i == 0   ? static_cast<unsigned char>(Kind::keyword)
                           : i == 1 ? static_cast<unsigned char>(size_)
                                    : static_cast<unsigned char>(name_[i - 2]);
      if (i >= 2 && byte >= 'a' && byte <= 'z') byte = static_cast<unsigned char>(byte - ('a' - 'A'));
      word_[i / 8] |= std::uint64_t{byte} << (8 * (i % 8));
      // The length byte's hint bit (see Value) is not compared.
      mask_[i / 8] |= std::uint64_t{i == 1 ? 0xFFU & ~kPlainNameBit : 0xFFU} << (8 * (i % 8));
    }
    inline_ = true;
    plain_ = plain;
  }

  // Set in the length byte of an inline keyword whose name is only 'A'-'Z',
  // '0'-'9' and '-' (see Value): one constant for Key and Value.
  static constexpr unsigned kPlainNameBit = 0x40;

  // The name, without a leading ':'.
  constexpr std::string_view name() const noexcept { return {name_, size_}; }

 private:
  friend class Value;
  const char* name_;
  std::size_t size_;
  std::uint64_t word_[2] = {};
  std::uint64_t mask_[2] = {};
  bool inline_ = false;
  bool plain_ = false;  // inline, and only 'A'-'Z', '0'-'9' and '-' (Value::kPlainName)
};

namespace key_literals {
consteval Key operator""_key(const char* name, std::size_t size) { return Key(name, size); }
}  // namespace key_literals

// A Lisp datum: NIL, T, integer, float, string, keyword, symbol or list.
//
// Immutable and cheap to share: copying a Value copies 16 bytes and, for long
// text and lists, bumps an atomic reference count; the tree itself is never
// deep-copied. Text of up to 14 bytes is stored inline (no allocation), which
// covers almost every keyword of the protocol.
//
// Keywords are case-insensitive, as the Lisp reader made them: their names are
// stored upper-cased (ASCII) and print as `:NAME`. Symbols keep their name as
// given (the reader upper-cases unescaped symbols, as Lisp does). The empty
// list is NIL. Strings hold valid UTF-8; constructors that take unchecked text
// say so.
//
// Thread safety: a Value may be read and copied from any number of threads.
class Value {
 public:
  static constexpr std::size_t kInlineCapacity = 14;

  constexpr Value() noexcept : kind_(Kind::nil), small_len_(0), small_{}, u_{} {}  // NIL
  Value(const Value& other) noexcept { copy_from(other); }
  Value(Value&& other) noexcept { steal_from(other); }
  Value& operator=(const Value& other) noexcept {
    if (this != &other) {
      release();
      copy_from(other);
    }
    return *this;
  }
  Value& operator=(Value&& other) noexcept {
    if (this != &other) {
      release();
      steal_from(other);
    }
    return *this;
  }
  ~Value() { release(); }

  // --- construction -------------------------------------------------------
  static Value nil() noexcept { return Value(); }
  static Value t() noexcept {
    Value v;
    v.kind_ = Kind::t;
    return v;
  }
  static Value boolean(bool b) noexcept { return b ? t() : nil(); }
  static Value integer(std::int64_t i) noexcept;
  static Value real(double d) noexcept;
  // `text` must be valid UTF-8 (callers holding untrusted bytes validate first;
  // see utf8.hpp). Asserted in debug builds.
  static Value string(std::string_view text);
  // The leading ':' is optional; ASCII letters are upper-cased.
  static Value keyword(std::string_view name);
  static Value symbol(std::string_view name);
  // An empty span gives NIL.
  static Value list(std::span<const Value> items);
  static Value list(std::initializer_list<Value> items) {
    return list(std::span<const Value>(items.begin(), items.size()));
  }
  // A property list from (keyword-name, value) pairs, in order.
  static Value plist(std::initializer_list<std::pair<std::string_view, Value>> entries);

  // --- inspection ---------------------------------------------------------
  Kind kind() const noexcept { return kind_; }
  bool is_nil() const noexcept { return kind_ == Kind::nil; }
  bool is_true() const noexcept { return kind_ == Kind::t; }
  bool is_integer() const noexcept { return kind_ == Kind::integer; }
  bool is_float() const noexcept { return kind_ == Kind::real; }
  bool is_string() const noexcept { return kind_ == Kind::string; }
  bool is_keyword() const noexcept { return kind_ == Kind::keyword; }
  bool is_symbol() const noexcept { return kind_ == Kind::symbol; }
  bool is_list() const noexcept { return kind_ == Kind::list; }
  // NIL or a list: something a Lisp peer would call a list.
  bool is_sequence() const noexcept { return kind_ == Kind::nil || kind_ == Kind::list; }
  // Lisp truthiness: everything but NIL.
  explicit operator bool() const noexcept { return kind_ != Kind::nil; }

  // Integer value; 0 for anything else.
  std::int64_t as_integer() const noexcept { return kind_ == Kind::integer ? u_.integer : 0; }
  // Float value (integers convert); 0.0 for anything else.
  double as_float() const noexcept;
  // Text of a string, or the name of a keyword (upper-case, without ':') or a
  // symbol; empty for other kinds. Valid while this Value (or a copy) lives.
  std::string_view text() const noexcept;
  // True for a keyword whose name equals `name` ignoring ASCII case (a leading ':' in `name` is ignored).
  bool is_keyword(std::string_view name) const noexcept;

  // List elements; empty for NIL and non-lists. Valid while this Value lives.
  std::span<const Value> items() const noexcept;
  std::size_t size() const noexcept { return items().size(); }

  // --- property lists -----------------------------------------------------
  // The value after the first keyword key equal to `key` (ASCII case-insensitive,
  // leading ':' optional), scanning keys at even positions; nullptr when absent
  // or when this is not a list. The pointer is valid while this Value lives.
  const Value* get(std::string_view key) const noexcept;
  // get(key) or NIL.
  const Value& at(std::string_view key) const noexcept;
  // get(k1) then get(k2) ... on each nested plist; NIL when any step is missing.
  const Value& path(std::initializer_list<std::string_view> keys) const noexcept;
  // The same for keys fixed at compile time ("PAYLOAD"_key); inline, so
  // that each lookup compares the list's keys with the key's words as
  // constants.
  static Value keyword(const Key& name);
  bool is_keyword(const Key& name) const noexcept;
  const Value* get(const Key& key) const noexcept;
  const Value& at(const Key& key) const noexcept;
  // path("PAYLOAD"_key, "TEXT"_key): one lookup after another, unrolled.
  template <class... Keys>
  const Value& path(const Key& first, const Keys&... rest) const noexcept;
  // A copy of this plist with `key` set to `value` (replaced in place when
  // present, appended otherwise). Shares the untouched elements.
  Value with(std::string_view key, Value value) const&;
  // The same, reusing this list when nothing else holds it and `key` is
  // already there: `v = std::move(v).with(k, x)` then changes one element
  // instead of copying the list.
  Value with(std::string_view key, Value value) &&;
  Value with(const Key& key, Value value) const&;
  Value with(const Key& key, Value value) &&;
  // A copy of this plist without `key` (every occurrence).
  Value without(std::string_view key) const;

  // Structural equality: same kinds and contents; floats compare by value.
  friend bool operator==(const Value& a, const Value& b) noexcept;

  // Number of live references to the shared node (0 for inline values); for tests.
  std::uint32_t use_count_for_test() const noexcept;

 private:
  static constexpr std::uint8_t kHeapText = 0xFF;
  // Inline text's length byte: the length in its low bits and, for a
  // keyword, a hint that its name is only 'A'-'Z', '0'-'9' and '-' (as
  // nearly every keyword of the protocol: the printer writes it without
  // looking at it). Set by the reader and the constructors that see the
  // name anyway; a keyword without it is the same keyword (nothing compares
  // it), only printed after a check.
  static constexpr std::uint8_t kPlainName = Key::kPlainNameBit;
  static constexpr std::uint8_t kInlineLength = 0x3F;

  void clear_bytes() noexcept { std::memset(static_cast<void*>(this), 0, sizeof(Value)); }
  // small_len_ is kHeapText only for text on the heap (it is 0 for every
  // non-text kind), so the kind need not be checked for text.
  bool has_node() const noexcept { return kind_ == Kind::list || small_len_ == kHeapText; }
  bool is_text_kind() const noexcept {
    return kind_ == Kind::string || kind_ == Kind::keyword || kind_ == Kind::symbol;
  }
  // Copies and releases test for a shared node inline: most Values (NIL,
  // numbers, short names) have none, and the reader creates and drops many.
  void copy_from(const Value& other) noexcept {
    std::memcpy(static_cast<void*>(this), &other, sizeof(Value));
    if (has_node()) retain_node();
  }
  void steal_from(Value& other) noexcept {
    std::memcpy(static_cast<void*>(this), &other, sizeof(Value));
    other.clear_bytes();
  }
  void release() noexcept {
    if (has_node()) release_node();
  }
  void retain_node() const noexcept;
  void release_node() noexcept;
  // True when this is the keyword whose inline words (kind, length, text) are
  // `word` where `mask` is set. The first word (kind, length, six bytes of
  // text) rejects almost every other key, so the second is read only when it
  // matched; the bytes after a keyword's text need not be zero.
  bool matches_inline_key(const std::uint64_t (&word)[2], const std::uint64_t (&mask)[2]) const noexcept {
    std::uint64_t low;
    std::memcpy(&low, static_cast<const void*>(this), sizeof low);
    if ((low & mask[0]) != word[0]) return false;
    std::uint64_t high;
    std::memcpy(&high, reinterpret_cast<const unsigned char*>(this) + sizeof low, sizeof high);
    return (high & mask[1]) == word[1];
  }
  static Value make_text(Kind kind, std::string_view text);
  // keyword(Key) for a name too long to store inline.
  static Value long_keyword(const Key& name);
  // with() once the key's position is known: `found` is its index among
  // the items, or items().size() when it is absent.
  template <class Name>
  Value with_in_place(Name name, std::size_t found, Value value) &&;
  template <class Name>
  Value with_copy(Name name, std::size_t found, Value value) const&;
  Value with_found(const Key& key, std::size_t found, Value value) &&;
  Value with_found(const Key& key, std::size_t found, Value value) const&;
  // The index of `key` among the items at even positions, or items().size().
  std::size_t key_index(const Key& key) const noexcept;

  friend struct ValueAccess;

  // Layout: byte 0 kind, byte 1 inline text length (with kPlainName) or
  // kHeapText, bytes 2..15 inline text; integer, float and node pointer live
  // at offset 8.
  Kind kind_;
  std::uint8_t small_len_;
  char small_[6];
  union {
    std::int64_t integer;
    double real;
    detail::TextNode* text;
    detail::ListNode* list;
    char small_tail[8];
  } u_;
};

static_assert(sizeof(Value) == 16, "Value is two words");

// NIL, for lookups that find nothing to return a reference to.
extern const Value kNilValue;

namespace detail {

// A list of `size` Values stored right after the header in the same
// allocation, which has room for `capacity` (a property list that had a key
// appended keeps room for a few more, so that the next appends to it, while
// it is unshared, need no copy); a preprinted list has its PrintedForm (see
// value_access.hpp) after the items, and no room to spare.
struct alignas(alignof(Value)) ListNode {
  static constexpr std::uint32_t kPreprinted = std::uint32_t{1} << 31;
  static constexpr std::uint32_t kMaxSize = kPreprinted - 1;

  std::atomic<std::uint32_t> refs;
  std::uint32_t bits;      // the size, and kPreprinted
  std::uint32_t capacity;  // at least the size; the slots past the size hold no Value

  std::uint32_t size() const noexcept { return bits & kMaxSize; }
  bool preprinted() const noexcept { return (bits & kPreprinted) != 0; }
  Value* items() noexcept { return std::launder(reinterpret_cast<Value*>(this + 1)); }
  const Value* items() const noexcept { return std::launder(reinterpret_cast<const Value*>(this + 1)); }
  // Only when preprinted().
  PrintedForm* printed_form() noexcept { return reinterpret_cast<PrintedForm*>(items() + size()); }
  const PrintedForm* printed_form() const noexcept { return reinterpret_cast<const PrintedForm*>(items() + size()); }
};

static_assert(sizeof(ListNode) % alignof(Value) == 0, "items follow the header aligned");

}  // namespace detail

[[gnu::always_inline]] inline Value Value::keyword(const Key& name) {
  if (!name.inline_) return long_keyword(name);
  Value v;  // the key's words are the keyword Value's bytes, text upper-cased
  static_assert(sizeof name.word_ == sizeof(Value));
  std::memcpy(static_cast<void*>(&v), name.word_, sizeof(Value));
  if (name.plain_) v.small_len_ |= kPlainName;
  return v;
}

[[gnu::always_inline]] inline bool Value::is_keyword(const Key& name) const noexcept {
  if (name.inline_) return matches_inline_key(name.word_, name.mask_);
  return is_keyword(name.name());
}

[[gnu::always_inline]] inline const Value* Value::get(const Key& key) const noexcept {
  if (kind_ != Kind::list) return nullptr;
  if (!key.inline_) return get(key.name());
  const Value* const items = u_.list->items();
  const std::size_t size = u_.list->size();
  for (std::size_t i = 0; i + 1 < size; i += 2) {
    if (items[i].matches_inline_key(key.word_, key.mask_)) return &items[i + 1];
  }
  return nullptr;
}

[[gnu::always_inline]] inline const Value& Value::at(const Key& key) const noexcept {
  const Value* found = get(key);
  return found != nullptr ? *found : kNilValue;
}

[[gnu::always_inline]] inline std::size_t Value::key_index(const Key& key) const noexcept {
  if (kind_ != Kind::list) return 0;
  const Value* const found = get(key);  // the key is the item before its value
  return found != nullptr ? static_cast<std::size_t>(found - 1 - u_.list->items()) : u_.list->size();
}

// The key is looked for here, with its words as constants; the list is
// changed or copied out of line.
[[gnu::always_inline]] inline Value Value::with(const Key& key, Value value) && {
  const std::size_t found = key_index(key);
  return std::move(*this).with_found(key, found, std::move(value));
}
[[gnu::always_inline]] inline Value Value::with(const Key& key, Value value) const& {
  return with_found(key, key_index(key), std::move(value));
}

template <class... Keys>
[[gnu::always_inline]] inline const Value& Value::path(const Key& first, const Keys&... rest) const noexcept {
  if constexpr (sizeof...(rest) == 0) {
    return at(first);
  } else {
    return at(first).path(rest...);
  }
}

// Appends `text` upper-cased (ASCII only) to `out`.
void append_upper_ascii(std::string& out, std::string_view text);
// ASCII case-insensitive equality.
bool equals_ignore_case(std::string_view a, std::string_view b) noexcept;

}  // namespace passepartout
