// Node memory: where Value's heap nodes (long text, lists) come from and go
// back to. Private to runtime/value: Value and ValueAccess build their nodes
// through these, and free them when the last reference goes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "value/value_access.hpp"

namespace passepartout::detail {

// `size` as a list's size; throws std::length_error past ListNode::kMaxSize.
std::uint32_t checked_list_size(std::size_t size);

// A text node for `size` bytes, its one reference held by the caller (the
// bytes are the caller's to fill). Throws std::length_error past 4 GiB.
TextNode* allocate_text(std::size_t size);
// A list node of `size` NIL elements, so the node is always safe to release
// even if filling it throws half-way.
ListNode* allocate_list(std::size_t size);
// A list node of `size` elements, with room for `capacity` (at least `size`):
// copies of `from`, then NIL.
ListNode* allocate_list_copying(std::span<const Value> from, std::size_t size, std::size_t capacity);
// A list node of the `count` (at least 1) Values at `items`, their bytes
// relocated: the caller must neither use nor destroy those Values afterwards.
ListNode* allocate_list_relocating(Value* items, std::size_t count);
// A preprinted list node: copies of `from`, then `printed` as its PrintedForm
// (whose text it takes over).
ListNode* allocate_preprinted_list(std::span<const Value> from, const PrintedForm& printed);

// Free a node whose last reference was dropped, and what it holds.
void free_text(TextNode* node) noexcept;
void free_list(ListNode* node) noexcept;

}  // namespace passepartout::detail
