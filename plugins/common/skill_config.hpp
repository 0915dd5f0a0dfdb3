// Readers of a bundled skill's manifest `config` (a property list, keys
// upper-cased): each returns the fallback when the key is absent and throws
// std::invalid_argument naming the key as the manifest spells it when the
// value has the wrong type, which refuses the load with that message.
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <passepartout/value.hpp>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "skill_text.hpp"

namespace passepartout::bundled {

// A positive integer at `key` (`name` in the manifest).
inline std::int64_t positive_integer(const ValueRef& config, std::string_view key, std::string_view name,
                                     std::int64_t fallback) {
  const ValueRef value = config.get(key);
  if (value.is_nil()) return fallback;
  if (!value.is_integer() || value.as_integer() <= 0) {
    throw std::invalid_argument("config " + std::string(name) + ": expected a positive integer, got " + value.print());
  }
  return value.as_integer();
}

// The strings of the list at `key` (`name` in the manifest); the fallback
// when the key is absent, none when it is present and NIL.
inline std::vector<std::string> string_list(const ValueRef& config, std::string_view key, std::string_view name,
                                            std::vector<std::string> fallback) {
  if (!config.has(key)) return fallback;
  const ValueRef list = config.get(key);
  std::vector<std::string> out;
  if (list.is_nil()) return out;
  if (!list.is_list()) {
    throw std::invalid_argument("config " + std::string(name) + ": expected a list of strings, got " + list.print());
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string() || list[i].text().empty()) {
      throw std::invalid_argument("config " + std::string(name) + "[" + decimal(i) +
                                  "]: expected a non-empty string, got " + list[i].print());
    }
    out.emplace_back(list[i].text());
  }
  return out;
}

// true or false at `key` (`name` in the manifest). YAML's false reads as NIL,
// so a key present with NIL is false and only an absent key falls back.
inline bool boolean(const ValueRef& config, std::string_view key, std::string_view name, bool fallback) {
  if (!config.has(key)) return fallback;
  const ValueRef value = config.get(key);
  if (value.is_t()) return true;
  if (value.is_nil()) return false;
  throw std::invalid_argument("config " + std::string(name) + ": expected true or false, got " + value.print());
}

// `path` with a leading "~" (alone or before '/') replaced by the home directory.
inline std::string expand_home(const std::string& path) {
  if (path.empty() || path[0] != '~' || (path.size() > 1 && path[1] != '/')) return path;
  std::string home;
  if (const char* env = std::getenv("HOME"); env != nullptr && *env != '\0') {
    home = env;
  } else {
    passwd entry{};
    passwd* found = nullptr;
    char buffer[4096];
    if (::getpwuid_r(::getuid(), &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr) home = found->pw_dir;
  }
  if (home.empty()) throw std::invalid_argument("cannot expand '~' in '" + path + "': no home directory is known");
  return home + path.substr(1);
}

}  // namespace passepartout::bundled
