// Scale rows of `npm run bench` (think-rs only): the shipped agent (build/) in a workerd of its
// own, driven by the scripted model over the real `agents` client, read through the V8
// inspector (tests/helpers/inspector.mjs). Rows:
// - 100 tabs on one instance, each sending a message at once: the 100 turns queue and stream
//   one after the other, and every tab receives every turn's frames;
// - 1,000 instances with one turn each (20 at a time, each over a tab of its own);
// - a transcript of 10 MB (40 answers of 256 KB): `get-messages` over HTTP, and the next turn.
// workerd runs as `npm start` runs it, under scripts/workerd-supervisor.mjs with every isolate's
// V8 heap capped at 128 MB (THINK_LOCAL_HEAP_MB), so garbage is collected as it would be under
// the platform's limit. Figures per row: wall time, workerd's CPU time (/proc schedstat, every
// thread), the agent isolate's V8 peak (heap plus ArrayBuffer stores, sampled while the row
// runs, so a lower bound) and its wasm high-water (the linear memory at the end of the row, or
// just before an idle reset during it), and what stays after a full GC once it is quiescent.
// A row over a platform limit (128 MB isolate memory, 30 s CPU per request) says so.
// Run alone: `bash scripts/build.sh && node bench/agent-scale.mjs` (BENCH_SCALE_INSTANCES and
// BENCH_SCALE_TABS shorten the rows; BENCH_SCALE_ROWS=tabs,instances,transcript picks rows).
// Only 127.0.0.1 is reached.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startScriptedModel } from "../tests/helpers/scripted-model.mjs";
import { startWorker, modelVars, ROOT } from "../tests/helpers/worker.mjs";
import { connect, closeTabs } from "../tests/helpers/client.mjs";
import { freePort, openInspector, sampleHeapPeak } from "../tests/helpers/inspector.mjs";

const MB = 1024 * 1024;
const TABS = Math.max(1, Number(process.env.BENCH_SCALE_TABS ?? 100));
const INSTANCES = Math.max(1, Number(process.env.BENCH_SCALE_INSTANCES ?? 1000));
const IN_FLIGHT = 20;
const TRANSCRIPT_MB = 10;
const ANSWER_BYTES = 256 * 1024;
/** Cloudflare's isolate memory limit (128 MB, read as MiB like the table's MB) and CPU limit
 * per request (30 s). */
const MEMORY_LIMIT = 128 * MB;
const CPU_LIMIT_MS = 30000;

/** The CPU time so far of process `pid` and its descendants (the supervisor's workerd), in ms,
 * summed over their threads. */
function cpuMs(pid) {
  if (!pid) return NaN;
  let ns = 0;
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(fs.readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
      for (const child of fs.readFileSync(`/proc/${pid}/task/${t}/children`, "utf8").split(" ").filter(Boolean)) {
        ns += cpuMs(Number(child)) * 1e6;
      }
    } catch {
      // A thread or process that ended meanwhile.
    }
  }
  return ns / 1e6;
}

/** A text answer of `bytes` bytes in 64-byte lines, streamed in 16 KB deltas. */
function answer(bytes, tag) {
  const line = `${tag} `.padEnd(63, ".") + "\n";
  return { text: line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes), chunkSize: 16384 };
}

/** Runs `work` while sampling the isolate; returns its figures. */
async function measured(agent, work) {
  // Start from a quiescent isolate, so an idle reset the work before left pending (and the
  // memory it gives back) is not counted in this row.
  const { resets } = await agent.inspector.quiescent(0, 120000);
  const sampler = sampleHeapPeak(agent.inspector);
  const cpu0 = cpuMs(agent.pid);
  const t0 = performance.now();
  const extra = await work();
  const ms = performance.now() - t0;
  const cpu = cpuMs(agent.pid) - cpu0;
  const v8Peak = await sampler.stop();
  const idle = await agent.inspector.quiescent(0, 120000);
  const wasm = await agent.inspector.wasmBytes();
  const heap = await agent.inspector.heap();
  const reset = idle.resets > resets;
  return {
    ms,
    cpu,
    v8Peak,
    wasmHigh: reset ? Math.max(idle.lastReset?.bytes ?? 0, wasm) : wasm,
    v8After: heap.usedSize + (heap.backingStorageSize ?? 0),
    wasmAfter: wasm,
    resets: idle.resets - resets,
    ...extra,
  };
}

async function startAgent(model, vars = {}) {
  // As `npm start` runs workerd (scripts/workerd-supervisor.mjs): every isolate's V8 heap is
  // capped at 128 MB, so V8 collects its garbage before it would pass the platform's limit,
  // and the V8 peak below is what an isolate under that limit holds, not garbage a local
  // isolate with no cap leaves lying.
  process.env.MINIFLARE_WORKERD_PATH = path.join(ROOT, "scripts/workerd-supervisor.mjs");
  process.env.THINK_LOCAL_HEAP_MB = "128";
  const inspectorPort = await freePort();
  const before = new Set(children());
  const worker = await startWorker({ vars: modelVars(model, vars), inspectorPort });
  // The supervisor, whose descendants are workerd.
  const [pid] = children().filter((p) => !before.has(p));
  return { worker, pid, inspector: await openInspector(inspectorPort, "think-rs") };
}

