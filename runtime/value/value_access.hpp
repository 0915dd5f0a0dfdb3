// ValueAccess: construction paths for the reader and the JSON bridge that skip
// the public constructors' copying and case folding. Private to runtime/value.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string_view>

#include "value/value.hpp"

namespace passepartout {

namespace detail {

// Text longer than the inline capacity: one allocation holding the header and
// `size` bytes right after it (no terminating NUL).
struct TextNode {
  std::atomic<std::uint32_t> refs;
  std::uint32_t size;
  char* data() noexcept { return reinterpret_cast<char*>(this + 1); }
  const char* data() const noexcept { return reinterpret_cast<const char*>(this + 1); }
};

// What a preprinted list (see preprint() in sexp_printer.hpp) prints as,
// stored after its items: print_sexp copies `text` instead of walking the
// list. `keyword_marks` has the bit keyword_mark() gives for each keyword in
// the list at any depth: a printer leaving out keys none of whose bits are
// set prints `text` too. `ascii`: every byte of `text` is below 0x80.
struct PrintedForm {
  char* text;  // new[]-allocated, freed with the node
  std::size_t size;
  std::uint64_t keyword_marks;
  bool ascii;
};

// A keyword name's bit in PrintedForm::keyword_marks: a multiplicative hash
// of its length and first, second and last bytes (different names may share one).
constexpr std::uint64_t keyword_mark(std::string_view name) noexcept {
  std::uint64_t key = name.size();
  if (!name.empty()) {
    key |= std::uint64_t{static_cast<unsigned char>(name.front())} << 8;
    key |= std::uint64_t{static_cast<unsigned char>(name.back())} << 16;
  }
  if (name.size() > 1) key |= std::uint64_t{static_cast<unsigned char>(name[1])} << 24;
  return std::uint64_t{1} << ((key * 0x9E3779B97F4A7C15ULL) >> 58);
}

static_assert(alignof(PrintedForm) <= alignof(Value), "a printed form follows the items aligned");

}  // namespace detail

struct ValueAccess {
  // Makes `slot`, which must be NIL, a text Value of `kind` (String, Keyword or
  // Symbol) holding `size` bytes, and returns those bytes for the caller to
  // fill before the Value is shared (strings must end up valid UTF-8). Inline
  // text lives inside `slot`: the pointer is valid until `slot` moves.
  static char* init_text(Value& slot, Kind kind, std::size_t size) {
    if (size <= Value::kInlineCapacity) {
      slot.kind_ = kind;
      slot.small_len_ = static_cast<std::uint8_t>(size);
      return reinterpret_cast<char*>(&slot.small_);
    }
    return init_heap_text(slot, kind, size);
  }

  // The inline text storage of `slot` (kInlineCapacity bytes), to be written
  // before set_inline_text() makes `slot` a text Value of its first bytes.
  static char* inline_bytes(Value& slot) noexcept { return reinterpret_cast<char*>(&slot.small_); }
  static void set_inline_text(Value& slot, Kind kind, std::size_t size) noexcept {
    slot.kind_ = kind;
    slot.small_len_ = static_cast<std::uint8_t>(size);
  }
  // The same for a keyword of 1 to kInlineCapacity bytes, all 'A'-'Z', '0'-'9' or '-'.
  static void set_plain_keyword(Value& slot, std::size_t size) noexcept {
    slot.kind_ = Kind::keyword;
    slot.small_len_ = static_cast<std::uint8_t>(size | Value::kPlainName);
  }
  // Whether `value` is a keyword marked as set_plain_keyword() makes one.
  static bool is_plain_keyword(const Value& value) noexcept {
    return value.kind_ == Kind::keyword && value.small_len_ != Value::kHeapText &&
           (value.small_len_ & Value::kPlainName) != 0;
  }
  // Marks the inline keyword `value` plain when its name is (see Value::kPlainName).
  static void mark_if_plain(Value& value) noexcept;

  // Makes `slot`, which must be NIL, the integer `value`.
  static void init_integer(Value& slot, std::int64_t value) noexcept {
    slot.kind_ = Kind::integer;
    slot.u_.integer = value;
  }

  // Makes `slot`, which must be NIL, a list of the `count` Values at `items`,
  // relocating their bytes: afterwards the caller must neither use nor destroy
  // those source Values. A count of 0 leaves `slot` NIL.
  static void init_list_relocated(Value& slot, Value* items, std::size_t count);

  // Value::text() (for a String, Keyword or Symbol only) and Value::items(),
  // inline for the printer's inner loop.
  static std::string_view text_of(const Value& value) noexcept {
    if (value.small_len_ == Value::kHeapText) return {value.u_.text->data(), value.u_.text->size};
    return {reinterpret_cast<const char*>(&value.small_),
            static_cast<std::size_t>(value.small_len_ & Value::kInlineLength)};
  }
  static std::span<const Value> items_of(const Value& value) noexcept {
    if (value.kind_ != Kind::list) return {};
    return {value.u_.list->items(), value.u_.list->size()};
  }

  // A list owning the elements of `items`, which are moved out (left NIL).
  // An empty span gives NIL.
  static Value list_from_moved(std::span<Value> items);

  // The node of `list`, which must be a list; for the printer.
  static const detail::ListNode& list_node(const Value& list) noexcept { return *list.u_.list; }
  // A list of the same items as `list` (a list) whose node holds `printed`
  // and `keyword_marks` as its PrintedForm.
  static Value preprinted_list(const Value& list, std::string_view printed, std::uint64_t keyword_marks);

 private:
  static char* init_heap_text(Value& slot, Kind kind, std::size_t size);
};

}  // namespace passepartout
