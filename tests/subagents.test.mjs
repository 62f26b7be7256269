// Agents as tools in Miniflare: the shipped agent's `subagent` tool runs a child agent (another
// instance of the ThinkAgent class, over Durable Object RPC). One scripted model answers parent,
// child and grandchild requests by their content: each conversation's first user message says
// who is asking ("PARENT:", "CHILD:", "GRANDCHILD:"), and a tool result in it means a follow-up.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, getMessages } from "./helpers/client.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let model;
/** Per test: `(role, body, phase) => entry`, role from the first user message. */
let script = () => ({ text: "(unscripted)" });

const contentOf = (m) => (typeof m?.content === "string" ? m.content : (m?.content ?? []).map((c) => c.text ?? "").join(""));
const roleOf = (body) => {
  const first = contentOf(body.messages.find((m) => m.role === "user"));
  return first.match(/^(PARENT|CHILD|GRANDCHILD):/)?.[1] ?? "OTHER";
};
/** The content of the last tool result in a request, if its last message is one. */
const toolResultOf = (body) => (body.messages.at(-1)?.role === "tool" ? contentOf(body.messages.at(-1)) : null);
/** Where the current test's requests start in `model.requests`. */
let mark = 0;
const requestsOf = (role) => model.requests.slice(mark).filter((b) => roleOf(b) === role);

before(async () => {
  model = await startScriptedModel();
  model.setFallback((body) => script(roleOf(body), body, toolResultOf(body)));
});

after(async () => {
  closeTabs();
  await model?.close();
});

const events = (tab, callId) => tab.frames.filter((f) => f.type === "agent-tool-event" && (!callId || f.parentToolCallId === callId));
const deltas = (frames) => frames.filter((f) => f.event.kind === "chunk" && f.event.chunk.type === "text-delta").map((f) => f.event.chunk.delta).join("");
const waitForEvent = (tab, pred, opts) => tab.waitFor((f) => f.type === "agent-tool-event" && pred(f), opts);

async function childMessages(worker, parent, callId) {
  const res = await fetch(new URL(`/agents/think-agent/${parent}/sub/${callId}/get-messages`, worker.url));
  return { status: res.status, body: res.status === 200 ? await res.json() : await res.text() };
}

