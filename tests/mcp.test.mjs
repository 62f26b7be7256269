// MCP over the real stack: the unmodified `agents` client manages servers through the built-in
// rpc callables, the Rust agent in Miniflare connects to MCP test servers built on the real
// @modelcontextprotocol/sdk (tests/mcp/servers/server.mjs, one process each, on 127.0.0.1),
// and the scripted model calls their tools.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { startScriptedModel, lastMessage } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { startMcpServer } from "./mcp/start-server.mjs";
import { connect, closeTabs, getMessages, newId } from "./helpers/client.mjs";

const APPROVAL = "tool_*_filler_*";

let model;
let worker;
const mcp = {};

before(async () => {
  model = await startScriptedModel();
  [mcp.main, mcp.mutable, mcp.auth, mcp.doomed, mcp.restart] = await Promise.all([
    startMcpServer(),
    startMcpServer(),
    startMcpServer("--token", "sekret", "--json", "--page-size", "100"),
    startMcpServer(),
    startMcpServer(),
  ]);
  worker = await startWorker({ vars: modelVars(model, { THINK_APPROVAL: APPROVAL }) });
});

after(async () => {
  closeTabs();
  for (const tab of tabs) tab.close();
  await worker?.dispose();
  await model?.close();
  await Promise.all(Object.values(mcp).map((s) => s.kill()));
});

const ALL_TOOLS = ["echo", "add", "fail", "image", "slow", "mutate", "grow", "interrupt", "filler_1", "filler_2", "filler_3", "filler_4"];
const toolNames = (request) => (request.tools ?? []).map((t) => t.function.name);
const toolDef = (request, name) => (request.tools ?? []).find((t) => t.function.name === name)?.function;
/** The `mcp` state of the first cf_agent_mcp_servers frame matching `pred`. */
const mcpFrame = async (tab, pred, opts) => (await tab.waitFor((f) => f.type === "cf_agent_mcp_servers" && pred(f.mcp), opts)).mcp;

/** A tab, closed after the tests even when its test fails (an open AgentClient keeps reconnecting). */
const tabs = [];
async function open(name) {
  const tab = await connect(worker.host, name);
  tabs.push(tab);
  return tab;
}

/** Registers a server through AgentClient's rpc and checks it came up. */
async function addServer(tab, name, url, options) {
  const added = await tab.client.call("addMcpServer", [name, url, options]);
  assert.equal(added.state, "ready", `addMcpServer(${name}): ${JSON.stringify(added)}`);
  return added;
}

/** Runs one chat turn whose model replies are `replies`, and returns its chunks. */
async function turn(tab, text, ...replies) {
  model.push(...replies);
  const { id } = tab.chat(text);
  await tab.turn(id, { timeout: 20000 });
  assert.ok(!tab.responses(id).some((f) => f.error), `turn failed: ${JSON.stringify(tab.responses(id).filter((f) => f.error))}`);
  return tab.chunks(id);
}

test("add, list and remove over rpc; every change reaches a second tab as cf_agent_mcp_servers", async () => {
  const tab = await open("rpc");
  const other = await open("rpc");
  await mcpFrame(other, (m) => Object.keys(m.servers).length === 0);

  const added = await addServer(tab, "main", mcp.main.mcp, { id: "Pager" });
  assert.deepEqual(added, { id: "pager", state: "ready" }, "the id is normalised as the reference does");
  const frame = await mcpFrame(other, (m) => m.servers.pager?.state === "ready");
  const entry = frame.servers.pager;
  assert.deepEqual(Object.keys(entry), ["auth_url", "capabilities", "error", "instructions", "name", "server_url", "state"]);
  assert.equal(entry.name, "main");
  assert.equal(entry.server_url, mcp.main.mcp);
  assert.equal(entry.error, null);
  assert.equal(entry.instructions, "A test server. Use echo to echo.");
  assert.deepEqual(entry.capabilities.tools, { listChanged: true });
  // The server pages tools/list three at a time: all four pages were read.
  assert.deepEqual(frame.tools.map((t) => t.name), ALL_TOOLS);
  assert.ok(frame.tools.every((t) => t.serverId === "pager"));
  assert.deepEqual(frame.prompts.map((p) => p.name), ["greet"]);
  assert.deepEqual(frame.resources.map((r) => r.uri), ["test://readme"]);

  const listed = await tab.client.call("getMcpServers", []);
  assert.deepEqual(listed, frame, "getMcpServers answers what the frame carries");
  const again = await tab.client.call("addMcpServer", ["main", mcp.main.mcp]);
  assert.deepEqual(again, { id: "pager", state: "ready" }, "the same name and URL again is the same server");

  await assert.rejects(tab.client.call("addMcpServer", ["bad", "ftp://example.com/"]), /URL/);
  await assert.rejects(tab.client.call("removeMcpServer", ["nope"]), /nope/);

  const from = other.frames.length;
  assert.equal(await tab.client.call("removeMcpServer", ["pager"]), null);
  const gone = await mcpFrame(other, (m) => !m.servers.pager, { from });
  assert.deepEqual(gone, { prompts: [], resources: [], servers: {}, tools: [] });
  assert.deepEqual(await tab.client.call("getMcpServers", []), gone);
  tab.close();
  other.close();
});

