// Crash tests: workerd is killed with SIGKILL in the middle of a turn (nothing is flushed or
// closed), Miniflare starts again on the same persist directory, and the agent must come back
// with nothing lost, every server tool call settled, no tool run twice, and a working next turn.
// Each case runs several times with a fresh agent per run and logs its pass count.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import http from "node:http";
import path from "node:path";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars, ROOT } from "./helpers/worker.mjs";
import { connect, connectRaw, closeTabs, getMessages, newId, assertIdle } from "./helpers/client.mjs";

const RUNS = 5;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let model;
let mcp;

/** The scripted model answers through `reply`, which each run sets for the phase it is in. */
let reply = () => ({ text: "(unscripted)" });

/** The alarm case (last test) waits ~10 s for the alarm; it is started first and runs alongside. */
let alarmCase;

before(async () => {
  model = await startScriptedModel();
  model.setFallback((body) => reply(body));
  mcp = await startCountingMcpServer();
  alarmCase = await startAlarmCase();
});

after(async () => {
  closeTabs();
  await alarmCase?.dispose();
  await model?.close();
  await mcp?.close();
});

// ---------------------------------------------------------------------------------------------
// Helpers

const isToolPart = (p) => typeof p.type === "string" && (p.type.startsWith("tool-") || p.type === "dynamic-tool");

/** Tool parts a crash left without a result (no client tools are used here). */
const unsettled = (messages) =>
  messages.flatMap((m) => m.parts.filter((p) => isToolPart(p) && ["input-streaming", "input-available"].includes(p.state)));

const textOf = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");

const deltas = (chunks) => chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join("");

/** Tabs of the current run; all are closed when the run ends, passed or not. */
const openTabs = [];

async function open(worker, name) {
  const tab = await connect(worker.host, name);
  openTabs.push(tab);
  return tab;
}

/** Polls the transcript until `pred` holds. */
async function waitForTranscript(url, name, pred, what, timeoutMs = 10000) {
  const until = Date.now() + timeoutMs;
  let last;
  while (Date.now() < until) {
    last = await getMessages(url, name);
    if (pred(last)) return last;
    await sleep(40);
  }
  throw new Error(`timed out waiting for ${what}; transcript: ${JSON.stringify(last)}`);
}

/**
 * Everything persisted before the kill is still there, unchanged, except that a tool part
 * waiting for its approved run may since have got its result.
 */
function assertKept(before, after) {
  const SETTLED = ["output-available", "output-error"];
  for (const m of before) {
    const again = after.find((x) => x.id === m.id);
    assert.ok(again, `message ${m.id} (${m.role}) was lost`);
    const expected = {
      ...m,
      parts: m.parts.map((p, i) => {
        const now = again.parts[i];
        const ran = p.state === "approval-responded" && now?.toolCallId === p.toolCallId && SETTLED.includes(now.state);
        return ran ? { ...now, input: p.input, approval: p.approval } : p;
      }),
    };
    assert.deepEqual(again, expected, `message ${m.id} changed across the crash`);
  }
}

/** A turn that reads `file` with the `read` tool; returns the tool's output (and proves turns work). */
async function readFile(worker, name, file) {
  const tab = await open(worker, name);
  const callId = `call_read_${newId("r")}`;
  let step = 0;
  reply = () => (step++ === 0 ? { toolCalls: [{ id: callId, name: "read", args: { path: file } }] } : { text: "Read it." });
  const { id } = tab.chat(`read ${file}`, { messages: await getMessages(worker.url, name) });
  await tab.turn(id);
  const chunks = tab.chunks(id);
  tab.close();
  assert.equal(deltas(chunks), "Read it.", "the turn after the crash completes");
  const out = chunks.find((c) => c.toolCallId === callId && (c.type === "tool-output-available" || c.type === "tool-output-error"));
  assert.ok(out, JSON.stringify(chunks));
  return out.output;
}

/**
 * Starts an agent with one earlier turn that created `/notes/earlier.txt` (with `edit`, which
 * no approval policy here gates) and answered.
 */
async function earlierTurn(worker, name) {
  const tab = await open(worker, name);
  let step = 0;
  reply = () =>
    step++ === 0
      ? { toolCalls: [{ id: `call_earlier_${name}`, name: "edit", args: { path: "/notes/earlier.txt", old_string: "", new_string: "count:" } }] }
      : { text: "Saved the earlier note." };
  const { id } = tab.chat("save an earlier note");
  await tab.turn(id);
  assert.equal(deltas(tab.chunks(id)), "Saved the earlier note.");
  return tab;
}

