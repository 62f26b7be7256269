// `npm run bench`: think-rs and the TypeScript reference (Think 0.16.0's workspace tools over
// @cloudflare/shell's Workspace) side by side in one Miniflare process, one worker each.
//
// Every bench/*.bench.mjs default-exports `{ name, workloads }`. A workload is
//   { name, tool, inputs, setup?, fresh?, iterations?, goal? }
// and runs `inputs` through `tool` inside a Durable Object of each side (POST /run/<tool>),
// timed inside the object, so HTTP and JSON transport are not measured. `setup` files are
// written with the Workspace API first (untimed). `fresh` workloads get a new object, and so
// an empty workspace, for every run; the others set up once and repeat. `iterations` repeats
// the inputs within one timed run (for fast workloads). `goal` is the speedup the workload
// should reach. Each side runs BENCH_WARMUP (default 3) untimed runs, then BENCH_REPS
// (default 5) timed ones; the table shows medians. Afterwards every workload runs once more
// on each side to check that the outputs are identical, and a module may also export
// `parity`, a list of single `{ tool, input }` calls compared the same way.
// BENCH_ONLY=<regex> picks workloads by name. BENCH_HEAP_SNAPSHOT=<dir> also writes a heap
// snapshot of each compared isolate after the timed runs and prints what its live heap holds.
//
// A third column, the floor, runs the same inputs through the bare SQL statements the tool
// needs at minimum, from plain JavaScript in a think-rs bench object (bench/rust-worker/
// src/floor.js), set up with the same files, interleaved with the two sides in the same
// run. `÷ floor` is think-rs's median over the floor's; a workload's `floorGoal` is the
// most that ratio should be. More workload fields: `sides` (which of rust/ts/floor run;
// all by default), `warmup` and `reps` (override BENCH_WARMUP/BENCH_REPS for a slow row),
// `rustOptions` (the think-rs object's options: `grepIndex`, `indexAlarm`).
// think-rs also reports the peak of wasm heap bytes live during each run (its global
// allocator counts them); a suite whose rows set `showMemory` prints it.
import { Miniflare } from "miniflare";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { isDeepStrictEqual } from "node:util";
import * as codemode from "./codemode/bench.mjs";
import * as extensions from "./extensions/run.mjs";
import * as agentScale from "./agent-scale.mjs";
import { openInspector } from "../tests/helpers/inspector.mjs";
import { summarize, takeSnapshot } from "./heap-snapshot.mjs";
import { rustWorker } from "./workers.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPS = Math.max(1, Number(process.env.BENCH_REPS ?? 5));
// Warm-up runs let both JITs (V8 for the JS, its wasm tiers for think-rs) settle first.
const WARMUP = Math.max(0, Number(process.env.BENCH_WARMUP ?? 3));
const RUST_BUILD = path.resolve(process.env.BENCH_RUST_BUILD ?? path.join(HERE, "rust-worker/build"));
const ONLY = process.env.BENCH_ONLY ? new RegExp(process.env.BENCH_ONLY, "i") : null;

// `worker` is the Miniflare worker a side runs in, `route` its timed route, `suffix` what
// its object names get, so that the floor has objects (and data) of its own. The floor runs
// the same bench-crate build as think-rs in a worker of its own, so that its JavaScript
// garbage and its requests' wasm memory do not count as think-rs's isolate memory.
const SIDES = [
  { key: "rust", label: "think-rs", worker: "rust", route: "run", suffix: "" },
  { key: "ts", label: "Think (TS)", worker: "ts", route: "run", suffix: "" },
  { key: "floor", label: "floor", worker: "floor", route: "floor", suffix: "-floor" },
];
/** The two implementations, whose outputs must agree. */
const COMPARED = SIDES.filter((s) => s.key !== "floor");

