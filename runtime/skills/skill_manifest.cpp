// Reading skill manifests: YAML through yaml-cpp (whose exceptions stop here),
// every field checked, and config converted to a keyword plist.
#include "skills/skill_manifest.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <system_error>
#include <utility>

#include "base/ascii.hpp"
#include "base/file_io.hpp"
#include "base/utf8.hpp"
#include "base/yaml_diagnostics.hpp"
#include "base/yaml_scalars.hpp"

namespace passepartout {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTopKeys[] = {"name",        "version",      "library",      "abi",       "priority",
                                         "depends_on",  "guarded_by",   "trigger",      "config",    "sha256",
                                         "description", "never_unload", "gate_timeout", "isolation", "sandbox"};
constexpr std::string_view kRequiredKeys[] = {"name", "version", "library", "abi"};
constexpr std::string_view kTriggerKeys[] = {"sensors", "always"};
constexpr std::string_view kSandboxKeys[] = {"files",      "network",     "processes", "memory",
                                             "open_files", "cpu_seconds", "require"};

// Names people reach for that are too far from ours for the edit distance to find.
constexpr std::pair<std::string_view, std::string_view> kKeyAliases[] = {
    {"dependencies", "depends_on"}, {"depends", "depends_on"}, {"requires", "depends_on"}, {"guards", "guarded_by"},
    {"guarded", "guarded_by"},      {"guard", "guarded_by"},   {"lib", "library"},         {"so", "library"},
    {"checksum", "sha256"},         {"hash", "sha256"},        {"desc", "description"},    {"settings", "config"},
    {"options", "config"},          {"abi_version", "abi"},    {"triggers", "trigger"},    {"permissions", "sandbox"},
    {"security", "sandbox"},
};
constexpr std::pair<std::string_view, std::string_view> kSandboxAliases[] = {
    {"paths", "files"},           {"read", "files"},     {"net", "network"},         {"sockets", "network"},
    {"fork", "processes"},        {"exec", "processes"}, {"memory_limit", "memory"}, {"address_space", "memory"},
    {"files_open", "open_files"}, {"fds", "open_files"}, {"cpu", "cpu_seconds"},     {"requires", "require"},
    {"required", "require"},
};

// --- small text helpers --------------------------------------------------------

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_lower_or_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'z'); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// --- YAML 1.2 core schema ------------------------------------------------------

// --- the reader ------------------------------------------------------------------

// What was found, for "... found <this>".
std::string describe(const YAML::Node& node) {
  if (node.IsScalar()) return in_quotes(node.Scalar());
  if (node.IsSequence()) return "a sequence";
  if (node.IsMap()) return "a map";
  return "an empty value";
}

bool valid_config_key_char(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u <= 0x20 || u == 0x7F) return false;
  return std::string_view("()\"';|\\#`,:").find(c) == std::string_view::npos;
}

bool valid_sensor_char(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
}

bool is_constraint_char(char c) { return c == '<' || c == '>' || c == '=' || c == '^' || c == '~' || c == '*'; }

// Reads one manifest document, collecting every problem as a located line.
class ManifestReader : public YamlProblems {
 public:
  using YamlProblems::YamlProblems;

  void read(const YAML::Node& root, SkillManifest& out);

 private:
  std::optional<std::string> scalar(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                                    std::string_view expected);
  std::optional<bool> boolean(const YAML::Node& key, const YAML::Node& value, std::string_view field);

