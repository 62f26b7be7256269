// Checkpoints, rewind and fork (issue 21) in the built Worker: a turn writes, edits and
// deletes through the file tools, bash and Code Mode's `state.*`; rewinding to the checkpoint
// taken at its start restores every byte and the transcript, and every tab is told; a rewind
// is refused while a turn runs; a fork serves the old state while the original keeps the new
// one; and the chat page's Rewind action previews the files and rewinds, in headless Chromium.
import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars, ROOT } from "./helpers/worker.mjs";
import { connect, closeTabs, getMessages } from "./helpers/client.mjs";
import { launchBrowser } from "./helpers/browser.mjs";
import { openChat as openChatPage, send, slow, assistant } from "./helpers/chat-page.mjs";

let model;
let worker;
let browser;
const pages = [];
const OUT = path.join(ROOT, "test-output");

before(async () => {
  model = await startScriptedModel();
  worker = await startWorker({ vars: modelVars(model, { THINK_EXECUTE: JSON.stringify({ timeout: 10000 }) }), withCaller: true });
});

afterEach(async () => {
  for (const page of pages.splice(0)) await page.context().close();
});

after(async () => {
  closeTabs();
  await browser?.close();
  await worker?.dispose();
  await model?.close();
});

let seq = 0;
/** Calls a callable over the `rpc` frame (the `agents` client's `call`); a refusal rejects with its error text. */
const rpc = (tab, method, args = []) => tab.client.call(method, args);

/** The whole workspace: every entry's path and type, and every file's bytes (base64). */
async function snapshot(tab) {
  const { entries } = await rpc(tab, "listWorkspace");
  const out = {};
  for (const e of entries) {
    out[e.path] = e.type === "file" ? (await rpc(tab, "readWorkspaceFile", [e.path, "base64"])).base64 : e.type;
  }
  return out;
}

/** Runs one turn in which the model makes `steps` tool calls in order, then answers `text`. */
async function turn(tab, prompt, steps, text = "Done.") {
  model.push(...steps.map(([name, args], i) => ({ toolCalls: [{ id: `call_${seq++}_${i}`, name, args }] })), { text });
  const sent = tab.chat(prompt);
  await tab.turn(sent.id, { timeout: 60000 });
  const errors = tab.chunks(sent.id).filter((c) => /^(tool-output-error|tool-input-error|error)$/.test(c.type));
  assert.deepEqual(errors, [], `the turn's tools failed: ${JSON.stringify(errors)}`);
  return sent;
}

const BINARY = Buffer.from([0, 1, 2, 255, 254, 0x80, 10, 13, 0]).toString("base64");

/** Seeds files through every writer, then runs the turn that changes them through all three paths. */
async function changeEverything(tab) {
  await rpc(tab, "writeWorkspaceFile", ["/bin/blob.dat", BINARY]);
  await turn(tab, "seed", [
    ["write", { path: "/tool/a.txt", content: "alpha\n" }],
    ["write", { path: "/tool/b.txt", content: "one\ntwo\nthree\n" }],
    ["write", { path: "/tool/gone.txt", content: "delete me\n" }],
    ["bash", { script: "mkdir -p /sh && printf 'bash 1\\n' > /sh/log.txt && printf 'x' > /sh/rm.txt" }],
    ["execute", { code: 'await state.writeFile({ path: "/code/c.json", content: "{\\"n\\": 1}\\n" }); await state.writeFile({ path: "/code/old.txt", content: "old" }); return 1' }],
  ]);
  const before = { files: await snapshot(tab), messages: await getMessages(worker.url, tab.name) };
  const sent = await turn(tab, "change everything", [
    ["write", { path: "/tool/a.txt", content: "ALPHA overwritten\n" }],
    ["edit", { path: "/tool/b.txt", old_string: "two", new_string: "TWO" }],
    ["delete", { path: "/tool/gone.txt" }],
    ["write", { path: "/tool/new.txt", content: "new from the tool\n" }],
    ["bash", { script: "printf 'bash 2\\n' >> /sh/log.txt && rm /sh/rm.txt && mkdir -p /sh/new && echo made > /sh/new/n.txt && rm /bin/blob.dat" }],
    ["execute", { code: 'await state.writeFile({ path: "/code/c.json", content: "{\\"n\\": 2}\\n" }); await state.rm({ path: "/code/old.txt" }); await state.mv({ src: "/tool/b.txt", dest: "/code/b-moved.txt" }); await state.writeFile({ path: "/code/new.txt", content: "from code" }); return 2' }],
  ]);
  const after = { files: await snapshot(tab), messages: await getMessages(worker.url, tab.name) };
  return { before, after, sent };
}

/** The checkpoint taken at the start of the turn whose user message is `messageId`. */
async function checkpointOf(tab, messageId) {
  const list = await rpc(tab, "checkpoints");
  const found = list.find((c) => c.turnId === messageId);
  assert.ok(found, `no checkpoint for ${messageId} in ${JSON.stringify(list)}`);
  return found;
}

