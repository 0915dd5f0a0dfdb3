// Memory queries: linear scans of an immutable table.
#include "memory/memory_query.hpp"

#include <algorithm>

#include "base/ascii.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

std::string text_of(const Value& value) {
  if (value.is_string() || value.is_keyword() || value.is_symbol()) return std::string(value.text());
  return to_sexp(value);
}

bool todo_state_is(const MemoryObject& object, std::string_view state) {
  const Value& value = object.attributes.at("TODO-STATE");
  return (value.is_string() || value.is_keyword() || value.is_symbol()) && value.text() == state;
}

bool contains_ignore_case(std::string_view haystack, std::string_view needle) {
  auto found = std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end(),
                           [](char a, char b) { return ascii_lower(a) == ascii_lower(b); });
  return found != haystack.end() || needle.empty();
}

bool matches(const MemoryObject& object, const MemoryQuery& query) {
  if (query.type && !object.type.is_keyword(*query.type)) return false;
  if (query.tag && !tags_contain(object.attributes.at("TAGS"), *query.tag)) return false;
  if (query.todo_state && !todo_state_is(object, *query.todo_state)) return false;
  return true;
}

}  // namespace

std::string tags_text(const Value& tags) {
  if (!tags.is_list()) return tags.is_nil() ? std::string() : text_of(tags);
  std::string out;
  for (const Value& tag : tags.items()) {
    if (!out.empty()) out += ' ';
    out += text_of(tag);
  }
  return out;
}

bool tags_contain(const Value& tags, std::string_view tag) { return contains_ignore_case(tags_text(tags), tag); }

std::vector<MemoryObjectPtr> query_memory(const MemoryTable& table, const MemoryQuery& query) {
  std::vector<MemoryObjectPtr> out;
  for (const auto& [id, object] : table) {
    if (matches(*object, query)) out.push_back(object);
  }
  return out;
}

std::vector<MemoryObjectPtr> objects_with_attribute(const MemoryTable& table, std::string_view key,
                                                    const Value& value) {
  std::vector<MemoryObjectPtr> out;
  for (const auto& [id, object] : table) {
    const Value* found = object->attributes.get(key);
    if (found != nullptr && *found == value) out.push_back(object);
  }
  return out;
}

std::vector<MemoryObjectPtr> active_projects(const MemoryTable& table) {
  auto projects = query_memory(table, MemoryQuery{.tag = "project", .type = "HEADLINE"});
  std::erase_if(projects, [](const MemoryObjectPtr& object) { return todo_state_is(*object, "DONE"); });
  return projects;
}

std::vector<MemoryObjectPtr> completed_tasks(const MemoryTable& table) {
  return query_memory(table, MemoryQuery{.todo_state = "DONE", .type = "HEADLINE"});
}

}  // namespace passepartout