function miniflareOptions(persistDir) {
  return {
    host: "127.0.0.1",
    port: 0,
    defaultPersistRoot: persistDir,
    workers: [
      // BENCH_RUST_BUILD: another build of the bench crate (a copy of its build/), for A/B runs.
      rustWorker(RUST_BUILD),
      rustWorker(RUST_BUILD, "floor"),
      // think-rs's side of the suites whose workloads all leave Think out (the 100 MB scale
      // rows), so that the isolate compared with Think's has not done work Think's never did.
      rustWorker(RUST_BUILD, "solo"),
      {
        name: "ts",
        modules: true,
        scriptPath: path.join(HERE, "ts-worker/dist/index.js"),
        compatibilityDate: "2026-01-28",
        compatibilityFlags: ["nodejs_compat"],
        durableObjects: { BENCH_TS: { className: "BenchTs", useSQLite: true } },
        r2Buckets: ["WORKSPACE_R2"],
      },
    ],
  };
}

/**
 * What each think-rs request did to the wasm linear memory, from its `x-wasm-memory` header
 * (before, after, peak live heap bytes): the requests that grew it, for the memory notes.
 */
const growth = [];
/** Names of think-rs's Miniflare worker objects: `growth` follows the compared one (`rust`). */
const workerNames = new Map();

async function post(worker, doName, route, body) {
  const res = await worker.fetch(`http://bench/${route}?do=${encodeURIComponent(doName)}`, {
    method: "POST",
    headers: { "content-type": "application/json", "accept-encoding": "identity" },
    body: JSON.stringify(body ?? {}),
  });
  const memory = res.headers.get("x-wasm-memory");
  if (memory) {
    const [before, after, live] = memory.split(",").map(Number);
    if (after > before && workerNames.get(worker) === "rust") growth.push({ doName, route: body?.keepOutputs ? `${route} (outputs kept, for the comparison)` : route, before, after, live });
  }
  const text = await res.text();
  let value;
  try {
    value = JSON.parse(text);
  } catch {
    throw new Error(`${route} on ${doName}: HTTP ${res.status}: ${text.slice(0, 300)}`);
  }
  if (!res.ok) throw new Error(`${route} on ${doName}: HTTP ${res.status}: ${value.error ?? text.slice(0, 300)}`);
  return value;
}

async function setup(worker, doName, files, extra = {}) {
  for (let i = 0; i < files.length; i += 250) {
    await post(worker, doName, "setup/files", { files: files.slice(i, i + 250), ...extra });
  }
  // `rustOptions: {indexAlarm: true}`: the writes set think-rs's alarm, which indexes for
  // grep in the background; the timed run starts once it is done, as a user's next turn would.
  return extra.indexAlarm ? await post(worker, doName, "alarm/settled", extra) : null;
}

/**
 * Options a side's object is built with: think-rs takes the workload's `rustOptions` (e.g.
 * `{grepIndex: true}`); the floor's objects never keep the grep index, and the floor drops
 * the table's other triggers (src/floor.js), so its statements fire none.
 */
const sideOptions = (side, w) => (side.key === "floor" ? { grepIndex: false } : side.key === "rust" ? (w.rustOptions ?? {}) : {});

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const withoutVersion = (v) => {
  if (!v || typeof v !== "object" || Array.isArray(v) || !("version" in v)) return v;
  const { version: _version, ...rest } = v;
  return rest;
};
/**
 * think-rs's output in Think's shape: the one documented addition (README, *Versioned writes*)
 * is the `version` that `read` reports, dropped here so the rest is compared byte for byte. A
 * single call's result wraps it (`{output: {..., version}}`); a workload's is the output itself.
 */
const thinkShape = (v) => {
  const top = withoutVersion(v);
  return top && typeof top === "object" && !Array.isArray(top) && "output" in top ? { ...top, output: withoutVersion(top.output) } : top;
};

function firstDifference(a, b) {
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (!isDeepStrictEqual(thinkShape(a[i]), b[i])) return { index: i, rust: a[i], ts: b[i] };
  }
  return null;
}

const clip = (v, n = 240) => {
  const s = JSON.stringify(v);
  return s.length > n ? `${s.slice(0, n)}…` : s;
};

