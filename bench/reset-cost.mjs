// What an idle reset costs the next call (README "Memory", "Idle reset"): the shipped agent
// (build/) in Miniflare's workerd, a small write and a RESET_FILE_MB (default 20) write in
// WebSocket turns, then DO RPC `getMessages` from another Worker, timed from Node, once with
// the default idle reset and once with it off (THINK_IDLE_RESET_MB=0), alternating
// RESET_RUNS (default 2) times each. The caller's first RPC and the isolate's first
// getMessages cost about 100 ms of their own, so they are made (and printed) before the big
// write. RESET_PROFILE=1 also prints a V8 CPU profile of the first call after the reset (the
// functions with the most total time); build with `CARGO_PROFILE_RELEASE_STRIP=false
// THINK_WASM_KEEP_NAMES=1 bash scripts/wasm-build.sh .` first for Rust names.
//
//   node bench/reset-cost.mjs
import { startScriptedModel } from "../tests/helpers/scripted-model.mjs";
import { startWorker, modelVars } from "../tests/helpers/worker.mjs";
import { connect, closeTabs, toolTurn } from "../tests/helpers/client.mjs";
import { freePort, openInspector } from "../tests/helpers/inspector.mjs";

const MB = 1024 * 1024;
const FILE = Number(process.env.RESET_FILE_MB ?? 20) * MB;
const RUNS = Number(process.env.RESET_RUNS ?? 2);
const fmt = (ms) => `${ms.toFixed(1)} ms`;

async function timed(f) {
  const started = performance.now();
  await f();
  return performance.now() - started;
}

/** The functions with the most total (inclusive) time in a CPU profile, as text lines. */
function topTotals(profile, n = 30) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map();
  for (const node of profile.nodes) for (const c of node.children ?? []) parentOf.set(c, node);
  const nameOf = (node) => (node.callFrame.functionName || "(anonymous)").replace(/::h[0-9a-f]{16}$/, "");
  const total = new Map();
  let all = 0;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    if (nameOf(byId.get(id)) === "(idle)") return;
    all += dt;
    const seen = new Set();
    for (let node = byId.get(id); node; node = parentOf.get(node.id)) {
      const name = nameOf(node);
      if (seen.has(name)) continue;
      seen.add(name);
      total.set(name, (total.get(name) ?? 0) + dt);
    }
  });
  const top = [...total].sort((a, b) => b[1] - a[1]).slice(0, n);
  return [`  ${fmt(all / 1000)} sampled`, ...top.map(([name, us]) => `  ${fmt(us / 1000).padStart(9)}  ${name.slice(0, 120)}`)];
}

async function run(model, resetMb, profile) {
  const port = await freePort();
  const vars = modelVars(model, { THINK_CONTEXT_WINDOW: "50000000", THINK_IDLE_RESET_MB: resetMb });
  const worker = await startWorker({ vars, inspectorPort: port, withCaller: true });
  const inspector = await openInspector(port, "think-rs");
  const name = "reset-cost";
  try {
    const tab = await connect(worker.host, name);
    await toolTurn(model, tab, { name: "write", args: { path: "/small.txt", content: "kept\n" } });
    const coldMs = await timed(() => worker.caller(`/messages?name=${name}`));
    const line = "0123456789abcdef".repeat(4).slice(0, 63) + "\n";
    const content = line.repeat(FILE / line.length + 1).slice(0, FILE);
    await toolTurn(model, tab, { name: "write", args: { path: "/big.txt", content } });
    const state = await inspector.quiescent(resetMb === "0" ? 0 : 1);
    if (profile) {
      await inspector.send("Profiler.enable");
      await inspector.send("Profiler.setSamplingInterval", { interval: 100 });
      await inspector.send("Profiler.start");
    }
    const firstMs = await timed(() => worker.caller(`/messages?name=${name}`));
    const lines = profile ? topTotals((await inspector.send("Profiler.stop")).profile) : [];
    const nextMs = await timed(() => worker.caller(`/messages?name=${name}`));
    const what = resetMb === "0" ? "reset off" : `reset at ${(state.lastReset.bytes / MB).toFixed(1)} MB`;
    console.log(`${what}: isolate's first getMessages ${fmt(coldMs)}; after the ${FILE / MB} MB write: first ${fmt(firstMs)}, next ${fmt(nextMs)}`);
    for (const l of lines) console.log(l);
    tab.close();
  } finally {
    inspector.close();
    await worker.dispose();
  }
}

const model = await startScriptedModel();
try {
  for (let i = 0; i < RUNS; i++) {
    await run(model, "16", process.env.RESET_PROFILE && i === 0);
    await run(model, "0", false);
  }
} finally {
  closeTabs();
  await model.close();
}
