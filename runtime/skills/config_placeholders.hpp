// Placeholders in a manifest's config: "${workspace}" stands for a folder the
// host chooses (the daemon's `--workspace`), so a bundled manifest can name
// it without knowing where the daemon keeps its state.
#pragma once

#include <map>
#include <set>
#include <string>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

// Name -> text, e.g. {"workspace", "/var/lib/passepartout/workspace"}.
using ConfigPlaceholders = std::map<std::string, std::string, std::less<>>;

struct ExpandedConfig {
  Value config;                // `config` with every placeholder in a string replaced
  std::set<std::string> used;  // the names that occurred
};

// Replaces each "${name}" in every string of `config` (keys and other kinds
// are left as they are; lists are walked) with `values[name]`. A "$" not
// followed by "{" stays as it is. Fails (invalid_input) on an unknown name
// or an unclosed "${", naming the skill `who`, the placeholder and the known
// names. Pure; any thread.
Result<ExpandedConfig> expand_config_placeholders(const Value& config, const ConfigPlaceholders& values,
                                                  std::string_view who);

}  // namespace passepartout