/** Pids of this process's children. */
function children() {
  return fs
    .readdirSync(`/proc/${process.pid}/task`)
    .flatMap((t) => fs.readFileSync(`/proc/${process.pid}/task/${t}/children`, "utf8").split(" ").filter(Boolean))
    .map(Number);
}

/** 100 tabs on one instance, each sending one message at once. */
async function manyTabs(model) {
  const agent = await startAgent(model);
  try {
    const tabs = [];
    for (let i = 0; i < TABS; i++) {
      const tab = await connect(agent.worker.host, "scale-tabs");
      // As useAgentChat does: a tab offered a stream in progress ACKs it and follows it.
      tab.client.addEventListener("message", (event) => {
        if (typeof event.data !== "string" || !event.data.includes("cf_agent_stream_resuming")) return;
        const frame = JSON.parse(event.data);
        if (frame.type === "cf_agent_stream_resuming") tab.send({ type: "cf_agent_stream_resume_ack", id: frame.id });
      });
      tabs.push(tab);
    }
    for (let i = 0; i < TABS; i++) model.push({ text: `answer ${i} `.repeat(40), chunkSize: 32 });
    const row = await measured(agent, async () => {
      const sent = tabs.map((tab, i) => ({ tab, id: tab.chat(`message ${i}`).id }));
      const perTurn = [];
      await Promise.all(
        sent.map(async ({ tab, id }) => {
          const t = performance.now();
          await tab.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === id && f.done === true, { timeout: 600000 });
          perTurn.push(performance.now() - t);
        }),
      );
      // Every tab streamed every turn: it got chunks of each of the 100 requests.
      const ids = new Set(sent.map((s) => s.id));
      const seen = tabs.map((tab) => new Set(tab.frames.filter((f) => f.type === "cf_agent_use_chat_response" && ids.has(f.id)).map((f) => f.id)).size);
      const frames = tabs.reduce((n, tab) => n + tab.frames.length, 0);
      return { turns: TABS, everyTabSawAll: seen.every((n) => n === TABS), frames };
    });
    for (const tab of tabs) tab.close();
    return { name: `${TABS} tabs on one instance, each sending a message (${TABS} turns, every tab streams every turn)`, ...row, per: `${(row.ms / TABS).toFixed(1)} ms and ${(row.cpu / TABS).toFixed(1)} ms CPU per turn; ${row.frames.toLocaleString("en-US")} frames to the tabs; every tab streamed every turn: ${row.everyTabSawAll}` };
  } finally {
    closeTabs();
    agent.inspector.close();
    await agent.worker.dispose();
  }
}

/** 1,000 instances with one turn each. */
async function manyInstances(model) {
  const agent = await startAgent(model);
  try {
    model.setFallback({ text: "hello from the scripted model", chunkSize: 8 });
    const idle = await agent.inspector.heap();
    const row = await measured(agent, async () => {
      let next = 0;
      const perTurn = [];
      const worker = async () => {
        while (next < INSTANCES) {
          const i = next++;
          const t = performance.now();
          const tab = await connect(agent.worker.host, `scale-instance-${i}`);
          const { id } = tab.chat(`hello ${i}`);
          await tab.turn(id, { timeout: 120000 });
          tab.close();
          perTurn.push(performance.now() - t);
        }
      };
      await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
      perTurn.sort((a, b) => a - b);
      return { turns: INSTANCES, median: perTurn[perTurn.length >> 1], p90: perTurn[Math.floor(perTurn.length * 0.9)] };
    });
    model.setFallback(null);
    const idleV8 = idle.usedSize + (idle.backingStorageSize ?? 0);
    return {
      name: `${INSTANCES.toLocaleString("en-US")} instances, one turn each (${IN_FLIGHT} at a time, a tab each)`,
      ...row,
      per: `${(row.ms / INSTANCES).toFixed(1)} ms and ${(row.cpu / INSTANCES).toFixed(1)} ms CPU per instance (connect, first turn, close; median ${row.median.toFixed(0)} ms, p90 ${row.p90.toFixed(0)} ms each at ${IN_FLIGHT} in flight); V8 after ${((row.v8After - idleV8) / INSTANCES / 1024).toFixed(1)} KB per instance over the idle isolate`,
    };
  } finally {
    closeTabs();
    agent.inspector.close();
    await agent.worker.dispose();
  }
}

