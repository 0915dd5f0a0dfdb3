// Global awareness: rendering active projects as an Org outline.
#include "memory/global_awareness.hpp"

#include <algorithm>
#include <set>

#include "memory/memory_query.hpp"

namespace passepartout {
namespace {

class OutlineRenderer {
 public:
  OutlineRenderer(const MemoryTable& objects, std::string& out) : objects_(objects), out_(out) {}

  void render(const MemoryObject& object, std::size_t depth, std::string_view foveal_id) {
    const bool is_foveal = !foveal_id.empty() && object.id == foveal_id;
    if (depth > 2 && !is_foveal) return;
    // Ids can form a cycle (a node re-ingested under its own descendant); follow it once.
    if (!on_path_.insert(object.id).second) return;

    const Value& title = object.attributes.at("TITLE");
    out_.append(depth, '*').append(" ");
    out_.append(title.is_string() && !title.text().empty() ? title.text() : std::string_view("Untitled"));
    out_.append("\n:PROPERTIES:\n:ID: ").append(object.id).append("\n:END:\n");
    if (is_foveal && !object.content.empty()) out_.append(object.content).append("\n");

    for (const std::string& child_id : object.children) {
      auto child = objects_.find(child_id);
      if (child == objects_.end()) continue;
      render(*child->second, depth + 1, is_foveal ? std::string_view(child_id) : foveal_id);
    }
    on_path_.erase(object.id);
  }

 private:
  const MemoryTable& objects_;
  std::string& out_;
  std::set<std::string, std::less<>> on_path_;
};

bool is_private(const MemoryObject& project, std::span<const std::string> private_tags) {
  const Value& tags = project.attributes.at("TAGS");
  return std::any_of(private_tags.begin(), private_tags.end(),
                     [&](const std::string& tag) { return !tag.empty() && tags_contain(tags, tag); });
}

}  // namespace

std::string render_global_awareness(const MemoryTable& objects, const AwarenessOptions& options) {
  std::string out;
  out.reserve(128);  // room for the header and the line after it: one allocation
  out += "GLOBAL MEMEX AWARENESS (Peripheral Vision):\n";
  auto projects = active_projects(objects);
  std::erase_if(projects, [&](const MemoryObjectPtr& project) { return is_private(*project, options.private_tags); });
  if (projects.empty()) {
    out += "No active projects found.\n";
    return out;
  }
  OutlineRenderer renderer(objects, out);
  for (const MemoryObjectPtr& project : projects) renderer.render(*project, 1, options.foveal_id);
  return out;
}

std::string render_global_awareness(const MemoryStore& store, const AwarenessOptions& options) {
  auto objects = store.objects();
  return render_global_awareness(*objects, options);
}

std::string foveal_id_of(const Value& signal) {
  const Value& focus = signal.at("FOVEAL-FOCUS");
  if (focus.is_string() && !focus.text().empty()) return std::string(focus.text());
  const Value& target = signal.path({"PAYLOAD", "TARGET-ID"});
  return target.is_string() ? std::string(target.text()) : std::string();
}

}  // namespace passepartout
