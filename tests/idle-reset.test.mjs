// The idle reset (js/shim.mjs, src/wasm/idle.rs; README "Memory"): wasm linear memory never
// shrinks, so after a call leaves it above THINK_IDLE_RESET_MB (default 16) and nothing runs
// in the background, the shim resets the wasm instance and rebuilds each object on its next
// use, as after an eviction. This drives the real agent in Miniflare: a 20 MB write in a
// WebSocket turn (which grows the memory to about 65 MB before the reset existed), then more
// traffic from the same tab and from another Worker over Durable Object RPC, and checks
// through the V8 inspector that the memory fell back and that nothing was lost or broken.
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

test("after a 20 MB write the instance resets when idle: memory falls under the threshold, and the tab, DO RPC, the alarm and the data keep working", async (t) => {
  const name = "idle-reset";
  const tab = await connect(worker.host, name);
  const small = await turn(tab, { name: "write", args: { path: "/small.txt", content: "kept\n" } });
  assert.equal(small.type, "tool-output-available", JSON.stringify(small));
  const idle = await quiescent(0);
  assert.equal(idle.resets, 0, "small traffic does not reset the instance");
  const idleWasm = await inspector.wasmBytes();

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
