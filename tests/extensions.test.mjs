// Extensions end to end: the Rust agent in Miniflare with the real Worker Loader, driven by
// the scripted model over the real `agents` client. The model loads extensions with
// `load_extension`, the next turn offers their tools, and each call runs the source in a
// sandboxed isolate whose `host` and network the host checks. Network tests need a listener
// on 127.0.0.1 and must never reach anything else, so this file runs itself inside a network
// namespace that has loopback only (`unshare --net`, then `ip link set lo up`), as
// netfilter.test.mjs does.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import os from "node:os";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { INSIDE_NETNS, runInNetns } from "./helpers/netns.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs } from "./helpers/client.mjs";


const MATH = `({
  tools: {
    add: {
      description: "Add two numbers",
      parameters: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
      execute: async ({ a, b }) => a + b,
    },
  },
})`;

const CALC = `({ tools: { mul: { description: "Multiply", parameters: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"], execute: async ({ a, b }) => a * b } } })`;

const READER = `({
  tools: {
    read: { description: "Read a file", parameters: { path: { type: "string" } }, required: ["path"],
      execute: async ({ path }, host) => host.readFile(path) },
    write: { description: "Write a file", parameters: { path: { type: "string" } }, required: ["path"],
      execute: async ({ path }, host) => { await host.writeFile(path, "pwned"); return "written"; } },
    fetch: { description: "Fetch a URL", parameters: { url: { type: "string" } }, required: ["url"],
      execute: async ({ url }) => (await fetch(url)).text() },
  },
})`;

const WEB = `({
  tools: {
    get: { description: "GET a URL", parameters: { url: { type: "string" } }, required: ["url"],
      execute: async ({ url }) => { const r = await fetch(url); return { status: r.status, text: await r.text() }; } },
  },
})`;

const BAD = `({
  tools: {
    spin: { description: "Loops forever", parameters: {}, execute: async () => { let n = 0; while (true) { n++; } } },
    huge: { description: "A 2 MB result", parameters: {}, execute: async () => "x".repeat(2000000) },
    boom: { description: "Throws", parameters: {}, execute: async () => { throw new TypeError("boom"); } },
  },
})`;

const AUDIT = `({
  hooks: {
    afterToolCall: async (c, host) => { await host.setContext("audit_calls", c.toolName + ":" + c.success + ":" + JSON.stringify(c.output)); },
    onStepFinish: async (c, host) => { await host.setContext("audit_steps", "step " + c.stepNumber); },
    beforeTurn: async () => { while (true) {} },
  },
})`;

const MEMO = `({
  tools: {
    remember: { description: "Remember a fact", parameters: { fact: { type: "string" } }, required: ["fact"],
      execute: async ({ fact }, host) => host.setContext("memo_notes", fact) },
  },
  hooks: {
    beforeTurn: async (ctx) => ({ system: ctx.system + "\\nHOOKED BY MEMO", activeTools: ctx.toolNames.filter((n) => n !== "bash") }),
  },
})`;

// Module state that lives as long as the extension's isolate: a count of its calls.
const COUNTER = `(() => {
  let calls = 0;
  return {
    tools: {
      count: { description: "Counts its calls", parameters: {}, execute: async () => ++calls },
      write: { description: "Writes a file", parameters: {}, execute: async (_, host) => { await host.writeFile("/counted.txt", String(calls)); return "written"; } },
      spin: { description: "Loops forever", parameters: {}, execute: async () => { calls += 100; while (true) {} } },
    },
  };
})()`;

