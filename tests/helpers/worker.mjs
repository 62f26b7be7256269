// Runs the built Worker (crates/think-worker/build/index.js + wasm) in Miniflare — the same workerd that
// `wrangler dev` uses — with the Durable Object, SQLite, R2 and a persist directory.
import { Miniflare } from "miniflare";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

const tempDirs = [];
// Each Miniflare persist directory holds ~90 MB of workerd state; a test run must not leave them
// behind (`--test-force-exit` still runs "exit" listeners).
process.on("exit", () => {
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});

/** A fresh directory under the system temp dir, removed when the test process exits. */
export function tempDir(prefix = "think-rs-") {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

/** How Miniflare reads a built Worker's modules: the JS glue, and the wasm as a module. */
export const MODULE_RULES = [
  { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
  { type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true },
];

/** The Miniflare options of `startWorker` (also used by the Code Mode bench). */
export function options({ persistDir, vars, withCaller, inspectorPort, ai, tail, browserBinding }) {
  const agent = {
    name: "think-rs",
    modules: true,
    modulesRoot: ROOT,
    scriptPath: path.join(ROOT, "crates/think-worker/js/entry.mjs"),
    modulesRules: MODULE_RULES,
    compatibilityDate: "2025-11-01",
    compatibilityFlags: ["nodejs_compat", "enable_ctx_exports"],
    durableObjects: { ThinkAgent: { className: "ThinkAgent", useSQLite: true } },
    r2Buckets: ["WORKSPACE_R2"],
    // wrangler.toml's [[worker_loaders]]: the `execute` tool's sandbox isolates.
    workerLoaders: { LOADER: {} },
    // THINK_IDLE_RESET_MB from the test's environment, e.g. 1 to reset the wasm instance
    // whenever it is idle (crates/think-worker/js/shim.mjs), which runs any test through that path.
    bindings: process.env.THINK_IDLE_RESET_MB ? { THINK_IDLE_RESET_MB: process.env.THINK_IDLE_RESET_MB, ...vars } : vars,
    // The chat page, as wrangler.toml's [assets] (run_worker_first = ["/agents/*"]).
    assets: {
      directory: path.join(ROOT, "web/dist"),
      routerConfig: { has_user_worker: true, static_routing: { user_worker: ["/agents/*"] } },
      assetConfig: { compatibility_date: "2025-11-01" },
    },
  };
  // wrangler.toml's [browser] as `wrangler dev --local` gives it: Miniflare's stand-in for
  // Browser Run, which would download Chrome for Testing at the first session it is asked for.
  if (browserBinding) agent.browserRendering = { binding: "BROWSER" };
  const workers = [agent];
  if (ai) {
    // `env.AI`: a wrapped binding (as Miniflare builds the real one) whose `run` forwards to
    // the test's `ai(request)` handler in Node (see workers-ai-binding.mjs).
    agent.wrappedBindings = { AI: { scriptName: "scripted-workers-ai" } };
    workers.push({
      name: "scripted-workers-ai",
      modules: true,
      scriptPath: path.join(ROOT, "tests/helpers/workers-ai-binding.mjs"),
      serviceBindings: { NODE: ai },
    });
  }
  if (tail) {
    // A tail Worker, as Workers Logs sees each invocation (the entry's and the Durable
    // Object's, with their request URLs): every batch of events goes to the test's `tail`.
    agent.tails = ["tail-collector"];
    workers.push({
      name: "tail-collector",
      modules: true,
      compatibilityDate: "2025-11-01",
      script: `export default { async tail(events, env) { await env.NODE.fetch("http://node/", { method: "POST", body: JSON.stringify(events) }); } };`,
      serviceBindings: {
        NODE: async (request) => {
          tail(JSON.parse(await request.text()));
          return new Response("ok");
        },
      },
    });
  }
  if (withCaller) {
    workers.push({
      name: "caller",
      modules: true,
      scriptPath: path.join(ROOT, "tests/fixtures/caller-worker.mjs"),
      compatibilityDate: "2025-11-01",
      durableObjects: { AGENT: { className: "ThinkAgent", scriptName: "think-rs" } },
    });
  }
  return { host: "127.0.0.1", port: 0, defaultPersistRoot: persistDir, workers, ...(inspectorPort ? { inspectorPort } : {}) };
}

/** Pids of the workerd processes this test process runs (Miniflare spawns them directly). */
export function workerdPids() {
  let out = "";
  try {
    out = execFileSync("ps", ["-o", "pid=,comm=", "--ppid", String(process.pid)], { encoding: "utf8" });
  } catch {
    return []; // ps exits 1 when there are no children
  }
  return out
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter(([pid, comm]) => pid && comm === "workerd")
    .map(([pid]) => Number(pid));
}

/** Starts Miniflare and finds the workerd process it spawned (the one that was not there before). */
async function launch(opts) {
  const before = new Set(workerdPids());
  const mf = new Miniflare(opts);
  const url = await mf.ready;
  const pids = workerdPids().filter((p) => !before.has(p));
  return { mf, url, pid: pids.length === 1 ? pids[0] : undefined };
}

/**
 * Starts the Worker. `vars` become environment bindings (THINK_MODEL_BASE_URL, …); `ai`, a
 * Node `(Request) => Response` handler, becomes the `AI` binding (workers-ai-binding.mjs);
 * `tail`, a Node `(events) => void`, receives the tail events of every invocation.
 * `browserBinding` adds the `BROWSER` binding.
 * `restart()` disposes and starts again on the same persist directory; `kill()` first kills
 * workerd with SIGKILL (a crash: nothing is flushed or closed), then starts again.
 * `inspectorPort` opens the V8 inspector of the isolates there (see `inspector.mjs`).
 */
export async function startWorker({ vars = {}, persistDir = tempDir(), withCaller = false, inspectorPort, ai, tail, browserBinding = false } = {}) {
  let { mf, url, pid } = await launch(options({ persistDir, vars, withCaller, inspectorPort, ai, tail, browserBinding }));
  const handle = {
    persistDir,
    get mf() {
      return mf;
    },
    get url() {
      return url;
    },
    get host() {
      return url.host;
    },
    /** The pid of the running workerd, when it could be told apart from other ones. */
    get pid() {
      return pid;
    },
    async restart(newVars = vars) {
      await mf.dispose();
      ({ mf, url, pid } = await launch(options({ persistDir, vars: newVars, withCaller, inspectorPort, ai, tail, browserBinding })));
      return handle;
    },
    /** SIGKILLs workerd, disposes what is left of Miniflare, and starts again on the same persist dir. */
    async kill(newVars = vars) {
      if (pid === undefined) throw new Error("kill(): the workerd process of this Miniflare is unknown");
      process.kill(pid, "SIGKILL");
      await mf.dispose().catch(() => {});
      ({ mf, url, pid } = await launch(options({ persistDir, vars: newVars, withCaller, inspectorPort, ai, tail, browserBinding })));
      return handle;
    },
    async dispose() {
      await mf.dispose();
    },
    /** Fetches from the caller Worker (started with `withCaller`). */
    async caller(pathAndQuery, body) {
      const worker = await mf.getWorker("caller");
      const res = await worker.fetch(`http://caller${pathAndQuery}`, body === undefined ? {} : { method: "POST", body: JSON.stringify(body) });
      if (!res.ok) throw new Error(`caller ${pathAndQuery}: ${res.status} ${await res.text()}`);
      return res.json();
    },
  };
  return handle;
}

/** Model settings pointing the agent at a scripted model server. */
export function modelVars(model, extra = {}) {
  return { THINK_MODEL_BASE_URL: model.baseUrl, THINK_MODEL_API_KEY: "test-key", THINK_MODEL: "scripted", ...extra };
}
