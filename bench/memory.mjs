// `npm run bench:memory`: the isolate memory of the shipped agent (build/) while it writes and
// reads 1, 5 and 20 MB files through its tools, and after many turns on one instance.
//
// Everything goes through the real path: a scripted OpenAI-compatible model (the test
// helper) calls the `write` and `read` tools in a WebSocket turn of an `AgentClient` tab, and
// the agent runs in Miniflare's workerd with SQLite and R2. The figures come from the V8
// inspector Miniflare opens (tests/helpers/inspector.mjs):
// - V8 peak: the largest V8 heap plus ArrayBuffer stores (`usedSize + backingStorageSize`)
//   sampled while the turn runs (samples land where the isolate yields, so this is a lower
//   bound of the true peak);
// - V8 after: the same after the turn and a full garbage collection;
// - wasm high-water: the linear memory's size when the turn ended. It never grows back down
//   within an instance, so it is the most the Rust side held at once; when the idle reset
//   followed the turn (crates/think-worker/js/shim.mjs, README "Memory"), the size the shim saw just before it
//   reset the instance;
// - wasm after: the linear memory once the isolate is quiescent (no call in flight, no
//   background task), i.e. after the idle reset if there was one, summed over every
//   `WebAssembly.Memory` in the isolate after a full collection;
// - workerd RSS peak: the process's peak resident size during the turn (VmHWM, reset before
//   each turn). It includes Miniflare's own SQLite and R2 services, so it is only a cross-check.
// Each file size gets a fresh workerd, so its figures are not raised by a larger one before,
// and the read runs in a workerd restarted after the write, so the write's high-water mark
// does not hide the read's.
// MEMORY_TURNS (default 1000) sets the length of the many-turns run; MEMORY_SIZES (default
// "1,5,20") the file sizes in MB.
import fs from "node:fs";
import { startScriptedModel } from "../tests/helpers/scripted-model.mjs";
import { startWorker, modelVars } from "../tests/helpers/worker.mjs";
import { connect, closeTabs, newId } from "../tests/helpers/client.mjs";
import { freePort, openInspector, sampleHeapPeak } from "../tests/helpers/inspector.mjs";

const MB = 1024 * 1024;
const TURNS = Math.max(1, Number(process.env.MEMORY_TURNS ?? 1000));
const SIZES = (process.env.MEMORY_SIZES ?? "1,5,20").split(",").filter(Boolean).map(Number);

/** Peak and current resident size of a process, in bytes; the peak is reset by `resetPeak`. */
function rss(pid) {
  if (!pid) return { peak: NaN, now: NaN };
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const kb = (key) => Number(status.match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"))?.[1] ?? NaN) * 1024;
  return { peak: kb("VmHWM"), now: kb("VmRSS") };
}

function resetPeak(pid) {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, "5");
  } catch {
    // Not permitted here: the peak then covers the process's whole life.
  }
}

/** Text of `bytes` bytes in 64-character lines, as a source file or log would be. */
function fileOf(bytes) {
  const line = "0123456789abcdef".repeat(4).slice(0, 63) + "\n";
  return line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes);
}

/**
 * One agent in its own workerd, with an inspector on its isolate and one tab. `restart()`
 * starts a fresh workerd on the same storage, so a read is measured apart from the write.
 */
async function startAgent(model, name) {
  const inspectorPort = await freePort();
  const worker = await startWorker({ vars: modelVars(model), inspectorPort });
  const agent = {
    worker,
    inspector: await openInspector(inspectorPort, "think-rs"),
    tab: await connect(worker.host, name),
    async restart() {
      agent.tab.close();
      agent.inspector.close();
      await worker.restart();
      agent.inspector = await openInspector(inspectorPort, "think-rs");
      agent.tab = await connect(worker.host, name);
    },
    async dispose() {
      agent.tab.close();
      agent.inspector.close();
      await worker.dispose();
    },
  };
  return agent;
}

/**
 * The isolate's memory once it is quiescent, after a full collection. `resetsBefore`: the
 * idle resets counted before the turn; a later one gives the high-water mark it saw.
 */
async function settled(agent, resetsBefore) {
  const idle = await agent.inspector.quiescent();
  const wasm = await agent.inspector.wasmBytes();
  const heap = await agent.inspector.heap();
  const reset = resetsBefore !== undefined && idle.resets > resetsBefore;
  return {
    heap: heap.usedSize + (heap.backingStorageSize ?? 0),
    wasm,
    highWater: reset ? Math.max(idle.lastReset.bytes, wasm) : wasm,
    resets: idle.resets,
    rss: rss(agent.worker.pid).now,
  };
}

