// MCP servers behind OAuth 2.1, over the real stack: the Rust agent in Miniflare meets an MCP
// server whose authorization server is the MCP SDK's own (tests/mcp/servers/oauth-server.mjs on
// 127.0.0.1), and a headless Chromium plays the user: it opens the authUrl, approves on the
// consent page and follows the redirect to the agent's /agents/think-agent/<name>/callback.
// Then refresh before expiry, a revoked token, a failed refresh, state mismatch and replay,
// a restart in the middle of the flow, resources and prompts, and destructiveHint approvals.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { startOAuthServer } from "./mcp/start-server.mjs";
import { connect, closeTabs } from "./helpers/client.mjs";
import { launchBrowser } from "./helpers/browser.mjs";

let model;
let worker;
let auth;
let browser;

before(async () => {
  [model, auth, browser] = await Promise.all([startScriptedModel(), startOAuthServer(), launchBrowser()]);
  worker = await startWorker({ vars: modelVars(model) });
});

after(async () => {
  closeTabs();
  await browser?.close();
  await worker?.dispose();
  await model?.close();
  await auth?.kill();
});

const stats = () => auth.control("stats");
const mcpFrame = async (tab, pred, opts) => (await tab.waitFor((f) => f.type === "cf_agent_mcp_servers" && pred(f.mcp), opts)).mcp;
const callbackPath = (name) => `/agents/think-agent/${name}/callback`;

/**
 * The user's part: opens `authUrl` in a fresh browser context, clicks `button` on the consent
 * page and waits for the agent's answer page. `rewrite` sends the callback to another origin
 * (the agent after a restart listens on a new port). Returns the page's heading and the
 * callback URL the browser was sent to.
 */
async function authorize(authUrl, { button = "Approve", rewrite } = {}) {
  const context = await browser.newContext();
  try {
    const page = await context.newPage();
    page.setDefaultTimeout(15000);
    let callback;
    page.on("request", (r) => {
      if (r.url().includes("/callback?")) callback ??= r.url();
    });
    if (rewrite) {
      await page.route(`${rewrite.from}/**`, (route) => {
        const url = new URL(route.request().url());
        route.fulfill({ status: 302, headers: { location: `${rewrite.to}${url.pathname}${url.search}` } });
      });
    }
    await page.goto(authUrl);
    await page.getByRole("button", { name: button }).click();
    const heading = page.getByRole("heading", { name: /^(Authorized|Authorization failed)$/ });
    await heading.waitFor();
    return { heading: await heading.textContent(), text: await page.locator("p").textContent(), callback };
  } finally {
    await context.close();
  }
}

/** Runs one chat turn whose model replies are `replies`, and returns its chunks. */
async function turn(tab, text, ...replies) {
  model.push(...replies);
  const { id } = tab.chat(text);
  await tab.turn(id, { timeout: 20000 });
  return tab.chunks(id);
}

const callWhoami = (tab, server) =>
  turn(tab, "who am I?", { toolCalls: [{ id: `call_${Date.now()}`, name: `tool_${server}_whoami`, args: {} }] }, { text: "Done." });
const output = (chunks) => chunks.find((c) => c.type === "tool-output-available" || c.type === "tool-output-error");

/** Adds the OAuth server as `id` on agent `name` and checks it waits for authorization. */
async function addWaiting(tab, id) {
  const added = await tab.client.call("addMcpServer", [id, auth.mcp, { id }]);
  assert.equal(added.state, "authenticating", JSON.stringify(added));
  assert.ok(added.authUrl.startsWith(`${auth.origin}/authorize?`), added.authUrl);
  return added.authUrl;
}