  void read_name(const YAML::Node& key, const YAML::Node& value, SkillManifest& out);
  void read_library(const YAML::Node& key, const YAML::Node& value, SkillManifest& out);
  void read_priority(const YAML::Node& key, const YAML::Node& value, SkillManifest& out);
  // depends_on and guarded_by: `field` names the key in messages.
  void read_dependencies(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                         std::vector<Dependency>& out, std::vector<YAML::Mark>& marks);
  // The entries of a nested map (`trigger`, `sandbox`) whose keys are names
  // in `known`, each once; a problem for every other entry. Null reads as no
  // entries; anything but a map is a problem showing `example`.
  std::vector<std::pair<YAML::Node, YAML::Node>> section_entries(
      const YAML::Node& key, const YAML::Node& value, const std::string& section, std::string_view example,
      std::span<const std::string_view> known, std::span<const std::pair<std::string_view, std::string_view>> aliases);
  void read_trigger(const YAML::Node& key, const YAML::Node& value, SkillManifest& out);
  void read_sha256(const YAML::Node& key, const YAML::Node& value, SkillManifest& out);
  void read_sandbox(const YAML::Node& key, const YAML::Node& value, SandboxSpec& out);
  void read_sandbox_files(const YAML::Node& key, const YAML::Node& value, SandboxSpec& out);
  void read_sandbox_require(const YAML::Node& key, const YAML::Node& value, SandboxSpec& out);
  std::optional<std::uint64_t> sandbox_count(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                                             std::uint64_t most);
  void read_gate_timeout(const YAML::Node& key, const YAML::Node& value, SkillManifest& out);
  Value convert_config(const YAML::Node& node, const std::string& path, int depth);
  Value convert_config_scalar(const YAML::Node& node, const std::string& path);

  std::vector<YAML::Mark> dependency_marks_;  // parallel to depends_on
  std::vector<YAML::Mark> guard_marks_;       // parallel to guarded_by
  std::size_t config_values_ = 0;
  bool config_aborted_ = false;  // a cap was hit; the problem is already reported once
};

std::optional<std::string> ManifestReader::scalar(const YAML::Node& key, const YAML::Node& value,
                                                  std::string_view field, std::string_view expected) {
  if (value.IsScalar()) return value.Scalar();
  problem_at(key, value,
             "'" + std::string(field) + "' must be " + std::string(expected) + ", found " + describe(value));
  return std::nullopt;
}

std::optional<bool> ManifestReader::boolean(const YAML::Node& key, const YAML::Node& value, std::string_view field) {
  if (value.IsScalar()) {
    if (auto b = core_bool(value.Scalar())) return b;
  }
  problem_at(key, value, "'" + std::string(field) + "' must be true or false, found " + describe(value));
  return std::nullopt;
}

void ManifestReader::read(const YAML::Node& root, SkillManifest& out) {
  std::map<std::string, YAML::Mark> seen;
  for (const auto& entry : root) {
    const YAML::Node& key = entry.first;
    const YAML::Node& value = entry.second;
    if (!key.IsScalar()) {
      problem(key.Mark(), "keys must be names such as 'name', found " + describe(key));
      continue;
    }
    const std::string& k = key.Scalar();
    if (std::find(std::begin(kTopKeys), std::end(kTopKeys), k) == std::end(kTopKeys)) {
      problem(key.Mark(), unknown_key_message(k, kTopKeys, "", kKeyAliases));
      continue;
    }
    if (auto [it, inserted] = seen.emplace(k, key.Mark()); !inserted) {
      problem(key.Mark(), "duplicate key " + in_quotes(k) + " (first given at line " +
                              std::to_string(it->second.line + 1) + "); keep one");
      continue;
    }

    if (k == "name") {
      read_name(key, value, out);
    } else if (k == "version") {
      if (auto text = scalar(key, value, k, "a version such as 1.2.0")) {
        auto version = SemVer::parse(*text);
        if (version) {
          out.version = *version;
        } else {
          problem(value.Mark(), version.error().message);
        }
      }
    } else if (k == "library") {
      read_library(key, value, out);
    } else if (k == "abi") {
      if (auto text = scalar(key, value, k, "an ABI version such as 1")) {
        auto abi = AbiVersion::parse(*text);
        if (abi) {
          out.abi = *abi;
        } else {
          problem(value.Mark(), abi.error().message);
        }
      }
    } else if (k == "priority") {
      read_priority(key, value, out);
    } else if (k == "depends_on") {
      read_dependencies(key, value, k, out.depends_on, dependency_marks_);
    } else if (k == "guarded_by") {
      read_dependencies(key, value, k, out.guarded_by, guard_marks_);
      for (Dependency& guard : out.guarded_by) guard.guard = true;
    } else if (k == "trigger") {
      read_trigger(key, value, out);
    } else if (k == "config") {
      if (value.IsNull()) continue;
      if (!value.IsMap()) {
        problem_at(key, value, "'config' must be a map such as { max_output: 100000 }, found " + describe(value));
        continue;
      }
      out.config = convert_config(value, "config", 1);
      for (const auto& config_entry : value) {
        const YAML::Node& config_key = config_entry.first;
        if (!config_key.IsScalar()) continue;
        out.config_keys.push_back({config_key.Scalar(), config_key.Mark().line + 1, config_key.Mark().column + 1});
      }
    } else if (k == "sha256") {
      read_sha256(key, value, out);
    } else if (k == "description") {
      if (value.IsNull()) continue;
      if (auto text = scalar(key, value, k, "a string")) out.description = *text;
    } else if (k == "never_unload") {
      if (auto b = boolean(key, value, k)) out.never_unload = *b;
    } else if (k == "sandbox") {
      read_sandbox(key, value, out.sandbox);
    } else if (k == "gate_timeout") {
      read_gate_timeout(key, value, out);
    } else if (k == "isolation") {
      if (auto text = scalar(key, value, k, "'process' or 'in-process'")) {
        if (*text == "process") {
          out.isolation = Isolation::process;
        } else if (*text == "in-process") {
          out.isolation = Isolation::in_process;
        } else {
          problem(value.Mark(),
                  "'isolation' must be 'process' (the skill runs in a worker process of its own) or "
                  "'in-process' (it runs inside the daemon), found " +
                      in_quotes(*text));
        }
      }
    }
  }

  for (std::string_view required : kRequiredKeys) {
    if (seen.find(std::string(required)) == seen.end()) {
      problem(root.Mark(), "missing required key '" + std::string(required) + "'");
    }
  }

  // Needs the name, which may come after depends_on.
  if (!out.name.empty()) {
    for (std::size_t i = 0; i < out.depends_on.size(); ++i) {
      if (out.depends_on[i].name == out.name) {
        problem(dependency_marks_[i],
                "skill " + in_quotes(out.name) + " depends on itself; remove it from 'depends_on'");
      }
    }
  }
}