/** Runs one turn in which the model calls `calls`, then answers; returns its memory figures. */
async function measuredTurn(agent, model, calls) {
  const withIds = calls.map((c) => ({ id: newId("call"), ...c }));
  model.push({ toolCalls: withIds }, { text: "done" });
  const { resets } = await agent.inspector.idleReset();
  resetPeak(agent.worker.pid);
  const sampler = sampleHeapPeak(agent.inspector);
  const started = performance.now();
  const { id } = agent.tab.chat(`run ${calls.map((c) => c.name).join(", ")}`);
  await agent.tab.turn(id, { timeout: 300000 });
  const ms = performance.now() - started;
  const peak = await sampler.stop();
  const rssPeak = rss(agent.worker.pid).peak;
  const errors = agent.tab.chunks(id).filter((c) => c.type === "tool-output-error" || c.type === "tool-input-error");
  if (errors.length) throw new Error(`tool error: ${JSON.stringify(errors[0]).slice(0, 300)}`);
  // The tab keeps every frame; drop them so the bench's own memory stays flat.
  agent.tab.frames.length = 0;
  return { peak, rssPeak, ms, ...(await settled(agent, resets)) };
}

const fmt = (b) => (Number.isFinite(b) ? `${(b / MB).toFixed(1)}` : "n/a");

function table(rows) {
  const head = ["workload", "file MB", "V8 peak MB", "V8 after MB", "wasm high-water MB", "wasm after MB", "idle resets", "peak growth / file", "workerd RSS peak MB", "s"];
  let idle;
  const body = rows.map((r) => {
    if (!r.file) idle = r;
    return [
    r.name,
    r.file ? fmt(r.file) : "",
    r.peak === undefined ? "" : fmt(r.peak),
    fmt(r.heap),
    fmt(r.highWater),
    fmt(r.wasm),
    String(r.resets),
    // What the call added over the idle instance before it: V8 peak plus wasm growth.
    r.file ? `${((r.peak - idle.heap + r.highWater - idle.wasm) / r.file).toFixed(1)}×` : "",
    r.rssPeak === undefined ? fmt(r.rss) : fmt(r.rssPeak),
    r.ms === undefined ? "" : (r.ms / 1000).toFixed(1),
    ];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) => `| ${cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(" | ")} |`;
  console.log(line(head));
  console.log(`|${widths.map((w, i) => (i === 0 ? "-".repeat(w + 2) : `${"-".repeat(w + 1)}:`)).join("|")}|`);
  for (const b of body) console.log(line(b));
}

async function main() {
  const model = await startScriptedModel();
  const rows = [];
  try {
    for (const size of SIZES) {
      const bytes = size * MB;
      const agent = await startAgent(model, `mem-${size}`);
      try {
        rows.push({ name: `idle (fresh instance, ${size} MB run)`, ...(await settled(agent)) });
        const content = fileOf(bytes);
        rows.push({ name: `write ${size} MB`, file: bytes, ...(await measuredTurn(agent, model, [{ name: "write", args: { path: `/mem/${size}.txt`, content } }])) });
        await agent.restart();
        rows.push({ name: "idle (restarted on the same storage)", ...(await settled(agent)) });
        rows.push({ name: `read ${size} MB`, file: bytes, ...(await measuredTurn(agent, model, [{ name: "read", args: { path: `/mem/${size}.txt` } }])) });
        process.stderr.write(`  ${size} MB done\n`);
      } finally {
        await agent.dispose();
      }
    }

    // Many turns on one instance: each writes a small file with the tool and answers.
    const agent = await startAgent(model, "mem-turns");
    try {
      rows.push({ name: "idle (fresh instance)", ...(await settled(agent)) });
      const marks = new Set([10, 100, Math.floor(TURNS / 2), TURNS]);
      const started = performance.now();
      for (let i = 1; i <= TURNS; i++) {
        model.push({ toolCalls: [{ id: newId("call"), name: "write", args: { path: `/turns/${i % 50}.txt`, content: `turn ${i}\n`.repeat(100) } }] }, { text: `done ${i}` });
        const { id } = agent.tab.chat(`turn ${i}`);
        await agent.tab.turn(id, { timeout: 60000 });
        agent.tab.frames.length = 0;
        if (marks.has(i)) {
          rows.push({ name: `after ${i} turns`, ms: performance.now() - started, ...(await settled(agent)) });
          process.stderr.write(`  ${i} turns done\n`);
        }
      }
    } finally {
      await agent.dispose();
    }
  } finally {
    closeTabs();
    await model.close();
  }
  console.log(
    "\nbench:memory: the agent's isolate (V8 heap plus wasm linear memory) while the scripted model calls write and read through a WebSocket turn.\n" +
      "V8 = heap + ArrayBuffer stores; its peak is sampled during the turn, 'after' follows a full GC. wasm high-water = linear memory when the turn ended (before an idle reset);\n" +
      "wasm after = once the isolate is quiescent (after the idle reset, if the turn left more than the threshold or more free memory than the slack); idle resets = counted since the instance started.\n" +
      "Peak growth / file = (V8 peak − idle V8 + wasm high-water − idle wasm) / file size, over the idle row above it.\n",
  );
  table(rows);
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
