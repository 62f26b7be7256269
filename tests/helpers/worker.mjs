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

function options({ persistDir, vars }) {
  return {
    host: "127.0.0.1",
    port: 0,
    defaultPersistRoot: persistDir,
    modules: true,
    modulesRoot: ROOT,
    scriptPath: path.join(ROOT, "build/index.js"),
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }],
    compatibilityDate: "2025-11-01",
    compatibilityFlags: ["nodejs_compat"],
    durableObjects: { ThinkAgent: { className: "ThinkAgent", useSQLite: true } },
    r2Buckets: ["WORKSPACE_R2"],
    bindings: vars,
  };
}

/**
 * Starts the Worker. `vars` become environment bindings (THINK_MODEL_BASE_URL, …).
 * `restart()` disposes and starts again on the same persist directory.
 */
export async function startWorker({ vars = {}, persistDir = tempDir() } = {}) {
  let mf = new Miniflare(options({ persistDir, vars }));
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
      mf = new Miniflare(options({ persistDir, vars: newVars }));
      url = await mf.ready;
      return handle;
    },
    async dispose() {
      await mf.dispose();
    },
  };
  return handle;
}

/** Model settings pointing the agent at a scripted model server. */
export function modelVars(model, extra = {}) {
  return { THINK_MODEL_BASE_URL: model.baseUrl, THINK_MODEL_API_KEY: "test-key", THINK_MODEL: "scripted", ...extra };
}
