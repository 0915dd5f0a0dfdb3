// Test support for the shell skill's tests: its config, an action for a
// command, and running it through the :SHELL actuator.
#pragma once

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <string_view>

#include "configured_skills.hpp"
#include "value/sexp_reader.hpp"
#include "value/value.hpp"

namespace passepartout::testing::shell {

namespace fs = std::filesystem;

// The bundled shell skill with `workdir` and more config (YAML flow-map entries).
inline std::string config(const fs::path& workdir, std::string_view more = "") {
  return folder_config("workdir", workdir, more);
}

// A :TARGET :SHELL action running `cmd`, with extra payload entries (s-expression text).
inline Value shell_action(std::string_view cmd, std::string_view more = "") {
  Value payload = Value::plist({{"CMD", Value::string(cmd)}});
  if (!more.empty()) {
    auto extra = read_sexp("(" + std::string(more) + ")");
    REQUIRE(extra.has_value());
    for (std::size_t i = 0; i + 1 < extra->size(); i += 2) {
      payload = payload.with(extra->items()[i].text(), extra->items()[i + 1]);
    }
  }
  return Value::plist({{"TYPE", Value::keyword("REQUEST")}, {"TARGET", Value::keyword("SHELL")}, {"PAYLOAD", payload}});
}

inline const Value kSignal = Value::plist({{"TYPE", Value::keyword("EVENT")}});

// Runs `action` through the actuator the snapshot has for :SHELL.
inline Result<Value> act(ConfiguredSkills& skills, const Value& action) {
  const auto snapshot = skills.snapshot();
  const auto* actuator = snapshot->find_actuator("shell");
  REQUIRE(actuator != nullptr);
  return actuator->act(action, kSignal);
}

// What the shell answered for `cmd`; REQUIREs that it answered (errors are for bad actions only).
inline std::string run(ConfiguredSkills& skills, std::string_view cmd, std::string_view more = "") {
  CAPTURE(cmd, more);
  auto result = act(skills, shell_action(cmd, more));
  INFO((result ? std::string() : result.error().message));
  REQUIRE(result.has_value());
  REQUIRE(result->is_string());
  return std::string(result->text());
}

}  // namespace passepartout::testing::shell
