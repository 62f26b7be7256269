// Code Mode over the real Worker Loader in Miniflare, driven by the scripted model: the
// `execute` tool runs model-written JavaScript in a fresh isolate per pass, with `state.*`,
// `tools.*` and `codemode.*` reaching back into the agent, and a durable journal that pauses
// for approval and replays on approve.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { startScriptedModel, lastMessage } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, getMessages } from "./helpers/client.mjs";

let model;
let worker;
let seq = 0;

before(async () => {
  model = await startScriptedModel();
  worker = await startWorker({
    vars: modelVars(model, { THINK_APPROVAL: "delete", THINK_EXECUTE: JSON.stringify({ timeout: 3000 }) }),
    withCaller: true,
  });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

/** One turn in which the model calls `execute` with `code`, then answers "ok". */
async function execute(tab, code, { text = "ok" } = {}) {
  const id = `call_exec_${seq++}`;
  model.push({ toolCalls: [{ id, name: "execute", args: { code } }] }, { text });
  const { id: requestId } = tab.chat(`run ${id}`);
  await tab.turn(requestId, { timeout: 20000 });
  const chunks = tab.chunks(requestId);
  const out = chunks.find((c) => c.type === "tool-output-available" && c.toolCallId === id);
  assert.ok(out, `no output for ${id}: ${JSON.stringify(chunks.filter((c) => c.toolCallId === id))}`);
  return out.output;
}

/** Calls a callable over the `rpc` frame and resolves with its result. */
async function rpc(tab, method, args = []) {
  const id = `rpc_${seq++}`;
  tab.send({ type: "rpc", id, method, args });
  const reply = await tab.waitFor((f) => f.type === "rpc" && f.id === id, { timeout: 20000 });
  if (!reply.success) throw new Error(reply.error);
  return reply.result;
}

test("execute is offered with a strict {code} schema and runs code to a result", async () => {
  const tab = await connect(worker.host, "cm-basic");
  const out = await execute(tab, "async () => { console.log('hi', 1); return 1 + 2 }");
  assert.equal(out.status, "completed", JSON.stringify(out));
  assert.equal(out.result, 3);
  assert.deepEqual(out.logs, ["hi 1"]);
  assert.match(out.executionId, /^exec_/);
  const def = model.requests.at(-2).tools.map((t) => t.function).find((f) => f.name === "execute");
  assert.deepEqual(def.parameters, {
    type: "object",
    properties: { code: { type: "string", description: def.parameters.properties.code.description } },
    required: ["code"],
    additionalProperties: false,
  });
  assert.match(def.description, /codemode\.search/);
  // What the model saw next is the same object.
  assert.deepEqual(JSON.parse(lastMessage(model.requests.at(-1), "tool").content), out);
  // A bare block of statements in a Markdown fence, its last expression the result.
  const fenced = await execute(tab, "```js\nconst xs = [1, 2, 3]\nxs.map((x) => x * 2)\n```");
  assert.deepEqual(fenced.result, [2, 4, 6]);
  tab.close();
});

test("errors and syntax errors are results quoting the message and position", async () => {
  const tab = await connect(worker.host, "cm-errors");
  const thrown = await execute(tab, "throw new TypeError('nope')");
  assert.equal(thrown.status, "error");
  assert.equal(thrown.error, "TypeError: nope");
  const syntax = await execute(tab, "const a = 1;\nconst b = (a + ;\nreturn b");
  assert.equal(syntax.status, "error");
  assert.match(syntax.error, /^SyntaxError: Unexpected token ';' \(at line 2, column \d+\)$/);
  tab.close();
});

test("state.* writes are visible to the read tool, and tools.* calls run the agent's tools", async () => {
  const tab = await connect(worker.host, "cm-state");
  const out = await execute(
    tab,
    `await state.writeFile({ path: "/cm/a.txt", content: "alpha" });
     await state.appendFile({ path: "/cm/a.txt", content: "-beta" });
     await state.writeJson({ path: "/cm/c.json", value: { n: [1, { k: "v" }] } });
     const listed = await tools.list({ path: "/cm" });
     const q = await state.queryJson({ path: "/cm/c.json", query: "n[1].k" });
     const found = await codemode.search("json");
     const types = await codemode.describe("state.readFile");
     return { text: await state.readFile({ path: "/cm/a.txt" }), listed, q, total: found.total, types: types.types }`,
  );
  assert.equal(out.status, "completed", JSON.stringify(out));
  assert.equal(out.result.text, "alpha-beta");
  assert.equal(out.result.q, "v");
  assert.ok(out.result.total >= 3);
  assert.match(out.result.types, /function readFile\(input: \{/);
  assert.match(JSON.stringify(out.result.listed), /a\.txt/);
  model.push({ toolCalls: [{ id: "call_read_cm", name: "read", args: { path: "/cm/a.txt" } }] }, { text: "done" });
  const { id } = tab.chat("read it");
  await tab.turn(id);
  const read = tab.chunks(id).find((c) => c.type === "tool-output-available" && c.toolCallId === "call_read_cm");
  assert.match(JSON.stringify(read.output), /alpha-beta/);
  tab.close();
});

test("fetch from model code fails and no request leaves", async () => {
  let hits = 0;
  const listener = http.createServer((req, res) => {
    hits++;
    res.end("reached");
  });
  await new Promise((r) => listener.listen(0, "127.0.0.1", r));
  const { port } = listener.address();
  const tab = await connect(worker.host, "cm-net");
  const out = await execute(tab, `const r = await fetch("http://127.0.0.1:${port}/x"); return await r.text()`);
  assert.equal(out.status, "error");
  assert.match(out.error, /not permitted to access the internet/);
  const out2 = await execute(tab, `return typeof connect === "function" ? "connect exists" : "no connect"`);
  assert.equal(out2.status, "completed");
  await new Promise((r) => listener.close(r));
  assert.equal(hits, 0, "the listener received nothing");
  tab.close();
});