test("streamable-http: all pages of tools are offered, and the scripted model's call result reaches it", async () => {
  const tab = await open("streamable");
  await addServer(tab, "main", mcp.main.mcp, { id: "pager", transport: "streamable-http" });
  const chunks = await turn(tab, "echo something", { toolCalls: [{ id: "call_echo", name: "tool_pager_echo", args: { text: "hello over MCP" } }] }, { text: "It said hello." });
  const offered = model.requests.at(-2);
  for (const name of ALL_TOOLS) assert.ok(toolNames(offered).includes(`tool_pager_${name}`), `tool_pager_${name} offered`);
  assert.equal(toolDef(offered, "tool_pager_echo").description, "Echo the text back.");
  assert.deepEqual(toolDef(offered, "tool_pager_echo").parameters.required, ["text"]);
  const input = chunks.find((c) => c.type === "tool-input-available");
  assert.equal(input.toolName, "tool_pager_echo");
  const output = chunks.find((c) => c.type === "tool-output-available");
  assert.equal(output.toolCallId, "call_echo");
  assert.deepEqual(output.output.content, [{ type: "text", text: "hello over MCP" }]);
  const tool = lastMessage(model.requests.at(-1), "tool");
  assert.equal(tool.tool_call_id, "call_echo");
  assert.equal(tool.content, "hello over MCP");
  const stored = await getMessages(worker.url, "streamable");
  assert.equal(stored[1].parts.find((p) => p.toolCallId === "call_echo").state, "output-available");
  tab.close();
});

test("sse transport, and auto falling back to SSE on an SSE-only endpoint", async () => {
  const tab = await open("legacy");
  const before = await mcp.main.control("sessions");
  await addServer(tab, "legacy", mcp.main.sse, { id: "legacy", transport: "sse" });
  await addServer(tab, "auto", mcp.main.sse, { id: "auto", transport: "auto" });
  const after = await mcp.main.control("sessions");
  assert.equal(after.sse.length, before.sse.length + 2, "both connected over the legacy SSE transport");
  assert.equal(after.streamable.length, before.streamable.length, "no Streamable HTTP session was made");
  const servers = await tab.client.call("getMcpServers", []);
  assert.equal(servers.tools.filter((t) => t.serverId === "auto").length, ALL_TOOLS.length);
  const chunks = await turn(
    tab,
    "echo twice",
    { toolCalls: [{ id: "call_sse", name: "tool_legacy_echo", args: { text: "via sse" } }, { id: "call_auto", name: "tool_auto_echo", args: { text: "via auto" } }] },
    { text: "Both echoed." },
  );
  const outputs = Object.fromEntries(chunks.filter((c) => c.type === "tool-output-available").map((c) => [c.toolCallId, c.output.content[0].text]));
  assert.deepEqual(outputs, { call_sse: "via sse", call_auto: "via auto" });
  const tools = model.requests.at(-1).messages.filter((m) => m.role === "tool").map((m) => m.content);
  assert.deepEqual(tools, ["via sse", "via auto"]);
  tab.close();
});

test("structuredContent reaches the model; isError is a tool error and the turn goes on", async () => {
  const tab = await open("results");
  await addServer(tab, "main", mcp.main.mcp, { id: "pager" });
  const chunks = await turn(
    tab,
    "add, then fail",
    { toolCalls: [{ id: "call_add", name: "tool_pager_add", args: { a: 2, b: 3 } }] },
    { toolCalls: [{ id: "call_fail", name: "tool_pager_fail", args: {} }] },
    { text: "The second tool failed." },
  );
  assert.ok(toolDef(model.requests.at(-3), "tool_pager_add"), "add is offered");
  const added = chunks.find((c) => c.type === "tool-output-available" && c.toolCallId === "call_add");
  assert.deepEqual(added.output.structuredContent, { sum: 5 });
  const toolMessages = model.requests.at(-1).messages.filter((m) => m.role === "tool");
  assert.deepEqual(JSON.parse(toolMessages[0].content), { sum: 5 }, "the model reads the structured content");

  const failed = chunks.find((c) => c.toolCallId === "call_fail" && c.type.startsWith("tool-output"));
  assert.equal(failed.type, "tool-output-error");
  assert.equal(failed.errorText, "the tool failed on purpose");
  assert.deepEqual(JSON.parse(toolMessages[1].content), { error: "Error: the tool failed on purpose" }, "as Think's model sees a thrown error");
  assert.equal(chunks.at(-1).type, "finish");
  assert.equal(chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join(""), "The second tool failed.");
  const stored = await getMessages(worker.url, "results");
  const part = stored[1].parts.find((p) => p.toolCallId === "call_fail");
  assert.equal(part.state, "output-error");
  assert.equal(part.errorText, "the tool failed on purpose");
  tab.close();
});

