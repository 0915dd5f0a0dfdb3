// MemoryObject: one node of the agent's memory (a headline, a paragraph, ...),
// immutable once stored, and the universal-time clock its timestamps use.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "value/value.hpp"

namespace passepartout {

// Lisp universal time counts seconds since 1900-01-01 UTC; Unix time since 1970.
inline constexpr std::int64_t kUniversalTimeOffset = 2208988800;

// The current time as Lisp universal time (Unix seconds + kUniversalTimeOffset).
std::int64_t universal_time_now();

// One node of memory. Built once by the store (ingest or load) and then only
// shared, as MemoryObjectPtr: any number of threads may read it.
struct MemoryObject {
  std::string id;
  Value type;                         // a keyword, e.g. :HEADLINE
  Value attributes;                   // a property list, e.g. (:ID "n1" :TITLE "T" :TAGS ("project"))
  std::string content;                // "<title>\n<raw content>" for headlines, empty otherwise
  std::string parent_id;              // empty for a root
  std::vector<std::string> children;  // ids, in document order
  // The hashes of those children when this object was stored, in the same
  // order: the Merkle links that make `hash` cover the whole subtree.
  std::vector<std::string> child_hashes;
  std::int64_t version = 0;    // universal time of creation
  std::int64_t last_sync = 0;  // universal time of the last sync (creation, for now)
  std::string hash;            // merkle_hash() of the fields above; also its key in the history
};

using MemoryObjectPtr = std::shared_ptr<const MemoryObject>;

// Empty when `attributes` is a property list with keyword keys (NIL included),
// as MemoryObject::attributes must be; otherwise what is wrong, e.g.
// "key 2 is string, expected a keyword".
std::string attributes_problem(const Value& attributes);

}  // namespace passepartout
