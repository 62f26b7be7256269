// Code Mode rows of `npm run bench`: think-rs's `execute` against Think 0.16.0's
// `createExecuteTool`, both on the real Worker Loader, as two more workers of the bench's one
// Miniflare (bench/run.mjs calls `addWorkers` on its options and `run` at the end;
// `node bench/codemode/run.mjs` runs these rows alone). Rows:
// - a trivial execute, cold (the first in a fresh object) and warm (a later one);
// - per-call overhead: one script makes 100 `state.readFile` calls and times them inside the
//   sandbox (the same code and clock on both sides).
// Think is timed around `tool.execute` inside its Durable Object, and as its caller gets it: the
// request's round trip less that of a request that does nothing. think-rs runs as the shipped
// agent (build/), driven by a scripted model, and is timed as its caller gets it from the moment
// the model answered with the call (the scripted model's clock, which is the bench's) to the
// `tool-output-available` frame at a tab, less the round trip of a callable that does nothing
// much (the two legs to and from the object, as Think's no-op request): that covers what the
// object does with the call before its first frame leaves (the ledger and journal rows, the
// request to the sandbox), which the interval between the call's two frames leaves out, since
// the `tool-input-available` frame leaves only when the object first yields. That interval is
// printed too, on a row of its own. Both sides include two commits (think-rs's rows before and
// after the code runs, Think's `begin` and `complete` in its CodemodeRuntime facet's database)
// and each object's output gate.
// BENCH_REPS (default 5) timed runs per row after BENCH_WARMUP (default 3) untimed ones;
// the sides alternate which goes first. BENCH_ONLY skips these rows unless it matches "execute".
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startScriptedModel } from "../../tests/helpers/scripted-model.mjs";
import { modelVars, options as agentOptions } from "../../tests/helpers/worker.mjs";
import { connect, closeTabs } from "../../tests/helpers/client.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPS = Math.max(1, Number(process.env.BENCH_REPS ?? 5));
const WARMUP = Math.max(0, Number(process.env.BENCH_WARMUP ?? 3));
const TRIVIAL = "async () => 1";
const SETUP = `async () => { await state.writeFile({ path: "/b.txt", content: "bench" }); return 0; }`;
const CALLS = 100;
const PER_CALL = `async () => {
  const t0 = Date.now();
  for (let i = 0; i < ${CALLS}; i++) await state.readFile({ path: "/b.txt" });
  return (Date.now() - t0) / ${CALLS};
}`;
const RUST = "codemode-rust";
const TS = "codemode-ts";

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

let model;

/** Adds the two Code Mode workers to Miniflare `options` (and starts the scripted model). */
export async function addWorkers(options) {
  model = await startScriptedModel();
  // The agent as the tests run it, less the chat page, on a socket of its own so a tab can
  // open a WebSocket to it next to the bench's entry worker.
  const { assets, ...agent } = agentOptions({ vars: modelVars(model) }).workers[0];
  Object.assign(agent, { name: RUST, unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] });
  const think = {
    name: TS,
    modules: true,
    scriptPath: path.join(HERE, "ts-worker/dist/index.js"),
    compatibilityDate: "2026-01-28",
    compatibilityFlags: ["nodejs_compat"],
    durableObjects: { BENCH_CM_TS: { className: "BenchCodemodeTs", useSQLite: true } },
    workerLoaders: { LOADER: {} },
  };
  return { ...options, workers: [...options.workers, agent, think] };
}

/**
 * One `execute` on the Think side, in object `doName`: `{inside, seen, output}`, where
 * `inside` is timed around `tool.execute` in the object and `seen` is the caller's round trip
 * (through the object's output gate) less that of a request that does nothing.
 */
async function thinkExecute(worker, doName, code) {
  const url = (route) => `http://bench/${route}?do=${encodeURIComponent(doName)}`;
  let t = performance.now();
  const out = await (await worker.fetch(url("execute"), { method: "POST", body: JSON.stringify({ code }) })).json();
  const trip = performance.now() - t;
  // Afterwards, so a cold object's construction is not subtracted.
  t = performance.now();
  await (await worker.fetch(url("noop"), { method: "POST", body: "{}" })).json();
  const seen = trip - (performance.now() - t);
  if (out.output?.status !== "completed") throw new Error(`Think: ${JSON.stringify(out).slice(0, 300)}`);
  return { inside: out.ms, seen, output: out.output };
}

let callCount = 0;

/**
 * One `execute` on the think-rs side, over `tab`'s object: `{inside, seen, frames, output}`,
 * where `inside` is the execution's own span in the journal (started → settled, whole ms),
 * `seen` the time from the model's answer to the output frame at the tab less a callable's
 * round trip, and `frames` the time between the call's two frames at the tab.
 */
