// MemoryTable, HistoryTable and MemoryImage: the two tables memory is made of,
// and a consistent pair of them (what a save writes and a load reads).
#pragma once

#include <map>
#include <memory>
#include <string>

#include "memory/memory_object.hpp"

namespace passepartout {

// The live memory: id -> the current version of that object. Ordered by id so
// queries, renderings and files come out the same every time.
using MemoryTable = std::map<std::string, MemoryObjectPtr, std::less<>>;

// The immutable archive: Merkle hash -> object, every version ever stored.
using HistoryTable = std::map<std::string, MemoryObjectPtr, std::less<>>;

// Both tables at one moment. The tables are immutable once shared: holding an
// image keeps that moment readable from any thread while the store moves on.
// Invariant kept by the store: every object of `objects` is in `history`.
// The tables themselves are created non-const (the store may reuse one it
// holds alone; see MemoryStore), so always make them with make_shared<T>().
struct MemoryImage {
  std::shared_ptr<const MemoryTable> objects = std::make_shared<MemoryTable>();
  std::shared_ptr<const HistoryTable> history = std::make_shared<HistoryTable>();
};

}  // namespace passepartout
