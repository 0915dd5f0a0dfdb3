// What the YAML readers (manifests, scripted-provider scripts) share: located
// messages, "did you mean" suggestions, and the YAML 1.2 core booleans.
// Included only by those readers' .cpp files: it brings in yaml-cpp.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace passepartout {

// Quoted for a message, shortened (at a code point) so one bad value cannot flood a log line.
std::string in_quotes(std::string_view s);

// "<where>:<line>:<column>: <what>", 1-based; a mark yaml-cpp left unset counts as the start.
std::string located(const std::string& where, const YAML::Mark& mark, const std::string& what);

// Edit distance counting a swap of neighbours as one edit ("nmae" -> "name").
std::size_t edit_distance(std::string_view a, std::string_view b);

// "unknown key 'priorty'<where>; did you mean 'priority'?", or the allowed
// keys when nothing is close. `aliases` maps names people reach for (compared
// lower-cased) to the known key they mean.
std::string unknown_key_message(std::string_view key, std::span<const std::string_view> known, std::string_view where,
                                std::span<const std::pair<std::string_view, std::string_view>> aliases = {});

// YAML 1.2 core schema booleans: true/True/TRUE, false/False/FALSE.
std::optional<bool> core_bool(std::string_view s);

}  // namespace passepartout
