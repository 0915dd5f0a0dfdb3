// Skill fingerprints and settings differences, for the audit log.
#include "skills/skill_fingerprint.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include "base/ascii.hpp"
#include "base/digest.hpp"
#include "skills/skill_manifest.hpp"
#include "value/sexp_printer.hpp"

namespace passepartout {
namespace {

constexpr std::size_t kFingerprintDigits = 12;
constexpr std::size_t kShownValueLength = 40;

std::string dependency_texts(const std::vector<Dependency>& deps) {
  std::string text;
  for (const Dependency& dep : deps) text += (text.empty() ? "" : ",") + dep.text;
  return text;
}

std::string trigger_text(const TriggerSpec& trigger) {
  std::string text = trigger.always ? "always" : "";
  for (const std::string& sensor : trigger.sensors) text += "," + sensor;
  return text;
}

// The settings compared one by one, in the order they are described.
std::vector<std::pair<std::string_view, std::string>> settings(const SkillManifest& m) {
  return {{"version", m.version.to_string()},
          {"library", m.library},
          {"abi", std::to_string(m.abi.major) + "." + std::to_string(m.abi.minor)},
          {"priority", std::to_string(m.priority)},
          {"depends_on", dependency_texts(m.depends_on)},
          {"guarded_by", dependency_texts(m.guarded_by)},
          {"trigger", trigger_text(m.trigger)},
          {"sha256", m.sha256.value_or("")},
          {"never_unload", m.never_unload ? "true" : "false"},
          {"gate_timeout", m.gate_timeout ? std::to_string(m.gate_timeout->count()) + "ms" : ""}};
}

// A config plist's entries by lower-case key.
std::map<std::string, Value> config_entries(const Value& config) {
  std::map<std::string, Value> entries;
  const auto items = config.items();
  for (std::size_t i = 0; i + 1 < items.size(); i += 2) {
    entries[ascii_lower(items[i].text())] = items[i + 1];
  }
  return entries;
}

std::string shown(const Value& value) {
  if (value.is_true()) return "true";
  if (value.is_nil()) return "false";
  std::string text = to_sexp(value);
  if (text.size() > kShownValueLength) text = text.substr(0, kShownValueLength - 3) + "...";
  return text;
}

std::string shown_or_none(const std::map<std::string, Value>& entries, const std::string& key) {
  auto found = entries.find(key);
  return found == entries.end() ? "(none)" : shown(found->second);
}

}  // namespace

std::string skill_fingerprint(const SkillManifest& manifest, const Value& config) {
  std::string canonical = "name=" + manifest.name + "\n";
  for (const auto& [key, value] : settings(manifest)) {
    if (key == "gate_timeout" && value.empty()) continue;  // unset: fingerprints from before the field stay valid
    canonical.append(key).append("=").append(value).append("\n");
  }
  canonical += "config=" + to_sexp(config) + "\n";
  return sha256_hex(canonical).substr(0, kFingerprintDigits);
}

bool looks_like_secret_key(std::string_view key) {
  const std::string lower = ascii_lower(key);
  for (std::string_view word : {"token", "secret", "password", "passwd", "credential", "auth", "private"}) {
    if (lower.find(word) != std::string::npos) return true;
  }
  return lower.size() >= 3 && lower.compare(lower.size() - 3, 3, "key") == 0;
}

std::string describe_settings_change(const SkillManifest& from, const Value& from_config, const SkillManifest& to,
                                     const Value& to_config) {
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : "; ") + part; };
  const auto before = settings(from);
  const auto after = settings(to);
  for (std::size_t i = 0; i < before.size(); ++i) {
    if (before[i].second == after[i].second) continue;
    auto side = [](const std::string& v) { return v.empty() ? std::string("(none)") : v; };
    add(std::string(before[i].first) + ": " + side(before[i].second) + " -> " + side(after[i].second));
  }
  const auto old_entries = config_entries(from_config);
  const auto new_entries = config_entries(to_config);
  std::vector<std::string> keys;
  keys.reserve(old_entries.size() + new_entries.size());
  for (const auto& entry : old_entries) keys.push_back(entry.first);
  for (const auto& entry : new_entries) {
    if (old_entries.count(entry.first) == 0) keys.push_back(entry.first);
  }
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    auto a = old_entries.find(key);
    auto b = new_entries.find(key);
    if (a != old_entries.end() && b != new_entries.end() && a->second == b->second) continue;
    if (looks_like_secret_key(key)) {
      add("config: " + key + (a == old_entries.end() ? " added" : b == new_entries.end() ? " removed" : " changed"));
    } else {
      add("config: " + key + " " + shown_or_none(old_entries, key) + " -> " + shown_or_none(new_entries, key));
    }
  }
  return text;
}

}  // namespace passepartout