test("a rewind restores every byte the file tools, bash and state.* changed, and the transcript; every tab is told", async () => {
  const name = "ckpt-rewind";
  const tab = await connect(worker.host, name);
  tab.name = name;
  const other = await connect(worker.host, name);
  const { before, after, sent } = await changeEverything(tab);
  // Every path of the turn ran: each writer's new file is there and each deleted one gone.
  for (const p of ["/tool/new.txt", "/sh/new/n.txt", "/code/new.txt", "/code/b-moved.txt"]) assert.ok(after.files[p], p);
  for (const p of ["/tool/gone.txt", "/sh/rm.txt", "/bin/blob.dat", "/code/old.txt", "/tool/b.txt"]) {
    assert.ok(before.files[p], p);
    assert.equal(after.files[p], undefined, p);
  }
  assert.equal(before.files["/bin/blob.dat"], BINARY);
  assert.ok(after.messages.length > before.messages.length);

  const cp = await checkpointOf(tab, sent.userMessage.id);
  assert.equal(typeof cp.id, "string");
  assert.equal(typeof cp.at, "number");
  assert.ok(cp.filesChanged >= 10, `filesChanged ${cp.filesChanged}`);

  const diff = await rpc(tab, "diffCheckpoint", [cp.id]);
  const kinds = Object.fromEntries(diff.map((c) => [c.path, c.kind]));
  assert.equal(kinds["/tool/a.txt"], "modified");
  assert.equal(kinds["/tool/gone.txt"], "deleted");
  assert.equal(kinds["/tool/new.txt"], "added");
  assert.equal(kinds["/sh/rm.txt"], "deleted");
  assert.equal(kinds["/code/new.txt"], "added");
  assert.match(diff.find((c) => c.path === "/tool/a.txt").diff, /-alpha\n\+ALPHA overwritten/);

  const from = other.frames.length;
  const outcome = await rpc(tab, "rewind", [cp.id]);
  assert.ok(outcome.undo?.id, JSON.stringify(outcome));
  assert.deepEqual(await snapshot(tab), before.files, "every byte is as before the turn");
  assert.deepEqual(await getMessages(worker.url, name), before.messages, "the transcript is as before the turn");

  // The other tab got the new message list and a workspace push.
  const msgs = await other.waitFor((f) => f.type === "cf_agent_chat_messages", { from });
  assert.deepEqual(msgs.messages.map((m) => m.id), before.messages.map((m) => m.id));
  const pushed = await other.waitFor((f) => f.type === "think_workspace_changed", { from });
  assert.ok(pushed.truncated || pushed.paths.includes("/tool/a.txt"), JSON.stringify(pushed));

  // The rewind is itself undoable: its undo checkpoint brings the turn's changes back.
  await rpc(tab, "rewind", [outcome.undo.id]);
  assert.deepEqual(await snapshot(tab), after.files);
  assert.deepEqual((await getMessages(worker.url, name)).map((m) => m.id), after.messages.map((m) => m.id));

  // Only the files: the transcript stays.
  await rpc(tab, "rewind", [cp.id, { files: true, transcript: false }]);
  assert.deepEqual(await snapshot(tab), before.files);
  assert.deepEqual((await getMessages(worker.url, name)).map((m) => m.id), after.messages.map((m) => m.id));
});

test("bad checkpoint calls are clear errors and the object keeps serving", async () => {
  const tab = await connect(worker.host, "ckpt-bad");
  await assert.rejects(rpc(tab, "rewind", ["no-such-checkpoint"]), /no-such-checkpoint|not found|no checkpoint/i);
  await assert.rejects(rpc(tab, "rewind", [42]), /checkpoint id must be a string/);
  await assert.rejects(rpc(tab, "rewind", ["x", { files: false, transcript: false }]), /nothing to restore/);
  await assert.rejects(rpc(tab, "rewind", ["x", { file: true }]), /options must be/);
  await assert.rejects(rpc(tab, "diffCheckpoint", []), /checkpoint id must be a string/);
  const cp = await rpc(tab, "checkpoint", ["by hand"]);
  assert.equal(cp.label, "by hand");
  assert.equal(cp.turnId ?? null, null);
  assert.deepEqual((await rpc(tab, "checkpoints")).map((c) => c.id), [cp.id]);
});

test("a rewind is refused while a turn runs, and works once it ended", async () => {
  const tab = await connect(worker.host, "ckpt-busy");
  const cp = await rpc(tab, "checkpoint", ["before"]);
  const seen = model.requests.length;
  model.push({ text: "thinking", hang: true });
  const { id } = tab.chat("take your time");
  await model.waitForRequests(seen + 1);
  await assert.rejects(rpc(tab, "rewind", [cp.id]), /a turn is running/);
  tab.send({ type: "cf_agent_chat_request_cancel", id });
  await tab.turn(id, { timeout: 20000 });
  await rpc(tab, "rewind", [cp.id]);
  assert.deepEqual(await getMessages(worker.url, "ckpt-busy"), []);
});

