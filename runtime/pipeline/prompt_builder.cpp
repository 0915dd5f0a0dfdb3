// The sections of the system prompt, each a pure function of PromptParts.
#include "pipeline/prompt_builder.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "value/sexp_printer.hpp"

namespace passepartout {

std::string config_section(const PromptParts& parts) {
  std::string names;
  for (const std::string& name : parts.providers) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  if (names.empty()) names = "default";
  return "CONFIG: You are Passepartout v" + parts.version + ". Provider: " + names +
         ". Context: " + std::to_string(parts.context_tokens) + " tokens. Security gates: " +
         std::to_string(parts.gates) + " active. Rules learned: " + std::to_string(parts.pending_approvals) +
         ". Documentation: README.md.";
}

std::string tool_belt(std::vector<ToolListing> tools) {
  if (tools.empty()) return "No tools registered.";
  std::sort(tools.begin(), tools.end(), [](const ToolListing& a, const ToolListing& b) { return a.name < b.name; });
  std::string belt = "Available tools:";
  for (const ToolListing& tool : tools) {
    belt += "\n- " + tool.name + ": " + tool.description;
    belt += "\n  Parameters: " + (tool.parameters.empty() ? std::string("none") : tool.parameters);
  }
  return belt;
}

std::string system_prompt(const PromptParts& parts) {
  std::string prompt;
  if (!parts.time.empty()) prompt += parts.time + "\n\n";
  prompt += config_section(parts);
  prompt += "\n\nIDENTITY: " + parts.assistant_name + parts.identity;
  if (!parts.rejection.is_nil()) prompt += "\n\nPREVIOUS PROPOSAL REJECTED: " + to_sexp(parts.rejection);
  if (!parts.mandates.empty()) {
    prompt += "\n";
    for (const std::string& mandate : parts.mandates) prompt += mandate + "\n";
  }
  prompt += "\n\nTOOLS:\n" + tool_belt(parts.tools);
  prompt += "\n\nCONTEXT:\n" + (parts.context.empty() ? std::string("[Awareness skill not loaded]") : parts.context);
  prompt += "\n\nLOGS:\n";
  if (parts.logs.empty()) {
    prompt += "[No system logs available]";
  } else {
    for (std::size_t i = 0; i < parts.logs.size(); ++i) {
      if (i != 0) prompt += '\n';
      prompt += parts.logs[i];
    }
  }
  return prompt;
}

std::string time_section() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string("TIME: ") + buffer;
}

}  // namespace passepartout
