// Where Passepartout keeps its durable state when nobody says otherwise.
#pragma once

#include <filesystem>

namespace passepartout {

// The folder Passepartout keeps durable state in: $PASSEPARTOUT_STATE_DIR, else
// $XDG_STATE_HOME/passepartout (when absolute), else ~/.local/state/passepartout
// (the home directory from $HOME, else the password database).
std::filesystem::path default_state_dir();

}  // namespace passepartout