void ManifestReader::read_name(const YAML::Node& key, const YAML::Node& value, SkillManifest& out) {
  auto text = scalar(key, value, "name", "a skill name such as shell-guard");
  if (!text) return;
  if (!is_valid_skill_name(*text)) {
    problem(value.Mark(), "invalid skill name " + in_quotes(*text) +
                              ": use lower-case letters, digits and '-', starting with a letter "
                              "or digit, at most 64 characters");
    return;
  }
  out.name = *text;
}

void ManifestReader::read_library(const YAML::Node& key, const YAML::Node& value, SkillManifest& out) {
  auto text = scalar(key, value, "library", "a file name such as libshell-guard.so");
  if (!text) return;
  const std::string& lib = *text;
  bool has_control =
      std::any_of(lib.begin(), lib.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
  if (lib.find('/') != std::string::npos || lib.find('\\') != std::string::npos || has_control) {
    problem(value.Mark(), "'library' must be a plain file name (it is resolved against the plugin directory), found " +
                              in_quotes(lib));
  } else if (lib.size() <= 3 || lib.compare(lib.size() - 3, 3, ".so") != 0) {
    problem(value.Mark(),
            "'library' must be a file name ending in .so, such as libshell-guard.so, found " + in_quotes(lib));
  } else {
    out.library = lib;
  }
}

void ManifestReader::read_priority(const YAML::Node& key, const YAML::Node& value, SkillManifest& out) {
  auto text = scalar(key, value, "priority", "an integer");
  if (!text) return;
  std::string_view digits = *text;
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  bool shape = !digits.empty() && std::all_of(digits.begin() + (digits[0] == '-' ? 1 : 0), digits.end(), is_digit) &&
               digits != "-";
  int priority = 0;
  if (shape) {
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), priority);
    if (ec == std::errc::result_out_of_range) {
      problem(value.Mark(), "'priority' " + in_quotes(*text) + " is out of range; use a value from " +
                                std::to_string(std::numeric_limits<int>::min()) + " to " +
                                std::to_string(std::numeric_limits<int>::max()));
      return;
    }
    shape = ec == std::errc() && end == digits.data() + digits.size();
  }
  if (!shape) {
    problem(value.Mark(), "'priority' must be an integer, found " + describe(value));
    return;
  }
  out.priority = priority;
}

