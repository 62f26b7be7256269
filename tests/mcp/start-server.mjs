// Starts tests/mcp/servers/server.mjs in its own process on 127.0.0.1, for the test files
// that need a real MCP server.
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

const SERVERS = path.join(path.dirname(fileURLToPath(import.meta.url)), "servers");

/** Starts server.mjs with `args` and resolves once it listens, with its ports and URLs. */
export function startMcpServer(...args) {
  return start("server.mjs", args);
}

/** Starts oauth-server.mjs (an MCP server behind the SDK's OAuth authorization server). */
export function startOAuthServer(...args) {
  return start("oauth-server.mjs", args);
}

async function start(script, args) {
  const child = spawn(process.execPath, [path.join(SERVERS, script), "--port", "0", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-2000)));
  const info = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const nl = out.indexOf("\n");
      if (nl >= 0) resolve(JSON.parse(out.slice(0, nl)));
    });
    child.once("exit", (code) => reject(new Error(`MCP server exited (${code}): ${stderr}`)));
  });
  const exited = new Promise((r) => child.once("exit", r));
  return {
    ...info,
    async control(what) {
      const res = await fetch(`http://127.0.0.1:${info.port}/control/${what}`);
      return res.json();
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}