test("list_changed from the server pushes the new tool to the tabs and into the next turn", async () => {
  await mcp.mutable.control("reset");
  const tab = await open("grow");
  const other = await open("grow");
  await addServer(tab, "grower", mcp.mutable.mcp, { id: "grower" });
  await addServer(tab, "grower-sse", mcp.mutable.sse, { id: "growsse", transport: "sse" });
  await mcpFrame(other, (m) => m.servers.grower?.state === "ready" && m.servers.growsse?.state === "ready");
  // `grow` announces the change to every session outside any request: on the Streamable HTTP
  // session's standalone GET stream and on the legacy SSE stream, which the agent listens to.
  await turn(tab, "grow a tool", { toolCalls: [{ id: "call_grow", name: "tool_grower_grow", args: {} }] }, { text: "Grown." });
  const frame = await mcpFrame(other, (m) => m.tools.filter((t) => t.name === "grown_12").length === 2);
  assert.deepEqual(frame.tools.filter((t) => t.name === "grown_12").map((t) => t.serverId).sort(), ["grower", "growsse"]);
  assert.equal(frame.tools.length, 2 * (ALL_TOOLS.length + 1));
  await turn(tab, "what now?", { text: "Now there is grown_12." });
  const offered = toolNames(model.requests.at(-1));
  assert.ok(offered.includes("tool_grower_grown_12") && offered.includes("tool_growsse_grown_12"), offered.join());
  tab.close();
  other.close();
});

test("pinning: a changed tool definition is held back until acceptMcpToolChanges", async () => {
  await mcp.mutable.control("reset");
  const tab = await open("pin");
  const other = await open("pin");
  await addServer(tab, "pinned", mcp.mutable.mcp, { id: "pin" });
  // `mutate` changes echo's description and announces list_changed inside its own response.
  await turn(tab, "mutate", { toolCalls: [{ id: "call_mutate", name: "tool_pin_mutate", args: {} }] }, { text: "Mutated." });
  assert.ok(toolNames(model.requests.at(-2)).includes("tool_pin_echo"));
  const frame = await mcpFrame(other, (m) => m.servers.pin?.pendingToolChanges);
  assert.deepEqual(frame.servers.pin.pendingToolChanges, [
    {
      tool: "echo",
      changes: ["description"],
      previous: { description: "Echo the text back.", inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } },
      current: { description: "Echo the text back. Mutated.", inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] } },
    },
  ]);
  assert.ok(!frame.tools.some((t) => t.name === "echo"), "the held-back tool is not listed");
  assert.equal((await tab.client.call("getMcpServers", [])).servers.pin.pendingToolChanges.length, 1);

  await turn(tab, "echo please", { text: "I cannot echo right now." });
  const held = toolNames(model.requests.at(-1));
  assert.ok(!held.includes("tool_pin_echo"), "held back from the model");
  assert.ok(held.includes("tool_pin_add"), "the other tools stay");

  const from = other.frames.length;
  assert.deepEqual(await tab.client.call("acceptMcpToolChanges", ["pin"]), { accepted: 1 });
  const accepted = await mcpFrame(other, (m) => !m.servers.pin.pendingToolChanges && m.tools.some((t) => t.name === "echo"), { from });
  assert.equal(accepted.tools.find((t) => t.name === "echo").description, "Echo the text back. Mutated.");
  assert.deepEqual(await tab.client.call("acceptMcpToolChanges", ["pin"]), { accepted: 0 });
  await turn(tab, "echo now", { text: "Echo is back." });
  assert.equal(toolDef(model.requests.at(-1), "tool_pin_echo")?.description, "Echo the text back. Mutated.");
  tab.close();
  other.close();
});

