// Test-side use of the real npm client: `AgentClient` from `agents/client` over the `ws`
// package, with helpers to send chat frames and wait for the frames that come back.
// THINK_TEST_AGENTS=next selects the newest `agents` (installed as `agents-next`) instead of the
// pinned 0.21; `npm test` runs the protocol's test files against both (scripts/test.sh).
import WebSocket from "ws";
import assert from "node:assert/strict";

/** The npm package the client comes from: `agents` (0.21) or `agents-next` (the newest). */
export const AGENTS_PACKAGE = process.env.THINK_TEST_AGENTS === "next" ? "agents-next" : "agents";
const { AgentClient } = await import(`${AGENTS_PACKAGE}/client`);

let counter = 0;
export const newId = (prefix = "req") => `${prefix}_${Date.now().toString(36)}_${counter++}`;

/** Every tab opened by this test file, so `closeTabs()` can close the ones a failed test left. */
const openTabs = new Set();

/** Closes every tab still open (call it from `after`): an open AgentClient keeps reconnecting. */
export function closeTabs() {
  for (const tab of openTabs) tab.close();
}

export async function connect(host, name, { agent = "ThinkAgent", ...rest } = {}) {
  const frames = [];
  const listeners = new Set();
  const client = new AgentClient({ agent, name, host, WebSocket, ...rest });
  client.addEventListener("message", (event) => {
    if (typeof event.data !== "string") return;
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch {
      return;
    }
    frames.push(frame);
    for (const l of listeners) l(frame);
  });
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("connect timeout")), 10000);
    client.addEventListener("open", () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });
  const tab = {
    client,
    frames,
    send(frame) {
      client.send(typeof frame === "string" ? frame : JSON.stringify(frame));
    },
    /** Resolves with the first frame (already received or future) matching `pred`. */
    waitFor: (pred, opts) => waitForFrame(frames, listeners, pred, opts),
    /** Sends a chat request as useAgentChat's transport does and returns its request id. */
    chat(text, { messages, id = newId(), body = {}, trigger = "submit-message" } = {}) {
      const userMessage = { id: newId("msg"), role: "user", parts: [{ type: "text", text }] };
      const all = messages ? [...messages, userMessage] : [userMessage];
      tab.send({ id, init: { method: "POST", body: JSON.stringify({ messages: all, trigger, ...body }) }, type: "cf_agent_use_chat_request" });
      return { id, userMessage };
    },
    /** Waits for the done frame of request `id` and returns that request's chunks (parsed). */
    async turn(id, opts) {
      await tab.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === id && f.done === true, opts);
      return tab.responses(id);
    },
    /**
     * Does what useAgentChat does after answering a tool call or approval: probes for the
     * continuation stream, ACKs it, and collects it to its end.
     */
    async followContinuation() {
      const from = frames.length;
      tab.send({ type: "cf_agent_stream_resume_request", probeId: newId("probe") });
      const resuming = await tab.waitFor((f) => f.type === "cf_agent_stream_resuming", { from });
      tab.send({ type: "cf_agent_stream_resume_ack", id: resuming.id });
      await tab.waitFor((f) => f.type === "cf_agent_use_chat_response" && f.id === resuming.id && f.done, { from });
      const seen = frames.slice(from);
      const chunks = seen
        .filter((f) => f.type === "cf_agent_use_chat_response" && f.id === resuming.id && f.body?.trim() && !f.error)
        .map((f) => JSON.parse(f.body));
      return { id: resuming.id, frames: seen, chunks };
    },
    responses(id) {
      return frames.filter((f) => f.type === "cf_agent_use_chat_response" && f.id === id);
    },
    chunks(id) {
      return tab
        .responses(id)
        .filter((f) => !f.error && f.body && f.body.trim())
        .map((f) => JSON.parse(f.body));
    },
    close() {
      openTabs.delete(tab);
      client.close();
    },
  };
  openTabs.add(tab);
  return tab;
}