void ManifestReader::read_gate_timeout(const YAML::Node& key, const YAML::Node& value, SkillManifest& out) {
  auto text = scalar(key, value, "gate_timeout", "a duration such as 250ms or 2s");
  if (!text) return;
  const std::string_view written = *text;
  std::string_view digits = written;
  std::int64_t scale = 0;
  if (digits.size() > 2 && digits.substr(digits.size() - 2) == "ms") {
    digits.remove_suffix(2);
    scale = 1;
  } else if (digits.size() > 1 && digits.back() == 's') {
    digits.remove_suffix(1);
    scale = 1000;
  }
  std::int64_t count = 0;
  bool shape = scale != 0 && !digits.empty() && std::all_of(digits.begin(), digits.end(), is_digit);
  if (shape) {
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    shape = end == digits.data() + digits.size() && (ec == std::errc() || ec == std::errc::result_out_of_range);
    if (ec == std::errc::result_out_of_range) count = std::numeric_limits<std::int64_t>::max() / 1000;
  }
  if (!shape) {
    problem(value.Mark(),
            "'gate_timeout' must be a duration in ms or s, such as 250ms or 2s, found " + describe(value));
    return;
  }
  const std::int64_t limit = SkillManifest::kMaxGateTimeout.count();
  if (count == 0 || count > limit / scale) {
    problem(value.Mark(), "'gate_timeout' " + in_quotes(*text) + " is out of range; use 1ms to " +
                              std::to_string(limit / 1000) + "s");
    return;
  }
  out.gate_timeout = std::chrono::milliseconds(count * scale);
}

void ManifestReader::read_dependencies(const YAML::Node& key, const YAML::Node& value, std::string_view field,
                                       std::vector<Dependency>& out, std::vector<YAML::Mark>& marks) {
  const std::string quoted_field = "'" + std::string(field) + "'";
  const std::string noun = field == "guarded_by" ? "guard" : "dependency";
  if (value.IsNull()) return;
  if (!value.IsSequence()) {
    problem_at(key, value, quoted_field + " must be a list such as [policy >=1.0], found " + describe(value));
    return;
  }
  std::set<std::string> listed;
  for (const YAML::Node& item : value) {
    if (!item.IsScalar()) {
      problem_at(key, item,
                 "each entry of " + quoted_field + " must be a string such as 'policy >=1.0', found " + describe(item));
      continue;
    }
    std::string_view text = trim(item.Scalar());
    std::size_t name_end = 0;
    while (name_end < text.size() && !is_blank(text[name_end]) && !is_constraint_char(text[name_end])) {
      ++name_end;
    }
    std::string_view name = text.substr(0, name_end);
    if (text.empty()) {
      problem(item.Mark(), "empty entry in " + quoted_field + "; remove it");
      continue;
    }
    if (name.empty()) {
      problem(item.Mark(), "invalid " + noun + " " + in_quotes(text) +
                               ": it must start with a skill name; to combine comparators, "
                               "quote the whole entry: \"policy >=1.0, <2\"");
      continue;
    }
    if (!is_valid_skill_name(name)) {
      problem(item.Mark(), "invalid " + noun + " " + in_quotes(text) + ": " + in_quotes(name) +
                               " is not a skill name (lower-case letters, digits and '-')");
      continue;
    }
    auto constraint = VersionConstraint::parse(trim(text.substr(name_end)));
    if (!constraint) {
      problem(item.Mark(), noun + " " + in_quotes(text) + ": " + constraint.error().message);
      continue;
    }
    if (!listed.insert(std::string(name)).second) {
      problem(item.Mark(), noun + " " + in_quotes(name) + " is listed twice; merge the entries into one such as \"" +
                               std::string(name) + " >=1.0, <2\"");
      continue;
    }
    out.push_back(Dependency{std::string(name), *constraint, std::string(text)});
    marks.push_back(item.Mark());
  }
}

