// What newer `agents` clients read (issue 38): `connect` on the transcript a tab gets as it
// connects, `seq` on every chunk (live and replayed), `outcome` and `messageIds` on terminal
// frames; and what Think 0.17–0.23 changed that think-rs adopts: recovery from transient model
// errors after the answer began, and the repair of approved calls a new turn moved past. The
// frames are read through the client `npm test` selects (THINK_TEST_AGENTS); the test of the
// newest client's replay dedupe drives its own chat transport (`agents-next/chat/react`).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel, lastMessage } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, getMessages, assertIdle, newId } from "./helpers/client.mjs";

let model;
let worker;

before(async () => {
  model = await startScriptedModel();
  worker = await startWorker({
    vars: modelVars(model, {
      THINK_APPROVAL: "write",
      // Short waits for the tests; the default is Think's 10 attempts from 1 s to 30 s.
      THINK_CHAT_RECOVERY: JSON.stringify({ maxAttempts: 2, initialDelayMs: 50, maxDelayMs: 100 }),
    }),
  });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

const isResponse = (id) => (f) => f.type === "cf_agent_use_chat_response" && f.id === id;
const chunkOf = (f) => (f.body?.trim() && !f.error ? JSON.parse(f.body) : null);
const textOf = (frames) =>
  frames
    .map(chunkOf)
    .filter((c) => c?.type === "text-delta")
    .map((c) => c.delta)
    .join("");
const textParts = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text);

test("the transcript a tab gets as it connects says connect:true; later transcripts do not", async () => {
  const tab = await connect(worker.host, "connect-flag");
  const first = await tab.waitFor((f) => f.type === "cf_agent_chat_messages");
  assert.deepEqual(first, { type: "cf_agent_chat_messages", messages: [], connect: true });
  model.push({ text: "Hi." });
  const { id } = tab.chat("hello");
  await tab.turn(id);
  const after = await tab.waitFor((f) => f.type === "cf_agent_chat_messages" && f.messages.length === 2);
  assert.equal(after.connect, undefined);
  const late = await connect(worker.host, "connect-flag");
  const again = await late.waitFor((f) => f.type === "cf_agent_chat_messages");
  assert.equal(again.connect, true);
  assert.equal(again.messages.length, 2);
  tab.close();
  late.close();
});

test("every chunk carries its index in the stream, and a late replay the same indexes", async () => {
  const tab = await connect(worker.host, "seq");
  model.push({ text: "one two three four five", chunkSize: 3 });
  const { id, userMessage } = tab.chat("count");
  await tab.turn(id);
  const live = tab.responses(id).filter((f) => !f.done);
  assert.ok(live.length > 5, `${live.length} chunks`);
  assert.deepEqual(live.map((f) => f.seq), live.map((_, i) => i));
  const from = tab.frames.length;
  tab.send({ type: "cf_agent_stream_resume_ack", id });
  const end = await tab.waitFor((f) => isResponse(id)(f) && f.replay && f.done, { from });
  const replayed = tab.frames.slice(from).filter((f) => isResponse(id)(f) && f.replay && !f.done);
  assert.deepEqual(replayed.map((f) => [f.seq, f.body]), live.map((f) => [f.seq, f.body]));
  assert.equal(end.outcome, "completed");
  assert.deepEqual(end.messageIds, [userMessage.id]);
  tab.close();
});

test("terminal frames say how the request ended and name the user messages it carried", async () => {
  const tab = await connect(worker.host, "outcomes");
  // Completed: both trailing user messages of the request are named.
  model.push({ text: "Done." });
  const earlier = { id: newId("msg"), role: "user", parts: [{ type: "text", text: "first" }] };
  const { id, userMessage } = tab.chat("second", { messages: [earlier] });
  await tab.turn(id);
  assert.deepEqual(tab.responses(id).at(-1), {
    type: "cf_agent_use_chat_response",
    id,
    body: "",
    done: true,
    outcome: "completed",
    messageIds: [earlier.id, userMessage.id],
  });
  // Error: the error frame and the done frame both name them.
  model.push({ status: 400, message: "bad request" });
  const failed = tab.chat("fail please");
  await tab.turn(failed.id);
  const [error, done] = tab.responses(failed.id).slice(-2);
  assert.equal(error.error, true);
  assert.deepEqual(error.messageIds, [failed.userMessage.id]);
  assert.equal(done.outcome, "error");
  assert.deepEqual(done.messageIds, [failed.userMessage.id]);
  // Aborted: a stopped turn.
  model.push({ text: "never ending", hang: true });
  const stopped = tab.chat("go on forever");
  await tab.waitFor((f) => isResponse(stopped.id)(f) && f.body?.includes("text-delta"));
  tab.send({ type: "cf_agent_chat_request_cancel", id: stopped.id });
  await tab.turn(stopped.id);
  assert.equal(tab.responses(stopped.id).at(-1).outcome, "aborted");
  // Skipped: a queued turn whose message a clear dropped before its turn came.
  const watcher = await connect(worker.host, "outcomes");
  model.push({ text: "slow", hang: true });
  const running = tab.chat("hold the slot");
  await tab.waitFor((f) => isResponse(running.id)(f) && f.body?.includes("text-delta"));
  const queued = tab.chat("wait in line");
  // The other tabs are shown the waiting message once it is queued.
  await watcher.waitFor((f) => f.type === "cf_agent_chat_messages" && f.messages.some((m) => m.id === queued.userMessage.id));
  tab.send({ type: "cf_agent_chat_clear" });
  const skipped = await tab.waitFor((f) => isResponse(queued.id)(f) && f.done);
  assert.deepEqual(skipped, { type: "cf_agent_use_chat_response", id: queued.id, body: "", done: true, outcome: "skipped", messageIds: [queued.userMessage.id] });
  tab.close();
  watcher.close();
});

/** Runs a turn whose first answer breaks off, and returns what the tab saw. */
async function interruptedTurn(name, first, rest) {
  const tab = await connect(worker.host, name);
  model.push(first, ...rest);
  const calls = model.requests.length;
  const { id, userMessage } = tab.chat("tell me");
  const recoveringDone = await tab.waitFor((f) => isResponse(id)(f) && f.done, { timeout: 20000 });
  const resumed = await tab.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id !== id && f.continuation, { timeout: 20000 });
  const second = resumed.id;
  await tab.waitFor((f) => isResponse(second)(f) && f.done, { timeout: 20000 });
  const settled = await tab.waitFor((f) => f.type === "cf_agent_chat_recovering" && f.recovering === false);
  return { tab, id, second, userMessage, recoveringDone, settled, calls };
}

