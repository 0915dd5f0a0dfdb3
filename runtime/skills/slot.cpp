// Slot: instance creation and self-test through the skill table.
#include "skills/slot.hpp"

#include <atomic>

namespace passepartout {

Slot::Slot(SkillManifest manifest, std::string sha256, std::unique_ptr<SkillLibrary> library,
           const pp_skill_api* api)
    : manifest_(std::move(manifest)),
      version_text_(manifest_.version.to_string()),
      sha256_(std::move(sha256)),
      library_(std::move(library)),
      api_(api) {
  self_.skill_name = manifest_.name;
  instance_.api = api_;
}

Slot::~Slot() = default;

Result<void> Slot::create_instance() {
  pp_call call;
  void* instance = api_->create(&host_api(), &self_, to_handle(manifest_.config), &call);
  if (instance == nullptr) {
    return fail(ErrorCode::failed,
                "skill '" + name() + "': create failed: " +
                    (call.error.empty() ? std::string("it returned no instance and gave no reason") : call.error));
  }
  instance_.ptr = instance;
  return {};
}

Result<void> Slot::self_test() {
  if (api_->self_test == nullptr) return {};
  pp_call call;
  if (api_->self_test(instance_.ptr, &call) != PP_OK) {
    return fail(ErrorCode::failed, "skill '" + name() + "': self-test failed: " +
                                       (call.error.empty() ? std::string("no reason given") : call.error));
  }
  return {};
}

}  // namespace passepartout
