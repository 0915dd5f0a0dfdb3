// Finding a program on PATH, for the tests and benchmarks that run a
// third-party one (node) only when it is installed.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>

namespace passepartout::testing {

// The executable `name` on PATH; "" when there is none.
inline std::string on_path(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::filesystem::path candidate = std::filesystem::path(dir) / name;
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

}  // namespace passepartout::testing
