// McpServerConfig: one Model Context Protocol server the daemon runs or
// reaches, as the daemon's YAML config declares it under `mcp_servers:`, or
// as an existing .mcp.json / mcp.json declares it (`mcpServers`, or VS
// Code's `servers`), read unchanged:
//
//   mcp_servers:
//     fs:                                   # the name: [A-Za-z0-9_-], 1 to 24, no "__"
//       command: npx                        # stdio: the program, and its arguments
//       args: [-y, "@modelcontextprotocol/server-filesystem", "${env:HOME}/notes"]
//       env: {LOG_LEVEL: info}              # added to a clean environment (PATH, HOME, LANG)
//       cwd: /srv/notes
//       writable: [/srv/notes]              # folders it may write (Landlock); its own temporary one too
//       network: false                      # default true
//       user: mcp                           # when the daemon is root: who it runs as (default nobody)
//       limits: {open_files: 1024, memory: 2GiB, cpu_seconds: 3600}   # only open_files by default
//     tracker:
//       url: https://mcp.example.com/mcp    # Streamable HTTP
//       headers: {Authorization: "Bearer ${env:TRACKER_TOKEN}"}
//       headers_file: ~/.config/passepartout/tracker.headers   # "Name: value" lines, owner-only
//     # for either:
//       guards: [tool-permissions]          # the skills that must be loaded for its tools to act
//       call_timeout: 30                    # seconds a request may take (initialize and tools/list too)
//       max_result_bytes: 65536             # of a result's text the model is shown
//       disabled: false
//
// ${env:NAME}, ${NAME} and ${NAME:-default} are expanded in every string. A
// header's value is never written in the config itself: it comes from the
// environment or the headers file (an .mcp.json read unchanged may hold one
// when only its owner can read it).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"

namespace YAML {
class Node;
}  // namespace YAML

namespace passepartout {
class YamlProblems;
}  // namespace passepartout

namespace passepartout::mcp {

struct McpServerConfig {
  std::string name;
  std::string where;  // "/etc/passepartout.yaml:12:5", for messages
  enum class Kind : std::uint8_t { stdio, http };
  Kind kind = Kind::stdio;
  // stdio
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;
  std::vector<std::filesystem::path> writable;
  bool network = true;
  std::string user;  // "" : nobody, when the daemon is root
  std::uint64_t open_files = 1024;
  std::uint64_t memory_bytes = 0;  // 0: not limited
  std::uint64_t cpu_seconds = 0;   // 0: not limited
  // http
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  // either
  std::vector<std::string> guards = {"tool-permissions"};
  std::chrono::milliseconds call_timeout{30'000};
  std::size_t max_result_bytes = std::size_t{64} * 1024;
  bool disabled = false;

  // Whether a running server must be restarted to take `other` (anything but
  // the name and where it was read differs).
  bool same_as(const McpServerConfig& other) const;
};

using EnvLookup = std::function<std::optional<std::string>(std::string_view)>;

// The longest server name: "mcp__" + name + "__" + a tool's name stays within
// the providers' 64 characters for tools of up to 33.
inline constexpr std::size_t kMaxServerName = 24;

// Appends each entry of `servers` (a YAML map of name -> entry, as above) to
// `out`, and each problem, located at its line and key, to `problems`.
// Relative paths are resolved against `base` (the config file's folder).
void read_mcp_servers(const YAML::Node& servers, YamlProblems& problems, const EnvLookup& env,
                      const std::filesystem::path& base, std::vector<McpServerConfig>& out);

// Reads an .mcp.json or mcp.json file: its `mcpServers` (Claude Code, Cursor)
// or `servers` (VS Code) map, each entry `{command, args, env}` or `{url,
// headers}` (`type` stdio, http or streamable-http; sse is refused: this
// client speaks Streamable HTTP). Keys other hosts use and this one does not
// are ignored. Errors name the file, line and key.
Result<std::vector<McpServerConfig>> read_mcp_json(const std::filesystem::path& file, const EnvLookup& env);

}  // namespace passepartout::mcp
