// The sections of the system prompt, each a pure function of PromptParts.
#include "pipeline/prompt_builder.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "value/sexp_printer.hpp"

namespace passepartout {

std::string config_section(const PromptParts& parts) {
  std::string section;
  append_config_section(section, parts);
  return section;
}

void append_config_section(std::string& section, const PromptParts& parts) {
  section += "CONFIG: You are Passepartout v";
  section += parts.version;
  section += ". Provider: ";
  if (parts.providers.empty()) section += "default";
  for (std::size_t i = 0; i < parts.providers.size(); ++i) {
    if (i != 0) section += ", ";
    section += parts.providers[i];
  }
  section += ". Context: ";
  section += std::to_string(parts.context_tokens);
  section += " tokens. Security gates: ";
  section += std::to_string(parts.gates);
  section += " active. Rules learned: ";
  section += std::to_string(parts.rules_learned);
  section += ". Documentation: README.md.";
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
  append_system_prompt(prompt, parts);
  return prompt;
}

std::size_t append_system_prompt(std::string& prompt, const PromptParts& parts) {
  using namespace std::string_view_literals;  // appended without measuring them
  std::size_t estimate = 512 + parts.time.size() + parts.assistant_name.size() + parts.identity.size() +
                         parts.grammar.size() + parts.tools.size() + parts.context.size();
  for (const std::string& mandate : parts.mandates) estimate += mandate.size() + 1;
  estimate += parts.logs.size();
  prompt.reserve(prompt.size() + estimate);
  // What stays the same from call to call of a session first, so that the
  // providers' prompt caches serve it (decision 0026).
  prompt += "IDENTITY: "sv;
  prompt += parts.assistant_name;
  if (!parts.identity.empty()) {
    prompt += '\n';
    prompt += parts.identity;
  }
  prompt += parts.grammar;
  if (!parts.mandates.empty()) {
    prompt += '\n';
    for (const std::string& mandate : parts.mandates) {
      prompt += mandate;
      prompt += '\n';
    }
  }
  prompt += "\n\nTOOLS:\n"sv;
  prompt += parts.tools.empty() ? "No tools registered."sv : parts.tools;
  prompt += "\n\nCONTEXT:\n"sv;
  prompt += parts.context.empty() ? "[Awareness skill not loaded]"sv : std::string_view(parts.context);
  const std::size_t stable = prompt.size();
  // Then what changes per call.
  prompt += "\n\n"sv;
  if (parts.config.empty()) {
    append_config_section(prompt, parts);
  } else {
    prompt += parts.config;
  }
  if (!parts.time.empty()) {
    prompt += "\n\n"sv;
    prompt += parts.time;
  }
  prompt += "\n\nLOGS:\n"sv;
  prompt += parts.logs.empty() ? "[No system logs available]"sv : parts.logs;
  if (!parts.rejection.is_nil()) {
    prompt += "\n\nPREVIOUS PROPOSAL REJECTED: "sv;
    print_sexp(parts.rejection, prompt);
  }
  return stable;
}

const std::string& time_section() {
  // Formatting the time costs more than the rest of the CONFIG line; within
  // one second the text is the same. The coarse clock (the kernel's last
  // tick, a few milliseconds behind at most) is read in a fifth of the time
  // of the precise one, and a line that shows whole seconds needs no more.
  thread_local std::time_t cached_second = -1;
  thread_local std::string cached;
  timespec coarse{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &coarse);
  const std::time_t now = coarse.tv_sec;
  if (now != cached_second) {
    std::tm utc{};
    gmtime_r(&now, &utc);
    char buffer[32];
    std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
    cached = std::string("TIME: ") + buffer;
    cached_second = now;
  }
  return cached;
}

}  // namespace passepartout
