// Code Mode's callables over Durable Object RPC, rollback, the sandbox limit shared with skill
// scripts, and the expiry of paused runs: the second half of tests/codemode.test.mjs, in a file
// (and a workerd) of its own.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, getMessages, assertIdle } from "./helpers/client.mjs";
import { model, worker, nextSeq, useCodemodeWorker, execute, rpc, pausedRun, readFiles } from "./helpers/codemode.mjs";

useCodemodeWorker();

test("the callables are reachable over Durable Object RPC", async () => {
  const tab = await connect(worker.host, "cm-dorpc");
  await execute(tab, `await state.writeFile({ path: "/do/f.txt", content: "v1" })`);
  const paused = await pausedRun(tab, `return await tools.delete({ path: "/do/f.txt" })`);
  const call = (method, args = []) => worker.caller(`/call?name=cm-dorpc`, { method, args });
  const pending = await call("pendingExecutions", [paused.executionId]);
  assert.deepEqual(pending.map((p) => [p.connector, p.method, p.args]), [["tools", "delete", { path: "/do/f.txt" }]]);
  model.push({ text: "Deleted over RPC." });
  const done = await call("approveExecution", [paused.executionId]);
  assert.equal(done.status, "completed", JSON.stringify(done));
  const history = await call("executions", [1]);
  assert.equal(history[0].id, paused.executionId);
  assert.deepEqual(await call("snippets"), []);
  assert.deepEqual(await readFiles(tab, ["/do/f.txt"]), [null]);
  // Tool calls have no undo (as in Think), so a rollback of tools.delete reverts nothing.
  assert.deepEqual(await call("rollbackExecution", [paused.executionId]), { executionId: paused.executionId, reverted: 0, status: "completed" });
  await assert.rejects(call("rollbackExecution", ["exec_nope"]), /exec_nope does not exist/);
  assert.equal(await call("deleteExecution", [paused.executionId]), true);
  assert.equal(await call("deleteExecution", [paused.executionId]), false);
  const left = await call("executions", [10]);
  assert.ok(left.length > 0 && !left.some((r) => r.id === paused.executionId));
  // Pruning to 0 drops every settled run that is left.
  assert.equal(await call("pruneExecutions", [0]), left.length);
  assert.deepEqual(await call("executions", [10]), []);
  tab.close();
});

test("rejectExecution over Durable Object RPC takes {autoContinue: false}", async () => {
  const tab = await connect(worker.host, "cm-dorpc-reject");
  const paused = await pausedRun(tab, `return await tools.delete({ path: "/nothing.txt" })`);
  const call = (method, args = []) => worker.caller(`/call?name=cm-dorpc-reject`, { method, args });
  const calls = model.requests.length;
  const rejected = await call("rejectExecution", [paused.executionId, "not now", { autoContinue: false }]);
  assert.deepEqual(rejected, { status: "rejected", executionId: paused.executionId, reason: "not now" });
  await assertIdle(tab, "no continuation runs");
  assert.equal(model.requests.length, calls);
  const stored = await getMessages(worker.url, "cm-dorpc-reject");
  assert.match(JSON.stringify(stored.at(-1)), /not now/, "the paused output is replaced in the transcript");
  tab.close();
});

test("rollbackExecution puts the workspace back as it was before the run's state.* writes", async () => {
  const tab = await connect(worker.host, "cm-rollback");
  const before = await execute(tab, `
    await state.writeFile({ path: "/rb/a.txt", content: "A" });
    await state.writeFile({ path: "/rb/d/x.txt", content: "X" });
    return "set up"`);
  assert.equal(before.status, "completed", JSON.stringify(before));
  const run = await execute(tab, `
    await state.writeFile({ path: "/rb/a.txt", content: "changed" });
    await state.appendFile({ path: "/rb/a.txt", content: "+more" });
    await state.rm({ path: "/rb/d", recursive: true });
    await state.writeFile({ path: "/rb/new/deep/n.txt", content: "N" });
    await state.mv({ src: "/rb/a.txt", dest: "/rb/moved.txt" });
    return await state.readdir({ path: "/rb" })`);
  assert.deepEqual(run.result, ["new", "moved.txt"], JSON.stringify(run));
  const rolled = await rpc(tab, "rollbackExecution", [run.executionId]);
  assert.deepEqual(rolled, { executionId: run.executionId, reverted: 5, status: "rolled_back" });
  assert.deepEqual(await readFiles(tab, ["/rb/a.txt", "/rb/d/x.txt", "/rb/moved.txt", "/rb/new/deep/n.txt"]), ["A", "X", null, null]);
  const after = await execute(tab, `return await state.readdir({ path: "/rb" })`);
  assert.deepEqual(after.result, ["d", "a.txt"]);
  const [row] = (await rpc(tab, "executions", [20])).filter((r) => r.id === run.executionId);
  assert.equal(row.status, "rolled_back");
  const states = row.calls.map((c) => [c.method, c.state]);
  assert.deepEqual(states.filter(([m]) => m !== "readdir").map(([, st]) => st), Array(5).fill("reverted"), JSON.stringify(states));
  tab.close();
});

