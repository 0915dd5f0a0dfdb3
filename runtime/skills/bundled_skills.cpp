// Where the bundled skills are, relative to the running executable.
// PASSEPARTOUT_INSTALLED_*_DIR: the install rules' folders relative to the
// installed executable's (runtime/skills/CMakeLists.txt).
#include "skills/bundled_skills.hpp"

#include <cstdlib>
#include <system_error>

namespace passepartout {
namespace fs = std::filesystem;
namespace {

fs::path executable_dir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : self.parent_path();
}

// The variable when set; else the installed layout, then the build tree.
fs::path default_dir(const char* env, const fs::path& installed, const fs::path& build_tree) {
  if (const char* value = std::getenv(env); value != nullptr && *value != '\0') return value;
  const fs::path base = executable_dir();
  std::error_code ec;
  if (fs::is_directory(base / installed, ec)) return (base / installed).lexically_normal();
  return (base / build_tree).lexically_normal();
}

fs::path installed_template() { return (executable_dir() / PASSEPARTOUT_INSTALLED_TEMPLATE_DIR).lexically_normal(); }

}  // namespace

fs::path default_plugin_dir() {
  return default_dir("PASSEPARTOUT_PLUGIN_DIR", PASSEPARTOUT_INSTALLED_PLUGIN_DIR, "../plugins");
}

fs::path default_manifest_dir() {
  return default_dir("PASSEPARTOUT_MANIFEST_DIR", PASSEPARTOUT_INSTALLED_MANIFEST_DIR, "../manifests");
}

fs::path default_template_dir() {
  if (const char* value = std::getenv("PASSEPARTOUT_TEMPLATE_DIR"); value != nullptr && *value != '\0') return value;
  std::error_code ec;
  if (fs::is_directory(installed_template(), ec)) return installed_template();
  return PASSEPARTOUT_SOURCE_TEMPLATE_DIR;
}

fs::path installed_sdk_prefix() {
  std::error_code ec;
  if (default_template_dir() != installed_template() || !fs::is_directory(installed_template(), ec)) return {};
  fs::path prefix = (executable_dir() / PASSEPARTOUT_INSTALLED_PREFIX).lexically_normal();
  if (!prefix.has_filename() && prefix.has_parent_path()) prefix = prefix.parent_path();  // "/usr/" -> "/usr"
  return prefix;
}

}  // namespace passepartout