const textOf = (m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join("");

async function waitUntil(pred, what, timeoutMs = 15000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await pred();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

test("the parent calls subagent: another tab sees the child's events, the parent gets its answer and continues", async (t) => {
  mark = model.requests.length;
  const worker = await startWorker({ vars: modelVars(model), withCaller: true });
  try {
    script = (role, body, result) => {
      if (role === "PARENT") return result === null ? { toolCalls: [{ id: "call_basic", name: "subagent", args: { task: "CHILD: what is 2+2?" } }] } : { text: `The child said ${result}.` };
      if (role === "CHILD") return { text: "It is four.", chunkSize: 2, delayMs: 10 };
      return { text: "(unexpected)" };
    };
    const tab = await connect(worker.host, "sub-basic");
    const other = await connect(worker.host, "sub-basic");
    const { id } = tab.chat("PARENT: ask a child");
    // Timings for the README: the call's input to the child's first event, and the child's
    // last event to the tool's output, as the tab sees them.
    const at = (pred) => tab.waitFor(pred, { timeout: 20000 }).then(() => performance.now());
    const bodyIs = (type) => (f) => f.type === "cf_agent_use_chat_response" && f.body && JSON.parse(f.body).type === type;
    const [called, started, finished, answered] = await Promise.all([
      at(bodyIs("tool-input-available")),
      at((f) => f.type === "agent-tool-event" && f.event.kind === "started"),
      at((f) => f.type === "agent-tool-event" && f.event.kind === "finished"),
      at(bodyIs("tool-output-available")),
    ]);
    t.diagnostic(`call → child started: ${(started - called).toFixed(0)} ms; child finished → tool output: ${(answered - finished).toFixed(0)} ms`);
    await tab.turn(id, { timeout: 20000 });
    const chunks = tab.chunks(id);
    const output = chunks.find((c) => c.type === "tool-output-available" && c.toolCallId === "call_basic");
    assert.equal(output?.output, "It is four.", JSON.stringify(chunks.map((c) => c.type)));
    assert.equal(chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join(""), 'The child said "It is four.".');
    assert.equal(requestsOf("PARENT").length, 2, "the parent continued once with the answer");
    assert.equal(requestsOf("CHILD").length, 1);
    assert.equal(contentOf(requestsOf("CHILD")[0].messages.find((m) => m.role === "user")), "CHILD: what is 2+2?", "the child got the task as its user message");
    assert.ok(!requestsOf("CHILD")[0].tools.some((t) => t.function.name === "subagent"), "a child has no subagent tool of its own");
    assert.ok(requestsOf("PARENT")[0].tools.some((t) => t.function.name === "subagent"));

    const seen = events(other, "call_basic");
    assert.deepEqual(seen.map((f) => f.sequence), seen.map((_, i) => i), "sequences run 0, 1, 2, …");
    assert.equal(seen[0].event.kind, "started");
    assert.equal(deltas(seen), "It is four.", "the child's chunks reached the other tab");
    assert.deepEqual(seen.at(-1).event, { kind: "finished", result: "It is four.", runId: "agent-tool:call_basic", summary: "It is four." });
    assert.ok(seen.every((f) => f.replay === undefined));

    const drill = await childMessages(worker, "sub-basic", "call_basic");
    assert.equal(drill.status, 200);
    assert.deepEqual(drill.body.map((m) => [m.role, textOf(m)]), [["user", "CHILD: what is 2+2?"], ["assistant", "It is four."]]);
    assert.equal((await childMessages(worker, "sub-basic", "call_unknown")).status, 404, "only a run the parent has");
    assert.equal((await childMessages(worker, "sub-other", "call_basic")).status, 404, "another parent does not have it");
    const direct = await fetch(new URL("/agents/think-agent/sub-basic~call_basic/get-messages", worker.url));
    assert.equal(direct.status, 404, "the child is not readable directly");
    const parentMessages = await getMessages(worker.url, "sub-basic");
    assert.ok(!JSON.stringify(parentMessages).includes("CHILD: what is 2+2?\"}]"), "the parent's transcript has no child steps");

    // Once the parent recorded the answer, the child's log (a row per chunk) keeps only the
    // terminal event, which a parent re-tailing after a crash would still read.
    const childLog = async () =>
      JSON.parse(await worker.caller("/call?name=sub-basic~call_basic", { method: "subagentRpc", args: ["events", JSON.stringify({ runId: "agent-tool:call_basic", cursor: 0, waitMs: 0 })] }));
    const left = await waitUntil(async () => ((await childLog()).entries.length === 1 ? childLog() : null), "the child's log released");
    assert.equal(left.entries[0].sequence, seen.length - 1);
    assert.deepEqual(left.entries[0].event, { kind: "finished", result: "It is four." });
  } finally {
    await worker.dispose();
  }
});

test("a tab that joins mid-run is replayed the events so far, then follows live", async () => {
  mark = model.requests.length;
  const worker = await startWorker({ vars: modelVars(model) });
  try {
    const LONG = "A slow child answer that streams in many small pieces.";
    script = (role, body, result) => {
      if (role === "PARENT") return result === null ? { toolCalls: [{ id: "call_replay", name: "subagent", args: { task: "CHILD: be slow" } }] } : { text: "ok" };
      return { text: LONG, chunkSize: 2, delayMs: 60 };
    };
    const tab = await connect(worker.host, "sub-replay");
    const { id } = tab.chat("PARENT: go");
    await waitForEvent(tab, (f) => f.event.kind === "chunk" && f.event.chunk.type === "text-delta" && f.sequence >= 5, { timeout: 15000 });
    const late = await connect(worker.host, "sub-replay");
    await tab.turn(id, { timeout: 20000 });
    await waitForEvent(late, (f) => f.event.kind === "finished");
    const seen = events(late, "call_replay");
    const replayed = seen.filter((f) => f.replay === true);
    const live = seen.filter((f) => f.replay !== true);
    assert.ok(replayed.length >= 5, `replayed ${replayed.length}`);
    assert.deepEqual(replayed.map((f) => f.sequence), replayed.map((_, i) => i), "the replay starts at 0, in order");
    assert.ok(seen.indexOf(replayed.at(-1)) < seen.indexOf(live[0]), "the replay comes first");
    assert.equal(live[0].sequence, replayed.length, "live events go on from the replay");
    assert.equal(deltas(seen), LONG, "replay plus live is the whole child stream");
  } finally {
    await worker.dispose();
  }
});

test("kill -9 mid-child: after the restart the parent re-attaches and finishes with the child run once", async () => {
  mark = model.requests.length;
  const worker = await startWorker({ vars: modelVars(model) });
  try {
    let restarted = false;
    script = (role, body, result) => {
      if (role === "PARENT") return result === null ? { toolCalls: [{ id: "call_crash", name: "subagent", args: { task: "CHILD: a long job" } }] } : { text: `Parent done: ${result}` };
      if (role === "CHILD") return restarted ? { text: "Child finished after the restart." } : { text: "Working on the long job, slowly, piece by piece...", chunkSize: 2, delayMs: 80 };
      return { text: "(unexpected)" };
    };
    const tab = await connect(worker.host, "sub-crash");
    tab.chat("PARENT: start a long job");
    await waitForEvent(tab, (f) => f.event.kind === "chunk" && f.event.chunk.type === "text-delta" && f.sequence >= 6, { timeout: 15000 });
    const childBefore = requestsOf("CHILD").length;
    assert.equal(childBefore, 1);
    restarted = true;
    await worker.kill();
    tab.close();

    const watcher = await connect(worker.host, "sub-crash");
    const messages = await waitUntil(async () => {
      const ms = await getMessages(worker.url, "sub-crash");
      return ms.some((m) => m.role === "assistant" && textOf(m).startsWith("Parent done:")) && ms;
    }, "the parent's recovered answer", 40000);
    const part = messages.flatMap((m) => m.parts).find((p) => p.toolCallId === "call_crash");
    assert.equal(part.state, "output-available", JSON.stringify(part));
    assert.match(part.output, /Child finished after the restart\./, "the output is the same child run's answer");
    const drill = await childMessages(worker, "sub-crash", "call_crash");
    assert.equal(drill.body.filter((m) => m.role === "user").length, 1, "the child was given its task once");
    const childRequests = requestsOf("CHILD");
    assert.equal(childRequests.length, 2, "one child call before the kill, one continuation after");
    assert.equal(childRequests[1].messages.filter((m) => m.role === "user").length, 1, "the continuation is of the same conversation");
    assert.ok(events(watcher, "call_crash").some((f) => f.event.kind === "finished"), "the re-attached tail reached the new tab");
  } finally {
    await worker.dispose();
  }
});

/**
 * A page's view of one run, as `agents`' `useAgentToolEvents` builds it: an event already
 * applied (same parentToolCallId, runId and sequence) is dropped, a run starts with `started`,
 * and a terminal event ends it. Returns the applied keys and the run's status.
 */
function pageView(frames, callId) {
  const seen = new Set();
  let status;
  const ends = { finished: "completed", error: "error", aborted: "aborted", interrupted: "interrupted" };
  for (const f of events({ frames }, callId)) {
    const key = [f.parentToolCallId, f.event.runId, f.sequence].join("\0");
    if (seen.has(key)) continue;
    seen.add(key);
    if (f.event.kind === "started" && status === undefined) status = "running";
    else if (status !== undefined && ends[f.event.kind]) status = ends[f.event.kind];
  }
  return { keys: seen, status };
}

test("kill -9 mid-child, the parent recovers before the tab is back: the tab is sent the end of the run it was following", async () => {
  mark = model.requests.length;
  const worker = await startWorker({ vars: modelVars(model) });
  try {
    let restarted = false;
    script = (role, body, result) => {
      if (role === "PARENT") return result === null ? { toolCalls: [{ id: "call_away", name: "subagent", args: { task: "CHILD: a long job" } }] } : { text: `Parent done: ${result}` };
      if (role === "CHILD") return restarted ? { text: "Finished while the tab was away." } : { text: "Working on the long job, slowly, piece by piece...", chunkSize: 2, delayMs: 80 };
      return { text: "(unexpected)" };
    };
    const tab = await connect(worker.host, "sub-away");
    tab.chat("PARENT: start a long job");
    await waitForEvent(tab, (f) => f.event.kind === "chunk" && f.event.chunk.type === "text-delta" && f.sequence >= 6, { timeout: 15000 });
    restarted = true;
    await worker.kill();
    tab.close();
    const before = [...tab.frames];
    assert.equal(pageView(before, "call_away").status, "running", "the tab saw the run start and not end");

    // No tab is connected: reading the transcript over HTTP wakes the parent, which recovers
    // and re-attaches to the child on its own.
    const messages = await waitUntil(async () => {
      const ms = await getMessages(worker.url, "sub-away");
      return ms.some((m) => m.role === "assistant" && textOf(m).startsWith("Parent done:")) && ms;
    }, "the parent's recovered answer", 40000);
    const part = messages.flatMap((m) => m.parts).find((p) => p.toolCallId === "call_away");
    assert.match(part.output, /Finished while the tab was away\./);

    // The tab comes back after the run ended (its socket reconnects, its page state is kept).
    const back = await connect(worker.host, "sub-away");
    const end = await waitForEvent(back, (f) => f.parentToolCallId === "call_away" && f.event.kind === "finished", { timeout: 10000 });
    assert.equal(end.replay, true);
    assert.equal(end.event.summary, part.output);
    const view = pageView([...before, ...back.frames], "call_away");
    assert.equal(view.status, "completed", "the run the tab was following ends");
    assert.ok(!pageView(before, "call_away").keys.has([end.parentToolCallId, end.event.runId, end.sequence].join("\0")), "at a sequence the tab had not seen");
    back.close();
  } finally {
    await worker.dispose();
  }
});

test("cancelling the parent's turn stops the child", async () => {
  mark = model.requests.length;
  const worker = await startWorker({ vars: modelVars(model) });
  try {
    script = (role) => {
      if (role === "PARENT") return { toolCalls: [{ id: "call_cancel", name: "subagent", args: { task: "CHILD: never ends" } }] };
      // One chunk, so the text-delta the tab waits for below is the whole text: the cancel
      // cannot overtake the rest of it under load (a CI run once persisted "still workin").
      return { text: "still working", chunkSize: 64, hang: true };
    };
    const tab = await connect(worker.host, "sub-cancel");
    const { id } = tab.chat("PARENT: start and cancel");
    await waitForEvent(tab, (f) => f.event.kind === "chunk" && f.event.chunk.type === "text-delta", { timeout: 15000 });
    tab.send({ type: "cf_agent_chat_request_cancel", id });
    const aborted = await waitForEvent(tab, (f) => f.parentToolCallId === "call_cancel" && f.event.kind === "aborted");
    assert.equal(aborted.sequence, Math.max(...events(tab, "call_cancel").filter((f) => f !== aborted).map((f) => f.sequence)) + 1);
    await tab.turn(id);
    // The child's turn ended (it is persisted only when its stream closes): it was aborted.
    const child = await waitUntil(async () => {
      const d = await childMessages(worker, "sub-cancel", "call_cancel");
      return d.status === 200 && d.body.some((m) => m.role === "assistant") && d.body;
    }, "the child's aborted turn");
    assert.equal(textOf(child.find((m) => m.role === "assistant")), "still working");
  } finally {
    await worker.dispose();
  }
});

test("a child's approval surfaces at the parent's tab and the answer from there runs the child's call", async () => {
  mark = model.requests.length;
  const worker = await startWorker({ vars: modelVars(model, { THINK_APPROVAL: "write" }) });
  try {
    script = (role, body, result) => {
      if (role === "PARENT") return result === null ? { toolCalls: [{ id: "call_appr", name: "subagent", args: { task: "CHILD: write the note" } }] } : { text: `Parent: ${result}` };
      if (role === "CHILD") return result === null ? { toolCalls: [{ id: "call_child_write", name: "write", args: { path: "/note.txt", content: "hello" } }] } : { text: "The note is written." };
      return { text: "(unexpected)" };
    };
    const tab = await connect(worker.host, "sub-approve");
    const { id } = tab.chat("PARENT: delegate a write");
    const request = await waitForEvent(tab, (f) => f.event.kind === "chunk" && f.event.chunk.type === "tool-approval-request", { timeout: 15000 });
    assert.equal(request.parentToolCallId, "call_appr");
    assert.equal(request.event.chunk.toolCallId, "call_child_write");
    assert.equal(requestsOf("PARENT").length, 1, "the parent waits for its child");
    tab.send({ type: "cf_agent_tool_approval", toolCallId: "call_child_write", approved: true, autoContinue: true });
    await tab.turn(id, { timeout: 20000 });
    const output = tab.chunks(id).find((c) => c.type === "tool-output-available" && c.toolCallId === "call_appr");
    assert.equal(output?.output, "The note is written.");
    const childOutput = events(tab, "call_appr").find((f) => f.event.chunk?.type === "tool-output-available");
    assert.equal(childOutput.event.chunk.toolCallId, "call_child_write");
    assert.deepEqual(childOutput.event.chunk.output, { path: "/note.txt", bytesWritten: 5, lines: 1 });
  } finally {
    await worker.dispose();
  }
});

test("two levels of nesting: the grandchild's events reach the root's tab", async () => {
  mark = model.requests.length;
  const worker = await startWorker({ vars: modelVars(model, { THINK_SUBAGENT: '{"depth": 2}' }) });
  try {
    script = (role, body, result) => {
      if (role === "PARENT") return result === null ? { toolCalls: [{ id: "call_root", name: "subagent", args: { task: "CHILD: delegate further" } }] } : { text: `Root: ${result}` };
      if (role === "CHILD") return result === null ? { toolCalls: [{ id: "call_mid", name: "subagent", args: { task: "GRANDCHILD: the leaf" } }] } : { text: `Child got ${result}` };
      if (role === "GRANDCHILD") return { text: "leaf answer", chunkSize: 3 };
      return { text: "(unexpected)" };
    };
    const tab = await connect(worker.host, "sub-nested");
    const { id } = tab.chat("PARENT: nest");
    await tab.turn(id, { timeout: 30000 });
    const output = tab.chunks(id).find((c) => c.type === "tool-output-available" && c.toolCallId === "call_root");
    assert.equal(output?.output, 'Child got "leaf answer"');
    const deep = events(tab, "call_mid");
    assert.equal(deep[0].event.kind, "started");
    assert.equal(deltas(deep), "leaf answer", "the grandchild's chunks reached the root");
    assert.deepEqual(deep.at(-1).event, { kind: "finished", result: "leaf answer", runId: "agent-tool:call_mid", summary: "leaf answer" });
    const mid = events(tab, "call_root");
    assert.ok(mid.some((f) => f.event.chunk?.type === "tool-input-available" && f.event.chunk.toolCallId === "call_mid"), "the child's own call is in its stream, for the panel to nest under");
    assert.ok(!requestsOf("GRANDCHILD")[0].tools.some((t) => t.function.name === "subagent"), "the last level has no subagent tool");
    const grand = await childMessages(worker, "sub-nested", "call_root/sub/call_mid");
    assert.equal(grand.status, 200, "the drill-in goes down through each parent");
    assert.deepEqual(grand.body.map((m) => [m.role, textOf(m)]), [["user", "GRANDCHILD: the leaf"], ["assistant", "leaf answer"]]);
    assert.equal((await childMessages(worker, "sub-nested", "call_mid")).status, 404, "the root has no run call_mid: its child has");
  } finally {
    await worker.dispose();
  }
});

test("more children than the cap wait: with maxConcurrent 2 the third starts only after one finished", async () => {
  mark = model.requests.length;
  const worker = await startWorker({ vars: modelVars(model, { THINK_SUBAGENT: '{"maxConcurrent": 2}' }) });
  try {
    const calls = ["call_cap_a", "call_cap_b", "call_cap_c"];
    script = (role, body, result) => {
      if (role === "PARENT") return result === null ? { toolCalls: calls.map((id, i) => ({ id, name: "subagent", args: { task: `CHILD: job ${i}` } })) } : { text: "all done" };
      return { text: "a child answer", chunkSize: 2, delayMs: 40 };
    };
    const tab = await connect(worker.host, "sub-cap");
    const { id } = tab.chat("PARENT: three at once");
    await tab.turn(id, { timeout: 30000 });
    const outputs = tab.chunks(id).filter((c) => c.type === "tool-output-available");
    assert.deepEqual(outputs.map((c) => c.output), ["a child answer", "a child answer", "a child answer"]);
    const frames = events(tab);
    const startedAt = (call) => frames.findIndex((f) => f.parentToolCallId === call && f.event.kind === "started");
    const firstFinished = frames.findIndex((f) => f.event.kind === "finished");
    const starts = calls.map(startedAt).sort((a, b) => a - b);
    assert.ok(starts[1] < firstFinished, "two children started at once");
    assert.ok(starts[2] > firstFinished, "the third started only after one had finished");
    assert.equal(requestsOf("CHILD").length, 3);
  } finally {
    await worker.dispose();
  }
});

test("a child that makes no progress for the stall time (stallMs 2000 here, 120 s by default) is reported interrupted", async () => {
  mark = model.requests.length;
  const worker = await startWorker({ vars: modelVars(model, { THINK_SUBAGENT: '{"stallMs": 2000}' }) });
  try {
    script = (role, body, result) => {
      if (role === "PARENT") return result === null ? { toolCalls: [{ id: "call_stall", name: "subagent", args: { task: "CHILD: hang" } }] } : { text: `Parent saw: ${result}` };
      return { text: "thinking", hang: true };
    };
    const tab = await connect(worker.host, "sub-stall");
    const { id } = tab.chat("PARENT: a child that hangs");
    await tab.turn(id, { timeout: 20000 });
    const output = tab.chunks(id).find((c) => c.type === "tool-output-available" && c.toolCallId === "call_stall");
    assert.deepEqual(output?.output, { ok: false, status: "interrupted", error: "The child agent made no progress for 2 s.", retryable: true });
    const last = events(tab, "call_stall").at(-1);
    assert.equal(last.event.kind, "interrupted");
    assert.equal(requestsOf("PARENT").length, 2, "the parent went on with the failure");
  } finally {
    await worker.dispose();
  }
});