async function runWorkload(workers, suiteIndex, wi, w) {
  const base = `s${suiteIndex}-w${wi}`;
  let sides = SIDES.filter((s) => !w.sides || w.sides.includes(s.key));
  const times = Object.fromEntries(sides.map((s) => [s.key, []]));
  const peaks = [];
  // Bytes a run stored, when the workload reports them (the checkpoint rows).
  const bytes = [];
  const alarms = [];
  const errors = {};
  const warmup = w.warmup ?? WARMUP;
  const reps = w.reps ?? REPS;
  // Non-fresh workloads share one set-up object per side.
  if (!w.fresh) {
    for (const side of sides) await setup(workers[side.worker], base + side.suffix, w.setup ?? [], sideOptions(side, w));
  }
  for (let rep = 0; rep < warmup + reps; rep++) {
    // Rotate which side goes first, so drift (GC, other load on the machine) is shared.
    const order = sides.map((_, i) => sides[(i + rep) % sides.length]);
    for (const side of order) {
      const doName = (w.fresh ? `${base}-r${rep}` : base) + side.suffix;
      const settled = w.fresh ? await setup(workers[side.worker], doName, w.setup ?? [], sideOptions(side, w)) : null;
      if (settled && rep >= warmup) alarms.push(settled);
      const result = await post(workers[side.worker], doName, `${side.route}/${w.tool}`, {
        inputs: w.inputs,
        iterations: w.iterations ?? 1,
        ...sideOptions(side, w),
      });
      if (result.unsupported) {
        sides = sides.filter((s) => s !== side);
        delete times[side.key];
        continue;
      }
      errors[side.key] = result.errors;
      if (rep >= warmup) {
        times[side.key].push(result.ms);
        if (side.key === "rust" && result.bytes != null) bytes.push(result.bytes);
        if (side.key === "rust") peaks.push(result.peakBytes ?? 0);
      }
    }
  }
  const med = (k) => (times[k] ? median(times[k]) : null);
  // The set-up object's totals (grep index, database size), for rows that show memory.
  const info = w.showMemory && !w.fresh ? await post(workers.rust, base, "info", sideOptions(SIDES[0], w)) : null;
  return {
    name: w.name,
    goal: w.goal,
    floorGoal: w.floorGoal,
    rust: med("rust"),
    ts: med("ts"),
    floor: med("floor"),
    peak: peaks.length ? Math.max(...peaks) : null,
    bytes: bytes.length ? median(bytes) : null,
    info,
    alarms,
    samples: times,
    errors,
  };
}

/**
 * Passes workerd's output through, less the shim's line for each idle reset (counted in the
 * memory notes instead), so the tables are not interleaved with them.
 */
function quietResets(stdout, stderr) {
  const pass = (from, to) => {
    let rest = "";
    from.on("data", (chunk) => {
      const lines = (rest + chunk).split("\n");
      rest = lines.pop();
      for (const l of lines) if (!l.includes("think-rs: idle reset of the wasm instance")) to.write(`${l}\n`);
    });
    from.on("end", () => rest && to.write(rest));
  };
  pass(stdout, process.stdout);
  pass(stderr, process.stderr);
}

/** Runs a workload once more on each side, keeping the outputs, and finds where they differ. */
async function compareOutputs(workers, suiteIndex, wi, w) {
  const base = `s${suiteIndex}-w${wi}`;
  const doName = w.fresh ? `${base}-compare` : base;
  const outputs = {};
  for (const side of COMPARED) {
    if (w.fresh) await setup(workers[side.key], doName, w.setup ?? [], sideOptions(side, w));
    outputs[side.key] = await outputsOf(workers[side.key], doName, side, w);
  }
  return firstDifference(outputs.rust ?? [], outputs.ts ?? []);
}

/** One more run of `w` on an already set-up object of `side`, keeping the outputs. */
async function outputsOf(worker, doName, side, w) {
  return (await post(worker, doName, `run/${w.tool}`, { inputs: w.inputs, keepOutputs: true, ...sideOptions(side, w) })).outputs;
}

/** Runs `calls` in order on a fresh object of each side and lists the calls whose outputs differ. */
async function parityCheck(workers, suiteIndex, calls) {
  const doName = `parity-${suiteIndex}`;
  const diffs = [];
  for (const [i, c] of calls.entries()) {
    const [rust, ts] = await Promise.all(COMPARED.map((side) => post(workers[side.key], doName, `call/${c.tool}`, { input: c.input })));
    if (!isDeepStrictEqual(thinkShape(rust), ts)) diffs.push(`#${i} ${c.tool} ${clip(c.input, 80)}: think-rs ${clip(rust, 300)} vs Think ${clip(ts, 300)}`);
  }
  return diffs;
}