std::vector<std::pair<YAML::Node, YAML::Node>> ManifestReader::section_entries(
    const YAML::Node& key, const YAML::Node& value, const std::string& section, std::string_view example,
    std::span<const std::string_view> known, std::span<const std::pair<std::string_view, std::string_view>> aliases) {
  std::vector<std::pair<YAML::Node, YAML::Node>> entries;
  if (value.IsNull()) return entries;
  if (!value.IsMap()) {
    problem_at(key, value,
               in_quotes(section) + " must be a map such as " + std::string(example) + ", found " + describe(value));
    return entries;
  }
  std::set<std::string> seen;
  for (const auto& entry : value) {
    const YAML::Node& k = entry.first;
    if (!k.IsScalar()) {
      problem(k.Mark(), "keys of " + in_quotes(section) + " must be names, found " + describe(k));
      continue;
    }
    const std::string& name = k.Scalar();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      problem(k.Mark(), unknown_key_message(name, known, " in " + in_quotes(section), aliases));
      continue;
    }
    if (!seen.insert(name).second) {
      problem(k.Mark(), "duplicate key " + in_quotes(name) + " in " + in_quotes(section) + "; keep one");
      continue;
    }
    entries.emplace_back(entry.first, entry.second);
  }
  return entries;
}

void ManifestReader::read_trigger(const YAML::Node& key, const YAML::Node& value, SkillManifest& out) {
  for (const auto& [k, v] :
       section_entries(key, value, "trigger", "{ sensors: [user-input] }", kTriggerKeys, kKeyAliases)) {
    const std::string& name = k.Scalar();
    if (name == "always") {
      if (auto b = boolean(k, v, "trigger.always")) out.trigger.always = *b;
      continue;
    }
    if (v.IsNull()) continue;
    if (!v.IsSequence()) {
      problem_at(k, v, "'trigger.sensors' must be a list such as [user-input], found " + describe(v));
      continue;
    }
    for (const YAML::Node& item : v) {
      if (!item.IsScalar()) {
        problem_at(k, item,
                   "each entry of 'trigger.sensors' must be a sensor name such as user-input, found " + describe(item));
        continue;
      }
      std::string_view sensor = item.Scalar();
      if (!sensor.empty() && sensor[0] == ':') sensor.remove_prefix(1);
      if (sensor.empty() || !std::all_of(sensor.begin(), sensor.end(), valid_sensor_char)) {
        problem(item.Mark(), "invalid sensor name " + in_quotes(item.Scalar()) +
                                 " in 'trigger.sensors': use letters, digits, '-' and '_', "
                                 "such as user-input");
        continue;
      }
      std::string upper;
      append_upper_ascii(upper, sensor);
      auto& sensors = out.trigger.sensors;
      if (std::find(sensors.begin(), sensors.end(), upper) == sensors.end()) {
        sensors.push_back(std::move(upper));
      }
    }
  }
}

void ManifestReader::read_sha256(const YAML::Node& key, const YAML::Node& value, SkillManifest& out) {
  auto text = scalar(key, value, "sha256", "64 hexadecimal digits");
  if (!text) return;
  if (text->size() != 64 || !std::all_of(text->begin(), text->end(), is_hex)) {
    problem(value.Mark(), "'sha256' must be 64 hexadecimal digits (as printed by sha256sum), found " +
                              in_quotes(*text) + " (" + std::to_string(text->size()) + " characters)");
    return;
  }
  out.sha256 = ascii_lower(*text);
}

void ManifestReader::read_sandbox(const YAML::Node& key, const YAML::Node& value, SandboxSpec& out) {
  for (const auto& [k, v] : section_entries(key, value, "sandbox", "{ files: [/srv/data], network: false }",
                                            kSandboxKeys, kSandboxAliases)) {
    const std::string& name = k.Scalar();
    if (name == "files") {
      read_sandbox_files(k, v, out);
    } else if (name == "network") {
      if (auto b = boolean(k, v, "sandbox.network")) out.network = *b;
    } else if (name == "processes") {
      if (auto b = boolean(k, v, "sandbox.processes")) out.processes = *b;
    } else if (name == "memory") {
      auto text = scalar(k, v, "sandbox.memory", "a size such as 256MiB");
      if (!text) continue;
      auto bytes = parse_size(*text);
      if (!bytes) {
        problem(v.Mark(), "'sandbox.memory' " + in_quotes(*text) + ": " + bytes.error().message);
      } else if (*bytes < SandboxSpec::kMinMemoryBytes || *bytes > SandboxSpec::kMaxMemoryBytes) {
        problem(v.Mark(), "'sandbox.memory' " + in_quotes(*text) + " is out of range; use " +
                              size_text(SandboxSpec::kMinMemoryBytes) + " to " +
                              size_text(SandboxSpec::kMaxMemoryBytes));
      } else {
        out.memory_bytes = *bytes;
      }
    } else if (name == "open_files") {
      if (auto n = sandbox_count(k, v, "sandbox.open_files", SandboxSpec::kMaxOpenFiles)) out.open_files = *n;
    } else if (name == "cpu_seconds") {
      if (auto n = sandbox_count(k, v, "sandbox.cpu_seconds", std::uint64_t{1} << 31)) out.cpu_seconds = *n;
    } else if (name == "require") {
      read_sandbox_require(k, v, out);
    }
  }
}

