#include "pipeline/consensus_yaml.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

namespace passepartout {
namespace {

constexpr std::string_view kKeys[] = {"providers", "quorum", "ahead_by", "max_calls", "when"};
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"k", "ahead_by"}, {"voters", "providers"}, {"models", "providers"}, {"calls", "max_calls"}};

// A whole number of at least `least`, or nullopt.
std::optional<int> whole(const YAML::Node& value, int least) {
  if (!value.IsScalar()) return std::nullopt;
  const std::string& text = value.Scalar();
  int number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || end != text.data() + text.size() || number < least) return std::nullopt;
  return number;
}

}  // namespace

void read_consensus(const YAML::Node& node, YamlProblems& problems, ConsensusConfig& out,
                    std::vector<std::string>& origins) {
  if (!node.IsMap()) {
    problems.problem(node.Mark(), "consensus: expected a map (providers:, quorum: or ahead_by:, when:)");
    return;
  }
  const std::size_t before = problems.count();
  YAML::Mark quorum_mark;
  YAML::Mark ahead_mark;
  bool max_calls_set = false;
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    const YAML::Node& value = entry.second;
    const std::string name = key.IsScalar() ? key.Scalar() : std::string("?");
    if (std::find(std::begin(kKeys), std::end(kKeys), name) == std::end(kKeys)) {
      problems.problem(key.Mark(), unknown_key_message(name, kKeys, " in consensus", kAliases));
      continue;
    }
    if (name == "providers") {
      if (!value.IsSequence() || value.size() == 0) {
        problems.problem_at(key, value, "providers: expected a list of provider names ([a, b, c])");
        continue;
      }
      for (const YAML::Node& provider : value) {
        if (!provider.IsScalar() || provider.Scalar().empty()) {
          problems.problem(provider.Mark(), "providers: expected a provider's name");
          continue;
        }
        if (std::find(out.providers.begin(), out.providers.end(), provider.Scalar()) != out.providers.end()) {
          problems.problem(provider.Mark(), "providers: " + in_quotes(provider.Scalar()) +
                                                " is listed twice (each provider votes once per call)");
          continue;
        }
        out.providers.push_back(provider.Scalar());
        origins.push_back(location(problems.origin(), provider.Mark()));
      }
    } else if (name == "quorum") {
      const auto number = whole(value, 2);
      if (!number) {
        problems.problem_at(key, value, "quorum: expected a whole number of answers that must agree, at least 2");
        continue;
      }
      out.quorum = *number;
      quorum_mark = key.Mark();
    } else if (name == "ahead_by") {
      const auto number = whole(value, 1);
      if (!number) {
        problems.problem_at(key, value, "ahead_by: expected a whole number of votes, at least 1");
        continue;
      }
      out.ahead_by = *number;
      ahead_mark = key.Mark();
    } else if (name == "max_calls") {
      const auto number = whole(value, 1);
      if (!number) {
        problems.problem_at(key, value, "max_calls: expected a whole number of calls, at least 1");
        continue;
      }
      out.max_calls = *number;
      max_calls_set = true;
    } else if (name == "when") {
      const std::string when = value.IsScalar() ? value.Scalar() : std::string();
      if (when == "acting") {
        out.when = ConsensusConfig::When::acting;
      } else if (when == "always") {
        out.when = ConsensusConfig::When::always;
      } else {
        problems.problem_at(key, value, "when: expected acting (proposals that act) or always (every proposal)");
      }
    }
  }
  if (problems.count() != before) return;
  if (out.quorum > 0 && out.ahead_by > 0) {
    problems.problem(ahead_mark, "consensus: give quorum: or ahead_by:, not both");
    return;
  }
  if (max_calls_set && out.ahead_by == 0) {
    problems.problem(node.Mark(), "consensus: max_calls: bounds an ahead_by: round; add ahead_by: or drop max_calls:");
    return;
  }
  if (out.ahead_by > 0) {
    if (!max_calls_set) out.max_calls = 4 * out.ahead_by;
    if (out.max_calls < out.ahead_by) {
      problems.problem(ahead_mark, "consensus: max_calls: must be at least ahead_by: (" + std::to_string(out.ahead_by) +
                                       "), or no round can be decided");
    }
    return;
  }
  if (out.quorum == 0) {
    if (out.providers.size() < 2) {
      problems.problem(node.Mark(), "consensus: needs quorum: or ahead_by: when fewer than two providers are listed");
      return;
    }
    out.quorum = static_cast<int>(out.providers.size() / 2 + 1);  // a majority
  }
  if (!out.providers.empty() && out.quorum > static_cast<int>(out.providers.size())) {
    problems.problem(quorum_mark, "consensus: quorum: " + std::to_string(out.quorum) + " is more than the " +
                                      std::to_string(out.providers.size()) +
                                      " providers listed: no round could be agreed");
  }
}

}  // namespace passepartout