/**
 * The V8 heap of each worker's isolate, via the inspector Miniflare exposes
 * (`Runtime.getHeapUsage`), as it is (garbage included: the goal's figure) and then after a
 * full collection (`gc`, live data only); `{}` if the inspector is unavailable.
 */
async function heapUsage(inspectorPort) {
  const out = {};
  try {
    for (const side of COMPARED) out[side.key] = await isolateHeap(inspectorPort, side.key);
  } catch (e) {
    process.stderr.write(`bench: no heap figures (${e.message})\n`);
  }
  return out;
}

/**
 * BENCH_HEAP_SNAPSHOT=<dir>: a heap snapshot of each compared isolate after the timed runs
 * (`<dir>/<side>.heapsnapshot`, for Chrome's DevTools), summarized after the memory lines.
 */
async function heapSnapshots(inspectorPort, dir) {
  fs.mkdirSync(dir, { recursive: true });
  const out = [];
  for (const side of COMPARED) out.push({ side, file: await takeSnapshot(inspectorPort, side.key, path.join(dir, `${side.key}.heapsnapshot`)) });
  return out;
}

/** Worker `name`'s V8 heap as it is, with `afterGc`, the same after a full collection. */
async function isolateHeap(inspectorPort, name) {
  const session = await openInspector(inspectorPort, name);
  const heap = await session.heap();
  await session.gc();
  heap.afterGc = await session.heap();
  session.close();
  return heap;
}

/**
 * BENCH_PROFILE=1: one more run of the workload on think-rs and on the floor (each in its
 * worker's isolate) under V8's sampling CPU profiler, printed as the functions with the
 * most self time. Build with `CARGO_PROFILE_RELEASE_STRIP=false THINK_WASM_KEEP_NAMES=1
 * THINK_FORCE_BUILD=1 bash bench/build.sh` first, so that wasm functions keep their Rust names.
 * BENCH_PROFILE=loop keeps only the samples taken inside the timed calls (under a tool's
 * `execute` on think-rs, under `floorRun` on the floor), so the request's parsing, the object's
 * construction after an idle reset and the response are left out.
 */
async function profileWorkload(workers, inspectorPort, suiteIndex, wi, w) {
  const base = `s${suiteIndex}-w${wi}`;
  const lines = [];
  for (const side of SIDES.filter((s) => s.key !== "ts" && (!w.sides || w.sides.includes(s.key)))) {
    const doName = (w.fresh ? `${base}-profile` : base) + side.suffix;
    if (w.fresh) await setup(workers[side.worker], doName, w.setup ?? []);
    const session = await openInspector(inspectorPort, workerNames.get(workers[side.worker]) ?? side.worker);
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: 100 });
    await session.send("Profiler.start");
    const result = await post(workers[side.worker], doName, `${side.route}/${w.tool}`, { inputs: w.inputs, iterations: w.iterations ?? 1 });
    const { profile } = await session.send("Profiler.stop");
    await session.send("Profiler.disable");
    session.close();
    if (result.unsupported) continue;
    const self = new Map();
    const byId = new Map(profile.nodes.map((n) => [n.id, n]));
    const parentOf = new Map();
    for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n);
    const nameOf = (n) => {
      const f = n.callFrame;
      return f.functionName || (f.url ? `(anonymous ${path.basename(f.url)}:${f.lineNumber})` : "(program)");
    };
    // Self time per function, and per function the callers it was sampled under.
    const callers = new Map();
    const loopOnly = process.env.BENCH_PROFILE === "loop";
    const insideLoop = (node) => {
      for (let p = node; p; p = parentOf.get(p.id)) if (/Tool>::execute|floorRun/.test(nameOf(p))) return true;
      return false;
    };
    let total = 0;
    profile.samples.forEach((id, i) => {
      const node = byId.get(id);
      const dt = profile.timeDeltas[i] ?? 0;
      const name = nameOf(node);
      if (name === "(idle)") return;
      if (loopOnly && !insideLoop(node)) return;
      self.set(name, (self.get(name) ?? 0) + dt);
      // The nearest two callers that are not wasm/JS transition frames.
      const up = [];
      for (let p = parentOf.get(id); p && up.length < 2; p = parentOf.get(p.id)) {
        const n = nameOf(p);
        if (!/^(wasm-to-js|js-to-wasm)/.test(n)) up.push(n.replace(/::h[0-9a-f]{16}$/, "").slice(0, 70));
      }
      const by = callers.get(name) ?? new Map();
      const pname = up.join(" ← ") || "-";
      by.set(pname, (by.get(pname) ?? 0) + dt);
      callers.set(name, by);
      total += dt;
    });
    const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 15);
    lines.push(`  ${side.label} (${fmtMs(total / 1000)} ms sampled, ${fmtMs(result.ms)} ms per iteration):`);
    for (const [name, us] of top) {
      const [caller] = [...callers.get(name)].sort((a, b) => b[1] - a[1]);
      lines.push(`    ${((100 * us) / total).toFixed(1).padStart(5)}%  ${name.replace(/::h[0-9a-f]{16}$/, "").slice(0, 80)}  ← ${caller[0]}`);
    }
  }
  return lines;
}

