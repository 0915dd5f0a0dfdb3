// External tools: tools served outside the skills (today by the Model Context
// Protocol servers the daemon runs), offered to the model beside the skills'
// tools and dispatched through the very same gates, approvals and last mile.
// The pipeline sees an immutable catalog and an asynchronous call; the
// daemon's MCP hub provides both (daemon/mcp_hub.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "value/value.hpp"

namespace passepartout {

class Snapshot;

// One tool as the model is offered it.
struct ExternalTool {
  std::string name;         // as the model calls it: "mcp__fs__read_text_file"
  std::string server;       // the server that serves it: "fs"
  std::string server_tool;  // the server's own name for it: "read_text_file"
  std::string description;
  std::string parameters_json;  // its input schema, as the server gave it
  Value parameters;             // the same through the JSON bridge
  std::string digest;           // SHA-256 of its pinned definition
  // The skills that must be loaded, each with a gate, for it to act (the
  // guard rule): its server's `guards:`, tool-permissions by default.
  std::vector<std::string> guards;
};

// What the external tools are at one moment; a new catalog replaces it when
// a server comes, goes or changes its tools. Immutable: read from any thread.
class ToolCatalog {
 public:
  ToolCatalog() = default;
  // `tools` in any order; kept sorted by name. `unavailable`: names of tools
  // the source knows but does not offer now, each with why ("the definition
  // of 'mcp__fs__write' changed since it was pinned; ...").
  ToolCatalog(std::uint64_t generation, std::vector<ExternalTool> tools,
              std::vector<std::pair<std::string, std::string>> unavailable = {});

  // Changes with every new catalog (0: the empty one of a daemon without servers).
  std::uint64_t generation() const noexcept { return generation_; }
  std::span<const ExternalTool> tools() const noexcept { return tools_; }
  // The tool named `name`, ignoring ASCII case; nullptr when none.
  const ExternalTool* find(std::string_view name) const noexcept;
  // Why the tool `name` (ignoring ASCII case) is known but not offered; "" when it is not known so.
  std::string_view unavailable(std::string_view name) const noexcept;

 private:
  std::uint64_t generation_ = 0;
  std::vector<ExternalTool> tools_;
  std::vector<std::pair<std::string, std::string>> unavailable_;
};

// Why `tool` may not act in `snapshot` ("the tool 'mcp__fs__write' is guarded
// by tool-permissions, which is not loaded"), or "" when every guard is
// loaded with a gate.
std::string missing_guard(const Snapshot& snapshot, const ExternalTool& tool);

// A call's outcome as the model sees it: the result's text, and whether the
// tool itself said it failed (a failed call that reached the tool).
struct ExternalResult {
  bool is_error = false;
  std::string text;
};

class ExternalTools {
 public:
  virtual ~ExternalTools() = default;
  // The current catalog; cheap, any thread.
  virtual std::shared_ptr<const ToolCatalog> catalog() const = 0;
  // Calls `tool` (from a catalog of this source) with `args` (the action's
  // :ARGS plist, keys as the JSON bridge upper-cased them). `done` is called
  // exactly once, on any thread: the result, or why the call did not
  // complete ("mcp server 'fs' exited with status 1", "no answer in 30 s",
  // "the definition of 'mcp__fs__write' changed and awaits `passepartout mcp trust fs`").
  virtual void call(const ExternalTool& tool, const Value& args, std::function<void(Result<ExternalResult>)> done) = 0;
};

}  // namespace passepartout