test("headers: a server requiring a bearer token fails without it and is ready with it", async () => {
  const tab = await open("auth");
  const other = await open("auth");
  const denied = await tab.client.call("addMcpServer", ["private", mcp.auth.mcp, { id: "private" }]);
  assert.equal(denied.state, "failed");
  assert.match(denied.error, /401/);
  const failed = await mcpFrame(other, (m) => m.servers.private?.state === "failed");
  assert.match(failed.servers.private.error, /401/);
  assert.deepEqual(failed.tools, []);

  // The same server with the token (the reference's nested transport form): it reconnects.
  const added = await tab.client.call("addMcpServer", ["private", mcp.auth.mcp, { id: "private", transport: { type: "streamable-http", headers: { Authorization: "Bearer sekret" } } }]);
  assert.deepEqual(added, { id: "private", state: "ready" });
  const ready = await mcpFrame(other, (m) => m.servers.private?.state === "ready");
  assert.equal(ready.servers.private.error, null);
  assert.equal(ready.tools.length, ALL_TOOLS.length);
  const chunks = await turn(tab, "echo privately", { toolCalls: [{ id: "call_private", name: "tool_private_echo", args: { text: "authorised" } }] }, { text: "ok" });
  assert.equal(chunks.find((c) => c.type === "tool-output-available").output.content[0].text, "authorised");
  tab.close();
  other.close();
});

test("a server that goes down mid-conversation: the model is told it is unavailable, others keep working", async () => {
  const tab = await open("down");
  await addServer(tab, "doomed", mcp.doomed.mcp, { id: "doomed" });
  await addServer(tab, "main", mcp.main.mcp, { id: "stays" });
  await turn(tab, "echo on doomed", { toolCalls: [{ id: "call_alive", name: "tool_doomed_echo", args: { text: "still here" } }] }, { text: "ok" });
  assert.equal(lastMessage(model.requests.at(-1), "tool").content, "still here");

  await mcp.doomed.kill();
  const chunks = await turn(
    tab,
    "echo on both",
    { toolCalls: [{ id: "call_dead", name: "tool_doomed_echo", args: { text: "anyone?" } }] },
    { toolCalls: [{ id: "call_other", name: "tool_stays_echo", args: { text: "the other one works" } }] },
    { text: "doomed is gone, main answered." },
  );
  const dead = chunks.find((c) => c.toolCallId === "call_dead" && c.type.startsWith("tool-output"));
  assert.equal(dead.type, "tool-output-error");
  assert.match(dead.errorText, /^MCP server "doomed" is unavailable: /);
  const toolMessages = model.requests.at(-1).messages.filter((m) => m.role === "tool");
  assert.deepEqual(JSON.parse(toolMessages.at(-2).content), { error: `Error: ${dead.errorText}` }, "the model reads the same error");
  assert.equal(toolMessages.at(-1).content, "the other one works");
  assert.equal(chunks.at(-1).type, "finish");
  const state = await tab.client.call("getMcpServers", []);
  assert.equal(state.servers.doomed.state, "failed");
  assert.ok(state.servers.doomed.error);
  assert.equal(state.servers.stays.state, "ready");
  tab.close();
});

test("a THINK_APPROVAL glob over MCP tool names pauses the call until it is approved", async () => {
  const tab = await open("approval");
  await addServer(tab, "main", mcp.main.mcp, { id: "gated" });
  const chunks = await turn(tab, "run filler", { toolCalls: [{ id: "call_filler", name: "tool_gated_filler_2", args: {} }] });
  const request = chunks.find((c) => c.type === "tool-approval-request");
  assert.ok(request, `${APPROVAL} gates tool_gated_filler_2`);
  assert.equal(request.toolCallId, "call_filler");
  assert.ok(!chunks.some((c) => c.type === "tool-output-available"), "the tool did not run");
  model.push({ text: "Filler ran." });
  tab.send({ type: "cf_agent_tool_approval", toolCallId: "call_filler", approved: true, autoContinue: true });
  const cont = (await tab.followContinuation()).chunks;
  const output = cont.find((c) => c.type === "tool-output-available");
  assert.equal(output.toolCallId, "call_filler");
  assert.deepEqual(output.output.content, [{ type: "text", text: "filler_2" }]);
  assert.equal(lastMessage(model.requests.at(-1), "tool").content, "filler_2");
  // Tools outside the glob run straight away.
  const echo = await turn(tab, "echo", { toolCalls: [{ id: "call_free", name: "tool_gated_echo", args: { text: "free" } }] }, { text: "ok" });
  assert.ok(!echo.some((c) => c.type === "tool-approval-request"));
  tab.close();
});