test("a stream that drops mid-answer is continued in the same assistant message", async () => {
  const r = await interruptedTurn("cut", { text: "Hello there, ", cut: true }, [{ text: "general Kenobi." }]);
  const { tab, id, second } = r;
  const start = chunkOf(tab.responses(id)[0]);
  assert.equal(start.type, "start");
  assert.equal(textOf(tab.responses(id)), "Hello there, ");
  assert.ok(!tab.responses(id).some((f) => f.error), "no error reaches the tab");
  assert.deepEqual(r.recoveringDone, { type: "cf_agent_use_chat_response", id, body: "", done: true, outcome: "recovering", messageIds: [r.userMessage.id] });
  const started = tab.frames.findIndex((f) => f.type === "cf_agent_chat_recovering" && f.recovering);
  assert.ok(started >= 0 && started < tab.frames.indexOf(r.recoveringDone), "recovering:true comes first");
  assert.deepEqual(tab.frames[started], { type: "cf_agent_chat_recovering", recovering: true, id });
  // The continuation streams as a continuation of the same message, and ends completed.
  const cont = tab.responses(second);
  assert.ok(cont.every((f) => f.continuation === true));
  assert.equal(chunkOf(cont[0]).messageId, undefined, "a continuation does not name a new message");
  assert.deepEqual(cont.filter((f) => !f.done).map((f) => f.seq), cont.filter((f) => !f.done).map((_, i) => i));
  assert.equal(textOf(cont), "general Kenobi.");
  assert.deepEqual(cont.at(-1), { type: "cf_agent_use_chat_response", id: second, body: "", done: true, outcome: "completed", continuation: true, messageIds: [r.userMessage.id] });
  assert.deepEqual(r.settled, { type: "cf_agent_chat_recovering", recovering: false, id });
  // The model was asked to go on from its partial answer.
  assert.equal(model.requests.length, r.calls + 2);
  assert.equal(lastMessage(model.requests.at(-1), "assistant").content, "Hello there, ");
  // One assistant message, under the first stream's id, holding both pieces.
  const stored = await getMessages(worker.url, "cut");
  assert.deepEqual(stored.map((m) => m.role), ["user", "assistant"]);
  assert.equal(stored[1].id, start.messageId);
  assert.deepEqual(textParts(stored[1]), ["Hello there, ", "general Kenobi."]);
  tab.close();
});

