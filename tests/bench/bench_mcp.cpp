// MCP calls through the daemon: `passepartout daemon` as a child process
// running the reference @modelcontextprotocol/server-everything over stdio
// (the pinned npm package scripts/setup installs), behind the bundled gates
// with `mcp__everything__*` allowed, its model the loopback stub of
// model_stub.hpp in tool-call mode, which calls the server's `echo` natively
// in every chat and answers "pong" once the result comes back:
//   BM_McpCallOverhead  the daemon's side of one call, p50: from the stub's
//                       writing the answer that makes the call to its having
//                       read the next request, the one carrying the result
//                       (parse, gates, dispatch, the MCP round trip, the
//                       result, the next prompt); minus the p50 of the same
//                       call made by a bare client of the TypeScript SDK
//                       (mcp_sdk_client.mjs) to the same server, same run.
// Without node or the npm packages it reports why and skips: no figures.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "daemon_process.hpp"
#include "model_stub.hpp"
#include "support/executables.hpp"

namespace {
using namespace passepartout;
using namespace passepartout::bench;
using nlohmann::json;

constexpr int kWarmup = 50;
constexpr int kCalls = 500;
// The call, the same on both sides, and what its result must hold.
constexpr std::string_view kServer = "everything";
constexpr std::string_view kTool = "echo";
constexpr std::string_view kArguments = R"({"message":"hello"})";
constexpr std::string_view kExpect = "Echo: hello";

// Where scripts/setup installs the npm packages, computed as it does it.
fs::path npm_dir() {
  if (const char* dir = std::getenv("PASSEPARTOUT_NPM_CACHE"); dir != nullptr && *dir != '\0') return dir;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache != nullptr && *cache != '\0') {
    return fs::path(cache) / "passepartout" / "npm";
  }
  const char* home = std::getenv("HOME");
  return fs::path(home != nullptr ? home : "") / ".cache" / "passepartout" / "npm";
}

// What both sides run, found; `missing` says why not.
struct Prerequisites {
  std::string node;
  fs::path npm;
  fs::path server;  // server-everything's dist/index.js
  std::string missing;
};

Prerequisites find_prerequisites() {
  Prerequisites p;
  p.node = testing::on_path("node");
  p.npm = npm_dir();
  const fs::path packages = p.npm / "node_modules" / "@modelcontextprotocol";
  p.server = packages / "server-everything" / "dist" / "index.js";
  if (p.node.empty()) {
    p.missing = "node is not on PATH: run scripts/setup (it installs Debian's nodejs); no MCP figures";
  } else if (!fs::exists(p.server)) {
    p.missing = "@modelcontextprotocol/server-everything is not installed in " + p.npm.string() +
                ": run scripts/setup; no MCP figures";
  } else if (!fs::exists(packages / "sdk" / "package.json") ||
             !fs::exists(packages / "sdk" / "dist" / "esm" / "client" / "stdio.js")) {
    p.missing =
        "@modelcontextprotocol/sdk is not installed in " + p.npm.string() + ": run scripts/setup; no MCP figures";
  }
  return p;
}

// The bundled manifests, copied into `dir` with the tool-permissions table
// allowing the server's tools in place of the bundled `"mcp__*": ask`.
fs::path manifests_allowing_server(const fs::path& dir) {
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(PP_MANIFEST_DIR)) {
    fs::copy_file(entry.path(), dir / entry.path().filename());
  }
  const fs::path file = dir / "tool-permissions.yaml";
  std::string text = slurp(file);
  const std::string bundled = "    \"mcp__*\": ask";
  const std::size_t at = text.find(bundled);
  if (at == std::string::npos) die("the bundled tool-permissions.yaml has no line '" + bundled + "'");
  text.replace(at, text.find('\n', at) - at, "    \"mcp__" + std::string(kServer) + "__*\": allow");
  std::ofstream(file) << text;
  return dir;
}

// The daemon's config: the stub as an OpenAI-compatible model (not
// streamed), and the server over stdio.
fs::path write_config(const fs::path& dir, const ModelStub& stub, const Prerequisites& p) {
  std::string config = "providers:\n";
  config += "  - name: model\n";
  config += "    kind: openai\n";
  config += "    base_url: " + stub.base_url() + "\n";
  config += "    model: stub-model\n";
  config += "    stream: false\n";
  config += "    context_window: 64000\n";
  config += "    api_key_env: MODEL_KEY\n";
  config += "mcp_servers:\n";
  config += "  " + std::string(kServer) + ":\n";
  config += "    command: \"" + p.node + "\"\n";
  config += "    args: [\"" + p.server.string() + "\", stdio]\n";
  // sandbox: user: root
  // A daemon running as root runs a stdio server as nobody unless its entry
  // names another user, and the npm cache is under /root (mode 0700): as root,
  // the server runs as root, as the SDK client's does; otherwise as the
  // daemon's user, who installed the cache.
  if (::geteuid() == 0) config += "    user: root\n";
  const fs::path file = dir / "passepartout.yaml";
  std::ofstream(file) << config;
  return file;
}

