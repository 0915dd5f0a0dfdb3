// SkillManifest: what a skill's YAML manifest declares (name, version, library,
// ABI, priority, dependencies, trigger, config), read and checked before any library is loaded.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "skills/sandbox_spec.hpp"
#include "skills/version.hpp"
#include "value/value.hpp"

namespace passepartout {

// Where a skill's code runs: in a worker process of its own (a crash, a hang
// or a runaway allocation costs only that process), or inside the host.
enum class Isolation { process, in_process };

// "process" or "in-process", as manifests write it.
const char* to_string(Isolation isolation) noexcept;

// One entry of `depends_on` or `guarded_by`: "policy" or "policy >=1.0".
struct Dependency {
  std::string name;
  VersionConstraint constraint;  // any version when none was written
  std::string text;              // the entry as written (trimmed), for messages: "policy >=1.0"
  bool guard = false;            // listed in `guarded_by`: the skill's actuators and tools act only while it is loaded

  // "depends on" or "is guarded by", for messages.
  const char* verb() const noexcept { return guard ? "is guarded by" : "depends on"; }
};

// Which signals select the skill's prompt generator (gates ignore triggers).
struct TriggerSpec {
  std::vector<std::string> sensors;  // upper-case keyword names without ':', e.g. "USER-INPUT"
  bool always = false;

  // True when the manifest declared anything to trigger on.
  bool declared() const { return always || !sensors.empty(); }
  // True when `always` is set, or the signal's :PAYLOAD :SENSOR is a keyword
  // named in `sensors` (case-insensitive).
  bool matches(const Value& signal) const;
};

// A parsed manifest. Every field has been checked: the name is a valid skill
// name, the library a plain file name ending in .so, sha256 (when present) 64
// lower-case hex digits, and no dependency is listed twice or names the skill itself.
//
// Format (YAML):
//   name: shell-guard           required; [a-z0-9][a-z0-9-]*, at most 64 characters
//   version: 1.2.0              required; semantic version
//   library: libshell-guard.so  required; file name, resolved against the plugin directory
//   abi: 1                      required; "1" or "1.0"
//   priority: 90                gates run highest first; default 10
//   depends_on: [policy >=1.0]  "name" or "name <constraint>" (see VersionConstraint)
//   guarded_by: [shell-guard]   the gates that must be loaded for the skill's
//                               actuators and tools to act; required when it
//                               offers any (entries as in depends_on; the
//                               skill itself may be one when it has a gate)
//   trigger: { sensors: [user-input], always: false }
//   config: { max_output: 100000 }   any map, handed to the skill as a keyword plist
//   sha256: 3f5a...             pin of the library
//   description: ...            one line for operators
//   never_unload: false         keep the library mapped after the skill is removed
//   sandbox: { files: [/srv/data], network: false, require: [seccomp] }
//                               what the skill's process may do (see SandboxSpec)
//   gate_timeout: 250ms         the gate's time budget per call ("250ms", "2s"; from
//                               1 ms to kMaxGateTimeout); default the host's budget,
//                               and at most the host's maximum (checked at load)
//   isolation: process          `process` (a worker process of its own) or
//                               `in-process` (inside the host); see kDefaultIsolation
//
// Config conversion: maps become plists with upper-cased keyword keys
// (max_output -> :MAX_OUTPUT), sequences become lists, and plain scalars are
// resolved as in YAML 1.2's core schema: null, ~ or nothing -> NIL, true/false
// -> T/NIL, integers -> integer, floats -> float, anything else -> string.
// Quoted and block scalars are always strings. Nesting is capped at
// kMaxConfigDepth levels and kMaxConfigValues values (aliases count each time
// they are used).
//
// Plain data: copy and read from any thread.
struct SkillManifest {
  static constexpr std::size_t kMaxFileSize = 1 << 20;  // bytes
  static constexpr int kMaxConfigDepth = 64;
  static constexpr std::size_t kMaxConfigValues = 100000;
  static constexpr std::size_t kMaxNameLength = 64;

  std::filesystem::path path;  // the manifest file; "<string>" when parsed from memory
  std::string name;
  SemVer version;
  std::string library;  // a file name only
  // Where `library` is; empty: the plugin directory. Never read from YAML:
  // set by the daemon for a fleet's release, which it keeps apart.
  std::filesystem::path library_dir;
  AbiVersion abi;
  int priority = 10;
  std::vector<Dependency> depends_on;
  std::vector<Dependency> guarded_by;  // each with guard = true
  TriggerSpec trigger;
  Value config;  // a keyword plist, NIL when absent or empty
  // Each top-level key of `config:` as written, and where: the loader checks
  // them against the keys the skill declares.
  struct ConfigKeyAt {
    std::string key;
    int line = 0;  // 1-based
    int column = 0;
  };
  std::vector<ConfigKeyAt> config_keys;
  std::optional<std::string> sha256;  // 64 lower-case hex digits
  std::string description;
  bool never_unload = false;
  SandboxSpec sandbox;  // the defaults when the manifest has no `sandbox:`
  // The gate's time budget per call, as written; nullopt: the host's default.
  std::optional<std::chrono::milliseconds> gate_timeout;
  static constexpr std::chrono::milliseconds kMaxGateTimeout{std::chrono::hours(1)};

  // The budget each call of this skill's gate gets: gate_timeout, or the
  // host's default when the manifest sets none.
  std::chrono::milliseconds gate_budget(std::chrono::milliseconds host_default) const noexcept {
    return gate_timeout.value_or(host_default);
  }
  // What a manifest that does not say gets: skills that are not bundled run in
  // a worker process of their own; the bundled manifests say `in-process`.
  static constexpr Isolation kDefaultIsolation = Isolation::process;
  Isolation isolation = kDefaultIsolation;

  // What must be loaded before this skill, and may not be unloaded while it
  // is: depends_on, then guarded_by (but the skill itself, which may guard
  // its own actuators). Pointers into this manifest.
  std::vector<const Dependency*> requirements() const;

  // Parses manifest text; `origin` names it in messages (empty: "<string>").
  // Never throws. On failure the error is invalid_input (limit_exceeded for
  // text over kMaxFileSize, failed if memory runs out) and its message has one
  // line per problem found, each "<origin>:<line>:<column>: <what was found and
  // what to do>" with 1-based positions.
  static Result<SkillManifest> parse(std::string_view yaml, const std::filesystem::path& origin);
  // Reads `file` (at most kMaxFileSize bytes) and parses it. A missing file
  // is not_found, an unreadable one io_error.
  static Result<SkillManifest> load(const std::filesystem::path& file);
};

// True for a valid skill name: [a-z0-9][a-z0-9-]*, at most 64 characters.
bool is_valid_skill_name(std::string_view name);

// The manifests of a directory: those that parsed, and one error per file that did not.
struct ManifestSet {
  std::vector<SkillManifest> manifests;
  std::vector<Error> errors;
};

// Loads every *.yaml and *.yml regular file directly in `dir` (not recursive;
// names starting with '.' are skipped, as editors leave such files behind),
// in file-name order. Fails only when the directory itself cannot be read.
Result<ManifestSet> load_manifest_dir(const std::filesystem::path& dir);

}  // namespace passepartout
