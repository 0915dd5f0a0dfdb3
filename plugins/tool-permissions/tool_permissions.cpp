// tool-permissions: the tool gate. Every model tool call (`:TARGET :TOOL`) is
// allowed, sent to a human, or denied by the level configured for its name,
// or by the most specific name pattern that matches it (`mcp__fs__*: allow`,
// `mcp__*: ask`; `*` matches any run of characters); tools nothing names
// need approval, as in the seed (I4).
#include <passepartout/name_pattern.hpp>
#include <passepartout/skill.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "skill_text.hpp"

namespace {

using passepartout::Action;
using passepartout::Signal;
using passepartout::ValueRef;
using passepartout::Verdict;
using passepartout::bundled::is_named;
using passepartout::bundled::is_text;
using passepartout::bundled::lower;

enum class Level { allow, ask, deny };

// "allow", "ask" or "deny" in any case (string, keyword or symbol).
Level parse_level(const ValueRef& value, std::string_view tool) {
  if (is_named(value, "allow")) return Level::allow;
  if (is_named(value, "ask")) return Level::ask;
  if (is_named(value, "deny")) return Level::deny;
  throw std::invalid_argument("config tools: '" + std::string(tool) + "': expected allow, ask or deny, got " +
                              value.print());
}

// Immutable after construction: gate() may run on any number of threads at once.
class ToolPermissions final : public passepartout::Skill {
 public:
  static constexpr const char kName[] = "tool-permissions";
  static constexpr const char kVersion[] = "1.0.0";
  static constexpr passepartout::ConfigKeySpec kConfig[] = {
      {"tools", "map", nullptr,
       "Tool name or pattern (mcp__fs__*): allow, ask or deny (names ignore case; a name wins over a pattern, a "
       "longer pattern over a shorter one)"}};

  // `config :TOOLS`: a map of tool name to allow, ask or deny.
  explicit ToolPermissions(const ValueRef& config) {
    const ValueRef tools = config.get("TOOLS");
    if (tools.is_nil()) return;
    if (!tools.is_list() || tools.size() % 2 != 0) {
      throw std::invalid_argument("config tools: expected a map of tool name to allow, ask or deny, got " +
                                  tools.print());
    }
    for (std::size_t i = 0; i < tools.size(); i += 2) {
      const ValueRef key = tools[i];
      if (!key.is_keyword()) {
        throw std::invalid_argument("config tools: expected a map of tool name to allow, ask or deny, got " +
                                    tools.print());
      }
      // Keys are unique: the manifest refuses a map naming one keyword twice.
      std::string name = lower(key.text());
      const Level level = parse_level(tools[i + 1], name);
      table_.emplace_back(std::move(name), level);
    }
  }

  Verdict gate(const Action& action, const Signal& /*signal*/) override {
    if (!is_named(action.get("TARGET"), "TOOL")) return Verdict::pass();
    const ValueRef tool = action.get("PAYLOAD").get("TOOL");
    if (!is_text(tool) || tool.text().empty()) {
      return Verdict::block("Tool call blocked: :PAYLOAD :TOOL must name the tool, got " + tool.print());
    }
    const std::string name = lower(tool.text());
    switch (level_of(name)) {
      case Level::allow:
        return Verdict::pass();
      case Level::ask:
        return Verdict::approval("Tool '" + name + "' requires approval by tool-permissions");
      case Level::deny:
        return Verdict::block("Tool '" + name + "' is denied by tool-permissions");
    }
    return Verdict::block("Tool '" + name + "' is denied by tool-permissions");
  }

 private:
  // The configured level: the tool's own, else the longest pattern's that
  // matches, else :ask (I4).
  Level level_of(const std::string& name) const {
    const std::pair<std::string, Level>* best = nullptr;
    for (const auto& entry : table_) {
      const std::string& tool = entry.first;
      if (tool == name) return entry.second;
      if (tool.find('*') != std::string::npos && passepartout::name_matches(tool, name) &&
          (best == nullptr || tool.size() > best->first.size())) {
        best = &entry;
      }
    }
    return best != nullptr ? best->second : Level::ask;
  }

  std::vector<std::pair<std::string, Level>> table_;  // lower-case names, as configured
};

}  // namespace

PASSEPARTOUT_SKILL(ToolPermissions);