test("the full flow: 401, discovery, registration, PKCE authUrl; the browser approves and the server is ready", async () => {
  const tab = await connect(worker.host, "oauth");
  const before = await stats();
  const authUrl = await addWaiting(tab, "secure");
  const q = new URL(authUrl).searchParams;
  assert.equal(q.get("response_type"), "code");
  assert.equal(q.get("code_challenge_method"), "S256");
  assert.match(q.get("code_challenge"), /^[A-Za-z0-9_-]{43}$/);
  assert.equal(q.get("redirect_uri"), `${worker.url.origin}${callbackPath("oauth")}`);
  assert.equal(q.get("resource"), auth.mcp);
  assert.equal(q.get("scope"), "mcp");
  assert.ok(q.get("state").length >= 43);
  assert.equal((await stats()).registrations, before.registrations + 1, "a client was registered dynamically");

  const waiting = await mcpFrame(tab, (m) => m.servers.secure?.state === "authenticating");
  assert.equal(waiting.servers.secure.auth_url, authUrl);
  assert.deepEqual(waiting.tools, []);

  const page = await authorize(authUrl);
  assert.equal(page.heading, "Authorized", page.text);
  const ready = await mcpFrame(tab, (m) => m.servers.secure?.state === "ready");
  assert.equal(ready.servers.secure.auth_url, null);
  assert.deepEqual(ready.tools.map((t) => t.name).sort(), ["ask", "whoami", "wipe"]);
  assert.deepEqual(ready.tools.find((t) => t.name === "whoami").annotations, { readOnlyHint: true }, "annotations reach the tabs");
  const after = await stats();
  assert.equal(after.grants.authorization_code, before.grants.authorization_code + 1);
  assert.equal(after.resources.at(-1), auth.mcp, "the token request names the resource");

  const out = output(await callWhoami(tab, "secure"));
  assert.equal(out.type, "tool-output-available", JSON.stringify(out));
  assert.match(out.output.content[0].text, /^client [0-9a-f-]{36}$/);

  // Tokens stay in the object: no frame any tab received carries one.
  const everything = JSON.stringify(tab.frames);
  for (const token of after.tokens) assert.ok(!everything.includes(token), "a token reached a tab");
  tab.close();
});

test("a wrong state is refused and stores nothing; a replayed callback is refused", async () => {
  const tab = await connect(worker.host, "mismatch");
  const authUrl = await addWaiting(tab, "secure");
  const before = await stats();
  const forged = await fetch(`${worker.url.origin}${callbackPath("mismatch")}?code=forged&state=not-the-state`);
  assert.equal(forged.status, 400);
  assert.match(await forged.text(), /unknown or already used OAuth state/);
  const still = await tab.client.call("getMcpServers", []);
  assert.equal(still.servers.secure.state, "authenticating");
  assert.equal(still.servers.secure.auth_url, authUrl, "the authorization in progress is untouched");
  assert.deepEqual(await stats(), before, "nothing was exchanged");

  const page = await authorize(authUrl);
  assert.equal(page.heading, "Authorized");
  await mcpFrame(tab, (m) => m.servers.secure?.state === "ready");
  const granted = await stats();
  const replay = await fetch(page.callback);
  assert.equal(replay.status, 400, "the same code and state a second time");
  assert.equal((await stats()).grants.authorization_code, granted.grants.authorization_code);
  assert.equal((await tab.client.call("getMcpServers", [])).servers.secure.state, "ready");
  tab.close();
});

test("a denied consent offers a new URL and says why", async () => {
  const tab = await connect(worker.host, "deny");
  const first = await addWaiting(tab, "secure");
  const page = await authorize(first, { button: "Deny" });
  assert.equal(page.heading, "Authorization failed");
  assert.match(page.text, /access_denied/);
  const state = (await tab.client.call("getMcpServers", [])).servers.secure;
  assert.equal(state.state, "authenticating");
  assert.notEqual(state.auth_url, first);
  assert.match(state.error, /access_denied/);
  tab.close();
});

test("resources and prompts: readMcpResource and getMcpPrompt", async () => {
  const tab = await connect(worker.host, "oauth");
  const read = await tab.client.call("readMcpResource", ["secure", "test://notes"]);
  assert.deepEqual(read.contents, [{ uri: "test://notes", mimeType: "text/plain", text: "The notes behind OAuth." }]);
  const prompt = await tab.client.call("getMcpPrompt", ["secure", "greet", { name: "Ada" }]);
  assert.equal(prompt.messages[0].content.text, "Hello, Ada!");
  await assert.rejects(tab.client.call("readMcpResource", ["secure", "test://missing"]), /Unknown resource/);
  await assert.rejects(tab.client.call("getMcpPrompt", ["secure", "greet", { name: 7 }]), /must be a string/);
  await assert.rejects(tab.client.call("readMcpResource", ["nope", "test://notes"]), /no MCP server with id "nope"/);
  await assert.rejects(tab.client.call("readMcpResource", ["secure"]), /the URI must be a string/);
  tab.close();
});