std::optional<std::uint64_t> ManifestReader::sandbox_count(const YAML::Node& key, const YAML::Node& value,
                                                           std::string_view field, std::uint64_t most) {
  const std::optional<std::string> text = scalar(key, value, field, "a positive integer");
  if (!text) return std::nullopt;
  const std::string_view digits = *text;
  std::uint64_t number = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  if (ec != std::errc() || end != digits.data() + digits.size() || number == 0 || number > most) {
    problem(value.Mark(), "'" + std::string(field) + "' must be an integer from 1 to " + std::to_string(most) +
                              ", found " + describe(value));
    return std::nullopt;
  }
  return number;
}

void ManifestReader::read_sandbox_files(const YAML::Node& key, const YAML::Node& value, SandboxSpec& out) {
  if (value.IsNull()) return;
  if (!value.IsSequence()) {
    problem_at(key, value,
               "'sandbox.files' must be a list of absolute paths such as [/srv/data], found " + describe(value));
    return;
  }
  for (const YAML::Node& item : value) {
    if (!item.IsScalar()) {
      problem_at(key, item, "each entry of 'sandbox.files' must be an absolute path, found " + describe(item));
      continue;
    }
    const std::string& text = item.Scalar();
    const bool has_control =
        std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
    if (text.empty() || text[0] != '/' || has_control) {
      problem(item.Mark(), "'sandbox.files' entry " + in_quotes(text) +
                               " is not an absolute path; write it from the root, such as /srv/data "
                               "(the skill process does not share the daemon's working folder)");
      continue;
    }
    fs::path path = fs::path(text).lexically_normal();
    if (path.has_relative_path() && !path.has_filename()) path = path.parent_path();  // "/srv/data/" -> "/srv/data"
    if (std::find(out.files.begin(), out.files.end(), path) != out.files.end()) {
      problem(item.Mark(), "'sandbox.files' lists " + in_quotes(path.string()) + " twice; keep one");
      continue;
    }
    if (out.files.size() == SandboxSpec::kMaxFiles) {
      problem(item.Mark(), "'sandbox.files' lists more than " + std::to_string(SandboxSpec::kMaxFiles) +
                               " paths; name their common folder instead");
      return;
    }
    out.files.push_back(path);
  }
}

void ManifestReader::read_sandbox_require(const YAML::Node& key, const YAML::Node& value, SandboxSpec& out) {
  if (value.IsNull()) return;
  if (!value.IsSequence()) {
    problem_at(key, value, "'sandbox.require' must be a list such as [seccomp, landlock], found " + describe(value));
    return;
  }
  for (const YAML::Node& item : value) {
    if (!item.IsScalar()) {
      problem_at(key, item, "each entry of 'sandbox.require' must be a layer name, found " + describe(item));
      continue;
    }
    const std::string layer = ascii_lower(item.Scalar());
    if (std::find(std::begin(kSandboxLayers), std::end(kSandboxLayers), layer) == std::end(kSandboxLayers)) {
      std::string_view nearest = kSandboxLayers[0];
      for (std::string_view known : kSandboxLayers) {
        if (edit_distance(layer, known) < edit_distance(layer, nearest)) nearest = known;
      }
      std::string message = "unknown sandbox layer " + in_quotes(item.Scalar()) + " in 'sandbox.require'; ";
      if (edit_distance(layer, nearest) <= 2) message += "did you mean '" + std::string(nearest) + "'? ";
      problem(item.Mark(), message + "the layers are seccomp, landlock and user");
      continue;
    }
    if (std::find(out.require.begin(), out.require.end(), layer) != out.require.end()) {
      problem(item.Mark(), "'sandbox.require' lists " + in_quotes(layer) + " twice; keep one");
      continue;
    }
    out.require.push_back(layer);
  }
}