test("a fork serves the checkpoint's state while the original keeps the new one", async () => {
  const name = "ckpt-fork-src";
  const tab = await connect(worker.host, name);
  tab.name = name;
  const { before, after, sent } = await changeEverything(tab);
  const cp = await checkpointOf(tab, sent.userMessage.id);

  const forked = await worker.caller("/call?name=" + name, { method: "forkSession", args: [cp.id, "ckpt-fork-dst"] });
  assert.equal(forked.name, "ckpt-fork-dst");
  const dst = await connect(worker.host, "ckpt-fork-dst");
  assert.deepEqual(await snapshot(dst), before.files, "the fork has the files as at the checkpoint");
  assert.deepEqual(await getMessages(worker.url, "ckpt-fork-dst"), before.messages, "and its transcript");
  assert.deepEqual(await snapshot(tab), after.files, "the original keeps its files");
  assert.deepEqual(await getMessages(worker.url, name), after.messages, "and its transcript");

  // The fork goes on on its own: a turn there does not reach the original.
  await turn(dst, "in the fork", [["write", { path: "/fork-only.txt", content: "f" }]]);
  assert.equal((await snapshot(tab))["/fork-only.txt"], undefined);

  // A fork into an instance that is not empty is refused.
  await assert.rejects(rpc(tab, "forkSession", [cp.id, "ckpt-fork-dst"]), /not empty/);
  await assert.rejects(rpc(tab, "forkSession", [cp.id, ""]), /name is empty/);
  // Over DO RPC the listing is the same as over `rpc`.
  const list = await worker.caller("/call?name=" + name, { method: "checkpoints", args: [] });
  assert.deepEqual(list, await rpc(tab, "checkpoints"));
});

test("the chat page's Rewind action previews the files it restores and rewinds", async () => {
  browser ??= await launchBrowser();
  fs.mkdirSync(OUT, { recursive: true });
  const name = "ckpt-page";
  const page = await openChatPage(browser, worker, pages, name, { width: 1360, height: 900 });
  model.push({ toolCalls: [{ id: "call_p1", name: "write", args: { path: "/keep.txt", content: "kept\n" } }] }, slow("First done."));
  await send(page, "first message");
  await assistant(page, "First done.").waitFor();
  // While a turn streams (about 2 s here), every Rewind button is disabled; after it, enabled.
  const firstRewind = page.locator(".msg-user", { hasText: "first message" }).locator(".rewind-open");
  // The answer's text can show a moment before its turn ends: wait for the button to enable.
  await page.waitForFunction(() => [...document.querySelectorAll(".rewind-open")].every((b) => !b.disabled));
  assert.equal(await firstRewind.isDisabled(), false);
  model.push({ text: "Busy. ".repeat(60) + "Busy done.", chunkSize: 6, delayMs: 30 });
  await send(page, "busy message");
  await page.waitForFunction(() => {
    const user = [...document.querySelectorAll(".msg-user")].find((m) => m.textContent.includes("first message"));
    return user?.querySelector(".rewind-open")?.disabled === true;
  });
  await assistant(page, "Busy done.").waitFor();
  await page.waitForFunction(() => [...document.querySelectorAll(".rewind-open")].every((b) => !b.disabled));
  model.push(
    { toolCalls: [{ id: "call_p2", name: "write", args: { path: "/keep.txt", content: "changed\n" } }] },
    { toolCalls: [{ id: "call_p3", name: "bash", args: { script: "echo tmp > /made.txt" } }] },
    slow("Second done."),
  );
  await send(page, "second message");
  await assistant(page, "Second done.").waitFor();

  const second = page.locator(".msg-user", { hasText: "second message" });
  await second.locator(".rewind-open").click();
  const preview = second.getByTestId("rewind-preview");
  await preview.locator("li[data-kind=modified]", { hasText: "/keep.txt" }).waitFor();
  await preview.locator("li[data-kind=added]", { hasText: "/made.txt" }).waitFor();
  await preview.locator("li", { hasText: "/keep.txt" }).locator("summary").click();
  await preview.locator(".diff", { hasText: "+changed" }).waitFor();
  await shot(page, "rewind-preview");
  await preview.locator(".rewind-confirm").click();

  await page.locator(".msg-user", { hasText: "second message" }).waitFor({ state: "detached" });
  await page.locator(".msg-user", { hasText: "first message" }).waitFor();
  await page.locator(`[data-testid=panel-workspace] .tree-row[data-path="/made.txt"]`).waitFor({ state: "detached" });
  const tab = await connect(worker.host, name);
  assert.equal(Buffer.from((await rpc(tab, "readWorkspaceFile", ["/keep.txt", "base64"])).base64, "base64").toString(), "kept\n");
  await shot(page, "rewind-done");
});

async function shot(page, name) {
  const file = path.join(OUT, `checkpoints-${name}.png`);
  await page.screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}