test("destructiveHint: true needs approval; readOnlyHint tools do not", async () => {
  const tab = await connect(worker.host, "oauth");
  const wipe = await turn(tab, "wipe it", { toolCalls: [{ id: "call_wipe", name: "tool_secure_wipe", args: {} }] });
  assert.ok(wipe.some((c) => c.type === "tool-approval-request" && c.toolCallId === "call_wipe"), JSON.stringify(wipe));
  assert.ok(!wipe.some((c) => c.type === "tool-output-available"), "the destructive tool did not run");
  tab.send({ type: "cf_agent_tool_approval", toolCallId: "call_wipe", approved: false, autoContinue: false });
  const who = await callWhoami(tab, "secure");
  assert.ok(!who.some((c) => c.type === "tool-approval-request"));
  tab.close();
});

test("elicitation: the question reaches every tab, a bad answer is refused, the answer and a decline reach the server", async () => {
  const tab = await connect(worker.host, "oauth");
  const other = await connect(worker.host, "oauth");
  const ask = async (answer) => {
    const from = other.frames.length;
    model.push({ toolCalls: [{ id: `call_ask_${from}`, name: "tool_secure_ask", args: {} }] }, { text: "Thanks." });
    const { id } = tab.chat("ask me");
    const asked = await other.waitFor((f) => f.type === "cf_agent_mcp_elicitation", { from });
    await answer(asked);
    await other.waitFor((f) => f.type === "cf_agent_mcp_elicitation_resolved" && f.id === asked.id, { from });
    await tab.turn(id, { timeout: 20000 });
    return { asked, out: output(tab.chunks(id)) };
  };
  const { asked, out } = await ask(async (asked) => {
    tab.send({ type: "cf_agent_mcp_elicitation_response", id: asked.id, action: "accept", content: { age: -1 } });
    const refused = await tab.waitFor((f) => f.type === "cf_agent_mcp_elicitation_error" && f.id === asked.id);
    assert.match(refused.error, /name/);
    tab.send({ type: "cf_agent_mcp_elicitation_response", id: asked.id, action: "accept", content: { name: "Ada", age: 36 } });
  });
  assert.equal(asked.serverId, "secure");
  assert.equal(asked.serverName, "secure");
  assert.equal(asked.message, "What is your name?");
  assert.deepEqual(asked.requestedSchema.required, ["name"]);
  assert.equal(out.output.content[0].text, 'accept {"name":"Ada","age":36}');
  const declined = await ask(async (asked) => other.send({ type: "cf_agent_mcp_elicitation_response", id: asked.id, action: "decline" }));
  assert.equal(declined.out.output.content[0].text, "decline");
  assert.deepEqual((await stats()).elicited.slice(-2), [{ action: "accept", content: { name: "Ada", age: 36 } }, { action: "decline" }]);
  tab.close();
  other.close();
});

