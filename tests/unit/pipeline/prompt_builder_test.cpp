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

TEST_CASE("the system prompt keeps the seed's section order and carries the rejection", "[pipeline][prompt]") {
  PromptParts parts;
  parts.version = "0.1.0";
  parts.time = "TIME: 2026-11-22T00:00:00Z";
  parts.assistant_name = "Ada";
  parts.mandates = {"Always answer in French."};
  parts.rejection = testing::sexp("(:TYPE :LOG :PAYLOAD (:LEVEL :ERROR :TEXT \"no explanation\"))");
  parts.logs = "pipeline: hello\npipeline: again";
  const std::string prompt = system_prompt(parts);
  const auto at = [&](std::string_view needle) { return prompt.find(needle); };
  REQUIRE(at("TIME: 2026-11-22T00:00:00Z") == 0);
  CHECK(at("TIME:") < at("CONFIG:"));
  CHECK(at("CONFIG:") < at("IDENTITY: Ada"));
  CHECK(at("IDENTITY: Ada") < at("PREVIOUS PROPOSAL REJECTED: (:TYPE :LOG"));
  CHECK(at("PREVIOUS PROPOSAL REJECTED") < at("Always answer in French."));
  CHECK(at("Always answer in French.") < at("TOOLS:\nNo tools registered."));
  CHECK(at("TOOLS:") < at("CONTEXT:\n[Awareness skill not loaded]"));
  CHECK(at("CONTEXT:") < at("LOGS:\npipeline: hello\npipeline: again"));
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