/**
 * The isolate memory after the timed runs, against the goal of issue 18 (think-rs's V8 heap
 * plus wasm memory at most half of Think's V8 heap), and the requests that grew think-rs's
 * wasm memory the most (each named by its workload and route, with the memory before and
 * after it and the most heap bytes live at once during it).
 */
function memoryLine(heap, mem, results) {
  const js = (h) =>
    `V8 heap ${fmtMB(h.usedSize)} used (garbage included) of ${fmtMB(h.totalSize)}${h.afterGc ? `, ${fmtMB(h.afterGc.usedSize)} after a full GC` : ""}`;
  const resets = mem.idleResets ? `, after ${mem.idleResets} idle resets of the instance` : "";
  const live = mem.liveBytes != null ? ` (${fmtMB(mem.liveBytes)} of it live heap)` : "";
  const parts = [`think-rs ${heap.rust ? `${js(heap.rust)}, plus ` : ""}wasm linear memory ${fmtMB(mem.wasmMemoryBytes)}${live}${resets}`];
  if (heap.ts) parts.push(`Think (TS) ${js(heap.ts)}`);
  const lines = [`Isolate memory after the timed runs: ${parts.join("; ")}.`];
  if (heap.rust && heap.ts) {
    const ratio = (heap.rust.usedSize + mem.wasmMemoryBytes) / heap.ts.usedSize;
    lines.push(`think-rs V8 + wasm is ${ratio.toFixed(2)}× Think's V8 heap (goal ≤ 0.50×: ${ratio <= 0.5 ? "ok" : "MISSED"}).`);
    if (heap.rust.afterGc && heap.ts.afterGc) {
      const live = (heap.rust.afterGc.usedSize + mem.wasmMemoryBytes) / heap.ts.afterGc.usedSize;
      lines.push(`After a full GC of both isolates (live data only): ${live.toFixed(2)}×.`);
    }
  }
  const names = new Map();
  for (const { si, rows } of results) for (const r of rows) names.set(`s${si}-w${r.wi}`, r.name);
  const nameOf = (doName) => {
    const base = doName.match(/^s\d+-w\d+/)?.[0];
    return `${names.get(base) ?? doName}${doName.endsWith("-floor") ? " (floor)" : ""}`;
  };
  const top = [...growth].sort((a, b) => b.after - b.before - (a.after - a.before)).slice(0, 5);
  if (top.length) {
    lines.push("Requests that grew think-rs's wasm memory the most (before → after; most heap live at once):");
    for (const g of top) lines.push(`- ${nameOf(g.doName)}, /${g.route}: ${fmtMB(g.before)} → ${fmtMB(g.after)}; ${fmtMB(g.live)} live`);
  }
  return lines.join("\n");
}

/** The isolate of the suites that leave Think out (the `solo` worker), for the record. */
function soloLine(heap, mem) {
  return (
    `think-rs's isolate for the suites that leave Think out (the \`solo\` worker): V8 heap ${fmtMB(heap.usedSize)} used (garbage included), ` +
    `${fmtMB(heap.afterGc.usedSize)} after a full GC, plus wasm linear memory ${fmtMB(mem.wasmMemoryBytes)}` +
    `${mem.liveBytes != null ? ` (${fmtMB(mem.liveBytes)} of it live heap)` : ""}${mem.idleResets ? `, after ${mem.idleResets} idle resets` : ""}.`
  );
}

