// The chat page at `/`, in headless Chromium: the unmodified `useAgent`/`useAgentChat` hooks
// talk to the Rust agent in Miniflare, which talks to the scripted model. The agent gates the
// `write` tool behind approval (THINK_APPROVAL=write); the page runs `getUserTimezone` itself.
import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startScriptedModel, lastMessage } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars, ROOT } from "./helpers/worker.mjs";
import { getMessages } from "./helpers/client.mjs";
import { launchBrowser } from "./helpers/browser.mjs";
import { openChat as openChatPage, send, slow, assistant } from "./helpers/chat-page.mjs";

let model;
let worker;
let browser;
const pages = [];

before(async () => {
  model = await startScriptedModel();
  worker = await startWorker({ vars: modelVars(model, { THINK_APPROVAL: "write" }) });
  browser = await launchBrowser();
});

afterEach(async () => {
  for (const page of pages.splice(0)) await page.context().close();
});

after(async () => {
  await browser?.close();
  await worker?.dispose();
  await model?.close();
});

const openChat = (name) => openChatPage(browser, worker, pages, name);

/** Waits for an assistant text, or fails as soon as the page shows a chat error instead. */
async function answer(page, text) {
  await assistant(page, text).or(page.getByTestId("error")).first().waitFor();
  await assertNoErrors(page);
}
const toolPart = (page, name, state) => page.locator(`[data-tool="${name}"][data-state="${state}"]`);

/** Neither an uncaught exception nor a chat error (useAgentChat's `error`) on the page. */
async function assertNoErrors(page) {
  assert.deepEqual(page.errors, []);
  const banner = page.getByTestId("error");
  if (await banner.count()) assert.fail(`the page shows an error: ${await banner.textContent()}`);
}

/** The OpenAI tool message answering a call, from the last request the model saw. */
function toolResultSent(callId) {
  return model.requests.at(-1).messages.find((m) => m.role === "tool" && m.tool_call_id === callId);
}

test("the Worker serves the page at / and still routes /agents/* to the agent", async () => {
  const index = await fetch(new URL("/", worker.url));
  assert.equal(index.status, 200);
  assert.match(index.headers.get("content-type"), /^text\/html/);
  const html = await index.text();
  assert.match(html, /<div id="root"><\/div>/);
  const script = html.match(/src="(\/assets\/[^"]+\.js)"/)?.[1];
  assert.ok(script, html);
  const js = await fetch(new URL(script, worker.url));
  assert.equal(js.status, 200);
  assert.match(js.headers.get("content-type"), /javascript/);
  await js.arrayBuffer();

  const messages = await fetch(new URL("/agents/think-agent/served/get-messages", worker.url));
  assert.equal(messages.status, 200);
  assert.deepEqual(await messages.json(), []);
});

test("a message streams its answer into the page", async () => {
  const page = await openChat("demo");
  await page.locator(".messages .empty").waitFor();
  const reply = "Hello from the scripted model, streamed into the browser piece by piece.";
  model.push({ text: reply, chunkSize: 6, delayMs: 25 });
  // Record every text the assistant bubble shows, to see the answer grow.
  await page.evaluate(() => {
    window.__seen = [];
    new MutationObserver(() => {
      const t = [...document.querySelectorAll(".msg-assistant .text")].at(-1)?.textContent;
      if (t && window.__seen.at(-1) !== t) window.__seen.push(t);
    }).observe(document.body, { subtree: true, childList: true, characterData: true });
  });
  await send(page, "Say hello");
  await page.locator("button.stop:enabled").waitFor();
  await assistant(page, reply).waitFor();
  await page.locator("button.stop:disabled").waitFor();
  const seen = await page.evaluate(() => window.__seen);
  assert.ok(seen.length >= 3, `the answer grew in steps: ${JSON.stringify(seen)}`);
  for (const t of seen) assert.ok(reply.startsWith(t), `${t} is a prefix of the answer`);
  assert.deepEqual(lastMessage(model.requests.at(-1), "user"), { role: "user", content: "Say hello" });
  await assertNoErrors(page);
});

