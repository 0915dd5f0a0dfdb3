// The decision log's files and lines as readers see them.
#include "cli/decision_files.hpp"

#include <algorithm>
#include <cstdlib>
#include <system_error>

namespace passepartout::cli {

namespace fs = std::filesystem;

std::vector<fs::path> decision_files_newest_first(const fs::path& folder) {
  struct Rotated {
    std::string stamp;
    long n;
    fs::path path;
  };
  std::vector<Rotated> rotated;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("decisions-") || !name.ends_with(".jsonl")) continue;
    const std::string middle = name.substr(10, name.size() - 10 - 6);
    const std::size_t dash = middle.rfind('-');
    if (dash == std::string::npos) continue;
    rotated.push_back({middle.substr(0, dash), std::strtol(middle.c_str() + dash + 1, nullptr, 10), entry.path()});
  }
  std::sort(rotated.begin(), rotated.end(),
            [](const Rotated& a, const Rotated& b) { return a.stamp != b.stamp ? a.stamp > b.stamp : a.n > b.n; });
  std::vector<fs::path> files;
  if (fs::exists(folder / "decisions.jsonl", ec)) files.push_back(folder / "decisions.jsonl");
  for (const Rotated& r : rotated) files.push_back(r.path);
  return files;
}

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
