// Node memory: Value's heap nodes are allocated here, freed here when their
// last reference goes, and, outside sanitizer builds, recycled through a
// per-thread cache of small blocks.
#include "value/node_memory.hpp"

#include <cstring>
#include <limits>
#include <new>
#include <stdexcept>
#include <vector>

namespace passepartout::detail {
namespace {

std::uint32_t checked_size(std::size_t size, const char* what) {
  if (size > std::numeric_limits<std::uint32_t>::max()) throw std::length_error(what);
  return static_cast<std::uint32_t>(size);
}

// Sanitizer builds allocate every node from the heap so that each use after
// free is still caught; others recycle small nodes through NodeCache.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kCacheNodes = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kCacheNodes = false;
#else
constexpr bool kCacheNodes = true;
#endif
#else
constexpr bool kCacheNodes = true;
#endif

// Freed nodes of up to 256 bytes, kept per thread for reuse: reading a message
// allocates a handful and dropping it frees them. It still pays with jemalloc
// allocating (2026-11-26, plain release, CPU-time medians of 5 runs, three
// rounds each): BM_ReadSignal 177-180 ns with the cache against 186-202 ns
// without (about 5 %); BM_FrameRoundtrip, BM_Verify* and BM_Loop within noise.
// At most kPerClass blocks per 16-byte size class (128 KiB per thread). A node freed on another thread than the one
// that allocated it simply joins the freeing thread's cache. Trivially destructible, so it stays usable while other
// thread-local objects are destroyed; NodeCacheDrain gives its blocks back when the thread ends.
struct NodeCache {
  static constexpr std::size_t kGranule = 16;
  static constexpr std::size_t kClasses = 16;
  static constexpr std::uint16_t kPerClass = 32;
  struct Block {
    Block* next;
  };
  Block* free[kClasses];
  std::uint16_t count[kClasses];
  bool drain_registered;
  bool drained;  // the thread is ending: no more caching
};

constinit thread_local NodeCache t_node_cache{};

struct NodeCacheDrain {
  NodeCacheDrain() = default;
  NodeCacheDrain(const NodeCacheDrain&) = delete;
  NodeCacheDrain& operator=(const NodeCacheDrain&) = delete;
  ~NodeCacheDrain() {
    NodeCache& cache = t_node_cache;
    cache.drained = true;
    for (std::size_t c = 0; c < NodeCache::kClasses; ++c) {
      while (NodeCache::Block* block = cache.free[c]) {
        cache.free[c] = block->next;
        ::operator delete(static_cast<void*>(block));
      }
      cache.count[c] = 0;
    }
  }
};

thread_local NodeCacheDrain t_node_cache_drain;

void* allocate_node(std::size_t bytes) {
  if constexpr (kCacheNodes) {
    const std::size_t size_class = (bytes - 1) / NodeCache::kGranule;
    if (size_class < NodeCache::kClasses) {
      NodeCache& cache = t_node_cache;
      if (NodeCache::Block* block = cache.free[size_class]) {
        cache.free[size_class] = block->next;
        --cache.count[size_class];
        return block;
      }
      // Whole-class blocks, so that any node of the class can reuse one.
      return ::operator new((size_class + 1) * NodeCache::kGranule);
    }
  }
  return ::operator new(bytes);
}

// `bytes` is what was asked of allocate_node for this block.
void free_node(void* memory, std::size_t bytes) noexcept {
  if constexpr (kCacheNodes) {
    const std::size_t size_class = (bytes - 1) / NodeCache::kGranule;
    NodeCache& cache = t_node_cache;
    if (size_class < NodeCache::kClasses && cache.count[size_class] < NodeCache::kPerClass && !cache.drained) {
      if (!cache.drain_registered) {
        cache.drain_registered = true;
        static_cast<void>(&t_node_cache_drain);  // constructs it, so it drains at thread exit
      }
      auto* block = static_cast<NodeCache::Block*>(memory);
      block->next = cache.free[size_class];
      cache.free[size_class] = block;
      ++cache.count[size_class];
      return;
    }
  }
  ::operator delete(memory);
}

std::size_t text_node_bytes(std::size_t size) noexcept { return sizeof(TextNode) + size; }
std::size_t list_node_bytes(std::size_t size) noexcept { return sizeof(ListNode) + size * sizeof(Value); }
std::size_t preprinted_list_node_bytes(std::size_t size) noexcept {
  return list_node_bytes(size) + sizeof(PrintedForm);
}

void destroy_list_node(ListNode* node) noexcept {
  Value* items = node->items();
  const std::uint32_t size = node->size();
  std::size_t bytes = list_node_bytes(node->capacity);
  if (node->preprinted()) {
    delete[] node->printed_form()->text;
    bytes = preprinted_list_node_bytes(size);
  }
  for (std::uint32_t i = 0; i < size; ++i) items[i].~Value();
  node->~ListNode();
  free_node(node, bytes);
}

// Freeing a list frees its elements, which may free nested lists: recursion is
// bounded by kMaxFreeRecursion, deeper nodes wait in a worklist owned by the
// outermost free on this thread, so arbitrarily deep lists never exhaust the stack.
constexpr unsigned kMaxFreeRecursion = 64;
thread_local unsigned t_free_depth = 0;
thread_local std::vector<ListNode*>* t_deferred_frees = nullptr;

}  // namespace

std::uint32_t checked_list_size(std::size_t size) {
  if (size > ListNode::kMaxSize) throw std::length_error("Value list longer than 2^31 - 1 elements");
  return static_cast<std::uint32_t>(size);
}

TextNode* allocate_text(std::size_t size) {
  const std::uint32_t checked = checked_size(size, "Value text longer than 4 GiB");
  void* memory = allocate_node(text_node_bytes(size));
  return new (memory) TextNode{{1}, checked};
}

// A node of `size` NIL elements, so the node is always safe to release even
// if filling it throws half-way.
ListNode* allocate_list(std::size_t size) {
  const std::uint32_t checked = checked_list_size(size);
  void* memory = allocate_node(list_node_bytes(size));
  auto* node = new (memory) ListNode{{1}, checked, checked};
  for (std::size_t i = 0; i < size; ++i) new (reinterpret_cast<Value*>(node + 1) + i) Value();
  return node;
}

// A node of `size` elements, with room for `capacity` (at least `size`):
// copies of `from`, then NIL. Copying a Value cannot throw, so each element is
// constructed once, in place.
ListNode* allocate_list_copying(std::span<const Value> from, std::size_t size, std::size_t capacity) {
  const std::uint32_t checked = checked_list_size(size);
  const std::uint32_t room = checked_list_size(capacity);
  void* memory = allocate_node(list_node_bytes(room));
  auto* node = new (memory) ListNode{{1}, checked, room};
  auto* items = reinterpret_cast<Value*>(node + 1);
  for (std::size_t i = 0; i < from.size(); ++i) new (items + i) Value(from[i]);
  for (std::size_t i = from.size(); i < size; ++i) new (items + i) Value();
  return node;
}

ListNode* allocate_list_relocating(Value* items, std::size_t count) {
  const std::uint32_t size = checked_list_size(count);
  void* memory = allocate_node(list_node_bytes(count));
  auto* node = new (memory) ListNode{{1}, size, size};
  // A Value is trivially relocatable: moving its bytes moves ownership.
  std::memcpy(static_cast<void*>(reinterpret_cast<Value*>(node + 1)), static_cast<const void*>(items),
              count * sizeof(Value));
  return node;
}

ListNode* allocate_preprinted_list(std::span<const Value> from, const PrintedForm& printed) {
  const std::uint32_t size = checked_list_size(from.size());
  void* memory = allocate_node(preprinted_list_node_bytes(size));
  auto* node = new (memory) ListNode{{1}, size | ListNode::kPreprinted, size};
  auto* items = reinterpret_cast<Value*>(node + 1);
  for (std::size_t i = 0; i < from.size(); ++i) new (items + i) Value(from[i]);
  new (node->printed_form()) PrintedForm(printed);
  return node;
}

void free_text(TextNode* node) noexcept {
  const std::size_t bytes = text_node_bytes(node->size);
  node->~TextNode();
  free_node(node, bytes);
}

void free_list(ListNode* node) noexcept {
  if (t_free_depth == 0) {
    std::vector<ListNode*> deferred;
    t_deferred_frees = &deferred;
    t_free_depth = 1;
    destroy_list_node(node);
    while (!deferred.empty()) {
      ListNode* next = deferred.back();
      deferred.pop_back();
      destroy_list_node(next);
    }
    t_free_depth = 0;
    t_deferred_frees = nullptr;
  } else if (t_free_depth < kMaxFreeRecursion) {
    ++t_free_depth;
    destroy_list_node(node);
    --t_free_depth;
  } else {
    t_deferred_frees->push_back(node);
  }
}

}  // namespace passepartout::detail
