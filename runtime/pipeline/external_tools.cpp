// The external tools' catalog and their guard rule.
#include "pipeline/external_tools.hpp"

#include <algorithm>
#include <utility>

#include "base/ascii.hpp"
#include "skills/registry.hpp"
#include "skills/slot.hpp"

namespace passepartout {

namespace {

bool same_name(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return ascii_lower(x) == ascii_lower(y); });
}

}  // namespace

ToolCatalog::ToolCatalog(std::uint64_t generation, std::vector<ExternalTool> tools,
                         std::vector<std::pair<std::string, std::string>> unavailable)
    : generation_(generation), tools_(std::move(tools)), unavailable_(std::move(unavailable)) {
  std::sort(tools_.begin(), tools_.end(), [](const ExternalTool& a, const ExternalTool& b) { return a.name < b.name; });
}

const ExternalTool* ToolCatalog::find(std::string_view name) const noexcept {
  for (const ExternalTool& tool : tools_) {
    if (same_name(tool.name, name)) return &tool;
  }
  return nullptr;
}

std::string_view ToolCatalog::unavailable(std::string_view name) const noexcept {
  for (const auto& [known, why] : unavailable_) {
    if (same_name(known, name)) return why;
  }
  return {};
}

std::string missing_guard(const Snapshot& snapshot, const ExternalTool& tool) {
  if (tool.guards.empty()) return "the tool '" + tool.name + "' names no guard";
  for (const std::string& guard : tool.guards) {
    const Slot* found = snapshot.find(guard);
    if (found == nullptr) return "the tool '" + tool.name + "' is guarded by " + guard + ", which is not loaded";
    if (!found->has_gate()) return "the tool '" + tool.name + "' is guarded by " + guard + ", which has no gate";
  }
  return {};
}

}  // namespace passepartout
