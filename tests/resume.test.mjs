// A resume offer applies to one stream: a tab that never ACKs `cf_agent_stream_resuming` (a
// lost frame, or a client without resume) follows the live frames again when that stream
// ends or when it sends a chat request of its own, and its own turn's frames always reach it.
// The tab here is a bare `ws` socket that answers nothing on its own. And a tab that lost the
// answer to its resume probe with its socket, and sent a message while offline, reads its
// answer once (the client's own transport, as `npm test` selects it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { AGENTS_PACKAGE, connect, connectRaw, closeTabs, newId } from "./helpers/client.mjs";

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

const SLOW = "one two three four five six seven eight nine ten eleven twelve";
const textOf = (frames) =>
  frames
    .filter((f) => f.body?.trim() && !f.error)
    .map((f) => JSON.parse(f.body))
    .filter((c) => c.type === "text-delta")
    .map((c) => c.delta)
    .join("");
const answerIn = (frame, text) =>
  frame.type === "cf_agent_chat_messages" && frame.messages.some((m) => m.role === "assistant" && m.parts.some((p) => p.type === "text" && p.text === text));

test("a tab that never ACKs gets the end-of-turn transcript, then its own turn's frames", async () => {
  const a = await connect(worker.host, "no-ack");
  model.push({ text: SLOW, chunkSize: 4, delayMs: 30 });
  const first = a.chat("tell me a long story");
  await a.waitFor((f) => f.id === first.id && f.body?.includes("text-delta"));

  const raw = await connectRaw(worker.host, "no-ack");
  const offer = await raw.waitFor((f) => f.type === "cf_agent_stream_resuming");
  assert.equal(offer.id, first.id);
  await a.turn(first.id);
  // The offer ended with the stream: the transcript with the answer reaches the silent tab.
  await raw.waitFor((f) => answerIn(f, SLOW));
  assert.equal(raw.responses(first.id).length, 0, "no live chunk of the offered stream reached it unasked");

  model.push({ text: "An answer for the silent tab." });
  const own = raw.chat("and now me");
  await raw.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === own.id && f.done);
  assert.equal(textOf(raw.responses(own.id)), "An answer for the silent tab.");
  a.close();
  raw.close();
});

test("a tab that never ACKs and sends a message mid-stream follows the live frames and gets its own answer", async () => {
  const a = await connect(worker.host, "no-ack-mid");
  model.push({ text: SLOW, chunkSize: 4, delayMs: 40 }, { text: "Queued answer." });
  const first = a.chat("stream for a while");
  await a.waitFor((f) => f.id === first.id && f.body?.includes("text-delta"));

  const raw = await connectRaw(worker.host, "no-ack-mid");
  await raw.waitFor((f) => f.type === "cf_agent_stream_resuming" && f.id === first.id);
  const own = raw.chat("a question while you talk");
  // Its own request ends the mute at once: the rest of the live stream reaches it.
  await raw.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === first.id && f.body?.includes("text-delta"));
  await raw.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === first.id && f.done);
  await raw.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === own.id && f.done);
  assert.equal(textOf(raw.responses(own.id)), "Queued answer.");
  await a.turn(own.id);
  assert.equal(textOf(a.responses(own.id)), "Queued answer.", "the other tab follows the second turn too");
  a.close();
  raw.close();
});

test("a tab that ACKs late is replayed the finished stream, then the transcript", async () => {
  const a = await connect(worker.host, "late-ack-raw");
  model.push({ text: SLOW, chunkSize: 4, delayMs: 30 });
  const first = a.chat("one more story");
  await a.waitFor((f) => f.id === first.id && f.body?.includes("text-delta"));
  const raw = await connectRaw(worker.host, "late-ack-raw");
  await raw.waitFor((f) => f.type === "cf_agent_stream_resuming");
  await a.turn(first.id);
  await raw.waitFor((f) => answerIn(f, SLOW));
  const from = raw.frames.length;
  raw.send({ type: "cf_agent_stream_resume_ack", id: first.id });
  await raw.waitFor((f) => f.id === first.id && f.replay && f.done, { from });
  assert.equal(textOf(raw.frames.slice(from).filter((f) => f.id === first.id)), SLOW);
  await raw.waitFor((f) => answerIn(f, SLOW), { from });
  a.close();
  raw.close();
});

test("a tab whose resume probe was lost with its socket, and that sent a message while offline, reads each chunk of its answer once", async () => {
  const { AgentClient } = await import(`${AGENTS_PACKAGE}/client`);
  const { WebSocketChatTransport } = await import(`${AGENTS_PACKAGE}/chat/react`);
  const agent = new AgentClient({ agent: "ThinkAgent", name: "lost-probe", host: worker.host, WebSocket });
  await new Promise((resolve) => agent.addEventListener("open", resolve, { once: true }));
  let stale;
  try {
    const transport = new WebSocketChatTransport({ agent, activeRequestIds: new Set() });
    // What useAgentChat does with the handshake frames.
    agent.addEventListener("message", (event) => {
      const frame = JSON.parse(event.data);
      if (frame.type === "cf_agent_stream_resuming") transport.handleStreamResuming(frame);
      if (frame.type === "cf_agent_stream_resume_none") transport.handleStreamResumeNone(frame);
      if (frame.type === "cf_agent_stream_pending") transport.handleStreamPending();
    });
    // The hook probes for a stream to resume as it mounts, and the connection drops with the
    // probe or its answer on the way: the probe waits for an answer that never comes.
    agent.reconnect();
    stale = transport.reconnectToStream({ chatId: "lost-probe" });
    assert.equal(agent.drainQueuedMessages().length, 1, "the probe is lost with the connection");
    // Sent while offline: the client buffers the request and sends it first on the new socket.
    model.push({ text: SLOW, chunkSize: 4, delayMs: 30 });
    const user = { id: newId("msg"), role: "user", parts: [{ type: "text", text: "sent while offline" }] };
    const own = (await transport.sendMessages({ chatId: "lost-probe", messages: [user], trigger: "submit-message" })).getReader();
    const chunks = [];
    let retried = false;
    for (;;) {
      const { value, done } = await own.read();
      if (done) break;
      chunks.push(value);
      // Once connected the hook re-sends the probe still waiting for its answer. Under load the
      // agent reads it while the answer streams (the chat page's flaky runs); here it is sent then.
      if (!retried && value.type === "text-delta") {
        retried = true;
        assert.ok(transport.retryPendingResume(), "the probe from before the drop still waits");
      }
    }
    assert.equal(chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join(""), SLOW, "each chunk once");
    assert.equal(chunks.filter((c) => c.type === "start" || c.type === "text-start").length, 2);
    // The probe is answered once the answer is over: nothing to resume, so no second reader
    // of the tab's own answer.
    const resumed = await stale;
    assert.equal(resumed, null, "the tab is not offered the stream it reads as its response");
  } finally {
    (await stale?.catch(() => null))?.cancel();
    agent.close();
  }
});