std::string token_of(const fs::path& dir) {
  std::string token = slurp(dir / "token");
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  return token;
}

// The daemon's MCP listing (the operator command `mcp list` sends), over TCP with the token.
Value mcp_listing(Client& client, const std::string& token, long id) {
  const std::string request_id = "op-" + std::to_string(id);
  auto message =
      read_sexp("(:TYPE :OPERATOR :COMMAND :MCP :REQUEST-ID \"" + request_id + "\" :AUTH \"" + token + "\")");
  if (!message) die("the operator request does not read: " + message.error().message);
  std::string frame;
  if (!FrameCodec().encode_into(*message, frame)) die("the operator request could not be framed");
  send_all(client.fd(), frame);
  for (;;) {
    const Value answer = client.read_frame();
    if (answer.at("TYPE").is_keyword("RESPONSE") && answer.at("REQUEST-ID").text() == request_id) {
      if (!answer.at("STATUS").is_keyword("OK")) die("the MCP listing failed: " + to_sexp(answer));
      return answer;
    }
  }
}

// The server's entry in the listing; NIL when it is not there.
Value server_entry(const Value& listing) {
  for (const Value& server : listing.path({"PAYLOAD", "SERVERS"}).items()) {
    if (server.at("NAME").text() == kServer) return server;
  }
  return {};
}

// The daemon's side: the stub's gaps (kCalls after kWarmup chats, each the
// first of a session of its own so the prompt does not grow), and what the
// daemon itself measured of its tools/call round trips to the server (the
// last 512 calls, p50, whole microseconds).
struct DaemonSide {
  std::vector<double> gaps;
  double hub_p50_us = 0;
};

DaemonSide daemon_side(const Prerequisites& p) {
  ModelStub stub(ModelStub::ToolCall{"mcp__" + std::string(kServer) + "__" + std::string(kTool),
                                     std::string(kArguments), std::string(kExpect)});
  Scratch scratch;
  const fs::path manifests = manifests_allowing_server(scratch.root / "manifests");
  const fs::path config = write_config(scratch.root, stub, p);
  ServerProcess daemon(scratch.root,
                       {PP_PASSEPARTOUT_EXE, "daemon", "--port", "0", "--socket", (scratch.root / "s.sock").string(),
                        "--state-dir", scratch.root.string(), "--config", config.string(), "--provider", "model",
                        "--manifests", manifests.string(), "--plugins", PP_PLUGIN_DIR, "--metrics-port", "off",
                        // no heartbeat signals (and model calls) in the middle of the measured ones
                        "--heartbeat-interval", "0"},
                       {"MODEL_KEY=sk-bench-not-a-key"});
  const std::string token = token_of(scratch.root);
  Client op(daemon.port(), token);
  long op_id = 0;
  const auto deadline = Clock::now() + kWait;
  const std::string offered = "mcp__" + std::string(kServer) + "__" + std::string(kTool);
  for (;;) {
    const Value server = server_entry(mcp_listing(op, token, ++op_id));
    bool ready = server.at("STATE").is_string() && server.at("STATE").text() == "ready";
    bool is_offered = false;
    for (const Value& tool : server.at("TOOLS").items()) {
      if (tool.at("NAME").text() == kTool && tool.at("OFFERED").text() == offered) is_offered = true;
    }
    if (ready && is_offered) break;
    if (Clock::now() > deadline) {
      die("mcp server '" + std::string(kServer) + "' did not become ready with " + offered + ": " + to_sexp(server) +
          "\n" + daemon.log());
    }
    std::this_thread::sleep_for(20ms);
  }

  Client client(daemon.port(), token);
  long id = 0;
  const auto session = [](long n) { return "mcp-" + std::to_string(n); };
  for (int i = 0; i < kWarmup; ++i) {
    ++id;
    client.chat(id, session(id));
  }
  stub.clear_call_gaps();
  for (int i = 0; i < kCalls; ++i) {
    ++id;
    client.chat(id, session(id));
  }
  DaemonSide out;
  out.gaps = stub.call_gaps();
  if (stub.unexpected_results() != 0) {
    die(std::to_string(stub.unexpected_results()) + " requests did not carry the result '" + std::string(kExpect) +
        "'; the last:\n" + stub.last_body() + "\n" + daemon.log());
  }
  if (out.gaps.size() != static_cast<std::size_t>(kCalls)) {
    die("the model stub timed " + std::to_string(out.gaps.size()) + " calls of " + std::to_string(kCalls));
  }
  const Value server = server_entry(mcp_listing(op, token, ++op_id));
  if (server.at("CALLS").as_integer() != kWarmup + kCalls || server.at("FAILURES").as_integer() != 0) {
    die("the daemon counted other calls than the model made: " + to_sexp(server));
  }
  out.hub_p50_us = static_cast<double>(server.at("LATENCY-P50-US").as_integer());
  if (!daemon.stop()) die("the daemon did not stop cleanly on SIGTERM:\n" + daemon.log());
  return out;
}

