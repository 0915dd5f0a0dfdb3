// What the YAML readers (manifests, scripted-provider scripts) share: located
// messages and "did you mean" suggestions (typing scalars: yaml_scalars.hpp).
// Included only by .cpp files (those readers, and the skill table's check of a
// manifest's config keys): it brings in yaml-cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace passepartout {

// Quoted for a message, shortened (at a code point) so one bad value cannot flood a log line.
std::string in_quotes(std::string_view s);

// "<where>:<line>:<column>", 1-based; a mark yaml-cpp left unset counts as the start.
std::string location(const std::string& where, const YAML::Mark& mark);
// "<where>:<line>:<column>: <what>".
std::string located(const std::string& where, const YAML::Mark& mark, const std::string& what);

// Edit distance counting a swap of neighbours as one edit ("nmae" -> "name").
std::size_t edit_distance(std::string_view a, std::string_view b);

// "unknown key 'priorty'<where>; did you mean 'priority'?", or the allowed
// keys when nothing is close. `aliases` maps names people reach for (compared
// lower-cased) to the known key they mean.
std::string unknown_key_message(std::string_view key, std::span<const std::string_view> known, std::string_view where,
                                std::span<const std::pair<std::string_view, std::string_view>> aliases = {});

// The problems a YAML reader finds, each located "<origin>:<line>:<col>: <what>",
// reported together so one run shows every mistake in a file.
class YamlProblems {
 public:
  explicit YamlProblems(std::string origin) : origin_(std::move(origin)) {}

  void problem(const YAML::Mark& mark, const std::string& what) { problems_.push_back(located(origin_, mark, what)); }
  // At the value, or at its key when the value is empty (yaml-cpp marks an
  // empty value at the next token).
  void problem_at(const YAML::Node& key, const YAML::Node& value, const std::string& what) {
    problem(!value.IsDefined() || value.IsNull() ? key.Mark() : value.Mark(), what);
  }
  bool ok() const { return problems_.empty(); }
  std::size_t count() const noexcept { return problems_.size(); }
  // Every problem, one per line.
  std::string message() const;
  const std::string& origin() const noexcept { return origin_; }

 private:
  std::string origin_;
  std::vector<std::string> problems_;
};

}  // namespace passepartout