Value ManifestReader::convert_config(const YAML::Node& node, const std::string& path, int depth) {
  if (config_aborted_) return Value::nil();
  if (++config_values_ > SkillManifest::kMaxConfigValues) {
    config_aborted_ = true;
    problem(node.Mark(), "'config' holds more than " + std::to_string(SkillManifest::kMaxConfigValues) +
                             " values (aliases count each time they are used)");
    return Value::nil();
  }
  if (node.IsScalar()) return convert_config_scalar(node, path);
  if (!node.IsMap() && !node.IsSequence()) return Value::nil();
  if (depth > SkillManifest::kMaxConfigDepth) {
    config_aborted_ = true;
    problem(node.Mark(), "'config' nests deeper than " + std::to_string(SkillManifest::kMaxConfigDepth) + " levels");
    return Value::nil();
  }

  std::vector<Value> items;
  if (node.IsSequence()) {
    std::size_t index = 0;
    for (const YAML::Node& item : node) {
      items.push_back(convert_config(item, path + "[" + std::to_string(index++) + "]", depth + 1));
    }
    return Value::list(items);
  }

  std::map<std::string, std::string> keywords;  // upper-cased -> as written
  for (const auto& entry : node) {
    const YAML::Node& k = entry.first;
    if (!k.IsScalar()) {
      problem(k.Mark(), "keys in '" + path + "' must be names, found " + describe(k));
      continue;
    }
    std::string_view name = k.Scalar();
    if (!name.empty() && name[0] == ':') name.remove_prefix(1);
    if (name.empty() || !std::all_of(name.begin(), name.end(), valid_config_key_char)) {
      problem(k.Mark(), "invalid key " + in_quotes(k.Scalar()) + " in '" + path +
                            "': use a name without spaces or any of ( ) \" ' ; | \\ # ` , :");
      continue;
    }
    std::string upper;
    append_upper_ascii(upper, name);
    if (auto [it, inserted] = keywords.emplace(upper, k.Scalar()); !inserted) {
      problem(k.Mark(),
              "duplicate key " + in_quotes(k.Scalar()) + " in '" + path + "'" +
                  (it->second == k.Scalar() ? std::string()
                                            : " (" + in_quotes(it->second) + " is the same keyword :" + upper + ")") +
                  "; keep one");
      continue;
    }
    items.push_back(Value::keyword(name));
    items.push_back(convert_config(entry.second, path + "." + std::string(name), depth + 1));
  }
  return Value::list(items);
}

Value ManifestReader::convert_config_scalar(const YAML::Node& node, const std::string& path) {
  auto typed = type_scalar(node);
  if (!typed) {
    problem(node.Mark(), "'" + path + "': " + typed.error().message);
    return Value::nil();
  }
  return scalar_value<Value>(*typed);
}

std::string origin_name(const fs::path& origin) { return origin.empty() ? std::string("<string>") : origin.string(); }

// The parse proper; may throw yaml-cpp exceptions, which parse() converts.
Result<SkillManifest> parse_document(std::string_view yaml, const fs::path& origin, const std::string& where) {
  auto at_start = [&](const std::string& what) { return fail(ErrorCode::invalid_input, where + ":1:1: " + what); };
  if (yaml.size() > SkillManifest::kMaxFileSize) {
    return fail(ErrorCode::limit_exceeded, where + ":1:1: the manifest is " + std::to_string(yaml.size()) +
                                               " bytes, over the limit of " +
                                               std::to_string(SkillManifest::kMaxFileSize) +
                                               "; a manifest describes a skill, large data belongs in a file it reads");
  }
  if (std::optional<std::size_t> bad = find_invalid_utf8(yaml)) {
    std::string_view before = yaml.substr(0, *bad);
    auto line = std::count(before.begin(), before.end(), '\n') + 1;
    std::size_t line_start = before.rfind('\n');
    std::size_t column = *bad - (line_start == std::string_view::npos ? 0 : line_start + 1);
    YAML::Mark mark;
    mark.line = static_cast<int>(line - 1);
    mark.column = static_cast<int>(column);
    return fail(ErrorCode::invalid_input, located(where, mark, "the manifest is not valid UTF-8; save it as UTF-8"));
  }

  std::vector<YAML::Node> documents;
  for (YAML::Node& document : YAML::LoadAll(std::string(yaml))) {
    // A lone '---' or '...' adds an empty document; only content counts.
    if (!document.IsNull()) documents.push_back(document);
  }
  if (documents.empty()) {
    return at_start("the manifest is empty; it needs at least name, version, library and abi");
  }
  if (documents.size() > 1) {
    return fail(ErrorCode::invalid_input, located(where, documents[1].Mark(),
                                                  "a manifest holds one YAML document, found " +
                                                      std::to_string(documents.size()) + "; one skill per file"));
  }
  const YAML::Node& root = documents[0];
  ManifestReader reader(where);
  if (!root.IsMap()) {
    reader.problem(root.Mark(),
                   "a manifest must be a map of keys such as 'name: shell-guard', found " + describe(root));
    return fail(ErrorCode::invalid_input, reader.message());
  }

  SkillManifest manifest;
  manifest.path = origin.empty() ? fs::path("<string>") : origin;
  reader.read(root, manifest);
  if (!reader.ok()) return fail(ErrorCode::invalid_input, reader.message());
  return manifest;
}

}  // namespace

