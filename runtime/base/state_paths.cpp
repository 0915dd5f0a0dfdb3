// default_state_dir: the XDG base-directory rules, with a fallback to the
// password database when $HOME is unset (as under some service managers).
#include "base/state_paths.hpp"

#include <pwd.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <string>

namespace passepartout {

namespace fs = std::filesystem;

fs::path default_state_dir() {
  auto env = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value != nullptr ? std::string(value) : std::string();
  };
  if (std::string dir = env("PASSEPARTOUT_STATE_DIR"); !dir.empty()) return dir;
  // The XDG base-directory spec says to ignore a relative value.
  if (fs::path xdg = env("XDG_STATE_HOME"); xdg.is_absolute()) return xdg / "passepartout";
  fs::path home = env("HOME");
  if (home.empty()) {
    std::array<char, 4096> buffer{};
    struct passwd entry {};
    struct passwd* found = nullptr;
    if (::getpwuid_r(::getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr &&
        found->pw_dir != nullptr) {
      home = found->pw_dir;
    }
  }
  return home / ".local" / "state" / "passepartout";
}

}  // namespace passepartout