test("Approve runs the gated write tool and the continuation's answer appears", async () => {
  const page = await openChat("demo");
  await assistant(page, "Hello from the scripted model").waitFor();
  const args = { path: "/notes/hello.txt", content: "written after approval" };
  model.push({ toolCalls: [{ id: "call_write_ok", name: "write", args }] }, slow("Saved the note to /notes/hello.txt."));
  await send(page, "Save a note for me");
  const pending = toolPart(page, "write", "approval-requested");
  await pending.waitFor();
  assert.match(await pending.locator(".tool-input").textContent(), /written after approval/);
  const calls = model.requests.length;
  await pending.locator("button.approve").click();
  await answer(page, "Saved the note to /notes/hello.txt.");
  await toolPart(page, "write", "output-available").waitFor();
  assert.equal(model.requests.length, calls + 1, "the continuation asked the model once more");
  assert.ok(toolResultSent("call_write_ok"), "the write result reached the model");
  assert.equal(await page.locator("button.approve").count(), 0);
  await assertNoErrors(page);
});

test("Deny refuses the gated tool and the model hears about it", async () => {
  const page = await openChat("deny");
  model.push(
    { toolCalls: [{ id: "call_write_no", name: "write", args: { path: "/secret.txt", content: "nope" } }] },
    slow("Understood, I did not write the file."),
  );
  await send(page, "Write a secret file");
  const pending = toolPart(page, "write", "approval-requested");
  await pending.waitFor();
  await pending.locator("button.deny").click();
  await answer(page, "Understood, I did not write the file.");
  await page.locator('[data-tool="write"] .tool-state', { hasText: "denied" }).waitFor();
  assert.ok(toolResultSent("call_write_no"), "the denial reached the model as the tool's result");
  const stored = await getMessages(worker.url, "deny");
  const part = stored.flatMap((m) => m.parts).find((p) => p.toolCallId === "call_write_no");
  assert.equal(part.approval?.approved, false, JSON.stringify(part));
  await assertNoErrors(page);
});

test("the page answers the getUserTimezone browser tool and the model gets the answer", async () => {
  const page = await openChat("demo");
  await assistant(page, "Saved the note").waitFor();
  model.push({ toolCalls: [{ id: "call_tz", name: "getUserTimezone", args: {} }] }, slow("You are in the Europe/Berlin time zone."));
  const calls = model.requests.length;
  await send(page, "What is my time zone?");
  await model.waitForRequests(calls + 1);
  const offered = model.requests[calls].tools?.map((t) => t.function?.name) ?? [];
  assert.ok(offered.includes("getUserTimezone"), `the model was offered the browser tool: ${offered}`);
  const done = toolPart(page, "getUserTimezone", "output-available");
  await done.waitFor();
  assert.match(await done.locator(".tool-output").textContent(), /Europe\/Berlin/);
  await answer(page, "You are in the Europe/Berlin time zone.");
  const result = toolResultSent("call_tz");
  assert.ok(result, "the browser's result reached the model");
  assert.match(JSON.stringify(result.content), /Europe\/Berlin/);
  await assertNoErrors(page);

  // A fresh tab shows the whole conversation from the server; keep a picture of it.
  const fresh = await openChat("demo");
  await assistant(fresh, "You are in the Europe/Berlin time zone.").waitFor();
  assert.equal(await fresh.locator(".msg-user").count(), 3);
  const file = path.join(ROOT, "test-output/chat.png");
  fs.mkdirSync(path.dirname(file), { recursive: true });
  await fresh.setViewportSize({ width: 960, height: 1100 });
  await fresh.screenshot({ path: file });
  console.log(`screenshot: ${file}`);
});

test("Stop cancels a streaming answer and keeps what arrived", async () => {
  const page = await openChat("stop");
  model.push({ text: "Partial words before the model hangs ", chunkSize: 5, hang: true });
  await send(page, "Tell me a long story");
  await assistant(page, "Partial words").waitFor();
  await page.locator("button.stop").click();
  await page.locator("button.stop:disabled").waitFor();
  const stored = await getMessages(worker.url, "stop");
  assert.equal(stored.length, 2);
  assert.match(stored[1].parts.find((p) => p.type === "text").text, /^Partial words/);
  await assertNoErrors(page);
});

test("a model failure is shown as an error", async () => {
  const page = await openChat("error");
  model.push({ status: 400, message: "the scripted model is down" }); // 4xx: not retried
  await send(page, "Are you there?");
  const banner = page.getByTestId("error");
  await banner.waitFor();
  assert.match(await banner.textContent(), /the scripted model is down/);
  await page.locator("button.stop:disabled").waitFor();
  assert.deepEqual(page.errors, []);
});