test("tools/call round trip, agent to a local server: median over sequential calls", async () => {
  const tab = await open("timing");
  await addServer(tab, "main", mcp.main.mcp, { id: "timed" });
  const seen = new Map(); // toolCallId -> {input, output} arrival times
  tab.client.addEventListener("message", (event) => {
    const now = performance.now();
    let frame;
    try {
      frame = JSON.parse(event.data);
    } catch {
      return;
    }
    if (frame.type !== "cf_agent_use_chat_response" || !frame.body?.trim()) return;
    const chunk = JSON.parse(frame.body);
    const at = seen.get(chunk.toolCallId) ?? {};
    if (chunk.type === "tool-input-available") at.input = now;
    if (chunk.type === "tool-output-available") at.output = now;
    if (chunk.toolCallId) seen.set(chunk.toolCallId, at);
  });
  // Nine sequential calls per turn (the agent's default step limit is ten), five turns.
  const TURNS = 5;
  const PER_TURN = 9;
  for (let t = 0; t < TURNS; t++) {
    const replies = [];
    for (let i = 0; i < PER_TURN; i++) replies.push({ toolCalls: [{ id: `call_t${t}_${i}`, name: "tool_timed_echo", args: { text: `ping ${t}.${i}` } }] });
    replies.push({ text: "done" });
    await turn(tab, `ping round ${t}`, ...replies);
  }
  const samples = [...seen.values()].filter((s) => s.input && s.output).map((s) => s.output - s.input).sort((a, b) => a - b);
  assert.equal(samples.length, TURNS * PER_TURN);
  const median = samples[Math.floor(samples.length / 2)];
  const p90 = samples[Math.floor(samples.length * 0.9)];
  console.log(`MCP tools/call round trip (agent -> local server -> agent, seen by the client): median ${median.toFixed(2)} ms, p90 ${p90.toFixed(2)} ms, min ${samples[0].toFixed(2)} ms, max ${samples.at(-1).toFixed(2)} ms, n=${samples.length}`);
  assert.ok(median < 1000, `median ${median} ms`);
  tab.close();
});

test("restart with THINK_WAIT_FOR_MCP_CONNECTIONS: the first turn already has the MCP tools", async () => {
  const tab = await open("restart-wait");
  await addServer(tab, "restarted", mcp.restart.mcp, { id: "rwait" });
  const off = await open("restart-nowait");
  await addServer(off, "restarted", mcp.restart.mcp, { id: "rnowait" });
  tab.close();
  off.close();

  // Discovery after the restart takes 1.5 s, far longer than connecting a tab and sending a chat.
  await mcp.restart.control("delay?list=1500");
  try {
    await worker.restart(modelVars(model, { THINK_APPROVAL: APPROVAL, THINK_WAIT_FOR_MCP_CONNECTIONS: "true" }));
    const again = await open("restart-wait");
    const first = await again.waitFor((f) => f.type === "cf_agent_mcp_servers");
    assert.notEqual(first.mcp.servers.rwait.state, "ready", "restored servers reconnect in the background");
    const started = performance.now();
    await turn(again, "echo after restart", { text: "tools are here" });
    assert.ok(performance.now() - started >= 1400, "the turn waited for the discovery");
    assert.ok(toolNames(model.requests.at(-1)).includes("tool_rwait_echo"), "the first turn after the restart has the MCP tools");
    again.close();
  } finally {
    await mcp.restart.control("delay?list=0");
  }
});

test("restart without the wait: the first turn lacks the MCP tools, the next one has them", async () => {
  await mcp.restart.control("delay?list=1500");
  try {
    await worker.restart(modelVars(model, { THINK_APPROVAL: APPROVAL }));
    const tab = await open("restart-nowait");
    await turn(tab, "quick question", { text: "no MCP tools yet" });
    // Documented behaviour: without the wait a turn does not block on connecting servers, so
    // one that starts while discovery is still under way is offered no tools from them.
    assert.ok(!toolNames(model.requests.at(-1)).some((n) => n.startsWith("tool_rnowait_")), "the turn did not wait");
    await mcpFrame(tab, (m) => m.servers.rnowait?.state === "ready", { timeout: 15000 });
    await turn(tab, "and now?", { toolCalls: [{ id: "call_late", name: "tool_rnowait_echo", args: { text: "late but here" } }] }, { text: "ok" });
    assert.ok(toolNames(model.requests.at(-2)).includes("tool_rnowait_echo"));
    assert.equal(lastMessage(model.requests.at(-1), "tool").content, "late but here");
    tab.close();
  } finally {
    await mcp.restart.control("delay?list=0");
  }
});