test("execute passes and skill scripts share one limit of 10 sandbox isolates in flight", async () => {
  const tab = await connect(worker.host, "cm-shared-limit");
  const WAIT = "const start = Date.now(); await new Promise((r) => setTimeout(r, 400)); return [start, Date.now()]";
  const setup = await execute(tab, `
    await state.writeFile({ path: "/skills/wait/SKILL.md", content: "---\\nname: wait\\ndescription: Waits.\\n---\\nRun scripts/wait.mjs.\\n" });
    await state.writeFile({ path: "/skills/wait/scripts/wait.mjs", content: ${JSON.stringify(`export default async () => { ${WAIT}; };
`)} });
    return "ok"`);
  assert.equal(setup.status, "completed", JSON.stringify(setup));
  const calls = Array.from({ length: 12 }, (_, i) =>
    i % 2
      ? { id: `call_mix_${i}`, name: "execute", args: { code: WAIT } }
      : { id: `call_mix_${i}`, name: "run_skill_script", args: { name: "wait", path: "scripts/wait.mjs" } },
  );
  model.push({ toolCalls: calls }, { text: "all done" });
  const { id } = tab.chat("run both kinds");
  await tab.turn(id, { timeout: 30000 });
  const outs = tab.chunks(id).filter((c) => c.type === "tool-output-available" && c.toolCallId.startsWith("call_mix_"));
  assert.equal(outs.length, 12, JSON.stringify(tab.chunks(id).filter((c) => c.toolCallId?.startsWith("call_mix_"))));
  const spans = outs.map((c) => c.output.result);
  assert.ok(spans.every((s) => Array.isArray(s) && s.length === 2), JSON.stringify(outs.map((c) => c.output)));
  const maxOverlap = Math.max(...spans.map(([s]) => spans.filter(([s2, e2]) => s2 <= s && s < e2).length));
  assert.equal(maxOverlap, 10, `at most 10 at once across both kinds: ${JSON.stringify(spans)}`);
  tab.close();
});

test("a paused execution past its age is expired as rejected by the alarm", async () => {
  const w = await startWorker({ vars: modelVars(model, { THINK_APPROVAL: "delete", THINK_EXECUTE: JSON.stringify({ pausedMaxAgeMs: 1500 }) }) });
  try {
    let tab = await connect(w.host, "cm-expire");
    const id = `call_exp_${nextSeq()}`;
    model.push({ toolCalls: [{ id, name: "execute", args: { code: `await tools.delete({ path: "/x" })` } }] }, { text: "waiting" });
    const { id: requestId } = tab.chat("expire");
    await tab.turn(requestId, { timeout: 20000 });
    const paused = tab.chunks(requestId).find((c) => c.type === "tool-output-available" && c.toolCallId === id).output;
    assert.equal(paused.status, "paused");
    tab.close();
    // After a restart the object arms its alarm for the expiry and rejects the run then.
    await w.restart();
    tab = await connect(w.host, "cm-expire");
    const until = Date.now() + 15000;
    let row;
    while (Date.now() < until) {
      [row] = await rpc(tab, "executions", [1]);
      if (row.status !== "paused") break;
      await new Promise((r) => setTimeout(r, 250));
    }
    assert.equal(row.status, "rejected");
    assert.equal(row.error, "Expired while waiting for approval.");
    assert.deepEqual(await rpc(tab, "pendingExecutions"), []);
    // The transcript no longer shows the run as paused.
    const part = (await getMessages(w.url, "cm-expire")).flatMap((m) => m.parts).find((p) => p.toolCallId === id);
    assert.deepEqual(part.output, { status: "rejected", executionId: paused.executionId, reason: "Expired while waiting for approval." });
    tab.close();
  } finally {
    await w.dispose();
  }
});