/** Resolves with the first frame of `frames` (already received or future) matching `pred`. */
function waitForFrame(frames, listeners, pred, { timeout = 10000, from = 0 } = {}) {
  const seen = frames.slice(from).find(pred);
  if (seen) return Promise.resolve(seen);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      listeners.delete(l);
      reject(new Error(`timed out waiting for a frame; got ${JSON.stringify(frames.slice(-5))}`));
    }, timeout);
    const l = (f) => {
      if (pred(f)) {
        clearTimeout(timer);
        listeners.delete(l);
        resolve(f);
      }
    };
    listeners.add(l);
  });
}

/**
 * A bare WebSocket to the agent (the `ws` package, no `agents` client): it answers nothing on
 * its own, so it never ACKs a resume offer, as a client without resume or a lost frame would.
 */
export async function connectRaw(host, name) {
  const frames = [];
  const listeners = new Set();
  const ws = new WebSocket(`ws://${host}/agents/think-agent/${name}?_pk=${newId("raw")}`);
  ws.on("message", (data, isBinary) => {
    if (isBinary) return;
    let frame;
    try {
      frame = JSON.parse(data.toString("utf8"));
    } catch {
      return;
    }
    frames.push(frame);
    for (const l of listeners) l(frame);
  });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const tab = {
    frames,
    send(frame) {
      ws.send(typeof frame === "string" ? frame : JSON.stringify(frame));
    },
    waitFor: (pred, opts) => waitForFrame(frames, listeners, pred, opts),
    /** Sends a chat request as useAgentChat's transport does and returns its request id. */
    chat(text, { messages = [] } = {}) {
      const userMessage = { id: newId("msg"), role: "user", parts: [{ type: "text", text }] };
      const id = newId();
      tab.send({ id, init: { method: "POST", body: JSON.stringify({ messages: [...messages, userMessage], trigger: "submit-message" }) }, type: "cf_agent_use_chat_request" });
      return { id, userMessage };
    },
    responses(id) {
      return frames.filter((f) => f.type === "cf_agent_use_chat_response" && f.id === id);
    },
    close() {
      openTabs.delete(tab);
      ws.close();
    },
  };
  openTabs.add(tab);
  return tab;
}

/**
 * One turn in which the scripted `model` calls the tool `call` ({name, args}) and then answers
 * `text`; returns the call's output chunk and clears the tab's frames.
 */
export async function toolTurn(model, tab, call, { text = "done", timeout = 120000 } = {}) {
  model.push({ toolCalls: [{ id: newId("call"), ...call }] }, { text });
  const { id } = tab.chat(`run ${call.name}`);
  await tab.turn(id, { timeout });
  const out = tab.chunks(id).find((c) => c.type === "tool-output-available" || c.type === "tool-output-error");
  tab.frames.length = 0;
  return out;
}

/**
 * Asserts that the agent is idle: nothing streaming, queued or about to continue. It asks
 * with a resume probe, which only an idle agent answers `resume_none {reason:"idle"}`; frames
 * on one socket are handled in order, so the answer also proves that every earlier frame was
 * handled. An idle agent offers nothing to ACK, so the probe leaves the tab as it was.
 */
export async function assertIdle(tab, message = "the agent is idle") {
  const probeId = newId("probe");
  tab.send({ type: "cf_agent_stream_resume_request", probeId });
  const answer = await tab.waitFor((f) => f.probeId === probeId);
  assert.deepEqual(answer, { type: "cf_agent_stream_resume_none", reason: "idle", probeId }, message);
}

/** GET /agents/think-agent/<name>/get-messages. */
export async function getMessages(baseUrl, name) {
  const res = await fetch(new URL(`/agents/think-agent/${name}/get-messages`, baseUrl));
  if (!res.ok) throw new Error(`get-messages: ${res.status}`);
  return res.json();
}
