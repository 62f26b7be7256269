// The idle reset (crates/think-worker/js/shim.mjs, crates/think-worker/src/idle.rs; README "Memory"): wasm linear memory never
// shrinks, so after a call leaves it above THINK_IDLE_RESET_MB (default 16), or holds more
// than a quarter of that beyond what the work since the last idle point needed at once, and
// nothing runs in the background, the shim resets the wasm instance and rebuilds each object
// on its next use, as after an eviction. This drives the real agent in Miniflare: a 20 MB write in a
// WebSocket turn (which grows the memory to about 65 MB before the reset existed), then more
// traffic from the same tab and from another Worker over Durable Object RPC, and checks
// through the V8 inspector that the memory fell back and that nothing was lost or broken;
// then a transient 8 MB peak under the threshold, and the reset turned off.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, toolTurn } from "./helpers/client.mjs";
import { freePort, openInspector } from "./helpers/inspector.mjs";

const MB = 1024 * 1024;
const FILE = 20 * MB;
/** The shim's default threshold. */
const THRESHOLD = 16 * MB;

let model;
let worker;
let inspector;

before(async () => {
  model = await startScriptedModel();
  const port = await freePort();
  // A context window that holds the 20 MB call, so no compaction takes the scripted replies.
  worker = await startWorker({ vars: modelVars(model, { THINK_CONTEXT_WINDOW: "50000000" }), inspectorPort: port, withCaller: true });
  inspector = await openInspector(port, "think-rs");
});

after(async () => {
  closeTabs();
  inspector?.close();
  await worker?.dispose();
  await model?.close();
});

const idleState = () => inspector.idleReset();
const quiescent = (minResets) => inspector.quiescent(minResets);

const turn = (tab, call) => toolTurn(model, tab, call, { text: `done ${call.name}` });

/**
 * A bash script that makes an 8 MB file: the file passes through wasm memory once, but neither
 * the script nor its output is large, so the transcript stays small.
 */
const script = (file) => `s=0123456789abcde; s="$s\n"; for i in $(seq 1 19); do s="$s$s"; done; printf %s "$s" > ${file}; wc -c ${file}`;

