// Value's own operations: reference counting, construction, plist access and
// structural equality (its nodes' memory is node_memory.cpp's).
#include "value/value.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cassert>
#include <cstring>
#include <new>
#include <utility>

#include "base/ascii.hpp"
#include "base/utf8.hpp"
#include "value/node_memory.hpp"
#include "value/sexp_syntax.hpp"
#include "value/value_access.hpp"

namespace passepartout {

constinit const Value kNilValue;

namespace {

using detail::allocate_list;
using detail::allocate_list_copying;
using detail::ListNode;

// Decrements a reference count; true when the caller held the last reference.
// A count of 1 means no other thread holds a reference to increment it, so the
// atomic read-modify-write can be skipped.
bool drop_reference(std::atomic<std::uint32_t>& refs) noexcept {
  if (refs.load(std::memory_order_acquire) == 1) return true;
  return refs.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

std::string_view strip_colon(std::string_view name) noexcept {
  if (!name.empty() && name.front() == ':') name.remove_prefix(1);
  return name;
}

// True when `keyword` (a Kind::keyword, stored upper-case) is named `name`
// (without ':', any case). The lengths decide first: most keys of a property
// list are told apart without looking at a byte.
bool keyword_named(const Value& keyword, std::string_view name) noexcept {
  const std::string_view stored = ValueAccess::text_of(keyword);
  if (stored.size() != name.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (stored[i] != ascii_upper(name[i])) return false;
  }
  return true;
}

}  // namespace

const char* to_string(Kind kind) noexcept {
  switch (kind) {
    case Kind::nil:
      return "nil";
    case Kind::t:
      return "t";
    case Kind::integer:
      return "integer";
    case Kind::real:
      return "float";
    case Kind::string:
      return "string";
    case Kind::keyword:
      return "keyword";
    case Kind::symbol:
      return "symbol";
    case Kind::list:
      return "list";
  }
  return "unknown";
}

// --- Value ------------------------------------------------------------------

void Value::retain_node() const noexcept {
  if (kind_ == Kind::list) {
    u_.list->refs.fetch_add(1, std::memory_order_relaxed);
  } else {
    u_.text->refs.fetch_add(1, std::memory_order_relaxed);
  }
}

void Value::release_node() noexcept {
  if (kind_ == Kind::list) {
    if (drop_reference(u_.list->refs)) detail::free_list(u_.list);
  } else {
    if (drop_reference(u_.text->refs)) detail::free_text(u_.text);
  }
}

Value Value::make_text(Kind kind, std::string_view text) {
  Value v;
  char* out = ValueAccess::init_text(v, kind, text.size());
  if (!text.empty()) std::memcpy(out, text.data(), text.size());
  return v;
}

Value Value::integer(std::int64_t i) noexcept {
  Value v;
  v.kind_ = Kind::integer;
  v.u_.integer = i;
  return v;
}

Value Value::real(double d) noexcept {
  Value v;
  v.kind_ = Kind::real;
  v.u_.real = d;
  return v;
}

Value Value::string(std::string_view text) {
  assert(is_valid_utf8(text) && "Value::string needs valid UTF-8");
  return make_text(Kind::string, text);
}

namespace {

// The keyword of exactly `name` (a leading ':' already taken off).
Value keyword_of(std::string_view name) {
  Value v;
  char* out = ValueAccess::init_text(v, Kind::keyword, name.size());
  for (std::size_t i = 0; i < name.size(); ++i) out[i] = ascii_upper(name[i]);
  ValueAccess::mark_if_plain(v);
  return v;
}

Value keyword_of(const Key& key) { return Value::keyword(key); }

}  // namespace

Value Value::keyword(std::string_view name) { return keyword_of(strip_colon(name)); }

Value Value::long_keyword(const Key& name) {
  // Each thread keeps the last few it made, found by the address of the
  // key's name (a literal's) and checked by the name itself: a long protocol
  // key (:APPROVED-ACTION, :REJECTION-TRACE) added to every signal then
  // costs a reference instead of an allocation.
  struct Made {
    const char* name = nullptr;
    Value keyword;
  };
  thread_local std::array<Made, 8> made;
  const std::string_view text = name.name();
  Made& slot = made[(reinterpret_cast<std::uintptr_t>(text.data()) >> 4) % made.size()];
  if (slot.name != text.data() || !keyword_named(slot.keyword, text)) {
    slot.keyword = keyword_of(text);
    slot.name = text.data();
  }
  return slot.keyword;
}

Value Value::symbol(std::string_view name) { return make_text(Kind::symbol, name); }

Value Value::list(std::span<const Value> items) {
  if (items.empty()) return Value();
  Value v;
  v.u_.list = allocate_list_copying(items, items.size(), items.size());
  v.kind_ = Kind::list;
  return v;
}

Value Value::plist(std::initializer_list<std::pair<std::string_view, Value>> entries) {
  if (entries.size() == 0) return Value();
  Value v;
  v.u_.list = allocate_list(entries.size() * 2);
  v.kind_ = Kind::list;
  Value* out = v.u_.list->items();
  for (const auto& [name, value] : entries) {
    *out++ = keyword(name);
    *out++ = value;
  }
  return v;
}

double Value::as_float() const noexcept {
  if (kind_ == Kind::real) return u_.real;
  if (kind_ == Kind::integer) return static_cast<double>(u_.integer);
  return 0.0;
}

std::string_view Value::text() const noexcept {
  if (!is_text_kind()) return {};
  if (small_len_ == kHeapText) return {u_.text->data(), u_.text->size};
  // Inline text runs on from small_ into u_.small_tail: it is read as the
  // object's bytes, since indexing small_ past its 6 elements is undefined.
  return {reinterpret_cast<const char*>(&small_), static_cast<std::size_t>(small_len_ & kInlineLength)};
}

bool Value::is_keyword(std::string_view name) const noexcept {
  return kind_ == Kind::keyword && keyword_named(*this, strip_colon(name));
}

std::span<const Value> Value::items() const noexcept {
  if (kind_ != Kind::list) return {};
  return {u_.list->items(), u_.list->size()};
}

const Value& Value::at(std::string_view key) const noexcept {
  const Value* found = get(key);
  return found != nullptr ? *found : kNilValue;
}

namespace {

// What Key's constructor computes, for a name known only at run time: the
// words of the inline keyword `name` (upper-cased) and the masks of the bytes
// that must match. False for a name that is not stored inline or not ASCII.
bool pack_inline_keyword(std::string_view name, std::uint64_t (&word)[2], std::uint64_t (&mask)[2]) noexcept {
  if constexpr (std::endian::native != std::endian::little) return false;
  if (name.size() > Value::kInlineCapacity) return false;
  unsigned char bytes[2 * sizeof(std::uint64_t)] = {static_cast<unsigned char>(Kind::keyword),
                                                    static_cast<unsigned char>(name.size())};
  std::memcpy(bytes + 2, name.data(), name.size());
  std::memcpy(&word[0], bytes, sizeof word[0]);
  std::memcpy(&word[1], bytes + sizeof word[0], sizeof word[1]);
  if (((word[0] | word[1]) & sexp::kHighBits) != 0) return false;
  // Upper case, a word at a time: 'a'-'z' lose 0x20 (the high bit >> 2).
  word[0] -= sexp::bytes_in_range(word[0], 'a', 'z') >> 2;
  word[1] -= sexp::bytes_in_range(word[1], 'a', 'z') >> 2;
  const std::size_t used = name.size() + 2;                                            // kind, length, text: at most 16
  mask[0] = sexp::first_bytes_mask(used) & ~(std::uint64_t{Key::kPlainNameBit} << 8);  // the hint is not compared
  mask[1] = used <= 8 ? 0 : sexp::first_bytes_mask(used - 8);
  word[0] &= mask[0];
  word[1] &= mask[1];
  return true;
}

}  // namespace

const Value* Value::get(std::string_view key) const noexcept {
  if (kind_ != Kind::list) return nullptr;
  key = strip_colon(key);
  const std::span<const Value> elements = items();
  std::uint64_t word[2];
  std::uint64_t mask[2];
  if (pack_inline_keyword(key, word, mask)) {
    for (std::size_t i = 0; i + 1 < elements.size(); i += 2) {
      if (elements[i].matches_inline_key(word, mask)) return &elements[i + 1];
    }
    return nullptr;
  }
  for (std::size_t i = 0; i + 1 < elements.size(); i += 2) {
    const Value& candidate = elements[i];
    if (candidate.kind_ == Kind::keyword && keyword_named(candidate, key)) return &elements[i + 1];
  }
  return nullptr;
}

const Value& Value::path(std::initializer_list<std::string_view> keys) const noexcept {
  const Value* current = this;
  for (std::string_view key : keys) {
    current = &current->at(key);
  }
  return *current;
}

namespace {

// The index of the first key `key` (its ':' optional) among the items of
// `list`, or their count: get()'s lookup, as a position.
std::size_t key_position(const Value& list, std::string_view key) noexcept {
  const Value* const found = list.get(key);  // the key is the item before its value
  const std::span<const Value> elements = list.items();
  return found != nullptr ? static_cast<std::size_t>(found - 1 - elements.data()) : elements.size();
}

}  // namespace

// Both overloads of with: `name` is the key as given (a Key or a name without ':').
template <class Name>
Value Value::with_in_place(Name name, std::size_t found, Value value) && {
  // A preprinted node keeps its text, so it is never changed in place; the
  // acquire pairs with the releases of the references dropped before, so
  // their last reads of the node come before this write.
  if (kind_ == Kind::list && !u_.list->preprinted() && u_.list->refs.load(std::memory_order_acquire) == 1) {
    ListNode& node = *u_.list;
    const std::size_t size = node.size();
    if (found < size) {
      node.items()[found + 1] = std::move(value);
      return std::move(*this);
    }
    if (node.capacity - size >= 2) {  // room kept by an earlier append
      new (node.items() + size) Value(keyword_of(name));
      new (node.items() + size + 1) Value(std::move(value));
      node.bits += 2;  // not preprinted: the bits are the size
      return std::move(*this);
    }
  }
  return std::as_const(*this).with_copy(name, found, std::move(value));
}

template <class Name>
Value Value::with_copy(Name name, std::size_t found, Value value) const& {
  const std::span<const Value> elements = items();
  const bool replace = found < elements.size();
  Value result;
  // An append keeps room for kAppendRoom more elements: a plist that gets one
  // key often gets another (a signal its status, an action its meta).
  constexpr std::size_t kAppendRoom = 4;
  const std::size_t size = elements.size() + (replace ? 0 : 2);
  result.u_.list = allocate_list_copying(elements, size, replace ? size : size + kAppendRoom);
  result.kind_ = Kind::list;
  Value* out = result.u_.list->items();
  if (replace) {
    out[found + 1] = std::move(value);
  } else {
    out[elements.size()] = keyword_of(name);
    out[elements.size() + 1] = std::move(value);
  }
  return result;
}

Value Value::with(std::string_view key, Value value) && {
  const std::size_t found = key_position(*this, key);
  return std::move(*this).with_in_place(strip_colon(key), found, std::move(value));
}
Value Value::with(std::string_view key, Value value) const& {
  return with_copy(strip_colon(key), key_position(*this, key), std::move(value));
}
Value Value::with_found(const Key& key, std::size_t found, Value value) && {
  return std::move(*this).with_in_place<const Key&>(key, found, std::move(value));
}
Value Value::with_found(const Key& key, std::size_t found, Value value) const& {
  return with_copy<const Key&>(key, found, std::move(value));
}

Value Value::without(std::string_view key) const {
  const std::string_view name = strip_colon(key);
  const auto is_key = [name](const Value& item) { return item.kind_ == Kind::keyword && keyword_named(item, name); };
  const std::span<const Value> elements = items();
  std::size_t removed = 0;
  for (std::size_t i = 0; i + 1 < elements.size(); i += 2) {
    if (is_key(elements[i])) removed += 2;
  }
  if (removed == 0) return *this;
  if (removed == elements.size()) return Value();
  Value result;
  result.u_.list = allocate_list(elements.size() - removed);
  result.kind_ = Kind::list;
  Value* out = result.u_.list->items();
  std::size_t i = 0;
  for (; i + 1 < elements.size(); i += 2) {
    if (is_key(elements[i])) continue;
    *out++ = elements[i];
    *out++ = elements[i + 1];
  }
  if (i < elements.size()) *out = elements[i];  // the unpaired last element of an odd list
  return result;
}

bool operator==(const Value& a, const Value& b) noexcept {
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case Kind::nil:
    case Kind::t:
      return true;
    case Kind::integer:
      return a.u_.integer == b.u_.integer;
    case Kind::real:
      return a.u_.real == b.u_.real;
    case Kind::string:
    case Kind::keyword:
    case Kind::symbol:
      return a.text() == b.text();
    case Kind::list: {
      if (a.u_.list == b.u_.list) return true;
      const std::span<const Value> x = a.items();
      const std::span<const Value> y = b.items();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!(x[i] == y[i])) return false;
      }
      return true;
    }
  }
  return false;
}

std::uint32_t Value::use_count_for_test() const noexcept {
  if (kind_ == Kind::list) return u_.list->refs.load(std::memory_order_relaxed);
  if (is_text_kind() && small_len_ == kHeapText) return u_.text->refs.load(std::memory_order_relaxed);
  return 0;
}

void append_upper_ascii(std::string& out, std::string_view text) {
  const std::size_t start = out.size();
  out.append(text);
  for (std::size_t i = start; i < out.size(); ++i) out[i] = ascii_upper(out[i]);
}

bool equals_ignore_case(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && ascii_upper(a[i]) != ascii_upper(b[i])) return false;
  }
  return true;
}

}  // namespace passepartout
