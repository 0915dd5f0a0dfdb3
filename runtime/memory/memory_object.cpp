// MemoryObject: the universal-time clock and the attribute check.
#include "memory/memory_object.hpp"

#include <chrono>

namespace passepartout {

std::int64_t universal_time_now() {
  auto unix_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  return static_cast<std::int64_t>(unix_seconds) + kUniversalTimeOffset;
}

std::string attributes_problem(const Value& attributes) {
  if (!attributes.is_sequence())
    return std::string("is ") + to_string(attributes.kind()) + ", expected a property list";
  auto items = attributes.items();
  if (items.size() % 2 != 0) return "has a key without a value";
  for (std::size_t i = 0; i < items.size(); i += 2) {
    if (!items[i].is_keyword()) {
      return "key " + std::to_string(i / 2 + 1) + " is " + to_string(items[i].kind()) + ", expected a keyword";
    }
  }
  return {};
}

}  // namespace passepartout
