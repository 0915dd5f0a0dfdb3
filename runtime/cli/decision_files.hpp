// The decision log's files as readers see them (docs/decision-log.md): which
// files a folder holds (decision_files_newest_first, the writer's), and one
// line parsed into its record.
// Shared by `passepartout decisions` and `passepartout verify --replay`.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/decision_log.hpp"  // decision_files_newest_first

namespace passepartout::cli {

using DecisionJson = nlohmann::ordered_json;

// One line as a record: a JSON object with a string "time"; nullopt for
// anything else (not JSON, not an object, no time), which readers skip and
// name as malformed.
std::optional<DecisionJson> parse_decision_line(std::string_view line);

// The string under `key`, or "" when it is absent or not a string.
std::string decision_text(const DecisionJson& record, const char* key);

// The gate that decided `outcome` ("blocked", "failed", "approval"): the
// last of the record's gates whose verdict is the outcome; "" when none is.
std::string deciding_gate(const DecisionJson& record, const std::string& outcome);

}  // namespace passepartout::cli
