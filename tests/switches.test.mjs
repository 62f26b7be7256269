// Switching a feature off switches all of it off, and its stored state comes back when it is
// switched on again. One agent instance builds up state with every feature on (a loaded
// extension with a tool, a context block and a beforeTurn hook; a skill with a shell script;
// a paused Code Mode execution), then the Worker restarts on the same persisted state with
// switches off, and again with every switch on. Each phase looks at what the scripted model
// was offered and shown, calls a switched-off tool by name, and calls the callables.
// (The browser's switch is checked in browser-tools.test.mjs, which has a Chromium.)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, newId } from "./helpers/client.mjs";

const MEMO = `({
  tools: {
    remember: { description: "Remember a fact", parameters: { fact: { type: "string" } }, required: ["fact"],
      execute: async ({ fact }, host) => host.setContext("memo_notes", fact) },
  },
  hooks: {
    beforeTurn: async (ctx) => ({ system: ctx.system + "\\nHOOKED BY MEMO" }),
  },
})`;
const MEMO_MANIFEST = {
  name: "memo",
  version: "1",
  permissions: { context: { write: "own" } },
  context: [{ label: "notes", type: "writable", description: "Things to remember" }],
};
const SKILL = `---
name: greet
description: Greets people warmly.
---
Run scripts/hi.sh.
`;
const NAME = "switches";

let model;
let worker;
let executionId;

// Every switch named by the issue, off (THINK_MCP_RESOURCES is off unless "true").
const OFF = {
  THINK_EXTENSIONS: "false",
  THINK_EXECUTE: "false",
  THINK_SUBAGENT: "false",
  THINK_MCP_RESOURCES: "false",
  THINK_BASH: "false",
};
const on = () => modelVars(model, { THINK_APPROVAL: "delete", THINK_MCP_RESOURCES: "true" });

