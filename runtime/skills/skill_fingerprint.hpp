// What tells two loads of a skill apart besides its library: a fingerprint of
// the manifest's settings and resolved config, and a description of what changed.
#pragma once

#include <string>
#include <string_view>

#include "value/value.hpp"

namespace passepartout {

struct SkillManifest;

// The first 12 hex digits of the sha256 of a canonical text of `manifest`'s
// settings (name, version, library, abi, priority, depends_on, guarded_by,
// trigger, sha256 pin, never_unload) and of `config` (the config the skill is
// created with, placeholders expanded). Equal settings give equal
// fingerprints whatever the file's layout or comments.
std::string skill_fingerprint(const SkillManifest& manifest, const Value& config);

// Whether a config key looks like it names a secret (token, secret,
// password, passwd, credential, auth, private, or a key ending in "key"):
// its values are never shown.
bool looks_like_secret_key(std::string_view key);

// What differs between two manifests' settings and configs, "; "-separated,
// in a fixed order: "version: 1.0.0 -> 1.1.0; priority: 50 -> 60; config:
// approve_all_shell true -> false; config: api_token changed". Config keys
// are shown in lower case as written in YAML; a value is its s-expression
// (T and NIL as true and false) cut to 40 characters; a key that only one
// side has shows "(none)" on the other. Empty when nothing differs.
std::string describe_settings_change(const SkillManifest& from, const Value& from_config, const SkillManifest& to,
                                     const Value& to_config);

}  // namespace passepartout
