// scripts/workerd-supervisor.mjs, the workerd that `npm start` runs, on a config written as
// Miniflare writes it (its own serializeConfig, on stdin, ports on the control pipe): the heap
// cap it adds to the config takes effect (a worker that keeps 200 MB dies under a 64 MB cap and
// lives without it), and a workerd that dies is started again on the same port.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import path from "node:path";
import readline from "node:readline";
import { serializeConfig } from "miniflare";
import { ROOT } from "./helpers/worker.mjs";

const WORKER = `
const kept = [];
export default {
  async fetch(request) {
    const mb = Number(new URL(request.url).searchParams.get("mb") ?? 0);
    // 2^18 small integers: a 1 MB array (V8 compresses pointers to 4 bytes).
    for (let i = 0; i < mb; i++) kept.push(new Array(1 << 18).fill(i));
    return new Response("kept " + kept.length);
  },
};`;

const config = serializeConfig({
  services: [{ name: "main", worker: { modules: [{ name: "main.js", esModule: WORKER }], compatibilityDate: "2025-11-01" } }],
  sockets: [{ name: "entry", service: { name: "main" }, http: {} }],
});

/** Starts the supervisor as Miniflare does; resolves with its port once workerd listens. */
function startSupervised(heapMb) {
  const child = spawn(
    path.join(ROOT, "scripts/workerd-supervisor.mjs"),
    ["serve", "--binary", "--experimental", "--socket-addr=entry=127.0.0.1:0", "--control-fd=3", "-"],
    { stdio: ["pipe", "pipe", "pipe", "pipe"], env: { ...process.env, THINK_LOCAL_HEAP_MB: String(heapMb) } },
  );
  let output = "";
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  child.stdin.end(config);
  const port = new Promise((resolve, reject) => {
    readline.createInterface(child.stdio[3]).on("line", (line) => {
      const event = JSON.parse(line);
      if (event.event === "listen" && event.socket === "entry") resolve(event.port);
    });
    child.on("exit", (code) => reject(new Error(`exited ${code} before listening: ${output}`)));
  });
  return { child, port, output: () => output };
}

async function get(port, mb) {
  const res = await fetch(`http://127.0.0.1:${port}/?mb=${mb}`, { signal: AbortSignal.timeout(60000) });
  return res.text();
}

async function until(check, ms = 60000) {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      const value = await check();
      if (value) return value;
    } catch (e) {
      if (Date.now() > deadline) throw e;
    }
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 200));
  }
}

test("under a 64 MB cap, a worker that keeps 200 MB stops workerd, which serves again on the same port", async () => {
  const run = startSupervised(64);
  try {
    const port = await run.port;
    assert.equal(await get(port, 1), "kept 1");
    await assert.rejects(get(port, 200), "the request that went over the cap gets no answer");
    // The restarted workerd is a new isolate on the same port: nothing kept.
    assert.equal(await until(() => get(port, 0)), "kept 0");
    assert.match(run.output(), /reached the 64 MB heap cap \(THINK_LOCAL_HEAP_MB\).*restarting it/);
  } finally {
    run.child.kill("SIGTERM");
  }
});

test("without the cap the same worker keeps its 200 MB (the cap is what stopped it)", async () => {
  const run = startSupervised(0);
  try {
    const port = await run.port;
    assert.equal(await get(port, 200), "kept 200");
    assert.doesNotMatch(run.output(), /restarting/);
  } finally {
    run.child.kill("SIGTERM");
  }
});

test("a workerd killed from outside is restarted; a stop of the supervisor stops workerd", async () => {
  const run = startSupervised(256);
  const port = await run.port;
  const workerdPid = () => {
    const out = spawn("pgrep", ["-P", String(run.child.pid)]);
    return new Promise((resolve) => {
      let text = "";
      out.stdout.on("data", (d) => (text += d));
      out.on("exit", () => resolve(text.trim().split("\n").filter(Boolean).map(Number)));
    });
  };
  const [first] = await workerdPid();
  assert.ok(first, "workerd runs as the supervisor's child");
  process.kill(first, "SIGKILL");
  assert.equal(await until(() => get(port, 1)), "kept 1");
  const [second] = await workerdPid();
  assert.ok(second && second !== first);
  assert.match(run.output(), /workerd stopped \(SIGKILL\); restarting it/);
  // Miniflare stops the runtime with SIGKILL: workerd must not outlive its supervisor.
  run.child.kill("SIGKILL");
  await until(() => {
    try {
      process.kill(second, 0);
      return false;
    } catch {
      return true;
    }
  }, 10000);
});
