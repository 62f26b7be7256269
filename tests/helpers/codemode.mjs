// Shared by the Code Mode test files (tests/codemode*.test.mjs): one agent Worker with the
// scripted model per file, and the calls that drive `execute` from a tab. `model` and `worker`
// are live bindings, set by the file's \`before\` hook.
import { before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel } from "./scripted-model.mjs";
import { startWorker, modelVars } from "./worker.mjs";
import { closeTabs } from "./client.mjs";

export let model;
export let worker;
let seq = 0;

/** A number no other call of this file used, for call and request ids. */
export function nextSeq() {
  return seq++;
}

/** Starts the file's model and agent (approval for delete and edit, a 3 s execute timeout) before its tests, and stops them after. */
export function useCodemodeWorker() {
  before(async () => {
    model = await startScriptedModel();
    worker = await startWorker({
      vars: modelVars(model, { THINK_APPROVAL: "delete,edit", THINK_EXECUTE: JSON.stringify({ timeout: 3000 }) }),
      withCaller: true,
    });
  });
  after(async () => {
    closeTabs();
    await worker?.dispose();
    await model?.close();
  });
}

/** One turn in which the model calls `execute` with `code`, then answers "ok". */
export async function execute(tab, code, { text = "ok", timeout = 20000 } = {}) {
  const id = `call_exec_${nextSeq()}`;
  model.push({ toolCalls: [{ id, name: "execute", args: { code } }] }, { text });
  const { id: requestId } = tab.chat(`run ${id}`);
  await tab.turn(requestId, { timeout });
  const chunks = tab.chunks(requestId);
  const out = chunks.find((c) => c.type === "tool-output-available" && c.toolCallId === id);
  assert.ok(out, `no output for ${id}: ${JSON.stringify(chunks.filter((c) => c.toolCallId === id))}`);
  return out.output;
}

/** Calls a callable over the `rpc` frame and resolves with its result. */
export async function rpc(tab, method, args = []) {
  const id = `rpc_${nextSeq()}`;
  tab.send({ type: "rpc", id, method, args });
  const reply = await tab.waitFor((f) => f.type === "rpc" && f.id === id, { timeout: 20000 });
  if (!reply.success) throw new Error(reply.error);
  return reply.result;
}
/** Runs `code` until it pauses; returns the paused output. */
export async function pausedRun(tab, code) {
  const out = await execute(tab, code, { text: "Waiting for your approval." });
  assert.equal(out.status, "paused", JSON.stringify(out));
  return out;
}

export async function readFiles(tab, paths) {
  const out = await execute(tab, `return await Promise.all(${JSON.stringify(paths)}.map(async (path) => (await state.exists({ path })) ? state.readFile({ path }) : null))`);
  assert.equal(out.status, "completed", JSON.stringify(out));
  return out.result;
}
