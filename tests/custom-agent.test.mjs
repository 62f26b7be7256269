// examples/custom-agent, a downstream crate that declares its own agent class with its own
// Rust tool and system prompt: `wrangler deploy --dry-run` builds it with its own
// wrangler.toml (its [build] command, in a loopback-only network namespace) and lists its
// bindings; then its entry runs in Miniflare, and the real `agents` client drives one turn
// in which the scripted model calls the example's `distance` tool.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { Miniflare } from "miniflare";
import { parse as parseToml } from "smol-toml";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { ROOT, MODULE_RULES, tempDir } from "./helpers/worker.mjs";
import { connect, closeTabs, newId } from "./helpers/client.mjs";

const EXAMPLE = path.join(ROOT, "examples/custom-agent");
let model;
let mf;
let dryRun;

before(async () => {
  const out = tempDir();
  const wrangler = path.join(ROOT, "node_modules/.bin/wrangler");
  dryRun = execFileSync(
    "unshare",
    ["--net", "sh", "-c", 'ip link set lo up && exec "$0" deploy --dry-run --outdir "$1"', wrangler, out],
    { cwd: EXAMPLE, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], timeout: 900_000 },
  );
  model = await startScriptedModel();
  const config = parseToml(fs.readFileSync(path.join(EXAMPLE, "wrangler.toml"), "utf8"));
  const [binding] = config.durable_objects.bindings;
  mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    defaultPersistRoot: tempDir(),
    workers: [
      {
        name: config.name,
        modules: true,
        modulesRoot: EXAMPLE,
        scriptPath: path.join(EXAMPLE, config.main),
        modulesRules: MODULE_RULES,
        compatibilityDate: config.compatibility_date,
        compatibilityFlags: config.compatibility_flags,
        durableObjects: { [binding.name]: { className: binding.class_name, useSQLite: true } },
        r2Buckets: ["WORKSPACE_R2"],
        workerLoaders: { LOADER: {} },
        bindings: { MODEL_BASE_URL: model.baseUrl, MODEL_API_KEY: "test-key", MODEL: "scripted" },
      },
    ],
  });
  await mf.ready;
});

after(async () => {
  closeTabs();
  await mf?.dispose();
  await model?.close();
});

test("the example's wrangler.toml deploys (dry run) with its own class and bindings", () => {
  assert.match(dryRun, /env\.TravelAgent \(TravelAgent\)\s+Durable Object/);
  assert.match(dryRun, /env\.LOADER\s+Worker Loader/);
  assert.match(dryRun, /env\.WORKSPACE_R2\b/);
  assert.match(dryRun, /Total Upload:/);
});

test("its own tool and system prompt serve a turn through the real client", async () => {
  const url = await mf.ready;
  const tab = await connect(url.host, "trip", { agent: "TravelAgent" });
  const callId = newId("call");
  model.push({ toolCalls: [{ id: callId, name: "distance", args: { from: "Lisbon", to: "Paris" } }] }, { text: "About 1453 km." });
  const { id } = tab.chat("How far is Paris from Lisbon?");
  await tab.turn(id, { timeout: 60_000 });
  const output = tab.chunks(id).find((c) => c.type === "tool-output-available" && c.toolCallId === callId);
  assert.deepEqual(output?.output, { km: 1453 });
  const system = model.requests[0].messages.find((m) => m.role === "system");
  assert.match(system.content, /You plan trips/);
  const offered = model.requests[0].tools.map((t) => t.function.name);
  assert.ok(offered.includes("distance") && offered.includes("read"), offered.join(","));
  assert.deepEqual(JSON.parse(model.requests[1].messages.find((m) => m.role === "tool").content), { km: 1453 });

  // Bad input reaches the model as the tool's error, and the object keeps serving.
  const badId = newId("call");
  model.push({ toolCalls: [{ id: badId, name: "distance", args: { from: "Lisbon", to: "Atlantis" } }] }, { text: "Unknown." });
  const second = tab.chat("And Atlantis?");
  await tab.turn(second.id, { timeout: 60_000 });
  const error = tab.chunks(second.id).find((c) => c.type === "tool-output-error" && c.toolCallId === badId);
  assert.match(error?.errorText ?? "", /Unknown city "Atlantis"/);
  tab.close();
});
