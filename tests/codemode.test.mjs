// Code Mode over the real Worker Loader in Miniflare, driven by the scripted model: the
// `execute` tool runs model-written JavaScript in a fresh isolate per pass, with `state.*`,
// `tools.*` and `codemode.*` reaching back into the agent, and a durable journal that pauses
// for approval and replays on approve.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { lastMessage } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, getMessages, assertIdle } from "./helpers/client.mjs";
import { model, worker, useCodemodeWorker, execute, rpc, pausedRun, readFiles } from "./helpers/codemode.mjs";

useCodemodeWorker();

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

test("calls the code did not await finish before the run ends, and its summary lists them", async () => {
  const tab = await connect(worker.host, "cm-unawaited");
  const out = await execute(tab, `state.writeFile({ path: "/un/a.txt", content: "x".repeat(200000) }); state.appendFile({ path: "/un/b.txt", content: "y" }); return 1`);
  assert.equal(out.status, "completed", JSON.stringify(out));
  // The pass waits for the calls in flight before the host takes its result (and lets the
  // isolate go): both are in the run's summary, applied. Before, the summary had neither.
  assert.equal(out.calls?.count, 2, JSON.stringify(out));
  assert.match(out.calls.last[0], /^state\.writefile\(.*\) applied$/i);
  assert.match(out.calls.last[1], /^state\.appendfile\(.*\) applied$/i);
  const sizes = await execute(tab, `return [(await state.readFile({ path: "/un/a.txt" })).length, await state.readFile({ path: "/un/b.txt" })]`);
  assert.deepEqual(sizes.result, [200000, "y"]);
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

test("a busy loop ends as an error within the timeout, and other tabs are served meanwhile", async () => {
  const tab = await connect(worker.host, "cm-busy");
  const other = await connect(worker.host, "cm-busy-other");
  const started = Date.now();
  const run = execute(tab, "while (true) {}");
  await model.waitForRequests(model.requests.length + 1);
  await new Promise((r) => setTimeout(r, 300));
  // Another tab of another object, and an RPC to the busy object itself, answer while it spins.
  const t0 = Date.now();
  const files = await getMessages(worker.url, "cm-busy-other");
  assert.deepEqual(files, []);
  const pending = await rpc(tab, "pendingExecutions");
  const served = Date.now() - t0;
  assert.deepEqual(pending, []);
  assert.ok(served < 1000, `served in ${served} ms while the loop ran`);
  const out = await run;
  const took = Date.now() - started;
  assert.equal(out.status, "error");
  assert.equal(out.error, "Execution timed out after 3000 ms");
  assert.ok(took < 3000 + 4000, `ended after ${took} ms`);
  // A loop inside an async callback yields as well, and ends the same way.
  const inAsync = execute(tab, "await Promise.all([1, 2].map(async () => { while (true) {} }))");
  await new Promise((r) => setTimeout(r, 500));
  const t1 = Date.now();
  assert.deepEqual(await rpc(tab, "snippets"), []);
  assert.ok(Date.now() - t1 < 1000, "served while the async loops ran");
  assert.equal((await inAsync).error, "Execution timed out after 3000 ms");
  // A loop inside a nested synchronous function is stopped too.
  const nested = await execute(tab, "[1].forEach(() => { for (;;) {} })");
  assert.equal(nested.error, "Execution timed out after 3000 ms");
  tab.close();
  other.close();
});

const APPROVAL_CODE = `
  await state.appendFile({ path: "/ap/log", content: "a" });
  await state.appendFile({ path: "/ap/log", content: "b" });
  const edited = await tools.edit({ path: "/ap/f.txt", old_string: "v1", new_string: "v1+" });
  await state.appendFile({ path: "/ap/log", content: "c" });
  return edited;`;

test("approval pauses durably; after kill -9 approve runs the approved call once and the turn goes on", async () => {
  let tab = await connect(worker.host, "cm-approve");
  await execute(tab, `await state.writeFile({ path: "/ap/f.txt", content: "v1" })`);
  const paused = await pausedRun(tab, APPROVAL_CODE);
  const id = paused.executionId;
  assert.deepEqual(paused.pending, [{ executionId: id, seq: 2, connector: "tools", method: "edit", args: { path: "/ap/f.txt", old_string: "v1", new_string: "v1+" } }]);
  assert.deepEqual(await readFiles(tab, ["/ap/log", "/ap/f.txt"]), ["ab", "v1"]);
  tab.close();

  await worker.kill();
  tab = await connect(worker.host, "cm-approve");
  const other = await connect(worker.host, "cm-approve");
  const pending = await rpc(tab, "pendingExecutions", [id]);
  assert.equal(pending.length, 1);
  assert.equal(pending[0].method, "edit");
  const approvals = await rpc(tab, "pendingApprovals");
  assert.equal(approvals[0].source, "codemode");

  const before = model.requests.length;
  model.push({ text: "Approved and done." });
  const from = other.frames.length;
  const approved = await rpc(tab, "approveExecution", [id]);
  assert.equal(approved.status, "completed", JSON.stringify(approved));
  assert.deepEqual(approved.result, { path: "/ap/f.txt", replaced: true, lines: 1 });
  const updated = await other.waitFor((f) => f.type === "cf_agent_message_updated" && JSON.stringify(f.message).includes(id), { from });
  const part = updated.message.parts.find((p) => p.output?.executionId === id);
  assert.equal(part.output.status, "completed");
  // The turn continues with the model, which sees the completed output.
  await model.waitForRequests(before + 1, 20000);
  const toolMsg = model.requests.at(-1).messages.filter((m) => m.role === "tool").map((m) => m.content).find((c) => c.includes(id));
  assert.match(toolMsg, /"status":"completed"/);
  await tab.waitFor((f) => f.type === "cf_agent_chat_messages" && JSON.stringify(f.messages).includes("Approved and done."), { timeout: 20000 });
  // The edit ran exactly once and the appends before it were not repeated.
  assert.deepEqual(await readFiles(tab, ["/ap/log", "/ap/f.txt"]), ["abc", "v1+"]);
  const again = await rpc(tab, "approveExecution", [id]);
  assert.equal(again.status, "error");
  assert.match(again.error, /is not paused/);
  const history = await rpc(tab, "executions", [5]);
  const row = history.find((e) => e.id === id);
  assert.equal(row.status, "completed");
  assert.deepEqual(row.calls.map((c) => [c.method, c.state]), [["appendFile", "applied"], ["appendFile", "applied"], ["edit", "applied"], ["appendFile", "applied"]]);
  tab.close();
  other.close();
});

test("reject settles the run, replaces the paused output, and nothing runs", async () => {
  const tab = await connect(worker.host, "cm-reject");
  await execute(tab, `await state.writeFile({ path: "/rj/f.txt", content: "v1" })`);
  const paused = await pausedRun(tab, `await tools.delete({ path: "/rj/f.txt" }); return "deleted"`);
  model.push({ text: "Understood, not deleting." });
  const rejected = await rpc(tab, "rejectExecution", [paused.executionId, "keep it"]);
  assert.deepEqual(rejected, { status: "rejected", executionId: paused.executionId, reason: "keep it" });
  const updated = await tab.waitFor((f) => f.type === "cf_agent_message_updated" && JSON.stringify(f.message).includes("keep it"));
  assert.ok(updated);
  await tab.waitFor((f) => f.type === "cf_agent_chat_messages" && JSON.stringify(f.messages).includes("not deleting"), { timeout: 20000 });
  assert.deepEqual(await readFiles(tab, ["/rj/f.txt"]), ["v1"]);
  const again = await rpc(tab, "rejectExecution", [paused.executionId]);
  assert.equal(again.status, "error");
  tab.close();
});

test("reject with {autoContinue: false} records the rejection and starts no continuation", async () => {
  const tab = await connect(worker.host, "cm-reject-quiet");
  await execute(tab, `await state.writeFile({ path: "/rq/f.txt", content: "v1" })`);
  const paused = await pausedRun(tab, `await tools.delete({ path: "/rq/f.txt" }); return "deleted"`);
  const calls = model.requests.length;
  const bad = await rpc(tab, "rejectExecution", [paused.executionId, null, { autoContinue: "no" }]).catch((e) => e);
  assert.match(String(bad?.message ?? bad), /rejectExecution: the options must be \{autoContinue\?: boolean\}/);
  const rejected = await rpc(tab, "rejectExecution", [paused.executionId, null, { autoContinue: false }]);
  assert.deepEqual(rejected, { status: "rejected", executionId: paused.executionId, reason: "Rejected by user" });
  await tab.waitFor((f) => f.type === "cf_agent_message_updated" && JSON.stringify(f.message).includes("Rejected by user"));
  await assertIdle(tab, "no continuation runs");
  assert.equal(model.requests.length, calls, "the model was not called");
  assert.deepEqual(await readFiles(tab, ["/rq/f.txt"]), ["v1"]);
  // The model hears the rejection with the next message.
  model.push({ text: "Noted." });
  const { id } = tab.chat("what happened?");
  await tab.turn(id);
  assert.match(JSON.stringify(model.requests.at(-1).messages), /Rejected by user/);
  tab.close();
});

test("Promise.all with a paused call replays correctly after approval", async () => {
  const tab = await connect(worker.host, "cm-parallel");
  await execute(tab, `await state.writeFile({ path: "/pa/f.txt", content: "v1" })`);
  const paused = await pausedRun(
    tab,
    `const [a, e, c] = await Promise.all([
       state.appendFile({ path: "/pa/log", content: "A" }),
       tools.edit({ path: "/pa/f.txt", old_string: "v1", new_string: "v1+" }),
       state.appendFile({ path: "/pa/log", content: "C" }),
     ]);
     return await state.readFile({ path: "/pa/log" });`,
  );
  model.push({ text: "Parallel run done." });
  const done = await rpc(tab, "approveExecution", [paused.executionId]);
  assert.equal(done.status, "completed", JSON.stringify(done));
  assert.equal(done.result.length, 2, "each append ran once");
  assert.deepEqual([...done.result].sort(), ["A", "C"]);
  await tab.waitFor((f) => f.type === "cf_agent_chat_messages" && JSON.stringify(f.messages).includes("Parallel run done."), { timeout: 20000 });
  assert.deepEqual(await readFiles(tab, ["/pa/f.txt"]), ["v1+"]);
  tab.close();
});

test("a replay whose calls changed fails with a divergence naming the step", async () => {
  const tab = await connect(worker.host, "cm-diverge");
  await execute(tab, `await state.writeFile({ path: "/dv/in", content: "first" }); await state.writeFile({ path: "/dv/x", content: "x" })`);
  const paused = await pausedRun(
    tab,
    `const v = await state.readFile({ path: "/dv/in" });
     await state.writeFile({ path: "/dv/out", content: v });
     await tools.delete({ path: "/dv/x" });
     return "ok"`,
  );
  await execute(tab, `await state.writeFile({ path: "/dv/in", content: "second" })`);
  model.push({ text: "ok" });
  const out = await rpc(tab, "approveExecution", [paused.executionId]);
  assert.equal(out.status, "error");
  assert.match(out.error, /^Codemode replay divergence at step 1: the journal has state\.writeFile/);
  assert.deepEqual(await readFiles(tab, ["/dv/out", "/dv/x"]), ["first", "x"]);
  tab.close();
});

test("snippets are saved from an execution and run with codemode.run", async () => {
  const tab = await connect(worker.host, "cm-snippets");
  const first = await execute(tab, `return (typeof input === "undefined" ? 1 : input.n) * 2`);
  assert.equal(first.result, 2);
  const inputSchema = { type: "object", properties: { n: { type: "number" } }, required: ["n"] };
  const saved = await rpc(tab, "saveSnippet", ["double", { executionId: first.executionId, description: "Doubles n", inputSchema }]);
  assert.equal(saved.name, "double");
  assert.deepEqual((await rpc(tab, "snippets")).map((s) => s.name), ["double"]);
  const ran = await execute(tab, `return await codemode.run("double", { n: 21 })`);
  assert.equal(ran.result, 42, JSON.stringify(ran));
  const invalid = await execute(tab, `return await codemode.run("double", { n: "x" })`);
  assert.equal(invalid.status, "error");
  assert.match(invalid.error, /^codemode\.run\("double"\): invalid input: \/n/);
  assert.equal(await rpc(tab, "deleteSnippet", ["double"]), true);
  const gone = await execute(tab, `return await codemode.run("double", { n: 1 })`);
  assert.equal(gone.status, "error");
  assert.match(gone.error, /no snippet named "double"/);
  tab.close();
});

test("at most 10 executions run at once; the others wait", async () => {
  const tab = await connect(worker.host, "cm-many");
  const calls = Array.from({ length: 12 }, (_, i) => ({
    id: `call_many_${i}`,
    name: "execute",
    args: { code: `const start = Date.now(); await new Promise((r) => setTimeout(r, 400)); return [start, Date.now()]` },
  }));
  model.push({ toolCalls: calls }, { text: "all done" });
  const { id } = tab.chat("run many");
  await tab.turn(id, { timeout: 30000 });
  const outs = tab.chunks(id).filter((c) => c.type === "tool-output-available" && c.toolCallId.startsWith("call_many_")).map((c) => c.output);
  assert.equal(outs.length, 12);
  assert.ok(outs.every((o) => o.status === "completed"), JSON.stringify(outs));
  const spans = outs.map((o) => o.result);
  const maxOverlap = Math.max(...spans.map(([s]) => spans.filter(([s2, e2]) => s2 <= s && s < e2).length));
  assert.equal(maxOverlap, 10, `at most 10 at once: ${JSON.stringify(spans)}`);
  tab.close();
});

test("code over 1 MB is refused before it runs; THINK_EXECUTE=false removes the tool", async () => {
  const tab = await connect(worker.host, "cm-caps");
  const big = await execute(tab, `return "${"x".repeat(1_000_100)}".length`);
  assert.equal(big.status, "error");
  assert.match(big.error, /over the 1 MB limit; nothing ran/);
  const large = await execute(tab, `return "y".repeat(30000)`);
  assert.equal(large.status, "completed");
  assert.ok(large.result.length < 24200 && large.result.includes("[truncated"), large.result.length);
  tab.close();
  const off = await startWorker({ vars: modelVars(model, { THINK_EXECUTE: "false" }) });
  try {
    const t = await connect(off.host, "cm-off");
    model.push({ text: "hello" });
    const { id } = t.chat("hi");
    await t.turn(id);
    assert.ok(!model.requests.at(-1).tools.some((x) => x.function.name === "execute"));
    t.close();
  } finally {
    await off.dispose();
  }
});

test("hashes, gzip, tar and edit plans run in the wasm build over the workspace", async () => {
  const tab = await connect(worker.host, "cm-archive");
  const out = await execute(
    tab,
    `await state.writeFile({ path: "/ar/a.txt", content: "abc" });
     await state.writeFile({ path: "/ar/d/b.txt", content: "x".repeat(5000) });
     const md5 = await state.hashFile({ path: "/ar/a.txt", algorithm: "md5" });
     const sha1 = await state.hashFile({ path: "/ar/a.txt", algorithm: "sha1" });
     const gz = await state.compressFile({ path: "/ar/d/b.txt" });
     await state.decompressFile({ path: "/ar/d/b.txt.gz", destination: "/ar/back.txt" });
     const tar = await state.createArchive({ path: "/ar.tar", sources: ["/ar/d"] });
     await state.extractArchive({ path: "/ar.tar", destination: "/ex" });
     const plan = await state.planEdits({ instructions: [{ kind: "replace", path: "/ar/a.txt", search: "B", replacement: "-", options: { caseSensitive: false } }] });
     await state.applyEditPlan({ plan });
     const hits = await state.searchFiles({ pattern: "/ex/**", query: "x{3}", options: { regex: true, maxMatches: 1 } });
     return { md5, sha1, gz: gz.bytesWritten, entries: (await state.listArchive({ path: "/ar.tar" })).map((e) => e.path), hits: hits.map((h) => h.path) }`,
  );
  assert.equal(out.status, "completed", JSON.stringify(out));
  assert.equal(out.result.md5, "900150983cd24fb0d6963f7d28e17f72");
  assert.equal(out.result.sha1, "a9993e364706816aba3e25717850c26c9cd0d89d");
  assert.ok(out.result.gz < 200, JSON.stringify(out.result));
  assert.deepEqual(out.result.entries, ["ar/d", "ar/d/b.txt", "ar/d/b.txt.gz"]);
  assert.deepEqual(out.result.hits, ["/ex/ar/d/b.txt"], "the .gz has no run of x");
  assert.deepEqual(await readFiles(tab, ["/ar/a.txt", "/ar/back.txt", "/ex/ar/d/b.txt"]), ["a-c", "x".repeat(5000), "x".repeat(5000)]);
  tab.close();
});

test("walkTree and summarizeTree take a tree as deep as paths allow without a crash", async () => {
  const tab = await connect(worker.host, "cm-deep");
  const deepest = (depth) => `"/d".repeat(${depth}) + "/f.txt"`;
  // 600 levels: the nested result fits the 1 MB limit for recorded values.
  const walked = await execute(
    tab,
    `await state.writeFile({ path: ${deepest(600)}, content: "x" });
     let t = await state.walkTree({ path: "/" }); let levels = 0;
     while (t.children && t.children.length) { t = t.children[0]; levels++; }
     return { levels, leaf: t.name, summary: await state.summarizeTree({ path: "/" }) }`,
  );
  assert.equal(walked.status, "completed", JSON.stringify(walked).slice(0, 300));
  assert.deepEqual(walked.result, { levels: 601, leaf: "f.txt", summary: { files: 1, directories: 601, symlinks: 0, totalBytes: 1, maxDepth: 601 } });
  // 2,000 levels (a path of 4,006 characters): the summary is small, the tree is over the limit.
  const deep = await execute(
    tab,
    `await state.writeFile({ path: "/e" + ${deepest(1999)}, content: "xy" });
     const summary = await state.summarizeTree({ path: "/e" });
     let tree; try { await state.walkTree({ path: "/e" }) } catch (e) { tree = String(e.message) }
     return { summary, tree }`,
    // This turn took 15-19 s on a quiet 2-core machine and timed out at 20 s in a loaded CI run.
    { timeout: 90000 },
  );
  assert.equal(deep.status, "error", JSON.stringify(deep).slice(0, 300));
  assert.match(deep.error, /The result of state\.walkTree is \d+ bytes, over the 1 MB limit/);
  const summary = await execute(tab, `return await state.summarizeTree({ path: "/e" })`);
  assert.deepEqual(summary.result, { files: 1, directories: 2000, symlinks: 0, totalBytes: 2, maxDepth: 2000 });
  tab.close();
});

test("a result nested deeper than 127 levels is an error naming the limit, not a null; one at the limit stays in the transcript", async () => {
  const tab = await connect(worker.host, "cm-deep-result");
  const nested = (depth) => `let v = 1; for (let i = 0; i < ${depth}; i++) v = [v]; return v`;
  const text = (depth) => "[".repeat(depth) + "1" + "]".repeat(depth);
  const ok = await execute(tab, nested(127));
  assert.equal(ok.status, "completed", JSON.stringify(ok).slice(0, 300));
  assert.equal(JSON.stringify(ok.result), text(127));
  // Stored inside its message, the result nests deeper than serde_json's limit: the
  // transcript still reads it back whole.
  const messages = await getMessages(worker.url, "cm-deep-result");
  const outputs = messages.flatMap((m) => m.parts).filter((p) => p.type === "tool-execute" && p.output);
  assert.ok(outputs.some((p) => JSON.stringify(p.output.result) === text(127)), "the message with the deep result is kept");
  // A client sends the transcript back with its next message, as useAgentChat does.
  model.push({ text: "seen it" });
  const next = tab.chat("and now?", { messages });
  const chunks = await tab.turn(next.id);
  assert.ok(!chunks.some((f) => f.error), JSON.stringify(chunks.filter((f) => f.error)).slice(0, 300));
  const said = tab.chunks(next.id).filter((c) => c.type === "text-delta").map((c) => c.delta).join("");
  assert.equal(said, "seen it", "the turn ran");
  const deep = await execute(tab, nested(128));
  assert.equal(deep.status, "error", JSON.stringify(deep).slice(0, 300));
  assert.match(deep.error, /^The result could not be returned \(recursion limit exceeded.*\): values nest at most 127 levels deep$/);
  tab.close();
});
