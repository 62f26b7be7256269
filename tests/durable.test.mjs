// Durable turns over the real `agents` client: the resume handshake (reconnect mid-stream,
// a second tab joining), message concurrency policies, and `chat()` over Durable Object RPC
// from another Worker.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, getMessages, newId, assertIdle } from "./helpers/client.mjs";

let model;
let worker;

before(async () => {
  model = await startScriptedModel();
  worker = await startWorker({ vars: modelVars(model), withCaller: true });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

const SLOW = "one two three four five six seven eight nine ten eleven twelve";
const textOf = (chunks) => chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join("");

/** Resumes as useAgentChat does on mount: probe, ACK a resuming answer, collect to done. */
async function resume(tab, { from = 0 } = {}) {
  const probeId = newId("probe");
  tab.send({ type: "cf_agent_stream_resume_request", probeId });
  const answer = await tab.waitFor(
    (f) => (f.type === "cf_agent_stream_resuming" || f.type === "cf_agent_stream_resume_none") && (f.probeId === probeId || f.probeId === undefined),
    { from },
  );
  if (answer.type === "cf_agent_stream_resume_none") return { none: answer };
  tab.send({ type: "cf_agent_stream_resume_ack", id: answer.id });
  await tab.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === answer.id && f.done, { from });
  const frames = tab.responses(answer.id);
  const chunks = frames.filter((f) => f.body?.trim() && !f.error).map((f) => JSON.parse(f.body));
  return { id: answer.id, frames, chunks };
}

test("resume_none when idle, with the probe id echoed", async () => {
  const tab = await connect(worker.host, "idle");
  await tab.waitFor((f) => f.type === "cf_agent_identity");
  tab.send({ type: "cf_agent_stream_resume_request", probeId: "p-idle" });
  const none = await tab.waitFor((f) => f.type === "cf_agent_stream_resume_none");
  assert.deepEqual(none, { type: "cf_agent_stream_resume_none", reason: "idle", probeId: "p-idle" });
  tab.close();
});

test("a tab that reconnects mid-stream is told to resume and receives the whole answer", async () => {
  const first = await connect(worker.host, "reconnect");
  model.push({ text: SLOW, chunkSize: 4, delayMs: 40 });
  const { id } = first.chat("tell me a long story");
  await first.waitFor((f) => f.id === id && f.body?.includes("text-delta"));
  first.close();
  const again = await connect(worker.host, "reconnect");
  const resuming = await again.waitFor((f) => f.type === "cf_agent_stream_resuming");
  assert.equal(resuming.id, id);
  assert.ok(!again.frames.some((f) => f.type === "cf_agent_chat_messages" && f.messages.length === 0), "no transcript instead of resuming");
  again.send({ type: "cf_agent_stream_resume_ack", id });
  await again.turn(id);
  const frames = again.responses(id);
  assert.ok(frames.some((f) => f.replay === true), "buffered chunks are replayed");
  assert.ok(frames.some((f) => f.replayComplete === true), "the replay of a live stream ends with replayComplete");
  assert.ok(frames.some((f) => !f.replay && f.body?.includes("text-delta")), "live chunks follow the replay");
  const chunks = frames.filter((f) => f.body?.trim()).map((f) => JSON.parse(f.body));
  assert.equal(textOf(chunks), SLOW);
  assert.equal(chunks.filter((c) => c.type === "start").length, 1, "nothing is sent twice");
  const stored = await getMessages(worker.url, "reconnect");
  assert.equal(stored[1].parts.find((p) => p.type === "text").text, SLOW);
  again.close();
});

test("a second tab joining mid-stream gets replay then live chunks, the first tab is undisturbed", async () => {
  const a = await connect(worker.host, "join");
  model.push({ text: SLOW, chunkSize: 4, delayMs: 40 });
  const { id } = a.chat("stream to everyone");
  await a.waitFor((f) => f.id === id && f.body?.includes("text-delta"));
  const b = await connect(worker.host, "join");
  const got = await resume(b);
  assert.equal(got.id, id);
  assert.equal(textOf(got.chunks), SLOW);
  await a.turn(id);
  assert.equal(textOf(a.chunks(id)), SLOW);
  a.close();
  b.close();
});

test("after a stream ended, an ACK for it replays the whole stream and done", async () => {
  const tab = await connect(worker.host, "late-ack");
  model.push({ text: "short" });
  const { id } = tab.chat("quick");
  await tab.turn(id);
  const from = tab.frames.length;
  tab.send({ type: "cf_agent_stream_resume_ack", id });
  const last = await tab.waitFor((f) => f.id === id && f.replay && f.done, { from });
  assert.equal(last.body, "");
  const replayed = tab.frames.slice(from).filter((f) => f.id === id && f.body?.trim()).map((f) => JSON.parse(f.body));
  assert.equal(textOf(replayed), "short");
  tab.close();
});

/** Sends three messages on one tab, the second and third while the first streams. */
async function overlap(policy, name, { waitForFirst = true } = {}) {
  const w = await startWorker({ vars: modelVars(model, { THINK_MESSAGE_CONCURRENCY: policy }) });
  try {
    const tab = await connect(w.host, name);
    const before = model.requests.length;
    model.push({ text: "first answer", chunkSize: 3, delayMs: 25 }, { text: "second answer" }, { text: "third answer" });
    const one = tab.chat("one");
    if (waitForFirst) await tab.waitFor((f) => f.id === one.id && f.body?.includes("text-delta"));
    const two = tab.chat("two", { messages: [one.userMessage] });
    const three = tab.chat("three", { messages: [one.userMessage, two.userMessage] });
    for (const r of [one, two, three]) await tab.turn(r.id);
    await assertIdle(tab, "no turn is left to run");
    const stored = await getMessages(w.url, name);
    const calls = model.requests.slice(before);
    tab.close();
    return { tab, one, two, three, stored, calls };
  } finally {
    model.clear();
    await w.dispose();
  }
}

const users = (stored) => stored.filter((m) => m.role === "user").map((m) => m.parts[0].text);
const answers = (stored) => stored.filter((m) => m.role === "assistant").map((m) => m.parts.find((p) => p.type === "text")?.text);
const lastUserContents = (call) => call.messages.filter((m) => m.role === "user").map((m) => m.content);

test("concurrency: queue answers every message, in order", async () => {
  const r = await overlap("queue", "cc-queue");
  assert.equal(r.calls.length, 3);
  assert.deepEqual(users(r.stored), ["one", "two", "three"]);
  assert.deepEqual(answers(r.stored), ["first answer", "second answer", "third answer"]);
});

for (const policy of ["latest", "merge"]) {
  test(`concurrency: ${policy} keeps every message but answers only the newest queued one`, async () => {
    const r = await overlap(policy, `cc-${policy}`);
    assert.equal(r.calls.length, 2, "the superseded message gets no model call");
    assert.deepEqual(users(r.stored), ["one", "two", "three"]);
    assert.deepEqual(answers(r.stored), ["first answer", "second answer"]);
    assert.deepEqual(lastUserContents(r.calls[1]), ["one", "two", "three"], "the one turn sees every kept message");
    const skipped = r.tab.responses(r.two.id);
    const messageIds = [r.one.userMessage.id, r.two.userMessage.id];
    assert.deepEqual(skipped, [{ type: "cf_agent_use_chat_response", id: r.two.id, body: "", done: true, outcome: "skipped", messageIds }]);
  });
}

test("concurrency: drop refuses messages sent during a turn and keeps nothing of them", async () => {
  const r = await overlap("drop", "cc-drop");
  assert.equal(r.calls.length, 1);
  assert.deepEqual(users(r.stored), ["one"]);
  const messageIds = [r.one.userMessage.id, r.two.userMessage.id];
  assert.deepEqual(r.tab.responses(r.two.id), [{ type: "cf_agent_use_chat_response", id: r.two.id, body: "", done: true, outcome: "skipped", messageIds }]);
  const rollback = r.tab.frames.find((f) => f.type === "cf_agent_chat_messages" && f.messages.length === 1 && f.messages[0].parts[0].text === "one");
  assert.ok(rollback, "the sender is sent the transcript back");
});

test("concurrency: debounce waits and answers only the last of a burst", async () => {
  const r = await overlap("debounce:300", "cc-debounce", { waitForFirst: false });
  assert.equal(r.calls.length, 1);
  assert.deepEqual(users(r.stored), ["one", "two", "three"]);
  assert.deepEqual(lastUserContents(r.calls[0]), ["one", "two", "three"]);
  assert.deepEqual(r.tab.responses(r.one.id), [{ type: "cf_agent_use_chat_response", id: r.one.id, body: "", done: true, outcome: "skipped", messageIds: [r.one.userMessage.id] }]);
});

test("chat() over DO RPC from another Worker streams events and runs a client tool in the caller", async () => {
  const tab = await connect(worker.host, "rpc");
  await tab.waitFor((f) => f.type === "cf_agent_identity");
  model.push({ toolCalls: [{ id: "call_rpc_tz", name: "getUserTimezone", args: {} }] }, { text: "It is Paris time." });
  const tz = { name: "getUserTimezone", description: "Where the caller is", parameters: { type: "object", properties: {} } };
  const out = await worker.caller("/chat?name=rpc", { message: "what time zone?", clientTools: [tz] });
  const types = out.events.map((e) => e.type);
  assert.equal(types[0], "start");
  assert.equal(types.at(-1), "done");
  assert.ok(!types.includes("error"), JSON.stringify(out.events));
  const chunks = out.events.filter((e) => e.type === "event").map((e) => e.chunk);
  assert.ok(chunks.some((c) => c.type === "tool-output-available" && c.toolCallId === "call_rpc_tz"));
  assert.equal(textOf(chunks), "It is Paris time.");
  assert.deepEqual(out.toolCalls, [{ toolName: "getUserTimezone", input: {}, toolCallId: "call_rpc_tz" }]);
  assert.equal(model.requests.at(-1).messages.at(-1).content, JSON.stringify({ timezone: "Europe/Paris" }));
  // The tab saw the same turn, and the transcript agrees over both routes.
  await tab.waitFor((f) => f.type === "cf_agent_chat_messages" && f.messages.length === 2);
  const viaRpc = await worker.caller("/messages?name=rpc");
  assert.deepEqual(viaRpc, await getMessages(worker.url, "rpc"));
  assert.equal(viaRpc[0].parts[0].text, "what time zone?");
  // RPC client tools live for one turn only: nothing was persisted for later turns.
  model.push({ text: "no tools now" });
  await worker.caller("/chat?name=rpc", { message: "again" });
  assert.ok(!(model.requests.at(-1).tools ?? []).some((t) => t.function.name === "getUserTimezone"));
  // clearMessages() reaches the tabs.
  await worker.caller("/clear?name=rpc");
  await tab.waitFor((f) => f.type === "cf_agent_chat_clear");
  assert.deepEqual(await getMessages(worker.url, "rpc"), []);
  tab.close();
});

test("a client tool that throws in the RPC caller becomes output-error for the model", async () => {
  model.push({ toolCalls: [{ id: "call_rpc_fail", name: "getUserTimezone", args: {} }] }, { text: "Could not tell." });
  const tz = { name: "getUserTimezone", parameters: { type: "object" } };
  const out = await worker.caller("/chat?name=rpc-fail", { message: "zone?", clientTools: [tz], failTool: true });
  const chunks = out.events.filter((e) => e.type === "event").map((e) => e.chunk);
  const err = chunks.find((c) => c.type === "tool-output-error");
  assert.match(err.errorText, /the caller refused/);
  assert.equal(model.requests.at(-1).messages.at(-1).role, "tool");
  assert.match(model.requests.at(-1).messages.at(-1).content, /the caller refused/);
});