/** The checks every case makes after the restart. */
async function checkAfterRestart(worker, name, before) {
  const after = await getMessages(worker.url, name);
  assertKept(before, after);
  assert.deepEqual(unsettled(after), [], "no server tool part is left without a result");
  const earlier = await readFile(worker, name, "/notes/earlier.txt");
  assert.match(earlier.content, /^1\tcount:/, "the file written by the earlier turn is still there");
  return earlier;
}

/** Runs `body` RUNS times, each with a fresh agent name; logs and returns the pass count. */
async function repeat(label, body, runs = RUNS) {
  let passed = 0;
  const failures = [];
  for (let i = 0; i < runs; i++) {
    try {
      await body(i, `${label}-${i}-${Date.now().toString(36)}`);
      passed++;
    } catch (e) {
      failures.push(e);
    } finally {
      for (const tab of openTabs.splice(0)) tab.close();
    }
  }
  console.log(`crash ${label}: ${passed}/${runs} passed`);
  if (failures.length) throw failures[0];
}

/** Waits for the `n`-th frame of `id` whose chunk is of `type`. */
function nthChunk(tab, id, type, n = 1) {
  let seen = 0;
  return tab.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === id && typeof f.body === "string" && f.body.includes(`"type":"${type}"`) && ++seen >= n);
}

/**
 * The MCP test server behind a proxy that counts `tools/call` requests, so a test can tell
 * whether a tool ran once or twice.
 */
