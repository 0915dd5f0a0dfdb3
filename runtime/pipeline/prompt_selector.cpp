// select_prompt_skill: declarative sensors first (cheap), then the skill's own hook.
#include "pipeline/prompt_selector.hpp"

#include "skills/slot.hpp"

namespace passepartout {

const Slot* select_prompt_skill(const Snapshot& snapshot, const Value& signal) {
  for (const Slot* slot : snapshot.prompt_skills()) {
    const TriggerSpec& spec = slot->manifest().trigger;
    if (spec.declared() && !spec.matches(signal)) continue;
    if (!slot->has_trigger_hook()) {
      if (spec.declared()) return slot;
      continue;  // no trigger at all: never selected (B4)
    }
    if (slot->trigger(signal)) return slot;
  }
  return nullptr;
}

}  // namespace passepartout
