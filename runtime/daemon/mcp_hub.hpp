// McpHub: the Model Context Protocol servers of one daemon. It starts each
// configured server on one event loop, lists its tools, pins their
// definitions, offers the pinned ones to the pipeline as external tools,
// makes the calls the gates let through, restarts a server that dies (with
// backoff, quarantined after repeated deaths) and applies a changed
// configuration live, leaving the servers that did not change alone.
//
// Pins: the first time a tool is seen, the SHA-256 of its definition (as
// mcp/tools.hpp computes it) is recorded in <state dir>/mcp-pins.json. A
// tool whose definition later differs is neither offered nor callable until
// an operator trusts the change (trust()).
//
// A stdio server runs confined (isolation/confine.hpp): as nobody when the
// daemon is root (its entry's `user:` otherwise), writes confined to its
// entry's `writable:` folders and a temporary folder of its own (TMPDIR, and
// HOME when it runs as another user; its working folder unless `cwd:`), the
// network denied when the entry says `network: false`, killed with the daemon.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "mcp/server_config.hpp"
#include "pipeline/external_tools.hpp"
#include "skills/audit_log.hpp"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace passepartout {

// What `mcp list`, `status` and /metrics show of one server.
struct McpServerStatus {
  std::string name;
  std::string transport;  // "stdio" or "http"
  // "starting", "ready", "restarting", "quarantined", "refused", "disabled"
  std::string state;
  std::string reason;  // why it is not ready ("" when it is)
  std::string protocol_version;
  std::int64_t pid = 0;
  std::uint64_t starts = 0;  // processes started (or sessions opened) since the daemon started
  std::uint64_t calls = 0;
  std::uint64_t failures = 0;
  std::uint64_t latency_p50_us = 0;  // of the recent calls (0: none)
  std::uint64_t latency_p99_us = 0;
  struct Tool {
    std::string name;     // the server's own
    std::string offered;  // as the model calls it ("" when not offered)
    std::string digest;   // of its definition now
    // "pinned" (matches its pin), "new" (pinned on this listing), "changed"
    // (differs from its pin: refused until trusted), "left out" (its name is
    // too long or collides)
    std::string pin;
    std::string pinned_digest;  // the pin's, when it differs
    std::string annotations_json;
    std::string note;  // why it is left out
  };
  std::vector<Tool> tools;
  std::uint64_t definition_changes = 0;  // tools found changed since the daemon started
  std::string sandbox;                   // what a stdio server runs under, one line ("" for http)
};

// What trust() changed.
struct McpTrustReport {
  struct Change {
    std::string tool;
    std::string from_digest;  // "" when it had no pin
    std::string to_digest;
    std::string from_definition;  // canonical JSON ("" when none)
    std::string to_definition;
  };
  std::vector<Change> changes;
};

class McpHub final : public ExternalTools {
 public:
  // Runs everything on `io` (one thread runs it). Pins are read from and
  // written to `state_dir`. A stdio server is started as `<launcher> confine
  // ... -- COMMAND ARGS` (isolation/confine.hpp); empty: this executable.
  McpHub(boost::asio::io_context& io, const std::filesystem::path& state_dir,
         const std::filesystem::path& launcher = {});
  ~McpHub() override;
  McpHub(const McpHub&) = delete;
  McpHub& operator=(const McpHub&) = delete;

  // Where a tool found changed ("mcp-tool-changed", refused at step "pin")
  // and an operator's trust ("mcp-trust") are recorded with the skill
  // changes; called on the loop's thread. Set before the first apply().
  void set_audit(std::function<void(SkillChange)> audit);

  // Takes `servers` as the whole configuration: new ones start, changed ones
  // restart, removed ones stop, unchanged ones keep serving. Any thread.
  void apply(std::vector<mcp::McpServerConfig> servers);

  // Stops every server; no call is made after. Any thread but the loop's;
  // waits until the loop has stopped them (or does it itself when the loop no
  // longer runs).
  void stop();

  std::vector<McpServerStatus> status() const;  // any thread

  // Accepts the current definition of `tool` of `server` (every changed or
  // new tool of it when `tool` is empty) as its pin. Any thread; waits for
  // the loop. Errors: no such server or tool (not_found).
  Result<McpTrustReport> trust(const std::string& server, const std::string& tool, const std::string& requester);

  // ExternalTools
  std::shared_ptr<const ToolCatalog> catalog() const override;
  void call(const ExternalTool& tool, const Value& args, std::function<void(Result<ExternalResult>)> done) override;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace passepartout
