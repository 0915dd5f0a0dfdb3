// The bare client BM_McpCallOverhead (bench_mcp.cpp) compares the daemon with:
// the TypeScript SDK's Client over its StdioClientTransport, running the
// same server the daemon runs, calling its tool the same way, one call at a
// time, timed from callTool() to its settled result.
//   node mcp_sdk_client.mjs NPM_DIR NODE SERVER_SCRIPT TOOL ARGUMENTS_JSON EXPECT WARMUP CALLS
// NPM_DIR is where scripts/setup installed the pinned packages (the SDK is
// one of them: scripts/npm/package.json); the server is started as
// `NODE SERVER_SCRIPT stdio`. Prints one JSON object on stdout:
//   {"calls": CALLS, "p50_us": ..., "p99_us": ..., "sdk_version": "..."}
// and exits 1, saying why on stderr, when a call fails or its result lacks EXPECT.
import { readFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [npmDir, node, serverScript, tool, argumentsJson, expect, warmupText, callsText] = process.argv.slice(2);
if (callsText === undefined) {
  console.error("usage: node mcp_sdk_client.mjs NPM_DIR NODE SERVER_SCRIPT TOOL ARGUMENTS_JSON EXPECT WARMUP CALLS");
  process.exit(2);
}
const warmup = Number(warmupText);
const calls = Number(callsText);

// The SDK from the npm folder, not from beside this script: its package's
// exports map "./*" to "./dist/esm/*" for import.
const sdk = path.join(npmDir, "node_modules", "@modelcontextprotocol", "sdk");
const sdkVersion = JSON.parse(readFileSync(path.join(sdk, "package.json"), "utf8")).version;
const { Client } = await import(pathToFileURL(path.join(sdk, "dist", "esm", "client", "index.js")).href);
const { StdioClientTransport } = await import(pathToFileURL(path.join(sdk, "dist", "esm", "client", "stdio.js")).href);

// The server's stderr is dropped (the daemon reads and rate-limits it; here it would only mix into the bench's output).
const transport = new StdioClientTransport({ command: node, args: [serverScript, "stdio"], stderr: "ignore" });
const client = new Client({ name: "passepartout-bench", version: "1.0.0" });
await client.connect(transport);
await client.listTools();  // as a host does before offering the tools

const request = { name: tool, arguments: JSON.parse(argumentsJson) };
async function once() {
  const result = await client.callTool(request);
  if (result.isError || !JSON.stringify(result.content).includes(expect)) {
    throw new Error(`unexpected result of ${tool}: ${JSON.stringify(result)}`);
  }
}

try {
  for (let i = 0; i < warmup; ++i) await once();
  const us = new Float64Array(calls);
  for (let i = 0; i < calls; ++i) {
    const began = process.hrtime.bigint();
    await once();
    us[i] = Number(process.hrtime.bigint() - began) / 1000;
  }
  us.sort();
  // The same percentile as the C++ side (daemon_process.hpp): the nearest rank, rounded.
  const at = (fraction) => us[Math.min(us.length - 1, Math.floor(fraction * (us.length - 1) + 0.5))];
  process.stdout.write(JSON.stringify({ calls, p50_us: at(0.5), p99_us: at(0.99), sdk_version: sdkVersion }) + "\n");
} catch (error) {
  console.error(`mcp_sdk_client: ${error.stack ?? error}`);
  process.exitCode = 1;
} finally {
  await client.close();
}
