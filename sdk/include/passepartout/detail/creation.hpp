// passepartout/detail/creation.hpp: hands the host table to a Skill while its constructor runs.
// Boundary plumbing: skill code never includes or names anything here.
#pragma once

#include "passepartout/abi.h"

namespace passepartout::sdk_detail {

/// What the create hook received, for the Skill base constructor to pick up
/// (the derived class's constructor takes only the config, or nothing).
struct Creation {
  const pp_host_api* host;  ///< the host table, valid until destroy returns
  pp_self* self;            ///< the logging handle, valid until destroy returns
  const pp_value* config;   ///< the manifest's config, valid until destroy returns
};

/// The creation in progress, or NULL. Not thread_local on purpose: a skill
/// library must carry no TLS (a TLS block of an unloaded library is exactly what
/// pins it or trips tools scanning threads), and it needs none — the host calls
/// `create` only on its control thread, one call at a time, and maps a private
/// copy of the library per load, so each copy's pointer serves one creation.
/// Hidden visibility keeps it private to the library.
inline const Creation* current_creation = nullptr;

/// Publishes a Creation for the duration of one constructor call and restores
/// the previous one (normally NULL) afterwards, even when the constructor throws.
class CreationScope {
 public:
  /// Publishes `creation` (control thread).
  explicit CreationScope(const Creation* creation) noexcept : previous_(current_creation) {
    current_creation = creation;
  }
  /// Restores what was published before.
  ~CreationScope() { current_creation = previous_; }
  CreationScope(const CreationScope&) = delete;
  CreationScope& operator=(const CreationScope&) = delete;

 private:
  const Creation* previous_;
};

}  // namespace passepartout::sdk_detail
