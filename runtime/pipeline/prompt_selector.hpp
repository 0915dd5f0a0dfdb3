// Trigger selection: which skill shapes the prompt for a signal (seed B4–B5).
#pragma once

#include "skills/registry.hpp"
#include "value/value.hpp"

namespace passepartout {

// The highest-priority skill with a prompt generator whose trigger matches
// `signal`, ties by name; nullptr when none does. A skill's trigger matches
// when its manifest's declarative trigger matches (or it declares none but has
// a trigger hook) and its trigger hook, if it has one, agrees. A hook that
// fails counts as not triggered; a skill with neither never triggers.
// Any thread.
const Slot* select_prompt_skill(const Snapshot& snapshot, const Value& signal);

}  // namespace passepartout
