// Tests for reading MCP servers: the daemon's mcp_servers: and an existing
// .mcp.json read unchanged; each mistake named by file, line and key.
#include "mcp/server_config.hpp"

#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <string>

#include "base/yaml_diagnostics.hpp"
#include "support/skill_fixtures.hpp"

using namespace passepartout;
using namespace passepartout::mcp;

namespace {

namespace fs = std::filesystem;

EnvLookup env_of(std::map<std::string, std::string> values) {
  return [values = std::move(values)](std::string_view name) -> std::optional<std::string> {
    const auto it = values.find(std::string(name));
    return it == values.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

fs::path write(const fs::path& file, const std::string& text, mode_t mode = 0600) {
  std::ofstream(file) << text;
  ::chmod(file.c_str(), mode);
  return file;
}

// `yaml` written to <dir>/config.yaml and its mcp_servers: read (paths
// relative to `dir`); the entries, and the problems' message ("" when none).
std::pair<std::vector<McpServerConfig>, std::string> read_servers(const fs::path& dir, const std::string& yaml) {
  const fs::path file = write(dir / "config.yaml", yaml);
  std::vector<McpServerConfig> out;
  YamlProblems problems(file.string());
  read_mcp_servers(YAML::Load(yaml)["mcp_servers"], problems, env_of({}), dir, out);
  return std::make_pair(out, problems.ok() ? std::string() : problems.message());
}

}  // namespace

TEST_CASE("mcp json: Claude Code's mcpServers and VS Code's servers are read unchanged", "[mcp]") {
  testing::TempDir dir;
  const fs::path claude = write(dir.path() / ".mcp.json", R"({
  "mcpServers": {
    "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"],
           "env": {"LOG": "${LEVEL:-info}"}, "autoApprove": ["read_file"]},
    "tracker": {"type": "http", "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": "Bearer ${env:TOKEN}"}}
  }
})");
  auto servers = read_mcp_json(claude, env_of({{"HOME", "/home/ada"}, {"TOKEN", "t0k"}}));
  REQUIRE(servers.has_value());
  REQUIRE(servers->size() == 2);
  const McpServerConfig& fs_server = (*servers)[0];
  CHECK(fs_server.name == "fs");
  CHECK(fs_server.kind == McpServerConfig::Kind::stdio);
  CHECK(fs_server.command == "npx");
  CHECK(fs_server.args.back() == "/home/ada/notes");
  CHECK(fs_server.env == std::vector<std::pair<std::string, std::string>>{{"LOG", "info"}});
  CHECK(fs_server.guards == std::vector<std::string>{"tool-permissions"});
  CHECK(fs_server.where.find(".mcp.json:3:5") != std::string::npos);
  const McpServerConfig& tracker = (*servers)[1];
  CHECK(tracker.kind == McpServerConfig::Kind::http);
  CHECK(tracker.headers == std::vector<std::pair<std::string, std::string>>{{"Authorization", "Bearer t0k"}});

  const fs::path vscode =
      write(dir.path() / "mcp.json", R"({"servers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}})");
  auto code = read_mcp_json(vscode, env_of({}));
  REQUIRE(code.has_value());
  CHECK(code->at(0).name == "git");
}