test("after a 20 MB write the instance resets when idle: memory falls under the threshold, and the tab, DO RPC, the alarm and the data keep working", async (t) => {
  const name = "idle-reset";
  const tab = await connect(worker.host, name);
  const small = await turn(tab, { name: "write", args: { path: "/small.txt", content: "kept\n" } });
  assert.equal(small.type, "tool-output-available", JSON.stringify(small));
  const idle = await quiescent(0);
  assert.equal(idle.resets, 0, "small traffic does not reset the instance");
  const idleWasm = await inspector.wasmBytes();
  // The caller Worker's first RPC and the isolate's first getMessages cost about 100 ms of
  // their own (start-up, not the reset): made here, so the figures below show the reset.
  await worker.caller(`/messages?name=${name}`);

  const line = "0123456789abcdef".repeat(4).slice(0, 63) + "\n";
  const content = line.repeat(FILE / line.length + 1).slice(0, FILE - 12) + "needle-tail\n";
  const wrote = await turn(tab, { name: "write", args: { path: "/big/file.txt", content } });
  assert.equal(wrote.type, "tool-output-available", JSON.stringify(wrote));
  assert.equal(wrote.output.bytesWritten, FILE);

  const reset = await quiescent(1);
  const wasmAfter = await inspector.wasmBytes();
  const figures = `idle ${idleWasm} B, reset at ${reset.lastReset.bytes} B (${reset.lastReset.after} B right after), now ${wasmAfter} B, ${reset.resets} resets`;
  t.diagnostic(figures);
  assert.ok(reset.lastReset.bytes > THRESHOLD, `the write grew the memory past the threshold: ${figures}`);
  // Every WebAssembly.Memory in the isolate, after a full GC: the old instance's is gone.
  assert.ok(wasmAfter <= THRESHOLD, `the memory fell back under the threshold: ${figures}`);
  assert.ok(wasmAfter < FILE, `the memory is below the file's size: ${figures}`);

  // The first call after the reset rebuilds the object: DO RPC getMessages from another Worker.
  let started = performance.now();
  const messages = await worker.caller(`/messages?name=${name}`);
  const firstMs = performance.now() - started;
  started = performance.now();
  await worker.caller(`/messages?name=${name}`);
  const warmMs = performance.now() - started;
  // For comparison, the first call on an object this isolate has not built yet.
  started = performance.now();
  await worker.caller(`/messages?name=${name}-other`);
  const otherMs = performance.now() - started;
  t.diagnostic(
    `getMessages over RPC: first after the reset ${firstMs.toFixed(1)} ms, next ${warmMs.toFixed(1)} ms; first on a new object of the same isolate ${otherMs.toFixed(1)} ms`,
  );
  assert.equal(messages.length, 4, "both turns are in the transcript");
  const answer = JSON.stringify(messages[3]);
  assert.ok(answer.includes('"bytesWritten":20971520') && answer.includes('"done write"'), `the write and its answer were kept: ${answer.slice(0, 200)}…${answer.slice(-300)}`);

  // The tab opened before the reset keeps working, and the files are whole.
  const read = await turn(tab, { name: "read", args: { path: "/big/file.txt", offset: FILE / 64 - 1 } });
  assert.equal(read.type, "tool-output-available", JSON.stringify(read).slice(0, 300));
  assert.ok(read.output.content.includes("needle-tail"), JSON.stringify(read.output).slice(0, 300));
  const kept = await turn(tab, { name: "read", args: { path: "/small.txt" } });
  assert.ok(kept.output.content.includes("kept"), JSON.stringify(kept.output));
  // grep skips files over 1 MB; the small one, indexed by the alarm the writes set, is found.
  const found = await turn(tab, { name: "grep", args: { query: "kept", fixedString: true } });
  assert.equal(found.type, "tool-output-available", JSON.stringify(found).slice(0, 300));
  assert.equal(found.output.totalMatches, 1, JSON.stringify(found.output).slice(0, 300));
  assert.ok(JSON.stringify(found.output).includes("/small.txt"), JSON.stringify(found.output).slice(0, 300));

  // A turn over DO RPC, streamed to the caller, and the transcript after it.
  model.push({ text: "hello over rpc" });
  const chat = await worker.caller(`/chat?name=${name}`, { message: "hi" });
  const types = chat.events.map((e) => e.type);
  assert.equal(types.at(-1), "done", JSON.stringify(chat.events).slice(0, 300));
  assert.ok(!types.includes("error"), JSON.stringify(chat.events).slice(0, 300));
  const chunks = chat.events.filter((e) => e.type === "event").map((e) => e.chunk);
  const text = chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join("");
  assert.equal(text, "hello over rpc", JSON.stringify(chunks).slice(0, 300));
  const after = await worker.caller(`/messages?name=${name}`);
  assert.equal(after.length, messages.length + 8, "three tab turns and one RPC turn were added");

  // Still quiescent under the threshold: the read and grep of 20 MB may reset again.
  await quiescent(reset.resets);
  const wasmEnd = await inspector.wasmBytes();
  t.diagnostic(`after the traffic: ${wasmEnd} B, ${(await idleState()).resets} resets in all`);
  assert.ok(wasmEnd <= THRESHOLD, `memory after the traffic: ${wasmEnd} B`);
  // No callback of the old instance ran after the reset, nor any other error in the isolate.
  assert.deepEqual(inspector.errors, []);
  tab.close();
});