test("a temporary error event after output begins is recovered the same way", async () => {
  const r = await interruptedTurn(
    "server-error",
    { text: "Part one. ", streamError: "The server had an error while processing your request.", streamErrorType: "server_error" },
    [{ text: "Part two." }],
  );
  assert.ok(!r.tab.responses(r.id).some((f) => f.error));
  assert.equal(r.recoveringDone.outcome, "recovering");
  const stored = await getMessages(worker.url, "server-error");
  assert.deepEqual(textParts(stored[1]), ["Part one. ", "Part two."]);
  r.tab.close();
});

test("a 429 on a later step of a turn with output is retried, then recovered", async () => {
  const limited = { status: 429, message: "Rate limit reached", headers: { "retry-after-ms": "10" } };
  const r = await interruptedTurn(
    "rate-limited",
    { toolCalls: [{ id: "call_list_rl", name: "list", args: { path: "/" } }] },
    [limited, limited, limited, { text: "Listed." }],
  );
  // The provider's own retries (3 calls) come first, then the recovery's continuation.
  assert.equal(model.requests.length, r.calls + 5);
  const stored = await getMessages(worker.url, "rate-limited");
  assert.deepEqual(stored.map((m) => m.role), ["user", "assistant"]);
  const call = stored[1].parts.find((p) => p.toolCallId === "call_list_rl");
  assert.equal(call.state, "output-available");
  assert.deepEqual(textParts(stored[1]), ["Listed."]);
  // The continuation's model call carries the tool's round trip.
  assert.equal(lastMessage(model.requests.at(-1), "tool").tool_call_id, "call_list_rl");
  r.tab.close();
});

test("recovery is bounded: after its attempts the error ends the turn", async () => {
  const tab = await connect(worker.host, "exhausted");
  model.push({ text: "a", cut: true }, { text: "b", cut: true }, { text: "c", cut: true });
  const calls = model.requests.length;
  const { id, userMessage } = tab.chat("try hard");
  const error = await tab.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.error, { timeout: 20000 });
  assert.equal(error.body, "The model stream broke off: Network connection lost. (gave up after 2 recovery attempts)");
  const done = await tab.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === error.id && f.done);
  assert.equal(done.outcome, "error");
  assert.deepEqual(done.messageIds, [userMessage.id]);
  await tab.waitFor((f) => f.type === "cf_agent_chat_recovering" && f.recovering === false);
  assert.equal(model.requests.length, calls + 3);
  assert.equal(tab.responses(id).at(-1).outcome, "recovering");
  const stored = await getMessages(worker.url, "exhausted");
  assert.deepEqual(textParts(stored[1]), ["a", "b", "c"]);
  await assertIdle(tab);
  tab.close();
});