// The bare client's side: mcp_sdk_client.mjs run to its end (its own
// server with it), its JSON line read.
json sdk_side(const Prerequisites& p) {
  Scratch scratch;
  std::vector<std::string> args{p.node,
                                PP_MCP_SDK_CLIENT,
                                p.npm.string(),
                                p.node,
                                p.server.string(),
                                std::string(kTool),
                                std::string(kArguments),
                                std::string(kExpect),
                                std::to_string(kWarmup),
                                std::to_string(kCalls)};
  std::vector<std::string> env{"HOME=" + scratch.root.string(), "LANG=C.UTF-8"};
  if (const char* path = std::getenv("PATH")) env.push_back(std::string("PATH=") + path);
  auto c_strings = [](std::vector<std::string>& strings) {
    std::vector<char*> out;
    for (auto& s : strings) out.push_back(s.data());
    out.push_back(nullptr);
    return out;
  };
  auto argv = c_strings(args);
  auto envp = c_strings(env);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) die("pipe2 failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  const std::string log_file = (scratch.root / "sdk-client.log").string();
  posix_spawn_file_actions_addopen(&actions, 2, log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (spawned != 0) {
    ::close(pipe_fds[0]);
    die("posix_spawn " + p.node + ": " + std::strerror(spawned));
  }
  live_daemon.store(pid);  // killed by die() too

  std::string out;
  const auto deadline = Clock::now() + 4 * kWait;
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) die("the SDK client did not finish in time:\n" + slurp(log_file));
    pollfd polled{pipe_fds[0], POLLIN, 0};
    if (::poll(&polled, 1, static_cast<int>(left.count())) <= 0) continue;
    const ssize_t got = ::read(pipe_fds[0], buffer, sizeof buffer);
    if (got <= 0) break;
    out.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  live_daemon.store(-1);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    die("the SDK client failed (status " + std::to_string(status) + "):\n" + slurp(log_file) + out);
  }
  json result = json::parse(out, nullptr, false);
  if (!result.is_object() || !result.contains("p50_us") || !result["p50_us"].is_number() ||
      result.value("calls", 0) != kCalls) {
    die("the SDK client printed no figures: " + out + "\n" + slurp(log_file));
  }
  return result;
}

void BM_McpCallOverhead(benchmark::State& state) {
  const Prerequisites p = find_prerequisites();
  if (!p.missing.empty()) {
    state.SkipWithError(p.missing.c_str());
    return;
  }
  for (auto _ : state) {
    // One after the other, the daemon stopped first: neither side's
    // processes share the two CPUs with the other's.
    const DaemonSide daemon = daemon_side(p);
    const json sdk = sdk_side(p);
    const double daemon_p50 = percentile(daemon.gaps, 0.5);
    const double sdk_p50 = sdk["p50_us"].get<double>();
    state.counters["mcp_call_overhead_us"] = daemon_p50 - sdk_p50;
    state.counters["mcp_call_daemon_p50_us"] = daemon_p50;
    state.counters["mcp_call_daemon_p99_us"] = percentile(daemon.gaps, 0.99);
    state.counters["mcp_call_sdk_p50_us"] = sdk_p50;
    state.counters["mcp_call_sdk_p99_us"] = sdk["p99_us"].get<double>();
    // Where the daemon's side goes: its own tools/call round trip to the server.
    state.counters["mcp_call_hub_p50_us"] = daemon.hub_p50_us;
  }
}

}  // namespace

BENCHMARK(BM_McpCallOverhead)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();