const fmtMs = (ms) => (ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));
const fmtMB = (b) => `${(b / 1024 / 1024).toFixed(1)} MB`;

function table(rows) {
  const memory = rows.some((r) => r.w.showMemory);
  const head = ["workload", "think-rs ms", "Think ms", "floor ms", "speedup", "÷ floor", ...(memory ? ["peak wasm heap"] : []), "goal", ""];
  const body = rows.map((r) => {
    const ratio = r.ts != null ? r.ts / r.rust : null;
    const over = r.floor != null ? r.rust / r.floor : null;
    const goals = [];
    const missed = [];
    if (r.goal) {
      goals.push(`≥ ${r.goal}×`);
      if (ratio != null && ratio < r.goal) missed.push("speedup");
    }
    if (r.floorGoal) {
      goals.push(`≤ ${r.floorGoal}× floor`);
      if (over != null && over > r.floorGoal) missed.push("floor");
    }
    const ok = goals.length ? (missed.length ? `MISSED (${missed.join(", ")})` : "ok") : "";
    const cells = [
      r.name,
      fmtMs(r.rust),
      r.ts != null ? fmtMs(r.ts) : r.w.noThink ? "—" : "-",
      r.floor != null ? fmtMs(r.floor) : "-",
      ratio != null ? `${ratio.toFixed(1)}×` : "-",
      over != null ? `${over.toFixed(2)}×` : "-",
    ];
    if (memory) cells.push(r.w.showMemory && r.peak != null ? fmtMB(r.peak) : "");
    return [...cells, goals.join(", "), ok];
  });
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => b[i].length)));
  const line = (cells) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  console.log(line(head));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const b of body) console.log(line(b));
}

