// Prompt assembly: the CONFIG line (seed test-assemble-config-section), the
// tool belt, and the section order of D8.
#include <catch2/catch.hpp>

#include <chrono>
#include <ctime>
#include <string>

#include "pipeline/prompt_builder.hpp"
#include "support/sexp.hpp"

namespace passepartout {

TEST_CASE("the CONFIG section names the system, its version and its gates", "[pipeline][prompt]") {
  PromptParts parts;
  parts.version = "0.7.2";
  const std::vector<std::string> providers{"scripted", "offline"};
  parts.providers = providers;
  parts.gates = 5;
  parts.rules_learned = 2;
  const std::string config = config_section(parts);
  CHECK(config ==
        "CONFIG: You are Passepartout v0.7.2. Provider: scripted, offline. Context: 8192 tokens. Security gates: 5 "
        "active. Rules learned: 2. Documentation: README.md.");
  parts.providers = {};
  CHECK(config_section(parts).find("Provider: default.") != std::string::npos);
}

TEST_CASE("the tool belt lists tools sorted by name, or says there are none", "[pipeline][prompt]") {
  CHECK(tool_belt({}) == "No tools registered.");
  const std::string belt =
      tool_belt({{"write-file", "Writes a file", "(:PATH \"string\")"}, {"read-file", "Reads a file", ""}});
  CHECK(belt.find("Available tools:\n- read-file: Reads a file") == 0);
  CHECK(belt.find("- write-file: Writes a file\n  Parameters: (:PATH \"string\")") != std::string::npos);
}

TEST_CASE("the system prompt puts the stable sections first and what changes per call after them",
          "[pipeline][prompt]") {
  PromptParts parts;
  parts.version = "0.1.0";
  parts.time = "TIME: 2026-11-22T00:00:00Z";
  parts.assistant_name = "Ada";
  parts.mandates = {"Always answer in French."};
  parts.rejection = testing::sexp("(:TYPE :LOG :PAYLOAD (:LEVEL :ERROR :TEXT \"no explanation\"))");
  parts.logs = "pipeline: hello\npipeline: again";
  std::string prompt;
  const std::size_t stable = append_system_prompt(prompt, parts);
  const auto at = [&](std::string_view needle) { return prompt.find(needle); };
  REQUIRE(at("IDENTITY: Ada") == 0);
  CHECK(at("IDENTITY: Ada") < at("Always answer in French."));
  CHECK(at("Always answer in French.") < at("TOOLS:\nNo tools registered."));
  CHECK(at("TOOLS:") < at("CONTEXT:\n[Awareness skill not loaded]"));
  CHECK(prompt.substr(0, stable).ends_with("CONTEXT:\n[Awareness skill not loaded]"));
  CHECK(stable < at("CONFIG:"));
  CHECK(at("CONFIG:") < at("TIME: 2026-11-22T00:00:00Z"));
  CHECK(at("TIME:") < at("LOGS:\npipeline: hello\npipeline: again"));
  CHECK(at("LOGS:") < at("PREVIOUS PROPOSAL REJECTED: (:TYPE :LOG"));
  CHECK(prompt == system_prompt(parts));
  // What changes per call leaves the stable part as it was, byte for byte.
  PromptParts later = parts;
  later.time = "TIME: 2026-11-22T00:00:07Z";
  later.rules_learned = 3;
  later.rejection = Value();
  later.logs = "pipeline: something else";
  std::string next;
  CHECK(append_system_prompt(next, later) == stable);
  CHECK(next.compare(0, stable, prompt, 0, stable) == 0);
  parts.logs = {};
  CHECK(system_prompt(parts).find("LOGS:\n[No system logs available]") != std::string::npos);
}

TEST_CASE("the TIME section is an ISO 8601 UTC timestamp of now", "[pipeline][prompt]") {
  const std::time_t before = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  const std::string time = time_section();
  const std::time_t after = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  REQUIRE(time.size() == std::string("TIME: 2026-11-22T00:00:00Z").size());
  CHECK(time.rfind("TIME: ", 0) == 0);
  CHECK(time[10] == '-');
  CHECK(time[16] == 'T');
  CHECK(time.back() == 'Z');
  std::tm utc{};
  REQUIRE(::strptime(time.c_str() + 6, "%Y-%m-%dT%H:%M:%SZ", &utc) != nullptr);
  const std::time_t shown = ::timegm(&utc);
  // The clock it reads may lag the precise one by a tick: a second before is still now.
  CHECK(shown >= before - 1);
  CHECK(shown <= after);
}

}  // namespace passepartout
