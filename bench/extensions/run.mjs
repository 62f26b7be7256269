// Extensions bench (think-rs only): what an extension costs on the real Worker Loader in
// Miniflare. Rows: `loadExtension` over `rpc` (validation, one isolate to describe the
// source, the SQLite row), and one tool call, timed from its `tool-input-available` to its
// `tool-output-available` frame at a tab (both cross the same WebSocket): an extension tool
// (a fresh isolate per call) against the built-in `list` tool on the same object.
// Run: `bash scripts/build.sh && node bench/extensions/run.mjs` (BENCH_REPS, default 15).
// Only 127.0.0.1 is reached (the scripted model and Miniflare).
import { startScriptedModel } from "../../tests/helpers/scripted-model.mjs";
import { startWorker, modelVars } from "../../tests/helpers/worker.mjs";
import { connect, closeTabs } from "../../tests/helpers/client.mjs";

const REPS = Math.max(1, Number(process.env.BENCH_REPS ?? 15));
const MATH = `({ tools: { add: { description: "Add", parameters: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"], execute: async ({ a, b }) => a + b } } })`;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const model = await startScriptedModel();
const worker = await startWorker({ vars: modelVars(model) });
const tab = await connect(worker.host, "bench-ext");
let seq = 0;

/** Times one tool call from its input frame to its output frame. */
async function timeCall(name, args) {
  const id = `call_${seq++}`;
  model.push({ toolCalls: [{ id, name, args }] }, { text: "ok" });
  const from = tab.frames.length;
  const at = (type) =>
    tab
      .waitFor((f) => f.type === "cf_agent_use_chat_response" && f.body?.includes(`"${type}"`) && f.body.includes(id), { from, timeout: 30000 })
      .then(() => performance.now());
  const input = at("tool-input-available");
  const output = at("tool-output-available");
  const { id: requestId } = tab.chat(`call ${name}`);
  const ms = (await output) - (await input);
  await tab.turn(requestId, { timeout: 30000 });
  return ms;
}

const loads = [];
for (let i = 0; i < 5; i++) {
  const t0 = performance.now();
  await tab.client.call("loadExtension", [{ name: `m${i}`, version: "1" }, MATH]);
  loads.push(performance.now() - t0);
}
const ext = [];
const builtin = [];
for (let i = 0; i < REPS; i++) {
  ext.push(await timeCall("m0_add", { a: i, b: 1 }));
  builtin.push(await timeCall("list", { path: "/" }));
}
console.log(`loadExtension over rpc: median ${median(loads).toFixed(1)} ms (n=${loads.length})`);
console.log(`extension tool call: median ${median(ext).toFixed(1)} ms (n=${REPS})`);
console.log(`built-in list call: median ${median(builtin).toFixed(1)} ms (n=${REPS})`);
closeTabs();
await worker.dispose();
await model.close();