async function main() {
  const files = fs.readdirSync(HERE).filter((f) => f.endsWith(".bench.mjs")).sort();
  const suites = [];
  for (const f of files) {
    const mod = await import(path.join(HERE, f));
    suites.push({ ...mod.default, parity: mod.parity ?? [] });
  }

  const persistDir = fs.mkdtempSync(path.join(os.tmpdir(), "think-bench-"));
  const inspectorPort = 9300 + Math.floor(Math.random() * 500);
  // The Code Mode rows' workers (the agent's build among them) only load when those rows run.
  const options = miniflareOptions(persistDir);
  const withCodemode = !ONLY || ONLY.test("execute");
  const mf = new Miniflare({ ...(withCodemode ? await codemode.addWorkers(options) : options), inspectorPort, handleRuntimeStdio: quietResets });
  await mf.ready;
  const workers = { rust: await mf.getWorker("rust"), ts: await mf.getWorker("ts"), floor: await mf.getWorker("floor") };
  const solo = await mf.getWorker("solo");
  workerNames.set(workers.rust, "rust").set(solo, "solo");
  console.log(
    `bench: ${REPS} timed runs per workload after ${WARMUP} warm-up runs (unless a row says otherwise); medians of the time inside each Durable Object. ` +
      "floor: the bare SQL each workload needs, from plain JavaScript in the same kind of object, same data, interleaved.\n",
  );
  try {
    const results = [];
    for (const [si, suite] of suites.entries()) {
      const rows = [];
      // A suite whose workloads all leave Think out runs think-rs in the `solo` worker.
      const sw = suite.workloads.some((w) => !w.sides || w.sides.includes("ts")) ? workers : { ...workers, rust: solo };
      for (const [wi, w] of suite.workloads.entries()) {
        if (ONLY && !ONLY.test(w.name)) continue;
        const r = await runWorkload(sw, si, wi, w);
        rows.push({ ...r, wi, w });
        const samples = SIDES.filter((s) => r.samples[s.key]).map((s) => `${s.label} ${r.samples[s.key].map(fmtMs).join(" ")}`);
        process.stderr.write(`  ${r.name}: ${samples.join(" | ")}\n`);
        if (process.env.BENCH_PROFILE) rows[rows.length - 1].profile = await profileWorkload(sw, inspectorPort, si, wi, w);
      }
      results.push({ si, suite, rows, sw });
    }
    // Memory is read before the output comparisons, which keep every output in memory.
    const heap = await heapUsage(inspectorPort);
    const mem = await post(workers.rust, "memory", "memory", {});
    const snapshots = process.env.BENCH_HEAP_SNAPSHOT ? await heapSnapshots(inspectorPort, process.env.BENCH_HEAP_SNAPSHOT) : [];
    const soloHeap = results.some((x) => x.sw.rust === solo && x.rows.length) ? await isolateHeap(inspectorPort, "solo") : null;
    const soloMem = soloHeap ? await post(solo, "memory", "memory", {}) : null;
    for (const { si, suite, rows, sw } of results) {
      if (!rows.length) continue;
      console.log(`## ${suite.name}\n`);
      table(rows);
      for (const r of rows) if (r.profile) console.log(`\nProfile of ${r.name}:\n${r.profile.join("\n")}`);
      const notes = [];
      for (const r of rows) {
        if (r.w.showBytes && r.bytes != null) notes.push(`${r.name}: the database grew by ${Math.round(r.bytes).toLocaleString("en-US")} B per checkpoint (median; SQLite's databaseSize, in pages)`);
        if (r.errors.rust || r.errors.ts) notes.push(`${r.name}: tool errors think-rs ${r.errors.rust}, Think ${r.errors.ts}`);
        if (r.alarms?.length) {
          const list = r.alarms.map((a) => `${a.alarms} alarms, ${a.ms.toFixed(0)} ms`).join("; ");
          notes.push(`${r.name}: think-rs's background indexing before each timed run: ${list}`);
        }
        if (r.info) {
          notes.push(
            `${r.name}: ${r.info.fileCount} files, ${fmtMB(r.info.totalBytes)}; grep index ${r.info.grepIndexRows} rows (~${fmtMB(r.info.grepIndexBytes)}); database ${fmtMB(r.info.databaseSize)}`,
          );
        }
        // `sameOutputAs: <name>`: think-rs's outputs must equal those of another row (the
        // same search with and without the grep index).
        const twin = r.w.sameOutputAs && rows.find((o) => o.name === r.w.sameOutputAs);
        if (twin) {
          const [a, b] = await Promise.all(
            [r, twin].map((x) => outputsOf(sw.rust, `s${si}-w${x.wi}`, SIDES[0], x.w)),
          );
          const d = firstDifference(a, b);
          notes.push(d ? `${r.name}: outputs differ from ${twin.name} at call ${d.index}: ${clip(d.rust)} vs ${clip(d.ts)}` : `${r.name}: outputs identical to ${twin.name}`);
        }
        if (r.ts == null) continue;
        const diff = await compareOutputs(workers, si, r.wi, r.w);
        if (diff) notes.push(`${r.name}: outputs differ at call ${diff.index}: think-rs ${clip(diff.rust)} vs Think ${clip(diff.ts)}`);
      }
      const differ = notes.some((n) => n.includes("outputs differ") || n.includes("tool errors"));
      if (notes.length) console.log(`\n${notes.map((n) => `- ${n}`).join("\n")}`);
      const compared = rows.some((r) => r.ts != null);
      console.log(differ || !compared ? "" : "\nOutputs of both sides are identical for every workload.\n");
      if (suite.parity.length) {
        const diffs = await parityCheck(workers, si, suite.parity);
        console.log(`Parity: ${suite.parity.length - diffs.length} of ${suite.parity.length} single tool calls give identical outputs on both sides.`);
        for (const d of diffs) console.log(`- ${d}`);
        console.log("");
      }
    }
    console.log(memoryLine(heap, mem, results));
    for (const { side, file } of snapshots) console.log(`\nLive V8 heap of ${side.label}'s isolate (${file}):\n${summarize(file).join("\n")}`);
    if (soloHeap) console.log(soloLine(soloHeap, soloMem));
    await codemode.run(mf);
  } finally {
    await mf.dispose();
    fs.rmSync(persistDir, { recursive: true, force: true });
  }
  // The shipped agent's extension and scale rows, each in a workerd of its own.
  await extensions.run();
  await agentScale.run();
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e);
    process.exit(1);
  },
);