std::vector<const Dependency*> SkillManifest::requirements() const {
  std::vector<const Dependency*> all;
  all.reserve(depends_on.size() + guarded_by.size());
  for (const Dependency& dep : depends_on) all.push_back(&dep);
  for (const Dependency& guard : guarded_by) {
    if (guard.name != name) all.push_back(&guard);
  }
  return all;
}

const char* to_string(Isolation isolation) noexcept {
  return isolation == Isolation::process ? "process" : "in-process";
}

bool is_valid_skill_name(std::string_view name) {
  if (name.empty() || name.size() > SkillManifest::kMaxNameLength) return false;
  if (!is_lower_or_digit(name[0])) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return is_lower_or_digit(c) || c == '-'; });
}

bool TriggerSpec::matches(const Value& signal) const {
  if (always) return true;
  const Value& sensor = signal.path({"PAYLOAD", "SENSOR"});
  if (!sensor.is_keyword()) return false;
  return std::any_of(sensors.begin(), sensors.end(),
                     [&](const std::string& s) { return equals_ignore_case(s, sensor.text()); });
}

Result<SkillManifest> SkillManifest::parse(std::string_view yaml, const fs::path& origin) {
  const std::string where = origin_name(origin);
  try {
    return parse_document(yaml, origin, where);
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::invalid_input, located(where, e.mark, "YAML syntax error: " + e.msg));
  } catch (const std::exception& e) {
    return fail(ErrorCode::failed, where + ": cannot parse the manifest: " + e.what());
  }
}

Result<SkillManifest> SkillManifest::load(const fs::path& file) {
  const std::string where = file.string();
  auto text = read_bounded_file(file, kMaxFileSize);
  if (!text && text.error().code == ErrorCode::limit_exceeded) {
    return fail(ErrorCode::limit_exceeded,
                where + ": the manifest is larger than " + std::to_string(kMaxFileSize) +
                    " bytes; a manifest describes a skill, large data belongs in a file it reads");
  }
  if (!text) return fail(text.error().code, where + ": cannot read the manifest: " + text.error().message);
  return parse(*text, file);
}

Result<ManifestSet> load_manifest_dir(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    ErrorCode code = ec == std::errc::no_such_file_or_directory ? ErrorCode::not_found : ErrorCode::io_error;
    return fail(code, dir.string() + ": cannot read the manifest directory: " + ec.message());
  }

  std::vector<fs::path> files;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& path = it->path();
    std::string name = path.filename().string();
    std::string extension = path.extension().string();
    if (name.empty() || name[0] == '.' || (extension != ".yaml" && extension != ".yml")) continue;
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;  // follows symlinks; a dangling one is skipped
    files.push_back(path);
  }
  if (ec) return fail(ErrorCode::io_error, dir.string() + ": cannot list the manifest directory: " + ec.message());
  std::sort(files.begin(), files.end(),
            [](const fs::path& a, const fs::path& b) { return a.filename() < b.filename(); });

  ManifestSet set;
  for (const fs::path& file : files) {
    auto manifest = SkillManifest::load(file);
    if (manifest)
      set.manifests.push_back(std::move(*manifest));
    else
      set.errors.push_back(std::move(manifest).error());
  }
  return set;
}

}  // namespace passepartout
