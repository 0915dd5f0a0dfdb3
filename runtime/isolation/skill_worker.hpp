// The skill worker: `passepartout skill-worker ...`, started by the host for a
// skill whose manifest says `isolation: process`; not meant to be run by hand.
#pragma once

namespace passepartout {

// Loads one skill library (with the loader's checks) and serves its hooks on
// the lanes the host opened as fds 3, 4, ... until the host closes them.
// Returns the process's exit status (2 for a bad command line).
int run_skill_worker(int argc, char** argv);

}  // namespace passepartout
