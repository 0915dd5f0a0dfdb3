// Memory queries: objects by attribute, tag, TODO state and type over one
// consistent table, and the two selections the context needs (active projects,
// completed tasks).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "memory/memory_table.hpp"
#include "value/value.hpp"

namespace passepartout {

// What to select; every criterion given must hold.
struct MemoryQuery {
  // A case-insensitive substring of the object's :TAGS (a string, or a list
  // whose elements' texts are joined by spaces), as the Lisp system matched
  // tags: "project" also matches "side-projects".
  std::optional<std::string> tag = std::nullopt;
  // :TODO-STATE equal to this text exactly ("DONE"; a keyword :DONE also matches).
  std::optional<std::string> todo_state = std::nullopt;
  // The object's type keyword, case-insensitive, leading ':' optional ("HEADLINE").
  std::optional<std::string> type = std::nullopt;
};

// Objects of `table` matching `query`, in id order.
std::vector<MemoryObjectPtr> query_memory(const MemoryTable& table, const MemoryQuery& query);

// Objects whose attribute `key` (case-insensitive) equals `value` structurally, in id order.
std::vector<MemoryObjectPtr> objects_with_attribute(const MemoryTable& table, std::string_view key, const Value& value);

// Headlines tagged "project" whose :TODO-STATE is not "DONE", in id order.
std::vector<MemoryObjectPtr> active_projects(const MemoryTable& table);

// Headlines whose :TODO-STATE is "DONE", in id order.
std::vector<MemoryObjectPtr> completed_tasks(const MemoryTable& table);

// The text tag matching searches: a string's text, or a list's element texts
// joined by spaces; empty when there are no tags.
std::string tags_text(const Value& tags);

// True when `tags` contains `tag` ignoring ASCII case (see MemoryQuery::tag).
bool tags_contain(const Value& tags, std::string_view tag);

}  // namespace passepartout