if (!INSIDE_NETNS) {
  runInNetns(import.meta.url, "the extension tests pass inside a loopback-only network namespace");
} else {
  let model;
  let worker;
  let plain;
  let listener;
  let listenerUrl;
  let seq = 0;

  before(async () => {
    assert.deepEqual(Object.keys(os.networkInterfaces()), ["lo"], "not in a loopback-only namespace");
    listener = http.createServer((req, res) => {
      const port = listener.address().port;
      // Redirects to a listed and to an unlisted spelling of this listener.
      if (req.url === "/to-listed") return res.writeHead(302, { location: `http://127.0.0.1:${port}/landed` }).end();
      if (req.url === "/to-unlisted") return res.writeHead(302, { location: `http://localhost:${port}/landed` }).end();
      res.end(`hello from the listener ${req.url}`);
    });
    await new Promise((r) => listener.listen(0, "127.0.0.1", r));
    listenerUrl = `http://127.0.0.1:${listener.address().port}`;
    model = await startScriptedModel();
    const extensions = JSON.stringify({ toolTimeout: 3000, hookTimeout: 1000, extensions: [{ manifest: { name: "calc", version: "1.0.0" }, source: CALC }] });
    // One after the other, so each one's workerd pid is known (worker.kill() needs it).
    worker = await startWorker({
      vars: modelVars(model, { THINK_EXTENSIONS: extensions, THINK_ALLOW_PRIVATE_NETWORK: "true" }),
      withCaller: true,
    });
    plain = await startWorker({ vars: modelVars(model) });
  });

  after(async () => {
    closeTabs();
    await worker?.dispose();
    await plain?.dispose();
    await model?.close();
    await new Promise((r) => listener?.close(r));
  });

  /** One turn: the model calls `name` with `args`, then says "ok". Returns the call's output chunk. */
  async function call(tab, name, args) {
    const id = `call_${name}_${seq++}`;
    model.push({ toolCalls: [{ id, name, args }] }, { text: "ok" });
    const { id: requestId } = tab.chat(`please ${name}`);
    await tab.turn(requestId, { timeout: 30000 });
    const chunks = tab.chunks(requestId);
    const ends = ["tool-output-available", "tool-output-error", "tool-input-error"];
    const out = chunks.find((c) => ends.includes(c.type) && c.toolCallId === id);
    assert.ok(out, `no output for ${id}: ${JSON.stringify(chunks.filter((c) => c.toolCallId === id))}`);
    return out;
  }

  /** A callable over the `rpc` frame, through the `agents` client's own `call`. */
  const rpc = (tab, method, args = []) => tab.client.call(method, args);

  const toolsSeen = (request) => request.tools.map((t) => t.function);
  const systemOf = (request) => request.messages.find((m) => m.role === "system")?.content ?? "";

  test("the model loads math; the next turn offers math_add, which returns the sum", async () => {
    const tab = await connect(worker.host, "ext-math");
    const before = model.requests.length;
    const loaded = await call(tab, "load_extension", { name: "math", version: "1.0.0", description: "Arithmetic", source: MATH });
    assert.equal(loaded.type, "tool-output-available", JSON.stringify(loaded));
    assert.deepEqual(loaded.output, {
      loaded: true,
      name: "math",
      prefix: "math",
      version: "1.0.0",
      tools: ["math_add"],
      message: 'Extension "math" loaded. On the NEXT message turn, call these tools by their full name: math_add.',
    });
    // Within the loading turn the tool is not offered yet.
    assert.ok(!toolsSeen(model.requests.at(-1)).some((f) => f.name === "math_add"));
    assert.ok(model.requests.length > before);

    const sum = await call(tab, "math_add", { a: 2, b: 3 });
    assert.equal(sum.type, "tool-output-available", JSON.stringify(sum));
    assert.equal(sum.output, 5);
    const def = toolsSeen(model.requests.at(-2)).find((f) => f.name === "math_add");
    assert.equal(def.description, "[math] Add two numbers");
    assert.deepEqual(def.parameters.required, ["a", "b"]);
    // The host validates the input like every tool's.
    const invalid = await call(tab, "math_add", { a: "two" });
    assert.equal(invalid.type, "tool-input-error", JSON.stringify(invalid));

    const twice = await call(tab, "load_extension", { name: "math", version: "1.0.1", source: MATH });
    assert.equal(twice.type, "tool-output-error");
    assert.match(twice.errorText, /Extension "math" is already loaded\. Unload it first\./);

    const listed = await call(tab, "list_extensions", {});
    assert.equal(listed.output.count, 2);
    assert.deepEqual(listed.output.extensions.map((e) => [e.name, e.tools]), [["calc", ["calc_mul"]], ["math", ["math_add"]]]);
    assert.equal(listed.output.extensions[1].description, "Arithmetic");
    assert.deepEqual(listed.output.extensions[1].permissions, { workspace: "none", messages: "none" });
    tab.close();
  });

  test("a static extension from THINK_EXTENSIONS is offered from the first turn and cannot be unloaded", async () => {
    const tab = await connect(worker.host, "ext-static");
    const product = await call(tab, "calc_mul", { a: 6, b: 7 });
    assert.equal(product.output, 42);
    await assert.rejects(rpc(tab, "unloadExtension", ["calc"]), /part of the agent's configuration/);
    tab.close();
  });

  test("a loaded extension survives kill -9 and unloading removes it (rpc and DO RPC)", async () => {
    let tab = await connect(worker.host, "ext-restart");
    const loaded = await call(tab, "load_extension", { name: "math", version: "1.0.0", source: MATH });
    assert.equal(loaded.output.loaded, true);
    tab.close();
    closeTabs();
    await worker.kill();
    tab = await connect(worker.host, "ext-restart");
    const sum = await call(tab, "math_add", { a: 40, b: 2 });
    assert.equal(sum.output, 42, JSON.stringify(sum));
    assert.ok(toolsSeen(model.requests.at(-2)).some((f) => f.name === "math_add"), "offered after the restart");

    const viaDo = await worker.caller("/call?name=ext-restart", { method: "listExtensions" });
    assert.deepEqual(viaDo.map((e) => [e.name, e.static]), [["calc", true], ["math", false]]);
    assert.deepEqual(viaDo[1].tools, ["math_add"]);
    const unloaded = await worker.caller("/call?name=ext-restart", { method: "unloadExtension", args: ["math"] });
    assert.deepEqual(unloaded, { unloaded: true, name: "math", tools: ["math_add"], contextLabels: [] });
    await assert.rejects(rpc(tab, "unloadExtension", ["math"]), /Extension "math" is not loaded/);
    const after = await call(tab, "math_add", { a: 1, b: 1 });
    assert.notEqual(after.type, "tool-output-available");
    assert.ok(!toolsSeen(model.requests.at(-2)).some((f) => f.name === "math_add"), "not offered after unload");
    const listed = await worker.caller("/call?name=ext-restart", { method: "listExtensions" });
    assert.deepEqual(listed.map((e) => e.name), ["calc"]);
    tab.close();
    closeTabs();
    await worker.kill();
    tab = await connect(worker.host, "ext-restart");
    assert.deepEqual((await rpc(tab, "listExtensions")).map((e) => e.name), ["calc"], "its stored copy is gone");
    tab.close();
  });

  test("a workspace-read extension reads a file, is refused a write, and has no network", async () => {
    const tab = await connect(worker.host, "ext-reader");
    const wrote = await call(tab, "write", { path: "/data.txt", content: "forty-two" });
    assert.equal(wrote.type, "tool-output-available");
    const loaded = await call(tab, "load_extension", { name: "reader", version: "1", source: READER, workspace_access: "read" });
    assert.equal(loaded.type, "tool-output-available", "read access needs no approval");
    assert.deepEqual(loaded.output.tools, ["reader_read", "reader_write", "reader_fetch"]);
    const read = await call(tab, "reader_read", { path: "/data.txt" });
    assert.equal(read.output, "forty-two");
    const write = await call(tab, "reader_write", { path: "/pwned.txt" });
    assert.equal(write.type, "tool-output-error");
    assert.match(write.errorText, /Permission denied: host\.writeFile needs workspace "read-write" permission; this extension has "read"/);
    const check = await call(tab, "reader_read", { path: "/pwned.txt" });
    assert.equal(check.output, null, "nothing was written");
    const net = await call(tab, "reader_fetch", { url: listenerUrl });
    assert.equal(net.type, "tool-output-error", JSON.stringify(net));
    assert.doesNotMatch(net.errorText, /hello from the listener/);
    tab.close();
  });

  test("a network load waits for approval; the listed host is reached and an unlisted one refused", async () => {
    const tab = await connect(worker.host, "ext-web");
    const id = `call_web_${seq++}`;
    const args = { name: "web", version: "1", source: WEB, network: ["127.0.0.1"] };
    model.push({ toolCalls: [{ id, name: "load_extension", args }] });
    const { id: requestId } = tab.chat("load web");
    await tab.turn(requestId);
    const chunks = tab.chunks(requestId);
    const request = chunks.find((c) => c.type === "tool-approval-request");
    assert.equal(request?.toolCallId, id, JSON.stringify(chunks));
    assert.ok(!chunks.some((c) => c.type === "tool-output-available"), "not loaded before the approval");
    const input = chunks.find((c) => c.type === "tool-input-available" && c.toolCallId === id);
    assert.deepEqual(input.input.network, ["127.0.0.1"], "the approval shows the requested hosts");
    assert.deepEqual((await rpc(tab, "listExtensions")).map((e) => e.name), ["calc"]);

    model.push({ text: "loaded" });
    tab.send({ type: "cf_agent_tool_approval", toolCallId: id, approved: true, autoContinue: true });
    const cont = await tab.followContinuation();
    const out = cont.chunks.find((c) => c.type === "tool-output-available" && c.toolCallId === id);
    assert.equal(out?.output.loaded, true, JSON.stringify(cont.chunks));

    const reached = await call(tab, "web_get", { url: `${listenerUrl}/hi` });
    assert.deepEqual(reached.output, { status: 200, text: "hello from the listener /hi" });
    const unlisted = await call(tab, "web_get", { url: `http://localhost:${listener.address().port}/` });
    assert.equal(unlisted.type, "tool-output-error");
    assert.match(unlisted.errorText, /network access to localhost is refused: this extension may reach only 127\.0\.0\.1/);
    const other = await call(tab, "web_get", { url: "http://example.com/" });
    assert.match(other.errorText, /network access to example\.com is refused/);
    // Each redirect hop comes back through the gateway.
    const followed = await call(tab, "web_get", { url: `${listenerUrl}/to-listed` });
    assert.deepEqual(followed.output, { status: 200, text: "hello from the listener /landed" });
    const escaped = await call(tab, "web_get", { url: `${listenerUrl}/to-unlisted` });
    assert.equal(escaped.type, "tool-output-error", JSON.stringify(escaped));
    assert.match(escaped.errorText, /network access to localhost is refused/);
    tab.close();
  });

  test("without the app's opt-in a listed loopback host is refused", async () => {
    const tab = await connect(plain.host, "ext-plain");
    const info = await rpc(tab, "loadExtension", [{ name: "web", version: "1", permissions: { network: ["127.0.0.1"] } }, WEB]);
    assert.deepEqual(info.tools, ["web_get"]);
    const refused = await call(tab, "web_get", { url: `${listenerUrl}/` });
    assert.equal(refused.type, "tool-output-error");
    assert.match(refused.errorText, /127\.0\.0\.1 is a loopback address.*THINK_ALLOW_PRIVATE_NETWORK=true/);
    tab.close();
  });

  test("a busy loop, a huge result and a throw are tool errors, and the agent keeps working", async () => {
    const tab = await connect(worker.host, "ext-bad");
    await rpc(tab, "loadExtension", [{ name: "bad", version: "1" }, BAD]);
    const started = Date.now();
    const spin = await call(tab, "bad_spin", {});
    assert.equal(spin.type, "tool-output-error");
    assert.match(spin.errorText, /timed out after 3000 ms/);
    assert.ok(Date.now() - started < 20000);
    const huge = await call(tab, "bad_huge", {});
    assert.equal(huge.type, "tool-output-error");
    assert.match(huge.errorText, /over the limit of 1000000/);
    const boom = await call(tab, "bad_boom", {});
    assert.match(boom.errorText, /TypeError: boom/);
    const fine = await call(tab, "calc_mul", { a: 2, b: 2 });
    assert.equal(fine.output, 4);
    await assert.rejects(rpc(tab, "loadExtension", [{ name: "broken", version: "1" }, "({ tools: { x: "]), /Invalid extension source/);
    tab.close();
  });

  test("an extension's calls share its isolate; a timeout, a reload or another instance gets a fresh one", async () => {
    const tab = await connect(worker.host, "ext-counter");
    const manifest = { name: "counter", version: "1", permissions: { workspace: "read" } };
    await rpc(tab, "loadExtension", [manifest, COUNTER]);
    const count = async () => {
      const out = await call(tab, "counter_count", {});
      assert.equal(out.type, "tool-output-available", JSON.stringify(out));
      return out.output;
    };
    assert.equal(await count(), 1);
    assert.equal(await count(), 2, "the second call sees the module state the first left");
    // The warm isolate has the same permissions: a write is refused by the host.
    const write = await call(tab, "counter_write", {});
    assert.equal(write.type, "tool-output-error");
    assert.match(write.errorText, /Permission denied: host\.writeFile needs workspace "read-write"/);
    assert.equal(await count(), 3);
    // A call that timed out ends its isolate: the next one starts from a fresh module.
    const spin = await call(tab, "counter_spin", {});
    assert.match(spin.errorText, /timed out after 3000 ms/);
    assert.equal(await count(), 1, "not 104: the timed-out isolate is not entered again");
    // Loaded again, even with the same source, it gets a fresh isolate.
    await rpc(tab, "unloadExtension", ["counter"]);
    await rpc(tab, "loadExtension", [manifest, COUNTER]);
    assert.equal(await count(), 1);
    assert.equal(await count(), 2);
    // Another agent instance with the same extension has an isolate of its own.
    const other = await connect(worker.host, "ext-counter-2");
    await rpc(other, "loadExtension", [manifest, COUNTER]);
    const elsewhere = await call(other, "counter_count", {});
    assert.equal(elsewhere.output, 1);
    assert.equal(await count(), 3);
    other.close();
    tab.close();
  });

  test("a context block shows in the next turn's system prompt; beforeTurn changes the prompt and tools", async () => {
    const tab = await connect(worker.host, "ext-memo");
    const manifest = {
      name: "memo",
      version: "1",
      permissions: { context: { write: "own" } },
      context: [{ label: "notes", type: "writable", description: "Things to remember" }],
    };
    const info = await rpc(tab, "loadExtension", [manifest, MEMO]);
    assert.deepEqual(info.contextLabels, ["memo_notes"]);
    assert.deepEqual(info.hooks, ["beforeTurn"]);
    const saved = await call(tab, "memo_remember", { fact: "the sky is green" });
    assert.equal(saved.type, "tool-output-available", JSON.stringify(saved));
    const first = model.requests.at(-2);
    assert.match(systemOf(first), /MEMO_NOTES \(Things to remember\)/, "registered at load, not after a restart");
    assert.match(systemOf(first), /HOOKED BY MEMO/);
    assert.ok(!toolsSeen(first).some((f) => f.name === "bash"), "beforeTurn narrowed the tools");
    await call(tab, "calc_mul", { a: 1, b: 1 });
    assert.match(systemOf(model.requests.at(-2)), /MEMO_NOTES[^\n]*\n[^\n]*\nthe sky is green/);
    await rpc(tab, "unloadExtension", ["memo"]);
    await call(tab, "calc_mul", { a: 1, b: 1 });
    assert.doesNotMatch(systemOf(model.requests.at(-2)), /MEMO_NOTES|HOOKED/);
    tab.close();
  });

  test("tool-call and step hooks observe with their host; a looping hook is cut at its limit", async () => {
    const tab = await connect(worker.host, "ext-audit");
    const manifest = {
      name: "audit",
      version: "1",
      permissions: { context: { write: "own" } },
      context: [{ label: "calls", type: "writable" }, { label: "steps", type: "writable" }],
    };
    const info = await rpc(tab, "loadExtension", [manifest, AUDIT]);
    assert.deepEqual(info.hooks, ["afterToolCall", "onStepFinish", "beforeTurn"]);
    const started = Date.now();
    const product = await call(tab, "calc_mul", { a: 3, b: 5 });
    assert.equal(product.output, 15, "the turn went on past the looping beforeTurn");
    assert.ok(Date.now() - started < 15000);
    const blocks = async () => Object.fromEntries((await rpc(tab, "getContext")).map((b) => [b.label, b.content]));
    assert.equal((await blocks()).audit_calls, "calc_mul:true:15");
    for (let i = 0; i < 50 && !(await blocks()).audit_steps; i++) await new Promise((r) => setTimeout(r, 100));
    assert.match((await blocks()).audit_steps, /^step [12]$/);
    tab.close();
  });
}
