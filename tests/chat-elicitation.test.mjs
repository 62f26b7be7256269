// MCP elicitation and tool hints on the chat page, in headless Chromium, against the Rust agent
// in Miniflare, the scripted model and the OAuth MCP server of tests/mcp-oauth.test.mjs on
// 127.0.0.1 (its `ask` tool sends `elicitation/create` for {name (required, minLength 1),
// age (integer, minimum 0)}): the form appears in the chat, required and bounds are checked
// before anything is sent, an accepted answer and a decline reach the server and finish the
// tool call, the agent's refusal is shown next to the form, a question answered in another tab
// leaves the page, and the MCP panel badges read-only and destructive tools. Screenshots go to
// test-output/.
import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars, ROOT } from "./helpers/worker.mjs";
import { connect, closeTabs } from "./helpers/client.mjs";
import { launchBrowser } from "./helpers/browser.mjs";
import { openChat as openChatPage, send, slow, assistant } from "./helpers/chat-page.mjs";
import { startOAuthServer } from "./mcp/start-server.mjs";

let model;
let auth;
let worker;
let browser;
const pages = [];
const OUT = path.join(ROOT, "test-output");
const NAME = "elicit";

before(async () => {
  [model, auth, browser] = await Promise.all([startScriptedModel(), startOAuthServer(), launchBrowser()]);
  worker = await startWorker({ vars: modelVars(model) });
  fs.mkdirSync(OUT, { recursive: true });
  // Add the OAuth server and approve it in a browser, as the user would.
  const tab = await connect(worker.host, NAME);
  const added = await tab.client.call("addMcpServer", ["secure", auth.mcp, { id: "secure" }]);
  tab.close();
  assert.equal(added.state, "authenticating", JSON.stringify(added));
  const context = await browser.newContext();
  const consent = await context.newPage();
  await consent.goto(added.authUrl);
  await consent.getByRole("button", { name: "Approve" }).click();
  await consent.getByRole("heading", { name: "Authorized" }).waitFor({ timeout: 15000 });
  await context.close();
});

afterEach(async () => {
  for (const page of pages.splice(0)) await page.context().close();
});

after(async () => {
  closeTabs();
  await browser?.close();
  await worker?.dispose();
  await model?.close();
  await auth?.kill();
});

const stats = () => auth.control("stats");

async function shot(page, name, locator) {
  const file = path.join(OUT, `chat-elicitation-${name}.png`);
  await (locator ?? page).screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}

/** Opens the page and records every elicitation response it sends, and its agent socket. */
async function openChat() {
  const page = await openChatPage(browser, worker, pages, NAME, { width: 1360, height: 900 });
  await page.evaluate(() => {
    window.__sent = [];
    const orig = WebSocket.prototype.send;
    WebSocket.prototype.send = function (data) {
      window.__ws = this;
      if (typeof data === "string" && data.includes("cf_agent_mcp_elicitation_response")) window.__sent.push(JSON.parse(data));
      return orig.call(this, data);
    };
  });
  return page;
}

const sent = (page) => page.evaluate(() => window.__sent);
// The latest call of the `ask` tool (earlier tests left theirs in the transcript).
const askCall = (page) => page.locator('[data-tool="tool_secure_ask"]').last();

test("the MCP panel badges read-only and destructive tools", async () => {
  const page = await openChat();
  const server = page.locator('[data-testid=panel-mcp] [data-server=secure][data-state=ready]');
  await server.waitFor({ timeout: 15000 });
  const tool = (name) => server.locator(`[data-tool-name="${name}"]`);
  await tool("whoami").locator("[data-hint=readOnly]", { hasText: "read-only" }).waitFor();
  await tool("wipe").locator("[data-hint=destructive]", { hasText: "destructive" }).waitFor();
  assert.equal(await tool("ask").locator("[data-hint]").count(), 0, "no badge for a tool without hints");
  assert.equal(await tool("whoami").locator("[data-hint=destructive]").count(), 0);
  await shot(page, "hints", page.getByTestId("panel-mcp"));
  assert.deepEqual(page.errors, []);
});

