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

/// The creation in progress on this thread, or NULL. A raw pointer: it has no
/// destructor, so it never pins the library in memory after dlclose.
inline thread_local const Creation* current_creation = nullptr;

/// Publishes a Creation for the duration of one constructor call and restores
/// the previous one (normally NULL) afterwards, even when the constructor throws.
class CreationScope {
 public:
  /// Publishes `creation` on this thread.
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
