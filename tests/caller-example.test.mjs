// The caller Worker example (examples/caller-worker, shown in docs/rpc.md) run as it is: its
// TypeScript bundled by esbuild as wrangler would, its Durable Object binding taken from its
// own wrangler.toml, beside the built agent in one Miniflare, against the scripted model.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { build } from "esbuild";
import { Miniflare } from "miniflare";
import { parse as parseToml } from "smol-toml";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { ROOT, options, tempDir, modelVars } from "./helpers/worker.mjs";

const EXAMPLE = path.join(ROOT, "examples/caller-worker");
let model;
let mf;

before(async () => {
  model = await startScriptedModel();
  const config = parseToml(fs.readFileSync(path.join(EXAMPLE, "wrangler.toml"), "utf8"));
  const bundle = await build({
    entryPoints: [path.join(EXAMPLE, config.main)],
    bundle: true,
    format: "esm",
    platform: "neutral",
    external: ["cloudflare:workers"],
    write: false,
  });
  const opts = options({ persistDir: tempDir(), vars: modelVars(model) });
  const [binding] = config.durable_objects.bindings;
  opts.workers.push({
    name: config.name,
    modules: true,
    script: bundle.outputFiles[0].text,
    compatibilityDate: config.compatibility_date,
    durableObjects: { [binding.name]: { className: binding.class_name, scriptName: binding.script_name } },
  });
  mf = new Miniflare(opts);
  await mf.ready;
});

after(async () => {
  await mf?.dispose();
  await model?.close();
});

test("the caller example runs a turn with its client tool and reads the transcript", async () => {
  model.push({ toolCalls: [{ id: "call_tz", name: "getUserTimezone", args: {} }] }, { text: "You are on Paris time." });
  const caller = await mf.getWorker("think-rs-caller");
  const res = await caller.fetch("http://caller/chat?name=example", {
    method: "POST",
    body: JSON.stringify({ message: "What time zone am I in?" }),
  });
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { text: "You are on Paris time.", error: null, done: true });

  // The model was offered the caller's tool and got the caller's answer back.
  assert.ok(model.requests[0].tools.some((t) => t.function.name === "getUserTimezone"));
  const toolMessage = model.requests[1].messages.find((m) => m.role === "tool");
  assert.deepEqual(JSON.parse(toolMessage.content), { timezone: "Europe/Paris" });

  const messages = await (await caller.fetch("http://caller/messages?name=example")).json();
  assert.deepEqual(
    messages.map((m) => m.role),
    ["user", "assistant"],
  );
  const part = messages[1].parts.find((p) => p.toolCallId === "call_tz");
  assert.equal(part.state, "output-available");
  assert.deepEqual(part.output, { timezone: "Europe/Paris" });
  assert.equal((await caller.fetch("http://caller/elsewhere")).status, 404);
});