test("the question renders as a form; required and bounds are checked before sending; the answer finishes the tool call", async () => {
  const page = await openChat();
  model.push({ toolCalls: [{ id: "call_ask_form", name: "tool_secure_ask", args: {} }] }, slow("Thanks, Ada."));
  await send(page, "ask me my name");
  const form = page.getByTestId("elicitation");
  await form.waitFor({ timeout: 15000 });
  assert.equal(await form.locator(".elicit-message").textContent(), "What is your name?");
  assert.equal(await form.locator(".tool-name").textContent(), "secure");
  assert.equal(await form.locator("[data-field=name] .elicit-required").count(), 1, "name is marked required");
  assert.equal(await form.locator("[data-field=age] .elicit-required").count(), 0);
  assert.equal(await form.locator("[data-field=age] input").getAttribute("type"), "number");

  // Nothing filled in: the page refuses (the submit handler would have sent synchronously).
  await form.getByRole("button", { name: "Submit" }).click();
  await form.locator("[data-field=name] .elicit-field-error", { hasText: "Required." }).waitFor();
  await form.locator("[data-field=age] input").fill("-1");
  await form.locator("[data-field=name] input").fill("Ada");
  await form.getByRole("button", { name: "Submit" }).click();
  await form.locator("[data-field=age] .elicit-field-error", { hasText: "At least 0." }).waitFor();
  assert.equal(await form.locator("[data-field=name] .elicit-field-error").count(), 0);
  assert.deepEqual(await sent(page), [], "an invalid answer is not sent");
  await shot(page, "form", page.getByTestId("elicitations"));

  await form.locator("[data-field=age] input").fill("36");
  await form.getByRole("button", { name: "Submit" }).click();
  await form.waitFor({ state: "detached" });
  await askCall(page).and(page.locator("[data-state=output-available]")).waitFor({ timeout: 15000 });
  assert.match(await askCall(page).locator(".tool-output").textContent(), /accept \{\\?"name\\?":\\?"Ada\\?",\\?"age\\?":36\}/);
  await assistant(page, "Thanks, Ada.").waitFor();
  const answers = await sent(page);
  assert.equal(answers.length, 1);
  assert.deepEqual(answers[0].content, { name: "Ada", age: 36 });
  assert.equal(answers[0].action, "accept");
  assert.deepEqual((await stats()).elicited.at(-1), { action: "accept", content: { name: "Ada", age: 36 } });
  assert.deepEqual(page.errors, []);
});

test("the agent's refusal shows next to the form, and Decline answers the server with a decline", async () => {
  const page = await openChat();
  model.push({ toolCalls: [{ id: "call_ask_decline", name: "tool_secure_ask", args: {} }] }, slow("Fine, no name."));
  await send(page, "ask me again");
  const form = page.getByTestId("elicitation");
  await form.waitFor({ timeout: 15000 });
  const id = await form.getAttribute("data-id");

  // An answer the page itself would not send, on the page's own socket: the agent refuses it
  // and the page shows why, keeping the form.
  await page.evaluate((id) => window.__ws.send(JSON.stringify({ type: "cf_agent_mcp_elicitation_response", id, action: "accept", content: { age: -1 } })), id);
  await form.getByTestId("elicitation-error").filter({ hasText: /name/ }).waitFor();
  await shot(page, "refused", form);

  const before = (await stats()).elicited.length;
  await form.getByRole("button", { name: "Decline" }).click();
  await form.waitFor({ state: "detached" });
  await askCall(page).and(page.locator("[data-state=output-available]")).waitFor({ timeout: 15000 });
  assert.match(await askCall(page).locator(".tool-output").textContent(), /decline/);
  await assistant(page, "Fine, no name.").waitFor();
  const { elicited } = await stats();
  assert.equal(elicited.length, before + 1);
  assert.deepEqual(elicited.at(-1), { action: "decline" });
  assert.deepEqual((await sent(page)).map((f) => f.action), ["accept", "decline"]);
  await shot(page, "declined");
  assert.deepEqual(page.errors, []);
});

test("a tab opened while a question waits shows it; answered in another tab, it leaves both pages", async () => {
  const page = await openChat();
  const tab = await connect(worker.host, NAME);
  try {
    model.push({ toolCalls: [{ id: "call_ask_other", name: "tool_secure_ask", args: {} }] }, slow("Hello, Grace."));
    await send(page, "ask once more");
    const form = page.getByTestId("elicitation");
    await form.waitFor({ timeout: 15000 });
    const asked = await tab.waitFor((f) => f.type === "cf_agent_mcp_elicitation");
    assert.equal(asked.id, await form.getAttribute("data-id"));
    // The agent re-sends pending questions to a connecting tab.
    const late = await openChat();
    const lateForm = late.getByTestId("elicitation");
    await lateForm.waitFor();
    assert.equal(await lateForm.getAttribute("data-id"), asked.id);
    tab.send({ type: "cf_agent_mcp_elicitation_response", id: asked.id, action: "accept", content: { name: "Grace" } });
    await form.waitFor({ state: "detached" });
    await lateForm.waitFor({ state: "detached" });
    await assistant(page, "Hello, Grace.").waitFor();
    assert.deepEqual(await sent(page), [], "the page sent nothing");
    assert.deepEqual((await stats()).elicited.at(-1), { action: "accept", content: { name: "Grace" } });
  } finally {
    tab.close();
  }
});