async function startCountingMcpServer() {
  const child = spawn(process.execPath, [path.join(ROOT, "tests/mcp/servers/server.mjs"), "--json"], { stdio: ["ignore", "pipe", "inherit"] });
  const upstream = await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const line = out.split("\n").find((l) => l.includes('"ready"'));
      if (line) resolve(JSON.parse(line).port);
    });
    child.on("exit", (code) => reject(new Error(`MCP server exited with ${code}`)));
  });
  const calls = [];
  const proxy = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    try {
      const msg = JSON.parse(body.toString("utf8"));
      if (msg?.method === "tools/call") calls.push(msg.params);
    } catch {}
    const up = http.request({ host: "127.0.0.1", port: upstream, path: req.url, method: req.method, headers: req.headers }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      ur.pipe(res);
    });
    up.on("error", () => res.destroy());
    res.on("close", () => up.destroy());
    up.end(body);
  });
  await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${proxy.address().port}/mcp`,
    calls,
    async close() {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
      child.kill();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// 1. Mid-stream

test("kill -9 mid-stream: the partial answer is kept or dropped, never lost history, and recovery continues once", async () => {
  const worker = await startWorker({ vars: modelVars(model) });
  try {
    const LONG = "This answer streams slowly, a few letters at a time, so the crash lands in the middle of it.";
    await repeat("mid-stream", async (i, name) => {
      const tab = await earlierTurn(worker, name);
      reply = () => ({ text: LONG, chunkSize: 3, delayMs: 25 });
      const { id } = tab.chat("tell me something long", { messages: await getMessages(worker.url, name) });
      // Straddle the buffer's 10-chunk rows: some kills land before the first text row is written.
      await nthChunk(tab, id, "text-delta", [2, 5, 9, 12, 16][i % 5]);
      const before = await getMessages(worker.url, name);
      assert.equal(before.at(-1).role, "user", "the interrupted user message was persisted before the stream");
      await worker.kill();
      tab.close();
      const requestsAtRestart = model.requests.length;
      reply = () => ({ text: "Recovered after the crash." });

      const watcher = await open(worker, name);
      const recovered = await waitForTranscript(worker.url, name, (ms) => ms.some((m) => m.role === "assistant" && textOf(m) === "Recovered after the crash."), "the recovery continuation");
      await watcher.waitFor((f) => f.type === "cf_agent_chat_recovering" && f.recovering === false);
      assert.equal(model.requests.length, requestsAtRestart + 1, "recovery asked the model exactly once");
      const continuation = model.requests.at(-1);
      assert.deepEqual(continuation.messages.filter((m) => m.role === "user").at(-1), { role: "user", content: "tell me something long" });
      // Whatever partial answer was kept is a prefix of what streamed; it sits between the
      // interrupted user message and the continuation.
      const tail = recovered.slice(before.length);
      assert.ok(tail.length === 1 || tail.length === 2, JSON.stringify(tail));
      if (tail.length === 2) assert.ok(LONG.startsWith(textOf(tail[0])) && textOf(tail[0]).length > 0, textOf(tail[0]));
      watcher.close();

      await checkAfterRestart(worker, name, before);
      await assertIdle(await open(worker, name), "no further recovery turn is pending or running");
      assert.equal(model.requests.length, requestsAtRestart + 3, "no further recovery turn ran");
    });
  } finally {
    await worker.dispose();
  }
});

test("kill -9 mid-stream: a tab that connects during the recovered turn, never ACKs, and sends a message gets its answer", async () => {
  const worker = await startWorker({ vars: modelVars(model) });
  try {
    const QUESTION = "a question during the recovery";
    const ANSWER = "The answer for the tab that joined during the recovery.";
    const SLOW = "The recovered answer streams slowly, so a tab can join while it runs.";
    await repeat("join-recovery", async (i, name) => {
      const tab = await earlierTurn(worker, name);
      reply = () => ({ text: "This answer is cut by the crash, a few letters at a time.", chunkSize: 3, delayMs: 25 });
      const { id } = tab.chat("tell me something long", { messages: await getMessages(worker.url, name) });
      await nthChunk(tab, id, "text-delta", 3);
      await worker.kill();
      tab.close();
      const requestsAtRestart = model.requests.length;
      reply = (body) =>
        body.messages.filter((m) => m.role === "user").at(-1)?.content === QUESTION ? { text: ANSWER } : { text: SLOW, chunkSize: 2, delayMs: 30 };

      // The first tab wakes the object; the recovery turn is streaming once the model is asked.
      const watcher = await open(worker, name);
      await model.waitForRequests(requestsAtRestart + 1);
      const raw = await connectRaw(worker.host, name);
      openTabs.push(raw);
      await raw.waitFor((f) => f.type === "cf_agent_stream_resuming");
      const own = raw.chat(QUESTION, { messages: await getMessages(worker.url, name) });
      await raw.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === own.id && f.done, { timeout: 20000 });
      assert.equal(deltas(raw.responses(own.id).filter((f) => f.body?.trim() && !f.error).map((f) => JSON.parse(f.body))), ANSWER);
      await watcher.waitFor((f) => f.type === "cf_agent_chat_recovering" && f.recovering === false);
      const after = await getMessages(worker.url, name);
      assert.equal(textOf(after.at(-1)), ANSWER, "the answer follows the question in the transcript");
      assert.equal(textOf(after.at(-2)), QUESTION);
    }, 3);
  } finally {
    await worker.dispose();
  }
});

test("kill -9 with messages waiting in the queue: after recovery each is answered in order, over the history up to it", async () => {
  const worker = await startWorker({ vars: modelVars(model) });
  try {
    await repeat("queued", async (i, name) => {
      const tab = await earlierTurn(worker, name);
      const lastUser = (body) => body.messages.filter((m) => m.role === "user").at(-1)?.content;
      reply = () => ({ text: "Cut by the crash", hang: true });
      const start = model.requests.length;
      const earlier = await getMessages(worker.url, name);
      const one = tab.chat("one", { messages: earlier });
      await model.waitForRequests(start + 1);
      const two = tab.chat("two", { messages: [...earlier, one.userMessage] });
      tab.chat("three", { messages: [...earlier, one.userMessage, two.userMessage] });
      // Both are shown (queued) before the kill.
      await waitForTranscript(worker.url, name, (ms) => ms.at(-1)?.parts[0]?.text === "three", "the queued messages");
      await worker.kill();
      tab.close();
      const atRestart = model.requests.length;
      reply = (body) => ({ text: `answer to ${lastUser(body)}` });

      await open(worker, name);
      const after = await waitForTranscript(worker.url, name, (ms) => ms.some((m) => textOf(m) === "answer to three"), "the queued turns", 20000);
      const calls = model.requests.slice(atRestart);
      assert.deepEqual(calls.map(lastUser), ["one", "two", "three"], "recovery, then one turn per queued message, each ending with its own message");
      // A kept partial answer of "one" may precede its recovered answer (or hold it, continued).
      const said = (m) => (m.role === "user" ? m.parts[0].text : textOf(m).match(/answer to \w+/)?.[0]);
      const tail = after.slice(earlier.length).map(said).filter(Boolean);
      assert.deepEqual(tail, ["one", "answer to one", "two", "answer to two", "three", "answer to three"]);
    }, 3);
  } finally {
    await worker.dispose();
  }
});

// ---------------------------------------------------------------------------------------------
// 2. Mid-tool

const NOT_RECORDED = "The tool call was interrupted before a result was recorded.";
const DURING_RUN = /interrupted by a restart while it ran/;

/** The recovery continuation's model request holds the call's result exactly once. */
function assertToolResultOnce(request, callId) {
  const results = request.messages.filter((m) => m.role === "tool" && m.tool_call_id === callId);
  assert.equal(results.length, 1, JSON.stringify(request.messages));
  return results[0];
}

test("kill -9 around a server tool (edit): settled from the ledger, never run twice", async () => {
  const worker = await startWorker({ vars: modelVars(model) });
  try {
    await repeat("mid-tool", async (i, name) => {
      const tab = await earlierTurn(worker, name);
      const callId = `call_edit_${i}`;
      let step = 0;
      // The edit appends one "I" per run, so a second run would show as "count:II".
      reply = () => (step++ === 0 ? { toolCalls: [{ id: callId, name: "edit", args: { path: "/notes/earlier.txt", old_string: "count:", new_string: "count:I" } }] } : { hang: true });
      const requestsBefore = model.requests.length;
      const { id } = tab.chat("bump the counter", { messages: await getMessages(worker.url, name) });
      const afterOutput = i % 2 === 0;
      if (afterOutput) {
        // The tool ran and the model is already asked for the next step.
        await nthChunk(tab, id, "tool-output-available");
        await model.waitForRequests(requestsBefore + 2);
      } else {
        // As early as possible: the moment the call is announced. (`edit` runs synchronously
        // right after, so the kill usually lands after it anyway; a ledger without a result
        // is what the MCP case below covers.)
        await nthChunk(tab, id, "tool-input-available");
      }
      const before = await getMessages(worker.url, name);
      await worker.kill();
      tab.close();
      const requestsAtRestart = model.requests.length;
      reply = () => ({ text: "Recovered after the tool." });

      const watcher = await open(worker, name);
      const recovered = await waitForTranscript(worker.url, name, (ms) => ms.some((m) => textOf(m) === "Recovered after the tool."), "the recovery continuation");
      await watcher.waitFor((f) => f.type === "cf_agent_chat_recovering" && f.recovering === false);
      watcher.close();
      assert.equal(model.requests.length, requestsAtRestart + 1, "recovery asked the model exactly once");
      const toolMessage = assertToolResultOnce(model.requests.at(-1), callId);
      const part = recovered.flatMap((m) => m.parts).find((p) => p.toolCallId === callId);
      assert.ok(part, "the tool call survived the crash");

      const file = await checkAfterRestart(worker, name, before);
      if (part.state === "output-available") {
        assert.equal(file.content, "1\tcount:I", "a recorded edit ran exactly once");
        assert.doesNotMatch(toolMessage.content, /interrupted/);
      } else {
        assert.equal(part.state, "output-error", JSON.stringify(part));
        assert.ok(!afterOutput, "an edit whose output was streamed is not reported as interrupted");
        if (part.errorText === NOT_RECORDED) assert.equal(file.content, "1\tcount:", "an edit with no ledger entry never ran");
        else assert.match(part.errorText, DURING_RUN);
        assert.notEqual(file.content, "1\tcount:II");
      }
      if (afterOutput) assert.equal(part.state, "output-available");
    });
  } finally {
    await worker.dispose();
  }
});

test("kill -9 while a slow MCP tool runs: the call is reported interrupted and not run again", async () => {
  const worker = await startWorker({ vars: modelVars(model) });
  try {
    await repeat("mid-mcp-tool", async (i, name) => {
      const tab = await earlierTurn(worker, name);
      const added = await tab.client.call("addMcpServer", ["slow-server", mcp.url]);
      assert.equal(added.state, "ready", JSON.stringify(added));
      const toolName = `tool_${added.id.replace(/-/g, "")}_slow`;
      const callId = `call_slow_${i}`;
      const ms = 2000 + i; // tells this run's call apart at the server
      let step = 0;
      reply = () => (step++ === 0 ? { toolCalls: [{ id: callId, name: toolName, args: { ms } }] } : { text: "The slow tool finished." });
      const { id } = tab.chat("run the slow tool", { messages: await getMessages(worker.url, name) });
      await nthChunk(tab, id, "tool-input-available");
      const callsOfRun = () => mcp.calls.filter((c) => c.name === "slow" && c.arguments?.ms === ms).length;
      const until = Date.now() + 5000;
      while (callsOfRun() === 0 && Date.now() < until) await sleep(10);
      assert.equal(callsOfRun(), 1, "the MCP server got the call");
      const before = await getMessages(worker.url, name);
      await worker.kill();
      tab.close();
      const requestsAtRestart = model.requests.length;
      reply = () => ({ text: "Recovered after the slow tool." });

      const watcher = await open(worker, name);
      const recovered = await waitForTranscript(worker.url, name, (msgs) => msgs.some((m) => textOf(m) === "Recovered after the slow tool."), "the recovery continuation");
      await watcher.waitFor((f) => f.type === "cf_agent_chat_recovering" && f.recovering === false);
      watcher.close();
      assert.equal(model.requests.length, requestsAtRestart + 1, "recovery asked the model exactly once");
      const part = recovered.flatMap((m) => m.parts).find((p) => p.toolCallId === callId);
      assert.equal(part?.state, "output-error", JSON.stringify(part));
      assert.match(part.errorText, DURING_RUN);
      assert.match(assertToolResultOnce(model.requests.at(-1), callId).content, DURING_RUN);

      await checkAfterRestart(worker, name, before);
      assert.equal(callsOfRun(), 1, "the interrupted call was not run again");
    });
  } finally {
    await worker.dispose();
  }
});

// ---------------------------------------------------------------------------------------------
// 3. Waiting for an approval


test("kill -9 while an approval is pending: it survives, can be approved, and the tool runs once", async () => {
  const worker = await startWorker({ vars: modelVars(model, { THINK_APPROVAL: "write" }) });
  // Where workerd dies: after the turn that asks for approval ended; the moment the request
  // reaches the tab (its stream may still be open); after approving, inside the 50 ms before
  // the continuation starts (it lived only in memory); after approving, once the continuation
  // ran the tool and is waiting for the model.
  const KILL_AT = ["turn-done", "approval-request-frame", "approved-before-continuation", "approved-continuation"];
  try {
    await repeat("approval", async (i, name) => {
      const killAt = KILL_AT[i % KILL_AT.length];
      const tab = await earlierTurn(worker, name);
      const callId = `call_write_${i}`;
      const content = `approved in run ${i}`;
      let step = 0;
      reply = () => (step++ === 0 ? { toolCalls: [{ id: callId, name: "write", args: { path: "/notes/approved.txt", content } }] } : { hang: true });
      const { id } = tab.chat("write the approved note", { messages: await getMessages(worker.url, name) });
      if (killAt === "approval-request-frame") {
        await nthChunk(tab, id, "tool-approval-request");
      } else {
        await tab.turn(id);
      }
      if (killAt === "approved-before-continuation") {
        tab.send({ type: "cf_agent_tool_approval", toolCallId: callId, approved: true, autoContinue: true });
        await tab.waitFor((f) => f.type === "cf_agent_message_updated" && f.message.parts.some((p) => p.toolCallId === callId && p.state === "approval-responded"));
      }
      if (killAt === "approved-continuation") {
        // Approve; the continuation runs the write, then the model hangs and workerd dies.
        const requests = model.requests.length;
        tab.send({ type: "cf_agent_tool_approval", toolCallId: callId, approved: true, autoContinue: true });
        await tab.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.body?.includes('"tool-output-available"') && f.body.includes(callId));
        await model.waitForRequests(requests + 1);
      }
      const before = await getMessages(worker.url, name);
      await worker.kill();
      tab.close();
      const requestsAtRestart = model.requests.length;

      const watcher = await open(worker, name);
      let part;
      if (killAt.startsWith("approved")) {
        reply = () => ({ text: "Recovered after the approved write." });
        const recovered = await waitForTranscript(worker.url, name, (ms) => ms.some((m) => textOf(m) === "Recovered after the approved write."), "the recovery continuation");
        part = recovered.flatMap((m) => m.parts).find((p) => p.toolCallId === callId);
        assert.equal(part?.state, "output-available", JSON.stringify(part));
        assert.equal(model.requests.length, requestsAtRestart + 1, "recovery asked the model exactly once");
        assert.match(assertToolResultOnce(model.requests.at(-1), callId).content, /bytesWritten/);
        assertKept(before, recovered);
        assert.deepEqual(unsettled(recovered), []);
      } else {
        reply = () => ({ text: "Written after the crash." });
        // Recovery (if the stream was cut) persists the approval request and does not continue.
        const pending = await waitForTranscript(
          worker.url,
          name,
          (ms) => ms.some((m) => m.parts.some((p) => p.toolCallId === callId && p.state === "approval-requested")),
          "the pending approval",
        );
        await assertIdle(watcher, "nothing runs while the approval is pending");
        assert.equal(model.requests.length, requestsAtRestart, "nothing ran while the approval is pending");
        const now = await getMessages(worker.url, name);
        assertKept(before, now);
        assert.deepEqual(unsettled(now), []);
        part = pending.flatMap((m) => m.parts).find((p) => p.toolCallId === callId);
        assert.match(part.approval?.id ?? "", /^approval_/);

        watcher.send({ type: "cf_agent_tool_approval", toolCallId: callId, approved: true, autoContinue: true });
        const chunks = (await watcher.followContinuation()).chunks;
        const output = chunks.find((c) => c.type === "tool-output-available" && c.toolCallId === callId);
        assert.deepEqual(output?.output, { path: "/notes/approved.txt", bytesWritten: content.length, lines: 1 }, JSON.stringify(chunks));
        assert.equal(deltas(chunks), "Written after the crash.");
        assert.equal(model.requests.length, requestsAtRestart + 1);
        assertToolResultOnce(model.requests.at(-1), callId);
        const settled = (await getMessages(worker.url, name)).flatMap((m) => m.parts).find((p) => p.toolCallId === callId);
        assert.equal(settled.state, "output-available");
      }
      watcher.close();
      const file = await readFile(worker, name, "/notes/approved.txt");
      assert.equal(file.content, `1\t${content}`, "the approved write took effect");
      const earlier = await readFile(worker, name, "/notes/earlier.txt");
      assert.equal(earlier.content, "1\tcount:");
    }, 8);
  } finally {
    await worker.dispose();
  }
});

// ---------------------------------------------------------------------------------------------
// 4. A turn that crashes the process every time

test("a turn whose recovery crashes every time is given up after three attempts", async () => {
  const worker = await startWorker({ vars: modelVars(model) });
  try {
    await repeat("crash-loop", async (i, name) => {
      const tab = await earlierTurn(worker, name);
      reply = () => ({ text: "Working on it", hang: true });
      const start = model.requests.length;
      tab.chat("this crashes the process every time", { messages: await getMessages(worker.url, name) });
      await model.waitForRequests(start + 1);
      const before = await getMessages(worker.url, name);
      tab.close();
      const continuations = [];
      for (let k = 0; k < 4; k++) {
        await worker.kill();
        const at = model.requests.length;
        const watcher = await open(worker, name);
        if (k < 3) await model.waitForRequests(at + 1);
        else await assertIdle(watcher, "the given-up turn is not continued");
        continuations.push(model.requests.length - at);
        watcher.close();
      }
      assert.deepEqual(continuations, [1, 1, 1, 0], "three recovery continuations, then none");
      await worker.kill();
      await assertIdle(await open(worker, name), "a later restart does not continue the turn");
      assert.equal(model.requests.length, start + 4, "a later restart does not pick the turn up again");
      await checkAfterRestart(worker, name, before);
    }, 3);
  } finally {
    await worker.dispose();
  }
});

// ---------------------------------------------------------------------------------------------
// 5. Nobody comes back: the alarm recovers the turn

/**
 * Kills workerd mid-turn and then sends the restarted Worker no request at all: the alarm the
 * turn armed (10 s after it started) must wake the object and recover the turn. It has its own
 * model and Worker so its late model call cannot disturb the other cases' counts.
 */
async function startAlarmCase() {
  const alarmModel = await startScriptedModel();
  alarmModel.push({ text: "Half an answer", hang: true }, { text: "Recovered by the alarm." });
  const worker = await startWorker({ vars: modelVars(alarmModel) });
  const tab = await connect(worker.host, "alarm");
  const started = Date.now();
  tab.chat("are you still there?");
  await alarmModel.waitForRequests(1);
  await worker.kill();
  tab.close();
  return {
    started,
    worker,
    model: alarmModel,
    async dispose() {
      await worker.dispose();
      await alarmModel.close();
    },
  };
}

test("with no client coming back, the heartbeat alarm recovers the interrupted turn", async () => {
  const { worker, model: alarmModel, started } = alarmCase;
  await alarmModel.waitForRequests(2, Math.max(1000, started + 20000 - Date.now()));
  const after = await waitForTranscript(worker.url, "alarm", (ms) => ms.some((m) => textOf(m) === "Recovered by the alarm."), "the alarm's recovery");
  assert.deepEqual(after.map((m) => m.role), ["user", "assistant"]);
  assert.equal(alarmModel.requests.length, 2);
});
