// The third-party servers some integration tests run: npm packages that
// scripts/setup installs, pinned (scripts/npm), into a cache folder.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "support/executables.hpp"  // on_path

namespace passepartout::testing {

// Where scripts/setup installs them: PASSEPARTOUT_NPM_CACHE now, else the
// folder CMake computed from the same variables when it configured.
std::filesystem::path npm_dir();

// node's path; the test fails, saying how to install it, when it is not on PATH.
std::string node_or_fail();

// `script` (e.g. "dist/index.js") of the installed npm package `package`
// ("@modelcontextprotocol/conformance"); the test fails, saying to run
// scripts/setup, when the package is not installed.
std::filesystem::path package_script(std::string_view package, std::string_view script);

}  // namespace passepartout::testing
