// Runs the built Worker (build/index.js + wasm) in Miniflare — the same workerd that
// `wrangler dev` uses — with the Durable Object, SQLite, R2 and a persist directory.
import { Miniflare } from "miniflare";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export function tempDir(prefix = "think-rs-") {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

function options({ persistDir, vars, withCaller }) {
  const agent = {
    name: "think-rs",
    modules: true,
    modulesRoot: ROOT,
    scriptPath: path.join(ROOT, "js/entry.mjs"),
    modulesRules: [
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
      { type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true },
    ],
    compatibilityDate: "2025-11-01",
    durableObjects: { ThinkAgent: { className: "ThinkAgent", useSQLite: true } },
    r2Buckets: ["WORKSPACE_R2"],
    bindings: vars,
    // The chat page, as wrangler.toml's [assets] (run_worker_first = ["/agents/*"]).
    assets: {
      directory: path.join(ROOT, "web/dist"),
      routerConfig: { has_user_worker: true, static_routing: { user_worker: ["/agents/*"] } },
      assetConfig: { compatibility_date: "2025-11-01" },
    },
  };
  const workers = [agent];
  if (withCaller) {
    workers.push({
      name: "caller",
      modules: true,
      scriptPath: path.join(ROOT, "tests/fixtures/caller-worker.mjs"),
      compatibilityDate: "2025-11-01",
      durableObjects: { AGENT: { className: "ThinkAgent", scriptName: "think-rs" } },
    });
  }
  return { host: "127.0.0.1", port: 0, defaultPersistRoot: persistDir, workers };
}

/**
 * Starts the Worker. `vars` become environment bindings (THINK_MODEL_BASE_URL, …).
 * `restart()` disposes and starts again on the same persist directory.
 */
export async function startWorker({ vars = {}, persistDir = tempDir(), withCaller = false } = {}) {
  let mf = new Miniflare(options({ persistDir, vars, withCaller }));
  let url = await mf.ready;
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
    async restart(newVars = vars) {
      await mf.dispose();
      mf = new Miniflare(options({ persistDir, vars: newVars, withCaller }));
      url = await mf.ready;
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
