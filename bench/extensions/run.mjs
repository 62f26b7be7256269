// Extensions rows of `npm run bench` (think-rs only): what an extension costs on the real
// Worker Loader in Miniflare. Rows: `loadExtension` over `rpc` (validation, one isolate to
// describe the source, the SQLite row), and tool calls, each timed from its
// `tool-input-available` to its `tool-output-available` frame at a tab (both cross the same
// WebSocket): an extension tool's first call after its load and its later (warm) calls,
// against the built-in `list` tool on the same object. The calls of one load share one
// isolate (src/extensions/isolate.rs), so only the load compiles the source.
// Run alone: `bash scripts/build.sh && node bench/extensions/run.mjs` (BENCH_REPS, default 15;
// `npm run bench` runs it after the Code Mode rows). Only 127.0.0.1 is reached (the scripted
// model and Miniflare).
import { fileURLToPath } from "node:url";
import { startScriptedModel } from "../../tests/helpers/scripted-model.mjs";
import { startWorker, modelVars } from "../../tests/helpers/worker.mjs";
import { connect, closeTabs } from "../../tests/helpers/client.mjs";

const REPS = Math.max(1, Number(process.env.BENCH_REPS ?? 15));
const MATH = `({ tools: { add: { description: "Add", parameters: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"], execute: async ({ a, b }) => a + b } } })`;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const fmt = (ms) => (ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

/** Runs the rows and prints their table. */
export async function run() {
  if (process.env.BENCH_ONLY && !new RegExp(process.env.BENCH_ONLY, "i").test("extension")) return;
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
    tab.frames.length = 0;
    return ms;
  }

  const loads = [];
  const first = [];
  const warm = [];
  const builtin = [];
  try {
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      await tab.client.call("loadExtension", [{ name: `m${i}`, version: "1" }, MATH]);
      loads.push(performance.now() - t0);
      first.push(await timeCall(`m${i}_add`, { a: i, b: 1 }));
    }
    for (let i = 0; i < REPS; i++) {
      warm.push(await timeCall("m0_add", { a: i, b: 1 }));
      builtin.push(await timeCall("list", { path: "/" }));
    }
  } finally {
    closeTabs();
    await worker.dispose();
    await model.close();
  }
  process.stderr.write(`  extension tool call, warm: ${warm.map(fmt).join(" ")}\n`);
  const rows = [
    ["loadExtension over rpc", loads],
    ["extension tool call, first after its load", first],
    ["extension tool call, warm (goal ≤ 5 ms)", warm],
    ["built-in list call", builtin],
  ];
  console.log(`## Extensions (think-rs)\n`);
  const width = Math.max(...rows.map(([name]) => name.length));
  console.log(`${"workload".padEnd(width)}  median ms   n`);
  for (const [name, xs] of rows) console.log(`${name.padEnd(width)}  ${fmt(median(xs)).padStart(9)}  ${String(xs.length).padStart(2)}`);
  console.log("\nTool calls: from the call's tool-input-available frame to its tool-output-available frame at a tab.\n");
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  run().then(
    () => process.exit(0),
    (e) => {
      console.error(e);
      process.exit(1);
    },
  );
}
