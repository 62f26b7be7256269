// Code Mode bench: think-rs's `execute` against Think 0.16.0's `createExecuteTool`, both on
// the real Worker Loader in Miniflare. Rows:
// - a trivial execute, cold (the first in a fresh object) and warm (median of later ones);
// - per-call overhead: one script makes 100 `state.readFile` calls and times them inside the
//   sandbox (identical code and clock on both sides).
// Think is timed around `tool.execute` inside its Durable Object; think-rs from the
// `tool-input-available` to the `tool-output-available` frame of the same call, as a tab
// receives them (both frames cross the same WebSocket, so its latency cancels out).
// Run: `bash bench/codemode/build.sh && node bench/codemode/run.mjs` (BENCH_REPS, default 7).
import { Miniflare } from "miniflare";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startScriptedModel } from "../../tests/helpers/scripted-model.mjs";
import { startWorker, modelVars } from "../../tests/helpers/worker.mjs";
import { connect, closeTabs } from "../../tests/helpers/client.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPS = Math.max(1, Number(process.env.BENCH_REPS ?? 7));
const TRIVIAL = "async () => 1";
const SETUP = `await state.writeFile({ path: "/b.txt", content: "bench" })`;
const PER_CALL = `async () => {
  const t0 = Date.now();
  for (let i = 0; i < 100; i++) await state.readFile({ path: "/b.txt" });
  return (Date.now() - t0) / 100;
}`;
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function thinkSide() {
  const mf = new Miniflare({
    modules: true,
    scriptPath: path.join(HERE, "ts-worker/dist/index.js"),
    compatibilityDate: "2026-01-28",
    compatibilityFlags: ["nodejs_compat"],
    durableObjects: { BENCH_CM_TS: { className: "BenchCodemodeTs", useSQLite: true } },
    workerLoaders: { LOADER: {} },
  });
  const url = await mf.ready;
  const run = async (doName, code) => {
    const res = await fetch(new URL(`/execute?do=${doName}`, url), { method: "POST", body: JSON.stringify({ code }) });
    const out = await res.json();
    if (out.output?.status !== "completed") throw new Error(`Think: ${JSON.stringify(out).slice(0, 300)}`);
    return out;
  };
  const cold = [];
  const warm = [];
  const perCall = [];
  for (let r = 0; r < REPS; r++) {
    cold.push((await run(`cold${r}`, TRIVIAL)).ms);
    warm.push((await run(`cold${r}`, TRIVIAL)).ms);
  }
  await run("calls", SETUP);
  for (let r = 0; r < REPS; r++) perCall.push((await run("calls", PER_CALL)).output.result);
  await mf.dispose();
  return { cold: median(cold), warm: median(warm), perCall: median(perCall) };
}

async function rustSide() {
  const model = await startScriptedModel();
  const worker = await startWorker({ vars: modelVars(model) });
  let n = 0;
  const run = async (tab, code) => {
    const id = `call_bench_${n++}`;
    model.push({ toolCalls: [{ id, name: "execute", args: { code } }] }, { text: "ok" });
    const from = tab.frames.length;
    const stamp = (type) =>
      tab
        .waitFor((f) => f.type === "cf_agent_use_chat_response" && f.body?.includes(`"${type}"`) && JSON.parse(f.body).toolCallId === id, { from, timeout: 30000 })
        .then(() => performance.now());
    const started = stamp("tool-input-available");
    const ended = stamp("tool-output-available");
    const { id: requestId } = tab.chat("bench");
    const ms = (await ended) - (await started);
    await tab.turn(requestId, { timeout: 30000 });
    const out = tab.chunks(requestId).find((c) => c.type === "tool-output-available" && c.toolCallId === id).output;
    if (out.status !== "completed") throw new Error(`think-rs: ${JSON.stringify(out).slice(0, 300)}`);
    return { ms, out };
  };
  const cold = [];
  const warm = [];
  const perCall = [];
  for (let r = 0; r < REPS; r++) {
    const tab = await connect(worker.host, `cold${r}`);
    cold.push((await run(tab, TRIVIAL)).ms);
    warm.push((await run(tab, TRIVIAL)).ms);
    tab.close();
  }
  const tab = await connect(worker.host, "calls");
  await run(tab, SETUP);
  for (let r = 0; r < REPS; r++) perCall.push((await run(tab, PER_CALL)).out.result);
  tab.close();
  closeTabs();
  await worker.dispose();
  await model.close();
  return { cold: median(cold), warm: median(warm), perCall: median(perCall) };
}

const ts = await thinkSide();
const rs = await rustSide();
const row = (name, a, b, unit) => `| ${name} | ${a.toFixed(2)} ${unit} | ${b.toFixed(2)} ${unit} | ${(b / a).toFixed(2)}× |`;
console.log(`\nCode Mode, medians of ${REPS} (Miniflare ${(await import("miniflare/package.json", { with: { type: "json" } })).default.version})\n`);
console.log("| workload | think-rs | Think (TS) | Think / think-rs |");
console.log("|---|---|---|---|");
console.log(row("trivial execute, cold (first in a fresh object)", rs.cold, ts.cold, "ms"));
console.log(row("trivial execute, warm", rs.warm, ts.warm, "ms"));
console.log(row("per state.readFile call (100 in one script)", rs.perCall, ts.perCall, "ms"));
process.exit(0);