/** A transcript of 10 MB: `get-messages` and the next turn. */
async function bigTranscript(model) {
  // A context window the transcript fits, so the turn sends it whole (no compaction).
  const agent = await startAgent(model, { THINK_CONTEXT_WINDOW: "100000000" });
  try {
    const tab = await connect(agent.worker.host, "scale-transcript");
    const turns = Math.ceil((TRANSCRIPT_MB * MB) / ANSWER_BYTES);
    const build0 = performance.now();
    for (let i = 0; i < turns; i++) {
      model.push(answer(ANSWER_BYTES, `turn ${i}`));
      const { id } = tab.chat(`turn ${i}`);
      await tab.turn(id, { timeout: 300000 });
      tab.frames.length = 0;
      model.requests.length = 0;
    }
    const buildMs = performance.now() - build0;
    const url = new URL("/agents/think-agent/scale-transcript/get-messages", agent.worker.url);
    const read = await measured(agent, async () => {
      const res = await fetch(url);
      const body = await res.text();
      if (!res.ok) throw new Error(`get-messages: ${res.status} ${body.slice(0, 200)}`);
      return { bytes: body.length, messages: JSON.parse(body).length };
    });
    model.push({ text: "the next answer", chunkSize: 8 });
    const next = await measured(agent, async () => {
      const { id } = tab.chat("one more");
      await tab.turn(id, { timeout: 300000 });
      const sent = model.requests.at(-1);
      return { requestBytes: JSON.stringify(sent.messages).length };
    });
    tab.close();
    return [
      { name: `transcript of ${(read.bytes / MB).toFixed(1)} MB (${read.messages} messages): get-messages`, ...read, per: `built by ${turns} turns in ${(buildMs / 1000).toFixed(1)} s` },
      { name: "transcript of 10 MB: the next turn (the whole transcript sent to the model)", ...next, per: `the model request's messages: ${(next.requestBytes / MB).toFixed(1)} MB` },
    ];
  } finally {
    closeTabs();
    agent.inspector.close();
    await agent.worker.dispose();
  }
}

const fmtMB = (b) => (Number.isFinite(b) ? (b / MB).toFixed(1) : "n/a");
const fmtS = (ms) => (ms >= 10000 ? (ms / 1000).toFixed(1) + " s" : ms.toFixed(0) + " ms");

function table(rows) {
  const head = ["workload", "wall", "workerd CPU", "V8 peak MB", "wasm high-water MB", "V8 + wasm peak MB", "V8 after MB", "wasm after MB", "idle resets", "limits"];
  const body = rows.map((r) => {
    const peak = r.v8Peak + r.wasmHigh;
    const over = [];
    if (peak > MEMORY_LIMIT) over.push("OVER 128 MB");
    if (r.cpuPerRequest > CPU_LIMIT_MS) over.push("OVER 30 s CPU");
    return [r.name, fmtS(r.ms), fmtS(r.cpu), fmtMB(r.v8Peak), fmtMB(r.wasmHigh), fmtMB(peak), fmtMB(r.v8After), fmtMB(r.wasmAfter), String(r.resets), over.join(", ") || "within"];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  console.log(line(head));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const b of body) console.log(line(b));
  console.log("");
  for (const r of rows) console.log(`- ${r.name}: ${r.per}`);
}

/** Runs the rows and prints their table (`npm run bench` calls it last). */
export async function run() {
  if (process.env.BENCH_ONLY && !new RegExp(process.env.BENCH_ONLY, "i").test("scale")) return;
  const model = await startScriptedModel();
  const rows = [];
  try {
    const want = (row) => !process.env.BENCH_SCALE_ROWS || process.env.BENCH_SCALE_ROWS.split(",").includes(row);
    const note = (added) => {
      for (const r of added) process.stderr.write(`  ${r.name}: ${fmtS(r.ms)}, CPU ${fmtS(r.cpu)}, V8 peak ${fmtMB(r.v8Peak)} MB + wasm ${fmtMB(r.wasmHigh)} MB; ${r.per}\n`);
      rows.push(...added);
    };
    if (want("tabs")) note([await manyTabs(model)]);
    if (want("instances")) note([await manyInstances(model)]);
    if (want("transcript")) note(await bigTranscript(model));
  } finally {
    await model.close();
  }
  console.log(`## Agent at scale (think-rs, the shipped agent)\n`);
  // The CPU limit is per request (an event of the object): a turn's CPU is the most one
  // request of these rows could have spent, so each row's CPU per turn is held against it.
  for (const r of rows) r.cpuPerRequest = r.turns ? r.cpu / r.turns : r.cpu;
  table(rows);
  console.log(
    "\nwall and workerd CPU: the whole row (the CPU is every workerd thread's, Miniflare's own services included). V8 peak: sampled while the row ran;" +
      " wasm high-water: the linear memory at its end, or before an idle reset during it. 'after': once the isolate is quiescent, after a full GC.\n",
  );
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