async function rustExecute(tab, code) {
  const id = `call_bench_${callCount++}`;
  let answered;
  // The model writes its whole answer at once, right after this entry is taken.
  const call = () => {
    answered = performance.now();
    return { toolCalls: [{ id, name: "execute", args: { code } }] };
  };
  model.push(call, { text: "ok" });
  const from = tab.frames.length;
  const stamp = (type) =>
    tab
      .waitFor((f) => f.type === "cf_agent_use_chat_response" && f.body?.includes(`"${type}"`) && JSON.parse(f.body).toolCallId === id, { from, timeout: 30000 })
      .then(() => performance.now());
  const started = stamp("tool-input-available");
  const ended = stamp("tool-output-available");
  const { id: requestId } = tab.chat("bench");
  const frames = (await ended) - (await started);
  const trip = (await ended) - answered;
  await tab.turn(requestId, { timeout: 30000 });
  // The no-op: a callable that reads one empty table, to and from the object over the socket.
  const t = performance.now();
  await tab.client.call("snippets", []);
  const seen = trip - (performance.now() - t);
  const output = tab.chunks(requestId).find((c) => c.type === "tool-output-available" && c.toolCallId === id).output;
  if (output.status !== "completed") throw new Error(`think-rs: ${JSON.stringify(output).slice(0, 300)}`);
  // As a user's app calls a callable: the client's own `call`, which matches the reply to its
  // pending call (a raw `rpc` frame sent past it makes the client log a discarded response).
  const [row] = await tab.client.call("executions", [1]);
  if (row.id !== output.executionId) throw new Error(`think-rs: the newest execution is ${row.id}, not ${output.executionId}`);
  return { inside: row.updatedAt - row.createdAt, seen, frames, output };
}

const fmt = (ms) => (ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));

/** Runs the rows on Miniflare `mf` (built from `addWorkers`' options) and prints their table. */
export async function run(mf) {
  if (process.env.BENCH_ONLY && !new RegExp(process.env.BENCH_ONLY, "i").test("execute")) return;
  const ts = await mf.getWorker(TS);
  const host = (await mf.unsafeGetDirectURL(RUST)).host;
  const row = (name, goal) => ({ name, goal, rust: [], ts: [] });
  const rows = {
    coldInside: row("execute, trivial, cold: inside the object"),
    coldSeen: row("execute, trivial, cold: as the caller gets it"),
    warmInside: row("execute, trivial, warm: inside the object"),
    warmSeen: row("execute, trivial, warm: as the caller gets it"),
    warmFrames: row("execute, trivial, warm: between the call's two frames (think-rs)"),
    perCall: row(`execute, per state.readFile call (${CALLS} in one script)`, 2),
  };
  const tabs = [];
  try {
    const callsTab = await connect(host, "cm-calls");
    tabs.push(callsTab);
    await rustExecute(callsTab, SETUP);
    await thinkExecute(ts, "cm-calls", SETUP);
    const sides = {
      rust: async (rep) => {
        const tab = await connect(host, `cm-cold-${rep}`);
        tabs.push(tab);
        const cold = await rustExecute(tab, TRIVIAL);
        const warm = await rustExecute(tab, TRIVIAL);
        const calls = await rustExecute(callsTab, PER_CALL);
        tab.close();
        return { cold, warm, calls };
      },
      ts: async (rep) => ({
        cold: await thinkExecute(ts, `cm-cold-${rep}`, TRIVIAL),
        warm: await thinkExecute(ts, `cm-cold-${rep}`, TRIVIAL),
        calls: await thinkExecute(ts, "cm-calls", PER_CALL),
      }),
    };
    for (let rep = 0; rep < WARMUP + REPS; rep++) {
      for (const side of rep % 2 ? ["ts", "rust"] : ["rust", "ts"]) {
        const r = await sides[side](rep);
        if (rep < WARMUP) continue;
        rows.coldInside[side].push(r.cold.inside);
        rows.coldSeen[side].push(r.cold.seen);
        rows.warmInside[side].push(r.warm.inside);
        rows.warmSeen[side].push(r.warm.seen);
        if (side === "rust") rows.warmFrames.rust.push(r.warm.frames);
        rows.perCall[side].push(r.calls.output.result);
      }
    }
  } finally {
    for (const tab of tabs) tab.close();
    closeTabs();
    await model?.close();
  }
  const list = Object.values(rows);
  for (const r of list) process.stderr.write(`  ${r.name}: think-rs ${r.rust.map(fmt).join(" ")} | Think ${r.ts.map(fmt).join(" ")}\n`);
  console.log(`## Code Mode\n`);
  const head = ["workload", "think-rs ms", "Think ms", "speedup", "goal", ""];
  const body = list.map((r) => {
    const a = median(r.rust);
    if (!r.ts.length) return [r.name, fmt(a), "", "", "", ""];
    const b = median(r.ts);
    const ratio = b / a;
    return [r.name, fmt(a), fmt(b), `${ratio.toFixed(1)}×`, r.goal ? `≥ ${r.goal}×` : "", r.goal ? (ratio >= r.goal ? "ok" : "MISSED") : ""];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  console.log([line(head), widths.map((w) => "-".repeat(w)).join("  "), ...body.map(line)].join("\n"));
  console.log(
    [
      "",
      "Inside the object: think-rs from its journal (execution started → settled, whole ms), Think around tool.execute.",
      "As the caller gets it: think-rs from the model's answer to the output frame at the tab less a callable's round trip, Think the request's",
      "round trip less a no-op one; both include the output gate (the object's writes made durable before its reply leaves). Between the",
      "call's frames: what a tab sees, less what the object does before its first frame leaves. The per-call row is timed inside the sandbox.",
      "",
    ].join("\n"),
  );
}
