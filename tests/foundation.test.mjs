// The foundation: the unmodified `agents` client talks to the Rust Durable Object in
// Miniflare (real workerd, SQLite, WebSockets), and the agent's real OpenAI provider talks to
// a scripted model server.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, getMessages, newId } from "./helpers/client.mjs";

let model;
let worker;

before(async () => {
  model = await startScriptedModel();
  worker = await startWorker({ vars: modelVars(model) });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

const types = (chunks) => chunks.map((c) => c.type);

test("connect sends the transcript, identity and MCP state", async () => {
  const tab = await connect(worker.host, "connect-frames");
  const msgs = await tab.waitFor((f) => f.type === "cf_agent_chat_messages");
  assert.deepEqual(msgs.messages, []);
  const identity = await tab.waitFor((f) => f.type === "cf_agent_identity");
  assert.equal(identity.name, "connect-frames");
  assert.equal(identity.agent, "think-agent");
  const mcp = await tab.waitFor((f) => f.type === "cf_agent_mcp_servers");
  assert.deepEqual(Object.keys(mcp.mcp).sort(), ["prompts", "resources", "servers", "tools"]);
  await tab.client.ready;
  assert.equal(tab.client.identified, true);
  tab.close();
});

test("a text turn streams UI message chunks, then persists and broadcasts the transcript", async () => {
  const tab = await connect(worker.host, "text-turn");
  model.push({ text: "Hello from the scripted model.", chunkSize: 6 });
  const { id, userMessage } = tab.chat("hi there");
  await tab.turn(id);
  const chunks = tab.chunks(id);
  assert.equal(chunks[0].type, "start");
  assert.match(chunks[0].messageId, /^[0-9a-f-]{36}$/);
  assert.deepEqual(types(chunks).filter((t) => t !== "text-delta"), ["start", "start-step", "text-start", "text-end", "finish-step", "finish"]);
  const text = chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join("");
  assert.equal(text, "Hello from the scripted model.");
  assert.ok(chunks.filter((c) => c.type === "text-delta").length >= 3, "the answer streams in several deltas");
  assert.equal(chunks.at(-1).finishReason, "stop");
  const done = tab.responses(id).at(-1);
  assert.deepEqual(done, { type: "cf_agent_use_chat_response", id, body: "", done: true, outcome: "completed", messageIds: [userMessage.id] });

  const after = await tab.waitFor((f) => f.type === "cf_agent_chat_messages" && f.messages.length === 2);
  assert.equal(after.messages[0].id, userMessage.id);
  assert.equal(after.messages[1].id, chunks[0].messageId);
  assert.equal(after.messages[1].role, "assistant");
  const textPart = after.messages[1].parts.find((p) => p.type === "text");
  assert.equal(textPart.text, "Hello from the scripted model.");
  assert.equal(textPart.state, "done");

  const http = await getMessages(worker.url, "text-turn");
  assert.deepEqual(http, after.messages);

  const seen = model.requests.at(-1);
  assert.equal(seen.stream, true);
  assert.equal(seen.model, "scripted");
  assert.equal(seen.__headers.authorization, "Bearer test-key");
  assert.deepEqual(seen.messages.at(-1), { role: "user", content: "hi there" });
  tab.close();
});

test("a two-step tool turn: the model calls a tool, sees its result, and answers", async () => {
  const tab = await connect(worker.host, "two-step");
  model.push(
    { text: "Let me save that.", toolCalls: [{ id: "call_save", name: "write", args: { path: "/todo.md", content: "- buy milk\n- call mum" } }] },
    { text: "Saved your list to /todo.md." },
  );
  const { id } = tab.chat("save my todo list");
  await tab.turn(id);
  const chunks = tab.chunks(id);
  assert.deepEqual(
    chunks.map((c) => c.type).filter((t) => !t.endsWith("-delta")),
    ["start", "start-step", "text-start", "text-end", "tool-input-start", "tool-input-available", "tool-output-available", "finish-step",
     "start-step", "text-start", "text-end", "finish-step", "finish"],
  );
  const available = chunks.find((c) => c.type === "tool-input-available");
  assert.deepEqual(available.input, { path: "/todo.md", content: "- buy milk\n- call mum" });
  const output = chunks.find((c) => c.type === "tool-output-available");
  assert.deepEqual(output.output, { path: "/todo.md", bytesWritten: 21, lines: 2 });
  const second = model.requests.at(-1);
  const call = second.messages.find((m) => m.role === "assistant" && m.tool_calls);
  assert.equal(call.tool_calls[0].id, "call_save");
  assert.equal(call.tool_calls[0].function.name, "write");
  const result = second.messages.find((m) => m.role === "tool");
  assert.equal(result.tool_call_id, "call_save");
  assert.deepEqual(JSON.parse(result.content), { path: "/todo.md", bytesWritten: 21, lines: 2 });
  const stored = await getMessages(worker.url, "two-step");
  const parts = stored[1].parts.map((p) => p.type);
  assert.deepEqual(parts, ["step-start", "text", "tool-write", "step-start", "text"]);
  assert.equal(stored[1].parts[2].state, "output-available");
  assert.equal(stored[1].parts[2].toolCallId, "call_save");
  tab.close();
});

test("two tabs see the same stream; the other tab gets the user message first", async () => {
  const a = await connect(worker.host, "two-tabs");
  const b = await connect(worker.host, "two-tabs");
  await a.waitFor((f) => f.type === "cf_agent_identity");
  await b.waitFor((f) => f.type === "cf_agent_identity");
  const before = b.frames.length;
  model.push({ text: "shared answer", delayMs: 20 });
  const { id } = a.chat("both of you");
  await a.turn(id);
  await b.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === id && f.done);
  assert.deepEqual(b.chunks(id), a.chunks(id));
  const bFrames = b.frames.slice(before);
  const firstMessages = bFrames.findIndex((f) => f.type === "cf_agent_chat_messages");
  const firstChunk = bFrames.findIndex((f) => f.type === "cf_agent_use_chat_response");
  assert.ok(firstMessages >= 0 && firstMessages < firstChunk, "the user message reaches the other tab before the stream");
  assert.equal(bFrames[firstMessages].messages.at(-1).parts[0].text, "both of you");
  a.close();
  b.close();
});

test("clear empties the transcript and tells the other tabs", async () => {
  const a = await connect(worker.host, "clear");
  const b = await connect(worker.host, "clear");
  model.push({ text: "to be cleared" });
  const { id } = a.chat("remember me");
  await a.turn(id);
  assert.equal((await getMessages(worker.url, "clear")).length, 2);
  await b.waitFor((f) => f.type === "cf_agent_identity");
  a.send({ type: "cf_agent_chat_clear" });
  await b.waitFor((f) => f.type === "cf_agent_chat_clear");
  assert.deepEqual(await getMessages(worker.url, "clear"), []);
  assert.equal(a.frames.filter((f) => f.type === "cf_agent_chat_clear").length, 0, "the sender is not echoed");
  a.close();
  b.close();
});

test("cancel stops the stream, persists the partial answer and sends done", async () => {
  const tab = await connect(worker.host, "cancel");
  model.push({ text: "partial words before the hang ", chunkSize: 5, hang: true });
  const { id } = tab.chat("start something long");
  await tab.waitFor((f) => f.id === id && f.body && f.body.includes("text-delta"));
  tab.send({ type: "cf_agent_chat_request_cancel", id });
  await tab.turn(id);
  const stored = await getMessages(worker.url, "cancel");
  assert.equal(stored.length, 2);
  const text = stored[1].parts.find((p) => p.type === "text");
  // How far the stream got before the cancel landed varies (one 5-byte chunk or more); what the
  // tab was shown is what the transcript keeps, and it is a non-empty prefix of the answer.
  const shown = tab.chunks(id).filter((c) => c.type === "text-delta").map((c) => c.delta).join("");
  assert.ok(shown.length > 0 && "partial words before the hang ".startsWith(shown), shown);
  assert.equal(text.text, shown, JSON.stringify(stored[1]));
  model.push({ text: "still works" });
  const next = tab.chat("again", { messages: stored });
  await tab.turn(next.id);
  assert.equal((await getMessages(worker.url, "cancel")).length, 4);
  tab.close();
});

test("the transcript survives a restart on the same persist directory", async () => {
  const tab = await connect(worker.host, "restart");
  model.push({ text: "kept across restarts" });
  const { id } = tab.chat("persist this");
  await tab.turn(id);
  tab.close();
  const before = await getMessages(worker.url, "restart");
  await worker.restart();
  const after = await getMessages(worker.url, "restart");
  assert.deepEqual(after, before);
  const again = await connect(worker.host, "restart");
  const msgs = await again.waitFor((f) => f.type === "cf_agent_chat_messages");
  assert.equal(msgs.messages.length, 2);
  const identity = await again.waitFor((f) => f.type === "cf_agent_identity");
  assert.equal(identity.name, "restart");
  again.close();
});

test("1,000 random and malformed frames are survived, then a turn works", async () => {
  const tab = await connect(worker.host, "fuzz");
  await tab.waitFor((f) => f.type === "cf_agent_identity");
  let seed = 42;
  const rand = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  const pick = (xs) => xs[Math.floor(rand() * xs.length)];
  const shapes = [
    () => "",
    () => "{",
    () => "null",
    () => "[1,2,3]",
    () => String(rand()),
    () => JSON.stringify({ type: pick(["cf_agent_use_chat_request", "rpc", "cf_agent_tool_result", "cf_agent_tool_approval", "x"]) }),
    () => JSON.stringify({ type: "cf_agent_use_chat_request", id: "f" + rand(), init: { method: "POST", body: "{not json" } }),
    () => JSON.stringify({ type: "cf_agent_use_chat_request", id: "g" + rand(), init: { method: "GET", body: "{}" } }),
    () => JSON.stringify({ type: "cf_agent_use_chat_request", id: "h" + rand(), init: { method: "POST", body: JSON.stringify({ messages: "nope" }) } }),
    () => JSON.stringify({ type: "cf_agent_use_chat_request", id: "i" + rand(), init: { method: "POST", body: JSON.stringify({ messages: [{ id: 1, role: "user", parts: 5 }] }) } }),
    () => JSON.stringify({ type: "rpc", id: "r" + rand(), method: 7, args: "x" }),
    () => JSON.stringify({ type: "rpc", id: "r" + rand(), method: "nope", args: [] }),
    () => JSON.stringify({ type: "cf_agent_tool_result", toolCallId: 5, output: { deep: [1, { a: null }] } }),
    () => JSON.stringify({ type: "cf_agent_stream_resume_ack", id: null }),
    () => JSON.stringify({ type: "cf_agent_chat_request_cancel", id: {} }),
    () => Array.from({ length: 50 }, () => String.fromCharCode(Math.floor(rand() * 0xffff))).join(""),
    () => "x".repeat(200000),
  ];
  // The client warns about rpc replies to ids it never sent; that noise is expected here.
  const warn = console.warn;
  console.warn = () => {};
  for (let i = 0; i < 1000; i++) tab.send(pick(shapes)());
  // A full round trip after the noise proves the object is still serving this socket.
  const probe = newId("probe");
  tab.send({ type: "rpc", id: probe, method: "definitelyMissing", args: [] });
  const reply = await tab.waitFor((f) => f.type === "rpc" && f.id === probe, { timeout: 30000 }).finally(() => {
    console.warn = warn;
  });
  assert.equal(reply.success, false);
  assert.match(reply.error, /does not exist/);
  const errors = tab.frames.filter((f) => f.type === "cf_agent_protocol_error" || (f.type === "rpc" && f.success === false));
  assert.ok(errors.length > 0, "malformed frames get error replies");
  model.push({ text: "alive" });
  const { id } = tab.chat("are you alive?");
  await tab.turn(id, { timeout: 30000 });
  assert.equal(tab.chunks(id).filter((c) => c.type === "text-delta").map((c) => c.delta).join(""), "alive");
  tab.close();
});

test("without a model configured each turn answers with an error naming the variables", async () => {
  const bare = await startWorker({ vars: {} });
  try {
    const tab = await connect(bare.host, "no-model");
    const { id } = tab.chat("hello?");
    const frames = await tab.turn(id);
    const err = frames.find((f) => f.error === true);
    assert.ok(err, JSON.stringify(frames));
    assert.match(err.body, /THINK_MODEL_BASE_URL/);
    assert.match(err.body, /THINK_MODEL\b/);
    assert.equal(frames.at(-1).done, true);
    // Still serving: a second turn gets the same clear answer.
    const second = tab.chat("again?");
    const again = await tab.turn(second.id);
    assert.ok(again.some((f) => f.error === true));
    tab.close();
  } finally {
    await bare.dispose();
  }
});

test("routing follows the agents rules", async () => {
  const unknown = await fetch(new URL("/agents/no-such-agent/x", worker.url));
  assert.equal(unknown.status, 400);
  assert.equal(await unknown.text(), "Invalid request");
  const other = await fetch(new URL("/somewhere/else", worker.url));
  assert.equal(other.status, 404);
  const msgs = await fetch(new URL("/agents/think-agent/fresh-one/get-messages", worker.url));
  assert.equal(msgs.status, 200);
  assert.deepEqual(await msgs.json(), []);
});
