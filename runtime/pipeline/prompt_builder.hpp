// Prompt assembly (seed D8, D9, B12): the system prompt in the seed's section
// order, and the raw prompt the model answers.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "value/value.hpp"

namespace passepartout {

// One tool as the TOOLS section lists it.
struct ToolListing {
  std::string name;
  std::string description;
  std::string parameters;  // printed, "" when the tool takes none
};

// What the sections are made of; the pipeline gathers it per attempt. The
// views are of text that outlives the prompt's assembly (options, the
// snapshot's tool belt, the thread's TIME line), so nothing is copied twice.
struct PromptParts {
  std::string_view version;                // "0.1.0"
  std::span<const std::string> providers;  // the cascade's names; "default" when empty
  std::size_t context_tokens = 8192;
  std::size_t gates = 0;                      // gates in the snapshot
  std::size_t rules_learned = 0;              // "Rules learned": standing approvals in force
  std::string_view assistant_name = "Agent";  // MEMEX_ASSISTANT
  std::string_view identity;                  // the identity file's text, after the name; may be empty
  std::string_view grammar;                   // how to answer and act (Offer::grammar); may be empty
  Value rejection;                            // the last rejection (:PAYLOAD :REJECTION-TRACE), NIL when none
  std::vector<std::string> mandates;          // standing mandates, already evaluated
  std::string_view tools;                     // the TOOLS section: tool_belt() of the snapshot's tools
  std::string context;                        // global awareness; "" when memory is absent
  std::string_view logs;                      // recent log lines, oldest first, one per line
  std::string_view time;                      // "TIME: ..." line; "" to omit
  std::string_view config;                    // config_section() of these parts when the caller keeps it; "" builds it
};

// D9: "CONFIG: You are Passepartout v<version>. Provider: <names>. Context: <n>
// tokens. Security gates: <g> active. Rules learned: <r>. Documentation: README.md."
std::string config_section(const PromptParts& parts);
// The same, appended to `out`.
void append_config_section(std::string& out, const PromptParts& parts);

// B12: "Available tools:\n- name: description\n  Parameters: ...", sorted, or
// "No tools registered."
std::string tool_belt(std::vector<ToolListing> tools);

// D8's sections, what is stable for a session first (decision 0026):
//   IDENTITY: <name>[\n<identity>]<grammar>[\n<mandates>] \n\n TOOLS:\n<belt>
//   \n\n CONTEXT:\n<context>            -- the stable part
//   \n\n CONFIG \n\n TIME \n\n LOGS:\n<logs><reflection>
// the reflection being "\n\nPREVIOUS PROPOSAL REJECTED: <printed rejection>"
// when there is one; an empty context reads "[Awareness skill not loaded]"
// and no logs "[No system logs available]"; no TIME section when it is "".
std::string system_prompt(const PromptParts& parts);
// The same, appended to `out` (a buffer kept from call to call grows once).
// Returns where the stable part ends in `out` (the prompt cache's breakpoint).
std::size_t append_system_prompt(std::string& out, const PromptParts& parts);

// The current time as the TIME section shows it: "TIME: 2026-11-21T23:59:00Z"
// (formatted once per second per thread). The calling thread's copy, valid
// until its next call.
const std::string& time_section();

}  // namespace passepartout