test("a transient peak under the threshold is given back after the next turn that does not need it, while memory each turn needs again is kept", async (t) => {
  // A worker of its own, so that the isolate's memory and reset count start fresh.
  const port = await freePort();
  const own = await startWorker({ vars: modelVars(model), inspectorPort: port });
  const watch = await openInspector(port, "think-rs");
  try {
    const tab = await connect(own.host, "transient");
    const small = () => turn(tab, { name: "read", args: { path: "/small.txt" } });
    await turn(tab, { name: "write", args: { path: "/small.txt", content: "kept\n" } });
    const start = await watch.quiescent(0);
    assert.equal(start.resets, 0, "small traffic does not reset the instance");
    const idleWasm = await watch.wasmBytes();

    const figures = [];
    for (const file of ["/gen1.txt", "/gen2.txt"]) {
      const made = await turn(tab, { name: "bash", args: { script: script(file) } });
      assert.equal(made.type, "tool-output-available", JSON.stringify(made).slice(0, 300));
      assert.equal(made.output.stdout, `8388608 ${file}\n`, JSON.stringify(made.output).slice(0, 300));
      const s = await watch.quiescent(0);
      figures.push({ ...s.lastCheck, resets: s.resets });
    }
    t.diagnostic(`idle ${idleWasm} B; after each 8 MB script: ${JSON.stringify(figures)}`);
    const [, second] = figures;
    // Each script needed the memory: more than the slack (a quarter of the threshold) over
    // idle, under the threshold, and kept.
    assert.ok(second.bytes - idleWasm > 4 * MB && second.bytes < THRESHOLD, JSON.stringify(second));
    assert.ok(second.needed > 8 * MB, `the peak of the script's request was counted: ${JSON.stringify(second)}`);
    assert.equal(second.resets, 0, "memory that each such turn needs again is not given back");

    // A small turn next: it did not need the memory the script left, so it is given back.
    await small();
    const state = await watch.quiescent(0);
    const wasmAfter = await watch.wasmBytes();
    t.diagnostic(`reset after the small turn: ${JSON.stringify(state.lastReset)}; now ${wasmAfter} B`);
    assert.equal(state.resets, 1, `one reset after the peak: ${JSON.stringify(state)}`);
    assert.ok(state.lastReset.bytes < THRESHOLD, "the reset came from the held memory, not the threshold");
    assert.ok(wasmAfter < idleWasm + MB, `the memory fell back to about idle: ${wasmAfter} B against ${idleWasm} B`);

    // The files survived the reset (listed, not read: reading 8 MB is another peak), and
    // small turns do not reset again.
    const listed = await turn(tab, { name: "list", args: { path: "/" } });
    assert.equal(listed.type, "tool-output-available", JSON.stringify(listed).slice(0, 300));
    const text = JSON.stringify(listed.output);
    assert.ok(text.includes("gen1.txt (8.0 MB)") && text.includes("gen2.txt (8.0 MB)"), text.slice(0, 300));
    for (let i = 0; i < 5; i++) await small();
    const end = await watch.quiescent(0);
    assert.equal(end.resets, 1, `ordinary turns after it do not reset: ${JSON.stringify(end)}`);
    assert.deepEqual(watch.errors, []);
    tab.close();
  } finally {
    watch.close();
    await own.dispose();
  }
});

test("THINK_IDLE_RESET_MB=0 turns the reset off: the memory an 8 MB script left is kept after small turns", async () => {
  const port = await freePort();
  const own = await startWorker({ vars: modelVars(model, { THINK_IDLE_RESET_MB: "0" }), inspectorPort: port });
  const watch = await openInspector(port, "think-rs");
  try {
    const tab = await connect(own.host, "off");
    const made = await turn(tab, { name: "bash", args: { script: script("/gen.txt") } });
    assert.equal(made.output?.stdout, "8388608 /gen.txt\n", JSON.stringify(made).slice(0, 300));
    for (let i = 0; i < 2; i++) await turn(tab, { name: "list", args: { path: "/" } });
    const state = await watch.quiescent(0);
    assert.equal(state.resets, 0, JSON.stringify(state));
    assert.ok((await watch.wasmBytes()) > 8 * MB, "the linear memory stays at its high-water mark");
    tab.close();
  } finally {
    watch.close();
    await own.dispose();
  }
});

test("the texts kept for the model's next edit are dropped at the idle point after its turn", async () => {
  const tab = await connect(worker.host, "kept-texts");
  const before = (await quiescent(0)).dropped;
  const text = `${"x".repeat(10_000)}\n`;
  const wrote = await turn(tab, { name: "write", args: { path: "/kept.txt", content: text } });
  assert.equal(wrote.type, "tool-output-available", JSON.stringify(wrote).slice(0, 300));
  const after = await quiescent(0);
  assert.ok(after.dropped - before >= text.length, JSON.stringify(after));
  // A read keeps nothing, so its idle point drops nothing.
  const read = await turn(tab, { name: "read", args: { path: "/kept.txt" } });
  assert.equal(read.type, "tool-output-available", JSON.stringify(read).slice(0, 300));
  assert.equal((await quiescent(0)).dropped, after.dropped);
  tab.close();
});