before(async () => {
  model = await startScriptedModel();
  worker = await startWorker({ vars: on() });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

/** One turn in which the model makes `calls` (one step), then answers; the calls' last chunks
 *  and the first model request of the turn. */
async function turn(tab, calls = []) {
  const withIds = calls.map((c) => ({ id: newId("call"), ...c }));
  const before = model.requests.length;
  model.push(...(withIds.length ? [{ toolCalls: withIds }] : []), { text: "done" });
  const { id } = tab.chat(`turn ${newId("t")}`);
  await tab.turn(id, { timeout: 60000 });
  const chunks = tab.chunks(id);
  const ends = ["tool-output-available", "tool-output-error", "tool-input-error"];
  const outputs = withIds.map((call) => {
    const chunk = chunks.find((c) => ends.includes(c.type) && c.toolCallId === call.id);
    assert.ok(chunk, `no output for ${call.name}: ${JSON.stringify(chunks.map((c) => c.type))}`);
    return chunk;
  });
  const request = model.requests[before];
  return {
    outputs,
    tools: request.tools.map((t) => t.function.name),
    system: request.messages.find((m) => m.role === "system")?.content ?? "",
  };
}

const rpc = (tab, method, args = []) => tab.client.call(method, args);
const base64 = (text) => Buffer.from(text).toString("base64");

/** Restarts the Worker on the same state with `vars` and connects a tab to the instance. */
async function restart(vars) {
  closeTabs();
  await worker.restart(vars);
  return connect(worker.host, NAME);
}

test("with every feature on, the instance builds up state of each", async () => {
  const tab = await connect(worker.host, NAME);
  const info = await rpc(tab, "loadExtension", [MEMO_MANIFEST, MEMO]);
  assert.deepEqual([info.tools, info.contextLabels, info.hooks], [["memo_remember"], ["memo_notes"], ["beforeTurn"]]);
  await rpc(tab, "writeWorkspaceFile", ["/skills/greet/SKILL.md", base64(SKILL)]);
  await rpc(tab, "writeWorkspaceFile", ["/skills/greet/scripts/hi.sh", base64("echo hi from bash\n")]);
  await rpc(tab, "writeWorkspaceFile", ["/x.txt", base64("keep")]);
  const { outputs, tools, system } = await turn(tab, [
    { name: "memo_remember", args: { fact: "the sky is green" } },
    { name: "run_skill_script", args: { name: "greet", path: "scripts/hi.sh" } },
    { name: "execute", args: { code: `await tools.delete({ path: "/x.txt" }); return "deleted"` } },
  ]);
  for (const name of ["memo_remember", "load_extension", "execute", "subagent", "activate_skill", "run_skill_script", "mcp_list_resources", "mcp_read_resource", "bash"]) {
    assert.ok(tools.includes(name), `${name} offered with every feature on: ${tools}`);
  }
  assert.match(system, /HOOKED BY MEMO/);
  assert.match(system, /MEMO_NOTES \(Things to remember\)/);
  assert.match(system, /greet: Greets people warmly/);
  assert.equal(outputs[0].type, "tool-output-available", JSON.stringify(outputs[0]));
  assert.match(JSON.stringify(outputs[1].output), /hi from bash/);
  assert.equal(outputs[2].output.status, "paused", JSON.stringify(outputs[2]));
  executionId = outputs[2].output.executionId;
  tab.close();
});

test("switched off after a restart, extensions, Code Mode, sub-agents, MCP resources and bash are all gone", async (t) => {
  const tab = await restart({ ...on(), ...OFF });
  const { outputs, tools, system } = await turn(tab, [
    { name: "memo_remember", args: { fact: "x" } },
    { name: "run_skill_script", args: { name: "greet", path: "scripts/hi.sh" } },
    { name: "bash", args: { script: "echo hi" } },
  ]);

  await t.test("THINK_EXTENSIONS=false: no tool, hook or block of a stored extension; its callables refuse", async () => {
    for (const name of ["memo_remember", "load_extension", "list_extensions"]) assert.ok(!tools.includes(name), `${name} offered: ${tools}`);
    assert.doesNotMatch(system, /HOOKED BY MEMO|MEMO_NOTES|the sky is green/);
    assert.equal(outputs[0].type, "tool-input-error");
    assert.match(outputs[0].errorText, /unavailable tool 'memo_remember'/);
    const off = /Extensions are switched off \(THINK_EXTENSIONS=false\)/;
    await assert.rejects(rpc(tab, "listExtensions"), off);
    await assert.rejects(rpc(tab, "loadExtension", [{ name: "other", version: "1" }, MEMO]), off);
    await assert.rejects(rpc(tab, "unloadExtension", ["memo"]), off);
  });

  await t.test("THINK_EXECUTE=false: no execute, and the paused execution cannot be approved into running", async () => {
    assert.ok(!tools.includes("execute"), `execute offered: ${tools}`);
    const off = /Code Mode \(execute\) is switched off \(THINK_EXECUTE=false\)/;
    await assert.rejects(rpc(tab, "approveExecution", [executionId]), off);
    await assert.rejects(rpc(tab, "pendingExecutions"), off);
    const file = await rpc(tab, "readWorkspaceFile", ["/x.txt"]);
    assert.equal(file.text, "keep", "the paused delete did not run");
  });

  await t.test("THINK_SUBAGENT=false and THINK_MCP_RESOURCES off: their tools are not offered", () => {
    for (const name of ["subagent", "mcp_list_resources", "mcp_read_resource"]) assert.ok(!tools.includes(name), `${name} offered: ${tools}`);
  });

  await t.test("THINK_BASH=false: no bash tool, and a skill's shell script does not run", () => {
    assert.ok(!tools.includes("bash"), `bash offered: ${tools}`);
    assert.equal(outputs[2].type, "tool-input-error");
    assert.equal(outputs[1].type, "tool-output-error", JSON.stringify(outputs[1]));
    assert.match(outputs[1].errorText, /Bash is switched off \(THINK_BASH=false\)/);
  });
  tab.close();
});

test("THINK_SKILLS=false: no catalog, no skill tool, and skills() refuses; the files stay", async () => {
  const tab = await restart({ ...on(), THINK_SKILLS: "false" });
  const { outputs, tools, system } = await turn(tab, [{ name: "activate_skill", args: { name: "greet" } }]);
  for (const name of ["activate_skill", "read_skill_resource", "run_skill_script"]) assert.ok(!tools.includes(name), `${name} offered: ${tools}`);
  assert.doesNotMatch(system, /Available skills|Greets people warmly/);
  assert.equal(outputs[0].type, "tool-input-error");
  await assert.rejects(rpc(tab, "skills"), /Skills are switched off \(THINK_SKILLS=false\)/);
  const { entries } = await rpc(tab, "listWorkspace");
  assert.ok(entries.some((e) => e.path === "/skills/greet/SKILL.md"), "the skill's files are kept");
  tab.close();
});

test("switched on again, everything comes back from what was stored", async () => {
  const tab = await restart(on());
  const { outputs, tools, system } = await turn(tab, [
    { name: "memo_remember", args: { fact: "the sky is blue" } },
    { name: "run_skill_script", args: { name: "greet", path: "scripts/hi.sh" } },
  ]);
  for (const name of ["memo_remember", "load_extension", "execute", "subagent", "activate_skill", "mcp_list_resources", "bash"]) {
    assert.ok(tools.includes(name), `${name} not back: ${tools}`);
  }
  assert.match(system, /HOOKED BY MEMO/);
  assert.match(system, /MEMO_NOTES \(Things to remember\)[^]*the sky is green/);
  assert.match(system, /greet: Greets people warmly/);
  assert.equal(outputs[0].type, "tool-output-available", JSON.stringify(outputs[0]));
  assert.match(JSON.stringify(outputs[1].output), /hi from bash/);
  assert.deepEqual((await rpc(tab, "listExtensions")).map((e) => e.name), ["memo"]);
  assert.deepEqual((await rpc(tab, "skills")).map((s) => s.name), ["greet"]);
  model.push({ text: "deleted it" });
  const approved = await rpc(tab, "approveExecution", [executionId]);
  assert.equal(approved.status, "completed", JSON.stringify(approved));
  assert.equal(approved.result, "deleted");
  tab.close();
});
