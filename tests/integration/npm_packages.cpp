// The npm packages the integration tests run, found where scripts/setup put them.
#include "integration/npm_packages.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>

namespace passepartout::testing {

namespace fs = std::filesystem;

fs::path npm_dir() {
  if (const char* dir = std::getenv("PASSEPARTOUT_NPM_CACHE"); dir != nullptr && *dir != '\0') return dir;
  return PP_NPM_DIR;
}

std::string node_or_fail() {
  const std::string node = on_path("node");
  if (node.empty()) FAIL("node is not on PATH: run scripts/setup (it installs Debian's nodejs)");
  return node;
}

fs::path package_script(std::string_view package, std::string_view script) {
  const fs::path dir = npm_dir() / "node_modules" / fs::path(std::string(package));
  if (!fs::exists(dir / "package.json") || !fs::exists(dir / script)) {
    FAIL(package << " is not installed in " << npm_dir().string()
                 << ": run scripts/setup (it installs the tests' npm packages)");
  }
  return dir / script;
}

}  // namespace passepartout::testing
