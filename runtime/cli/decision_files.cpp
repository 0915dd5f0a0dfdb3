// The decision log's lines as readers see them.
#include "cli/decision_files.hpp"

namespace passepartout::cli {

std::optional<DecisionJson> parse_decision_line(std::string_view line) {
  DecisionJson record = DecisionJson::parse(line, nullptr, false);
  if (record.is_discarded() || !record.is_object()) return std::nullopt;
  auto time = record.find("time");
  if (time == record.end() || !time->is_string()) return std::nullopt;
  return record;
}

std::string decision_text(const DecisionJson& record, const char* key) {
  auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string deciding_gate(const DecisionJson& record, const std::string& outcome) {
  auto gates = record.find("gates");
  if (gates == record.end() || !gates->is_array()) return {};
  for (auto it = gates->rbegin(); it != gates->rend(); ++it) {
    if (it->is_object() && decision_text(*it, "verdict") == outcome) return decision_text(*it, "name");
  }
  return {};
}

}  // namespace passepartout::cli
