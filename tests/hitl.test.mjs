// Human in the loop over the real `agents` client: tool approvals (THINK_APPROVAL policy),
// client tools, and the auto-continuation barrier with its resume handshake.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel, lastMessage } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, getMessages, assertIdle } from "./helpers/client.mjs";

let model;
let worker;

before(async () => {
  model = await startScriptedModel();
  worker = await startWorker({ vars: modelVars(model, { THINK_APPROVAL: "write,delete" }) });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

const TIMEZONE_TOOL = {
  name: "getUserTimezone",
  description: "The user's IANA time zone, read from their browser.",
  parameters: { type: "object", properties: {} },
};

async function startApprovalTurn(tab, name, args = { path: "/notes/a.txt", content: "approved content" }) {
  model.push({ toolCalls: [{ id: `call_${name}`, name: "write", args }] });
  const { id } = tab.chat(`please write a file (${name})`);
  await tab.turn(id);
  return { id, toolCallId: `call_${name}` };
}

test("approve: the call pauses, the approval runs it in a continuation, and the model goes on", async () => {
  const tab = await connect(worker.host, "approve");
  const other = await connect(worker.host, "approve");
  const { id, toolCallId } = await startApprovalTurn(tab, "approve");
  const chunks = tab.chunks(id);
  const types = chunks.map((c) => c.type);
  assert.ok(types.indexOf("tool-input-available") < types.indexOf("tool-approval-request"), types.join());
  const request = chunks.find((c) => c.type === "tool-approval-request");
  assert.equal(request.toolCallId, toolCallId);
  assert.match(request.approvalId, /^approval_/);
  assert.ok(!types.includes("tool-output-available"), "the tool did not run");
  let stored = await getMessages(worker.url, "approve");
  const part = stored[1].parts.find((p) => p.toolCallId === toolCallId);
  assert.equal(part.state, "approval-requested");
  assert.equal(part.approval.id, request.approvalId);

  // Slow enough that part of the continuation streams live after the ACK.
  model.push({ text: "The file is written.", chunkSize: 3, delayMs: 30 });
  tab.send({ type: "cf_agent_tool_approval", toolCallId, approved: true, autoContinue: true });
  const updated = await other.waitFor((f) => f.type === "cf_agent_message_updated");
  assert.equal(updated.message.parts.find((p) => p.toolCallId === toolCallId).state, "approval-responded");
  const cont = await tab.followContinuation();
  const contChunks = cont.chunks;
  const output = contChunks.find((c) => c.type === "tool-output-available");
  assert.equal(output.toolCallId, toolCallId);
  assert.deepEqual(output.output, { path: "/notes/a.txt", bytesWritten: 16, lines: 1 });
  assert.equal(contChunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join(""), "The file is written.");
  const live = cont.frames.filter((f) => f.type === "cf_agent_use_chat_response" && f.id === cont.id && !f.replay);
  assert.ok(live.length > 0, "part of the continuation arrived live");
  assert.ok(live.every((f) => f.continuation === true), "live continuation frames carry continuation:true");
  const replayed = cont.frames.filter((f) => f.type === "cf_agent_use_chat_response" && f.replay);
  assert.ok(replayed.every((f) => f.continuation === true), "replayed frames of a continuation say so too (Think 0.23)");
  // The continuation's replay and its live frames after it number its chunks once each, in order.
  const own = replayed.filter((f) => f.id === cont.id);
  const chunkSeqs = [...own, ...live].filter((f) => !f.done && !f.replayComplete).map((f) => f.seq);
  assert.deepEqual(chunkSeqs, chunkSeqs.map((_, i) => i));

  const seen = model.requests.at(-1);
  assert.match(lastMessage(seen, "tool").content, /bytesWritten/);
  await tab.waitFor((f) => f.type === "cf_agent_chat_messages" && f.messages.length === 3);
  stored = await getMessages(worker.url, "approve");
  assert.equal(stored.length, 3, "the continuation is a new assistant message");
  const settled = stored[1].parts.find((p) => p.toolCallId === toolCallId);
  assert.equal(settled.state, "output-available");
  assert.equal(stored[2].parts.find((p) => p.type === "text").text, "The file is written.");
  tab.close();
  other.close();
});

test("deny: the part becomes output-denied and the model is told", async () => {
  const tab = await connect(worker.host, "deny");
  const { toolCallId } = await startApprovalTurn(tab, "deny");
  model.push({ text: "Understood, not writing." });
  tab.send({ type: "cf_agent_tool_approval", toolCallId, approved: false, autoContinue: true });
  const updated = await tab.waitFor((f) => f.type === "cf_agent_message_updated");
  const part = updated.message.parts.find((p) => p.toolCallId === toolCallId);
  assert.equal(part.state, "output-denied");
  assert.equal(part.approval.approved, false);
  await tab.followContinuation();
  const tool = lastMessage(model.requests.at(-1), "tool");
  assert.equal(tool.tool_call_id, toolCallId);
  assert.match(tool.content, /denied/);
  tab.close();
});

test("deny with a reason: an output-error tool result reaches the model", async () => {
  const tab = await connect(worker.host, "deny-reason");
  const { toolCallId } = await startApprovalTurn(tab, "deny-reason");
  model.push({ text: "OK, I will not touch the notes." });
  tab.send({ type: "cf_agent_tool_result", toolCallId, toolName: "write", output: null, state: "output-error", errorText: "Not in the notes folder, please.", autoContinue: true });
  const updated = await tab.waitFor((f) => f.type === "cf_agent_message_updated");
  const part = updated.message.parts.find((p) => p.toolCallId === toolCallId);
  assert.equal(part.state, "output-error");
  assert.equal(part.errorText, "Not in the notes folder, please.");
  await tab.followContinuation();
  assert.deepEqual(JSON.parse(lastMessage(model.requests.at(-1), "tool").content), { error: "Not in the notes folder, please." });
  tab.close();
});

test("THINK_APPROVAL only gates the listed tools", async () => {
  const tab = await connect(worker.host, "policy");
  model.push({ toolCalls: [{ id: "call_list", name: "list", args: { path: "/" } }] }, { text: "Listed." });
  const { id } = tab.chat("what is in the workspace?");
  await tab.turn(id);
  const types = tab.chunks(id).map((c) => c.type);
  assert.ok(types.includes("tool-output-available"), types.join());
  assert.ok(!types.includes("tool-approval-request"));
  tab.close();
});

test("a client tool round trip: the turn pauses, the result continues it", async () => {
  const tab = await connect(worker.host, "client-tool");
  model.push({ toolCalls: [{ id: "call_tz", name: "getUserTimezone", args: {} }] });
  const { id } = tab.chat("what time zone am I in?", { body: { clientTools: [TIMEZONE_TOOL] } });
  await tab.turn(id);
  const chunks = tab.chunks(id);
  assert.ok(chunks.some((c) => c.type === "tool-input-available" && c.toolName === "getUserTimezone"));
  assert.ok(!chunks.some((c) => c.type === "tool-output-available"));
  const first = model.requests.at(-1);
  assert.ok(first.tools.some((t) => t.function.name === "getUserTimezone"), "the client tool is offered to the model");

  model.push({ text: "You are in Europe/Paris." });
  tab.send({ type: "cf_agent_tool_result", toolCallId: "call_tz", toolName: "getUserTimezone", output: "Europe/Paris", autoContinue: true, clientTools: [TIMEZONE_TOOL] });
  const updated = await tab.waitFor((f) => f.type === "cf_agent_message_updated");
  assert.equal(updated.message.parts.find((p) => p.toolCallId === "call_tz").output, "Europe/Paris");
  const cont = await tab.followContinuation();
  assert.equal(cont.chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join(""), "You are in Europe/Paris.");
  assert.equal(lastMessage(model.requests.at(-1), "tool").content, '"Europe/Paris"');

  // Re-applying the same result changes nothing and starts nothing.
  const requestsBefore = model.requests.length;
  const framesBefore = tab.frames.length;
  tab.send({ type: "cf_agent_tool_result", toolCallId: "call_tz", toolName: "getUserTimezone", output: "Europe/Paris", autoContinue: true });
  // A continuation would be pending from the moment the result was applied.
  await assertIdle(tab, "the repeated result scheduled no continuation");
  assert.equal(model.requests.length, requestsBefore);
  assert.ok(!tab.frames.slice(framesBefore).some((f) => f.type === "cf_agent_message_updated"));
  tab.close();
});

test("two parallel client calls answered 100 ms apart give exactly one continuation", async () => {
  const tab = await connect(worker.host, "parallel");
  model.push({
    toolCalls: [
      { id: "call_p1", name: "getUserTimezone", args: {} },
      { id: "call_p2", name: "getUserTimezone", args: {} },
    ],
  });
  const { id } = tab.chat("two lookups", { body: { clientTools: [TIMEZONE_TOOL] } });
  await tab.turn(id);
  const requestsBefore = model.requests.length;
  model.push({ text: "Both answers are in." });
  const from = tab.frames.length;
  tab.send({ type: "cf_agent_tool_result", toolCallId: "call_p1", toolName: "getUserTimezone", output: "UTC", autoContinue: true });
  await new Promise((r) => setTimeout(r, 100));
  tab.send({ type: "cf_agent_tool_result", toolCallId: "call_p2", toolName: "getUserTimezone", output: "Asia/Tokyo", autoContinue: true });
  await tab.followContinuation();
  await assertIdle(tab, "no second continuation is pending, queued or streaming");
  assert.equal(model.requests.length, requestsBefore + 1, "exactly one continuation called the model");
  const streams = new Set(tab.frames.slice(from).filter((f) => f.type === "cf_agent_use_chat_response").map((f) => f.id));
  assert.equal(streams.size, 1, "one continuation stream");
  const tools = model.requests.at(-1).messages.filter((m) => m.role === "tool");
  assert.deepEqual(tools.map((m) => m.content).slice(-2), ['"UTC"', '"Asia/Tokyo"']);
  tab.close();
});

test("client tool schemas persist across a restart", async () => {
  const tab = await connect(worker.host, "schemas");
  model.push({ text: "noted" });
  const first = tab.chat("remember my tools", { body: { clientTools: [TIMEZONE_TOOL] } });
  await tab.turn(first.id);
  tab.close();
  await worker.restart();
  const again = await connect(worker.host, "schemas");
  model.push({ text: "still have them" });
  const msgs = await getMessages(worker.url, "schemas");
  const second = again.chat("do you still have them?", { messages: msgs });
  await again.turn(second.id);
  assert.ok(model.requests.at(-1).tools.some((t) => t.function.name === "getUserTimezone"));
  // An empty list clears them.
  model.push({ text: "cleared" });
  const third = again.chat("forget them", { messages: await getMessages(worker.url, "schemas"), body: { clientTools: [] } });
  await again.turn(third.id);
  assert.ok(!model.requests.at(-1).tools.some((t) => t.function.name === "getUserTimezone"));
  again.close();
});