test("an approved call that a new message moves past becomes an error and never runs", async () => {
  const tab = await connect(worker.host, "approval-repair");
  model.push({ toolCalls: [{ id: "call_write_ar", name: "write", args: { path: "/ar/a.txt", content: "x" } }] });
  const { id } = tab.chat("write a file");
  await tab.turn(id);
  // Approved, but without a continuation (as a client with autoContinueAfterToolResult off).
  tab.send({ type: "cf_agent_tool_approval", toolCallId: "call_write_ar", approved: true, autoContinue: false });
  await tab.waitFor((f) => f.type === "cf_agent_message_updated");
  await assertIdle(tab);
  model.push({ text: "Moving on." });
  const next = tab.chat("never mind, something else");
  await tab.turn(next.id);
  const stored = await getMessages(worker.url, "approval-repair");
  const part = stored[1].parts.find((p) => p.toolCallId === "call_write_ar");
  assert.equal(part.state, "output-error");
  assert.equal(part.errorText, "The tool call was approved but did not run before the next turn started.");
  assert.ok(!tab.chunks(next.id).some((c) => c.toolCallId === "call_write_ar"), "the call did not run in the new turn");
  const listed = await tab.client.call("listWorkspace", []);
  assert.ok(!listed.entries.some((e) => e.path.startsWith("/ar")), JSON.stringify(listed));
  assert.match(lastMessage(model.requests.at(-1), "tool").content, /approved but did not run/);
  tab.close();
});

test("the newest client skips continuation chunks it already applied when it resumes after a reconnect", async () => {
  const { AgentClient } = await import("agents-next/client");
  const { WebSocketChatTransport } = await import("agents-next/chat/react");
  const WebSocket = (await import("ws")).default;
  const agent = new AgentClient({ agent: "ThinkAgent", name: "dedupe", host: worker.host, WebSocket });
  await new Promise((resolve) => agent.addEventListener("open", resolve, { once: true }));
  try {
    const tab = await connect(worker.host, "dedupe");
    model.push({ toolCalls: [{ id: "call_tz", name: "getUserTimezone", args: {} }] });
    const tools = { clientTools: [{ name: "getUserTimezone", parameters: { type: "object" } }] };
    const { id } = tab.chat("what time zone am I in?", { body: tools });
    await tab.turn(id);
    const words = Array.from({ length: 40 }, (_, i) => `w${i}`).join(" ");
    model.push({ text: words, chunkSize: 4, delayMs: 50 });
    const transport = new WebSocketChatTransport({ agent });
    // What useAgentChat does with the handshake frames, for the transport's resume paths.
    agent.addEventListener("message", (event) => {
      const frame = JSON.parse(event.data);
      if (frame.type === "cf_agent_stream_resuming") transport.handleStreamResuming(frame);
      if (frame.type === "cf_agent_stream_resume_none") transport.handleStreamResumeNone(frame);
      if (frame.type === "cf_agent_stream_pending") transport.handleStreamPending();
    });
    agent.send(JSON.stringify({ type: "cf_agent_tool_result", toolCallId: "call_tz", toolName: "getUserTimezone", output: { timezone: "Europe/Paris" }, autoContinue: true }));
    transport.expectToolContinuation();
    const first = (await transport.reconnectToStream({ chatId: "dedupe" })).getReader();
    let text = "";
    while (text.length < 12) {
      const { value, done } = await first.read();
      assert.ok(!done, "the continuation streams");
      if (value.type === "text-delta") text += value.delta;
    }
    // The socket drops mid-continuation; the stream reports the interruption.
    const reopened = new Promise((resolve) => agent.addEventListener("open", resolve, { once: true }));
    agent.reconnect();
    for (;;) {
      const { value, done } = await first.read();
      if (done || value?.type === "error") break;
      if (value.type === "text-delta") text += value.delta;
    }
    await reopened;
    const resumed = await transport.reconnectToStream({ chatId: "dedupe" });
    assert.ok(resumed, "the continuation is still live and is offered");
    const second = resumed.getReader();
    for (;;) {
      const { value, done } = await second.read();
      if (done) break;
      if (value.type === "text-delta") text += value.delta;
    }
    // The replay after the reconnect repeated every chunk so far; the client applied each once.
    assert.equal(text, words);
    tab.close();
  } finally {
    agent.close();
  }
});