test("refresh: before expiry, after a revoked access token, and a failed refresh asks for a new authorization", async () => {
  await auth.control("ttl?s=4");
  const tab = await connect(worker.host, "refresh");
  try {
    const first = await addWaiting(tab, "secure");
    assert.equal((await authorize(first)).heading, "Authorized");
    await mcpFrame(tab, (m) => m.servers.secure?.state === "ready");

    // 4 s tokens are refreshed in their second half, before a request would be refused.
    await new Promise((r) => setTimeout(r, 2500));
    const due = await stats();
    assert.equal(output(await callWhoami(tab, "secure")).type, "tool-output-available");
    const refreshed = await stats();
    assert.equal(refreshed.grants.refresh_token, due.grants.refresh_token + 1, "refreshed before use");
    assert.equal(refreshed.unauthorized, due.unauthorized, "and no request was refused");
    assert.equal(refreshed.resources.at(-1), auth.mcp);

    // The access token is revoked: the 401 is answered by a refresh, the call goes through.
    await auth.control("ttl?s=3600");
    await auth.control("revoke-access");
    assert.equal(output(await callWhoami(tab, "secure")).type, "tool-output-available");
    const recovered = await stats();
    assert.equal(recovered.unauthorized, refreshed.unauthorized + 1);
    assert.equal(recovered.grants.refresh_token, refreshed.grants.refresh_token + 1);

    // Refresh tokens revoked too: the call fails and the server waits for a new authorization.
    await auth.control("revoke-all");
    const from = tab.frames.length;
    const failed = output(await callWhoami(tab, "secure"));
    assert.equal(failed.type, "tool-output-error");
    assert.match(failed.errorText, /authorize/);
    const again = await mcpFrame(tab, (m) => m.servers.secure?.state === "authenticating", { from });
    const second = again.servers.secure.auth_url;
    assert.ok(second && second !== first, "a new authorization URL");
    assert.equal(new URL(second).searchParams.get("client_id"), new URL(first).searchParams.get("client_id"), "the registration is reused");
    assert.equal((await authorize(second)).heading, "Authorized");
    await mcpFrame(tab, (m) => m.servers.secure?.state === "ready", { from });
    assert.equal(output(await callWhoami(tab, "secure")).type, "tool-output-available");
  } finally {
    await auth.control("ttl?s=3600");
    tab.close();
  }
});

test("a restart in the middle of the flow: the authorization survives and completes", async () => {
  let tab = await connect(worker.host, "restart");
  const authUrl = await addWaiting(tab, "secure");
  const oldOrigin = worker.url.origin;
  tab.close();
  // THINK_APPROVAL=!tool_*_wipe lifts the approval destructiveHint asks for (checked below).
  await worker.restart(modelVars(model, { THINK_APPROVAL: "!tool_*_wipe" }));
  tab = await connect(worker.host, "restart");
  const waiting = await mcpFrame(tab, (m) => m.servers.secure?.state === "authenticating");
  assert.equal(waiting.servers.secure.auth_url, authUrl, "the same authorization waits after the restart");

  // The callback URL registered names the old port; the browser is sent on to the new one.
  const page = await authorize(authUrl, { rewrite: { from: oldOrigin, to: worker.url.origin } });
  assert.equal(page.heading, "Authorized", page.text);
  await mcpFrame(tab, (m) => m.servers.secure?.state === "ready");
  assert.equal(output(await callWhoami(tab, "secure")).type, "tool-output-available");

  const wipe = await turn(tab, "wipe it", { toolCalls: [{ id: "call_wipe2", name: "tool_secure_wipe", args: {} }] }, { text: "Wiped." });
  assert.ok(!wipe.some((c) => c.type === "tool-approval-request"), "exempted by THINK_APPROVAL");
  assert.equal(output(wipe).output.content[0].text, "wiped");
  tab.close();
});

test("a pending elicitation survives a restart and its answer reaches the server", async () => {
  let tab = await connect(worker.host, "restart");
  model.push({ toolCalls: [{ id: "call_ask_restart", name: "tool_secure_ask", args: {} }] });
  tab.chat("ask me");
  const asked = await tab.waitFor((f) => f.type === "cf_agent_mcp_elicitation");
  tab.close();
  await worker.restart();
  tab = await connect(worker.host, "restart");
  const again = await tab.waitFor((f) => f.type === "cf_agent_mcp_elicitation");
  assert.equal(again.id, asked.id, "the same pending input is shown after the restart");
  const before = (await stats()).elicited.length;
  tab.send({ type: "cf_agent_mcp_elicitation_response", id: again.id, action: "accept", content: { name: "Grace" } });
  await tab.waitFor((f) => f.type === "cf_agent_mcp_elicitation_resolved" && f.id === again.id);
  const deadline = Date.now() + 10000;
  while ((await stats()).elicited.length === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual((await stats()).elicited.at(-1), { action: "accept", content: { name: "Grace" } });
  tab.close();
});