TEST_CASE("mcp json: a mistake names the file, line and key, and nothing is taken", "[mcp]") {
  testing::TempDir dir;
  const std::pair<std::string, std::string> cases[] = {
      {R"({"mcpServers": {"a": {"url": "https://x/mcp", "type": "sse"}}})",
       "(the old HTTP+SSE transport) is not spoken"},
      {R"({"mcpServers": {"a": {"command": "x", "url": "https://x"}}})", "give either command:"},
      {R"({"mcpServers": {"a": {}}})", "give either command:"},
      {R"({"mcpServers": {"a": {"command": "${NOPE}"}}})", "${NOPE} is not set in the environment"},
      {R"({"mcpServers": {"a": {"command": "x", "args": "y"}}})", "args of mcp server 'a': expected a list"},
      {R"({"mcpServers": {"a__b": {"command": "x"}}})", "a name is 1 to 24"},
      {R"({"mcpServers": {"a": {"command": "x", "comand": "y"}}})",
       "unknown key 'comand' of mcp server 'a'; did you mean 'command'?"},
      {R"({"other": {}})", "no \"mcpServers\""},
      {R"({"mcpServers": {"a": {"command": "x"})", ".mcp.json:1:"},
  };
  for (const auto& [text, expected] : cases) {
    INFO(text);
    const fs::path file = write(dir.path() / ".mcp.json", text);
    auto servers = read_mcp_json(file, env_of({}));
    REQUIRE_FALSE(servers.has_value());
    CHECK_THAT(servers.error().message, Catch::Contains(expected));
    CHECK_THAT(servers.error().message, Catch::Contains(file.string()));
  }
}

TEST_CASE("mcp json: a literal header value is refused unless only the owner can read the file", "[mcp]") {
  testing::TempDir dir;
  const std::string text =
      R"({"mcpServers": {"t": {"url": "https://x/mcp", "headers": {"Authorization": "Bearer literal"}}}})";
  CHECK(read_mcp_json(write(dir.path() / "owner.json", text, 0600), env_of({})).has_value());
  auto shared = read_mcp_json(write(dir.path() / "shared.json", text, 0644), env_of({}));
  REQUIRE_FALSE(shared.has_value());
  CHECK_THAT(shared.error().message, Catch::Contains("a header's value is never written in the config file"));
}

TEST_CASE("mcp_servers: headers come from an owner-only headers_file, and limits are checked", "[mcp]") {
  testing::TempDir dir;
  write(dir.path() / "h.headers", "# comment\nAuthorization: Bearer from-file\nX-Team: blue\n", 0600);
  write(dir.path() / "loose.headers", "Authorization: x\n", 0644);
  auto read_yaml = [&](const std::string& yaml) { return read_servers(dir.path(), yaml); };
  auto [ok, none] = read_yaml(
      "mcp_servers:\n  t:\n    url: https://x/mcp\n    headers_file: h.headers\n    call_timeout: 5s\n"
      "    max_result_bytes: 4096\n    guards: [tool-permissions, policy]\n");
  INFO(none);
  REQUIRE(ok.size() == 1);
  CHECK(ok[0].headers ==
        std::vector<std::pair<std::string, std::string>>{{"Authorization", "Bearer from-file"}, {"X-Team", "blue"}});
  CHECK(ok[0].call_timeout == std::chrono::seconds(5));
  CHECK(ok[0].max_result_bytes == 4096);
  CHECK(ok[0].guards == std::vector<std::string>{"tool-permissions", "policy"});

  auto [loose, loose_problem] =
      read_yaml("mcp_servers:\n  t:\n    url: https://x/mcp\n    headers_file: loose.headers\n");
  CHECK(loose.empty());
  CHECK_THAT(loose_problem, Catch::Contains("can be read by others than its owner; run chmod 600"));
  auto [literal, literal_problem] = read_yaml("mcp_servers:\n  t:\n    url: https://x/mcp\n    headers: {A: b}\n");
  CHECK(literal.empty());
  CHECK_THAT(literal_problem, Catch::Contains(":4:5: headers of mcp server 't': a header's value is never written"));
  auto [bad, bad_problem] = read_yaml(
      "mcp_servers:\n  t:\n    command: x\n    call_timeout: never\n    max_result_bytes: 3\n    guards: []\n");
  CHECK(bad.empty());
  CHECK_THAT(bad_problem, Catch::Contains("call_timeout of mcp server 't': 'never' is not a duration"));
  CHECK_THAT(bad_problem, Catch::Contains("max_result_bytes of mcp server 't': '3' is not a number of bytes"));
  CHECK_THAT(bad_problem, Catch::Contains("guards of mcp server 't': name at least one skill"));
}

TEST_CASE("mcp_servers: the sandbox of a stdio server: user, writable folders, network and limits", "[mcp]") {
  testing::TempDir dir;
  auto read_yaml = [&](const std::string& yaml) { return read_servers(dir.path(), yaml); };
  auto [ok, none] = read_yaml(
      "mcp_servers:\n  fs:\n    command: x\n    writable: [notes, /srv/data]\n    network: false\n"
      "    user: mcp\n    limits: {open_files: 64, memory: 2GiB, cpu_seconds: 600}\n");
  INFO(none);
  REQUIRE(ok.size() == 1);
  CHECK(ok[0].writable == std::vector<fs::path>{dir.path() / "notes", "/srv/data"});
  CHECK_FALSE(ok[0].network);
  CHECK(ok[0].user == "mcp");
  CHECK(ok[0].open_files == 64);
  CHECK(ok[0].memory_bytes == std::uint64_t{2} << 30);
  CHECK(ok[0].cpu_seconds == 600);

  auto [defaults, no_problem] = read_yaml("mcp_servers:\n  fs:\n    command: x\n");
  REQUIRE(defaults.size() == 1);
  CHECK(defaults[0].network);
  CHECK(defaults[0].user.empty());
  CHECK(defaults[0].open_files == 1024);
  CHECK(defaults[0].memory_bytes == 0);
  CHECK(defaults[0].cpu_seconds == 0);

  auto [bad, problem] =
      read_yaml("mcp_servers:\n  fs:\n    command: x\n    limits: {open_files: 0, memory: 1MiB, cpu_second: 5}\n");
  CHECK(bad.empty());
  CHECK_THAT(problem,
             Catch::Contains(":4:26: limits.open_files of mcp server 'fs': '0' is not a positive whole number"));
  CHECK_THAT(problem, Catch::Contains("limits.memory of mcp server 'fs': '1MiB' is not a size of at least 16MiB"));
  CHECK_THAT(problem,
             Catch::Contains("unknown key 'cpu_second' of limits of mcp server 'fs'; did you mean 'cpu_seconds'?"));
  auto [list, list_problem] = read_yaml("mcp_servers:\n  fs:\n    command: x\n    limits: [1]\n");
  CHECK(list.empty());
  CHECK_THAT(list_problem, Catch::Contains("limits of mcp server 'fs': expected a map"));

  // A changed sandbox restarts the server.
  McpServerConfig other = ok[0];
  other.open_files = 65;
  CHECK_FALSE(ok[0].same_as(other));
  other = ok[0];
  other.user = "nobody";
  CHECK_FALSE(ok[0].same_as(other));
}

TEST_CASE("mcp server config: what restarts a server is every setting but its place in the file", "[mcp]") {
  McpServerConfig a;
  a.name = "fs";
  a.command = "x";
  McpServerConfig b = a;
  b.where = "elsewhere:1:1";
  CHECK(a.same_as(b));
  b.args = {"--verbose"};
  CHECK_FALSE(a.same_as(b));
}
