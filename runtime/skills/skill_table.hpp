// SkillTable: a skill's pp_skill_api as the host reads it — checked against the
// host's ABI and the manifest, with the ABI 1.1 tools and actuators validated.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "passepartout/abi.h"
#include "skills/skill_manifest.hpp"
#include "value/value.hpp"

namespace passepartout {

// A tool a skill offers the model, as the loader checked and copied it.
struct SkillTool {
  std::string name;         // 1 to 64 of [a-z0-9_-], unique within the skill
  std::string description;  // UTF-8; empty when the skill gave none
  // The parameters through the JSON bridge (object keys become upper-case
  // keywords); NIL when the skill gave none or `{}`.
  Value parameters;
  // The parameters JSON exactly as the skill wrote it ("" when none): what a
  // provider's tool-calling API wants, since the bridge upper-cases keys.
  std::string parameters_json;
};

// What an actuator takes (ABI 1.3), as the loader checked and copied it.
struct SkillActuatorSpec {
  std::string description;  // UTF-8; empty when the skill gave none
  // The payload's JSON Schema through the JSON bridge; NIL when the skill gave
  // none (the actuator is then named in the grammar only, never offered as a
  // function).
  Value payload;
  std::string payload_json;  // exactly as the skill wrote it ("" when none)
  bool described() const noexcept { return !payload_json.empty(); }
};

// A key the skill reads from its manifest's `config:` (ABI 1.2), copied.
struct SkillConfigKey {
  std::string name;
  std::string type;           // "" when the skill did not say
  std::string default_value;  // "" when none
  std::string description;
};

// The hooks and offerings of one skill library. Plain data; copy freely.
struct SkillTable {
  static constexpr std::size_t kMaxTools = 1024;
  static constexpr std::size_t kMaxActuators = 64;
  static constexpr std::size_t kMaxConfigKeys = 256;
  static constexpr std::size_t kMaxNameLength = 64;
  static constexpr std::size_t kMaxDescriptionBytes = 4096;
  static constexpr std::size_t kMaxParametersBytes = 64 * 1024;
  static constexpr std::size_t kMaxParametersDepth = 64;

  // The skill's table copied into a full-size one: members the skill's ABI
  // minor or struct_size does not cover are zero (NULL hooks, no tools), so
  // every member can be read whatever the skill was built against.
  pp_skill_api hooks{};
  std::vector<SkillTool> tools;        // in the skill's order (its indices)
  std::vector<std::string> actuators;  // upper-case, as keywords print; the skill's order
  // Parallel to actuators: what each takes (ABI 1.3; empty specs for older skills).
  std::vector<SkillActuatorSpec> actuator_specs;
  // The config keys the skill declares, in its order; empty when it does not
  // say (older than ABI 1.2, or no kConfig), so any key goes.
  std::vector<SkillConfigKey> config_keys;

  // Reads `table`, which `manifest`'s library returned: the ABI version and
  // size, the required hooks, name and version against the manifest, and for
  // ABI 1.1 the tools (names, descriptions, parameters JSON) and actuators,
  // for ABI 1.2 the config keys, refusing a manifest `config:` key the skill
  // does not declare ("<manifest>:<line>:<col>: ... did you mean ...").
  // Every refusal names the skill and what to do. Control thread.
  static Result<SkillTable> read(const pp_skill_api& table, const SkillManifest& manifest);

  // Whether the skill offers anything that acts on the world (an actuator or
  // a tool): then its manifest must name guards (guarded_by).
  bool acts() const noexcept { return !tools.empty() || !actuators.empty(); }
  // What it offers, for messages: "the actuator :SHELL", "the tools
  // read-file and write-file", "the actuator :A and the tool t"; "" when nothing.
  std::string offers_text() const;
  // The guard rule (guarded_by): a skill that acts names at least one guard,
  // and one that names itself has a gate. refused, saying what to add, otherwise.
  Result<void> check_guards(const SkillManifest& manifest) const;
};

}  // namespace passepartout
