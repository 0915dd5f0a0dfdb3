// ValueAccess: the construction paths the reader and the JSON bridge take
// past Value's public constructors.
#include "value/value_access.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <memory>

#include "value/node_memory.hpp"

namespace passepartout {

char* ValueAccess::init_heap_text(Value& slot, Kind kind, std::size_t size) {
  assert(kind == Kind::string || kind == Kind::keyword || kind == Kind::symbol);
  slot.u_.text = detail::allocate_text(size);
  slot.small_len_ = Value::kHeapText;
  slot.kind_ = kind;
  return slot.u_.text->data();
}

void ValueAccess::init_list_relocated(Value& slot, Value* items, std::size_t count) {
  if (count == 0) return;
  slot.u_.list = detail::allocate_list_relocating(items, count);
  slot.kind_ = Kind::list;
}

void ValueAccess::mark_if_plain(Value& value) noexcept {
  if (value.kind_ != Kind::keyword || value.small_len_ == Value::kHeapText || value.small_len_ == 0) return;
  const std::string_view name = text_of(value);
  for (const char c : name) {
    if (!detail::is_plain_name_byte(c)) return;
  }
  value.small_len_ |= Value::kPlainName;
}

Value ValueAccess::preprinted_list(const Value& list, std::string_view printed, std::uint64_t keyword_marks) {
  auto text = std::make_unique<char[]>(printed.size());
  if (!printed.empty()) std::memcpy(text.get(), printed.data(), printed.size());
  const bool ascii = std::all_of(printed.begin(), printed.end(), [](char c) { return (c & 0x80) == 0; });
  Value v;
  v.u_.list = detail::allocate_preprinted_list(items_of(list), {text.get(), printed.size(), keyword_marks, ascii});
  static_cast<void>(text.release());  // the node holds it now
  v.kind_ = Kind::list;
  return v;
}

Value ValueAccess::list_from_moved(std::span<Value> items) {
  Value v;
  if (items.empty()) return v;  // an empty span may have a null data()
  init_list_relocated(v, items.data(), items.size());
  std::memset(static_cast<void*>(items.data()), 0, items.size() * sizeof(Value));
  return v;
}

}  // namespace passepartout
