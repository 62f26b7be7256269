// The browser tools against a real headless Debian chromium started here (`--headless=new
// --remote-debugging-port=0`, its port read from stderr), reached by the Worker in Miniflare
// through THINK_BROWSER_CDP_URL, with pages served by this test on 127.0.0.1 and the scripted
// model calling the tools (and answering browser_extract's question).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import fs from "node:fs";
import { spawn } from "node:child_process";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars, tempDir } from "./helpers/worker.mjs";
import { connect, closeTabs } from "./helpers/client.mjs";
import { CHROMIUM } from "./helpers/browser.mjs";

let model;
let site;
let chrome;
let cdpUrl;
let oneShot;
let reuse;
let reuseVars;
let seq = 0;
/** The Host header of every request the test's site received. */
const seenHosts = [];

const MAX_CHARS = 3000;

const PAGES = {
  "/": `<!doctype html><html><head><title>Browser Home</title></head><body>
    <h1>Welcome</h1><p>Read <a href="/docs">the docs</a> or <a href="https://example.com/x">elsewhere</a>.</p>
    <ul class="items"><li data-id="1">one</li><li data-id="2">two</li></ul></body></html>`,
  "/docs": `<!doctype html><html><head><title>Docs</title></head><body><h2>Docs</h2><p>Price: 42 EUR</p></body></html>`,
  "/long": `<!doctype html><html><head><title>Long</title></head><body><p>${"word ".repeat(2000)}</p></body></html>`,
};

/** Starts chromium with an ephemeral DevTools port and resolves with its http base URL. */
function startChrome() {
  if (!fs.existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: run scripts/setup.sh`);
  const profile = tempDir("think-rs-chrome-");
  const proc = spawn(
    CHROMIUM,
    [
      "--headless=new",
      "--remote-debugging-port=0",
      "--remote-debugging-address=127.0.0.1",
      `--user-data-dir=${profile}`,
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--window-size=800,600",
      "about:blank",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  return new Promise((resolve, reject) => {
    let err = "";
    const timer = setTimeout(() => reject(new Error(`chromium printed no DevTools port: ${err}`)), 20000);
    proc.stderr.on("data", (d) => {
      err += d;
      const m = /DevTools listening on ws:\/\/[^:]+:(\d+)\//.exec(err);
      if (m) {
        clearTimeout(timer);
        resolve({ proc, base: `http://127.0.0.1:${m[1]}`, profile });
      }
    });
    proc.on("exit", (code) => reject(new Error(`chromium exited (${code}): ${err}`)));
  });
}

/** The page targets chromium has open now. */
async function pageTargets() {
  const list = await (await fetch(`${cdpUrl}/json/list`)).json();
  return list.filter((t) => t.type === "page");
}

before(async () => {
  site = http.createServer((req, res) => {
    seenHosts.push(req.headers.host);
    if (req.url === "/redirect") {
      res.writeHead(302, { location: `http://localhost:${site.address().port}/docs` });
      return res.end();
    }
    const page = PAGES[req.url];
    res.writeHead(page ? 200 : 404, { "content-type": "text/html; charset=utf-8" });
    res.end(page ?? "<h1>Not found</h1>");
  });
  await new Promise((r) => site.listen(0, "127.0.0.1", r));
  chrome = await startChrome();
  cdpUrl = chrome.base;
  model = await startScriptedModel();
  const vars = {
    THINK_BROWSER_CDP_URL: cdpUrl,
    THINK_BROWSER_ALLOW: "127.0.0.1",
    THINK_APPROVAL: "cdp.Input.*",
    THINK_BROWSER: JSON.stringify({ maxChars: MAX_CHARS, idleMs: 1500 }),
  };
  oneShot = await startWorker({ vars: modelVars(model, vars) });
  reuseVars = modelVars(model, { ...vars, THINK_BROWSER_SESSION: "reuse", THINK_MODEL_VISION: "true" });
  reuse = await startWorker({ vars: reuseVars });
});

after(async () => {
  closeTabs();
  await oneShot?.dispose();
  await reuse?.dispose();
  await model?.close();
  site?.close();
  if (chrome) {
    chrome.proc.kill("SIGKILL");
    fs.rmSync(chrome.profile, { recursive: true, force: true });
  }
});

const origin = () => `http://127.0.0.1:${site.address().port}`;

/** One turn in which the model calls `name` with `args` (and the `extra` model answers that
 *  follow, e.g. browser_extract's), then says "ok"; returns the tool's output or error. */
async function callTool(tab, name, args, { extra = [] } = {}) {
  const id = `call_br_${seq++}`;
  model.push({ toolCalls: [{ id, name, args }] }, ...extra, { text: "ok" });
  const { id: requestId } = tab.chat(`run ${id}`);
  await tab.turn(requestId, { timeout: 40000 });
  const chunks = tab.chunks(requestId);
  const out = chunks.find((c) => c.toolCallId === id && (c.type === "tool-output-available" || c.type === "tool-output-error"));
  assert.ok(out, `no output for ${id}: ${JSON.stringify(chunks.filter((c) => c.toolCallId === id))}`);
  return out.type === "tool-output-error" ? { error: out.errorText } : out.output;
}

async function rpc(tab, method, args = []) {
  const id = `rpc_${seq++}`;
  tab.send({ type: "rpc", id, method, args });
  const reply = await tab.waitFor((f) => f.type === "rpc" && f.id === id, { timeout: 40000 });
  if (!reply.success) throw new Error(reply.error);
  return reply.result;
}

test("the browser tools are offered when a cdpUrl is set", async () => {
  const tab = await connect(oneShot.host, "br-offer");
  await callTool(tab, "browser_links", { html: "<a href='https://example.com/'>e</a>" });
  const names = model.requests.at(-2).tools.map((t) => t.function.name);
  for (const n of ["browser_execute", "browser_markdown", "browser_links", "browser_scrape", "browser_extract"]) {
    assert.ok(names.includes(n), `${n} missing from ${names}`);
  }
  assert.ok(!names.includes("browser_content"), "browser_content is opt-in");
  tab.close();
});

test("browser_execute navigates and returns document.title; one-shot leaves no target behind", async () => {
  const tab = await connect(oneShot.host, "br-title");
  const before = (await pageTargets()).length;
  const code = `
    const { sessionId } = await cdp.openPage({ url: "${origin()}/" });
    const r = await cdp.send({ method: "Runtime.evaluate", params: { expression: "document.title", returnByValue: true }, sessionId });
    const info = await cdp.sessionInfo();
    return { title: r.result.value, pages: info.pages.length, mode: info.mode };`;
  const out = await callTool(tab, "browser_execute", { code });
  assert.equal(out.status, "completed", JSON.stringify(out));
  assert.deepEqual(out.result, { title: "Browser Home", pages: 1, mode: "one-shot" });
  assert.equal((await pageTargets()).length, before, "the run's page was closed with its session");
  tab.close();
});

/** A 640×400 screenshot of the home page; the page is closed after (the reuse worker's shared
 *  session must hold only the pages its own test opens). */
const SHOT_CODE = () => `
    const { sessionId, targetId } = await cdp.openPage({ url: "${origin()}/" });
    await cdp.send({ method: "Emulation.setDeviceMetricsOverride", params: { width: 640, height: 400, deviceScaleFactor: 1, mobile: false }, sessionId });
    const { data } = await cdp.send({ method: "Page.captureScreenshot", params: { format: "png" }, sessionId });
    await cdp.send({ method: "Target.closeTarget", params: { targetId } });
    return { type: "browser_screenshot", mediaType: "image/png", data };`;

/** The model request that carried the result of tool call `id`. */
const requestAfter = (id) => model.requests.find((r) => r.messages.some((m) => m.role === "tool" && m.tool_call_id === id));

test("a screenshot comes back described, without its pixels", async () => {
  const tab = await connect(oneShot.host, "br-shot");
  const out = await callTool(tab, "browser_execute", { code: SHOT_CODE() });
  assert.equal(out.status, "completed", JSON.stringify(out));
  assert.equal(out.result.type, "browser_screenshot");
  assert.equal(out.result.mediaType, "image/png");
  assert.equal(out.result.data, undefined);
  assert.deepEqual([out.result.width, out.result.height], [640, 400]);
  assert.ok(out.result.bytes > 1000, JSON.stringify(out.result));
  const next = requestAfter(`call_br_${seq - 1}`);
  assert.ok(next, "the model saw the result");
  assert.ok(!JSON.stringify(next.messages).includes("image_url"), "no image for a model without vision");
  tab.close();
});

test("with THINK_MODEL_VISION the next request of the turn carries the screenshot as an image part", async () => {
  const tab = await connect(reuse.host, "br-vision");
  const out = await callTool(tab, "browser_execute", { code: SHOT_CODE() });
  assert.equal(out.status, "completed", JSON.stringify(out));
  assert.equal(out.result.data, undefined, "the transcript keeps no pixels");
  const id = `call_br_${seq - 1}`;
  const next = requestAfter(id);
  const at = next.messages.findIndex((m) => m.role === "tool" && m.tool_call_id === id);
  const image = next.messages[at + 1];
  assert.equal(image.role, "user", JSON.stringify(next.messages.slice(at).map((m) => m.role)));
  assert.equal(image.content[0].text, `Image from tool call ${id}:`);
  const url = image.content[1].image_url.url;
  assert.match(url, /^data:image\/png;base64,/);
  const png = Buffer.from(url.slice(url.indexOf(",") + 1), "base64");
  assert.equal(png.subarray(1, 4).toString(), "PNG");
  assert.deepEqual([png.readUInt32BE(16), png.readUInt32BE(20)], [640, 400]);
  // The next turn rebuilds the history from the transcript: the description, not the image.
  model.push({ text: "later" });
  const { id: requestId } = tab.chat("and now?");
  await tab.turn(requestId, { timeout: 40000 });
  const later = model.requests.at(-1);
  assert.ok(later.messages.some((m) => m.role === "tool" && m.tool_call_id === id), "the result is still in the history");
  assert.ok(!JSON.stringify(later.messages).includes("image_url"), "the image lived for its turn only");
  tab.close();
});

test("errors in code and in CDP use are results that teach the fix", async () => {
  const tab = await connect(oneShot.host, "br-errors");
  const thrown = await callTool(tab, "browser_execute", { code: "throw new Error('nope')" });
  assert.equal(thrown.status, "error");
  assert.match(thrown.error, /^(Error: )?nope$/);
  const event = await callTool(tab, "browser_execute", { code: `await cdp.send({ method: "Page.loadEventFired" })` });
  assert.equal(event.status, "error");
  assert.match(event.error, /Page\.loadEventFired is an event, not a command/);
  const session = await callTool(tab, "browser_execute", { code: `await cdp.send({ method: "Page.reload" })` });
  assert.match(session.error, /Page\.reload needs a sessionId/);
  const spec = await callTool(tab, "browser_execute", { code: `return (await cdp.spec({ domain: "Page" })).commands.some((c) => c.name === "navigate")` });
  assert.equal(spec.result, true, JSON.stringify(spec));
  tab.close();
});

test("browser_markdown, browser_links and browser_scrape read a served page", async () => {
  const tab = await connect(oneShot.host, "br-quick");
  const md = await callTool(tab, "browser_markdown", { url: `${origin()}/` });
  assert.equal(md, `# Welcome\n\nRead [the docs](${origin()}/docs) or [elsewhere](https://example.com/x).\n\n- one\n- two`);
  const links = await callTool(tab, "browser_links", { url: `${origin()}/` });
  assert.deepEqual(links, [`${origin()}/docs`, "https://example.com/x"]);
  const scraped = await callTool(tab, "browser_scrape", { url: `${origin()}/`, selectors: [".items li", "h1"] });
  assert.equal(scraped.length, 2);
  assert.deepEqual(scraped[0].results.map((r) => [r.text, r.attributes["data-id"]]), [["one", "1"], ["two", "2"]]);
  assert.equal(scraped[1].results[0].html, "Welcome");
  assert.ok(scraped[1].results[0].width > 0 && scraped[1].results[0].height > 0);
  const inline = await callTool(tab, "browser_markdown", { html: "<h3>Inline</h3><p>x <b>y</b></p>" });
  assert.equal(inline, "### Inline\n\nx **y**");
  const both = await callTool(tab, "browser_markdown", { url: `${origin()}/`, html: "<p>x</p>" });
  assert.match(both.error, /exactly one of url or html/);
  const bad = await callTool(tab, "browser_links", { url: "not a url" });
  assert.match(bad.error, /Invalid URL "not a url"/);
  tab.close();
});

test("browser_extract asks the configured model with the schema as its response format and checks the answer", async () => {
  const tab = await connect(oneShot.host, "br-extract");
  const schema = { type: "object", properties: { price: { type: "number" }, currency: { type: "string" } }, required: ["price", "currency"] };
  const out = await callTool(tab, "browser_extract", { url: `${origin()}/docs`, prompt: "the price", schema }, { extra: [{ text: '{"price": 42, "currency": "EUR"}' }] });
  assert.deepEqual(out, { price: 42, currency: "EUR" });
  const asked = model.requests.at(-2);
  const question = asked.messages.at(-1).content;
  assert.match(question, /Price: 42 EUR/);
  assert.match(question, /Task: the price/);
  assert.equal(asked.tools, undefined, "the extraction call offers no tools");
  assert.deepEqual(asked.response_format, { type: "json_schema", json_schema: { name: "browser_extract", schema, strict: false } });
  const wrong = await callTool(tab, "browser_extract", { url: `${origin()}/docs`, schema }, { extra: [{ text: '{"price": "cheap"}' }] });
  assert.match(wrong.error, /does not match the schema/);
  tab.close();
});

test("maxChars cuts a long page with a note", async () => {
  const tab = await connect(oneShot.host, "br-max");
  const md = await callTool(tab, "browser_markdown", { url: `${origin()}/long` });
  const full = "word ".repeat(2000).trim();
  assert.equal(md, `${full.slice(0, MAX_CHARS)}\n\n[truncated ${full.length - MAX_CHARS} characters]`);
  tab.close();
});

test("the allow-list refuses hosts it does not name, and loopback names not listed", async () => {
  const tab = await connect(oneShot.host, "br-allow");
  const port = site.address().port;
  const local = await callTool(tab, "browser_markdown", { url: `http://localhost:${port}/` });
  assert.match(local.error, /localhost is a loopback address.*THINK_BROWSER_ALLOW/);
  const other = await callTool(tab, "browser_execute", { code: `await cdp.openPage({ url: "https://example.com/" })` });
  assert.equal(other.status, "error");
  assert.match(other.error, /example\.com is not in the browser allow-list \(127\.0\.0\.1\)/);
  const via = await callTool(tab, "browser_execute", {
    code: `const { sessionId } = await cdp.openPage({});
           await cdp.send({ method: "Page.navigate", params: { url: "http://10.0.0.1/" }, sessionId })`,
  });
  assert.match(via.error, /10\.0\.0\.1 is a private/);
  // A redirect, and the page's own navigation, are held by the host and refused too.
  const redirected = await callTool(tab, "browser_markdown", { url: `${origin()}/redirect` });
  assert.match(redirected.error, /net::ERR_BLOCKED_BY_CLIENT \(it redirected to a URL the browser allow-list refuses\)/);
  const scripted = await callTool(tab, "browser_execute", {
    code: `const { sessionId } = await cdp.openPage({ url: "${origin()}/" });
           await cdp.send({ method: "Runtime.evaluate", params: { expression: "location.href = 'http://localhost:${port}/docs'" }, sessionId });
           await new Promise((r) => setTimeout(r, 300));
           const r = await cdp.send({ method: "Runtime.evaluate", params: { expression: "location.href", returnByValue: true }, sessionId });
           return r.result.value;`,
  });
  assert.equal(scripted.status, "completed", JSON.stringify(scripted));
  assert.doesNotMatch(scripted.result, /localhost/);
  assert.ok(!seenHosts.some((h) => h.startsWith("localhost")), `the site was reached as localhost: ${seenHosts}`);
  tab.close();
});

test("reuse keeps a page across two runs", async () => {
  const tab = await connect(reuse.host, "br-reuse");
  const first = await callTool(tab, "browser_execute", {
    code: `const { targetId } = await cdp.openPage({ url: "${origin()}/docs" }); return targetId;`,
  });
  assert.equal(first.status, "completed", JSON.stringify(first));
  const second = await callTool(tab, "browser_execute", {
    code: `const info = await cdp.sessionInfo();
           const { sessionId } = await cdp.attachToTarget({ targetId: ${JSON.stringify(first.result)} });
           const r = await cdp.send({ method: "Runtime.evaluate", params: { expression: "document.title", returnByValue: true }, sessionId });
           return { shared: info.shared, title: r.result.value, pages: info.pages.map((p) => p.targetId) };`,
  });
  assert.equal(second.status, "completed", JSON.stringify(second));
  assert.deepEqual(second.result, { shared: true, title: "Docs", pages: [first.result] });
  assert.ok((await pageTargets()).some((t) => t.id === first.result), "the shared page is still open in chromium");
  tab.close();
});

test("a paused run's session id survives a restart of the object", async () => {
  let tab = await connect(reuse.host, "br-restart");
  const code = `
    const { sessionId } = await cdp.openPage({ url: "${origin()}/docs" });
    await cdp.send({ method: "Input.dispatchKeyEvent", params: { type: "keyDown", key: "a" }, sessionId });
    const r = await cdp.send({ method: "Runtime.evaluate", params: { expression: "document.title", returnByValue: true }, sessionId });
    return r.result.value;`;
  const paused = await callTool(tab, "browser_execute", { code });
  assert.equal(paused.status, "paused", JSON.stringify(paused));
  tab.close();
  await reuse.restart();
  tab = await connect(reuse.host, "br-restart");
  model.push({ text: "done after the restart" });
  const approved = await rpc(tab, "approveExecution", [paused.executionId]);
  assert.equal(approved.status, "completed", JSON.stringify(approved));
  assert.equal(approved.result, "Docs");
  tab.close();
});

test("cdp.send round trips are cheap (figure for the README)", async (t) => {
  const tab = await connect(oneShot.host, "br-speed");
  const code = `
    const { sessionId } = await cdp.openPage({ url: "${origin()}/" });
    const t0 = Date.now();
    for (let i = 0; i < 50; i++) {
      await cdp.send({ method: "Runtime.evaluate", params: { expression: "1 + " + i, returnByValue: true }, sessionId });
    }
    return (Date.now() - t0) / 50;`;
  const out = await callTool(tab, "browser_execute", { code });
  assert.equal(out.status, "completed", JSON.stringify(out));
  t.diagnostic(`cdp.send Runtime.evaluate round trip, sandbox → host → chromium → sandbox: ${out.result.toFixed(2)} ms per call (n = 50)`);
  assert.ok(out.result < 100, `${out.result} ms per call`);
  tab.close();
});

test("a run paused for approval finds its page again when approved", async () => {
  const tab = await connect(oneShot.host, "br-resume");
  const code = `
    const { sessionId } = await cdp.openPage({ url: "${origin()}/docs" });
    await cdp.send({ method: "Input.dispatchKeyEvent", params: { type: "keyDown", key: "a" }, sessionId });
    const r = await cdp.send({ method: "Runtime.evaluate", params: { expression: "document.title", returnByValue: true }, sessionId });
    return r.result.value;`;
  const paused = await callTool(tab, "browser_execute", { code });
  assert.equal(paused.status, "paused", JSON.stringify(paused));
  const before = (await pageTargets()).length;
  model.push({ text: "approved and done" });
  // The connection was closed when the tool call ended: approving reconnects, re-attaches the
  // page handle and carries on in the same page.
  const approved = await rpc(tab, "approveExecution", [paused.executionId]);
  assert.equal(approved.status, "completed", JSON.stringify(approved));
  assert.equal(approved.result, "Docs");
  assert.equal((await pageTargets()).length, before - 1, "the finished one-shot run closed its page");
  tab.close();
});

test("plain execute has the cdp global; an approved replay's tools.* has no browser tools, as the live run", async () => {
  const tab = await connect(oneShot.host, "br-exec-cdp");
  const before = (await pageTargets()).length;
  const code = `
    let md;
    try { await tools.browser_markdown({ html: "<p>x</p>" }); md = "present"; } catch { md = "absent"; }
    const { sessionId } = await cdp.openPage({ url: "${origin()}/docs" });
    await cdp.send({ method: "Input.dispatchKeyEvent", params: { type: "keyDown", key: "a" }, sessionId });
    const r = await cdp.send({ method: "Runtime.evaluate", params: { expression: "document.title", returnByValue: true }, sessionId });
    return { md, title: r.result.value };`;
  const paused = await callTool(tab, "execute", { code });
  assert.equal(paused.status, "paused", JSON.stringify(paused));
  model.push({ text: "approved and done" });
  const approved = await rpc(tab, "approveExecution", [paused.executionId]);
  assert.equal(approved.status, "completed", JSON.stringify(approved));
  assert.deepEqual(approved.result, { md: "absent", title: "Docs" });
  assert.equal((await pageTargets()).length, before, "the finished one-shot run closed its page");
  tab.close();
});

test("a paused run keeps its session until the sweep closes it; approving then fails loudly", async () => {
  const tab = await connect(oneShot.host, "br-sweep");
  const code = `
    const { targetId, sessionId } = await cdp.openPage({ url: "${origin()}/" });
    await cdp.send({ method: "Input.dispatchKeyEvent", params: { type: "keyDown", key: "a" }, sessionId });
    return targetId;`;
  const paused = await callTool(tab, "browser_execute", { code });
  assert.equal(paused.status, "paused", JSON.stringify(paused));
  assert.equal(paused.pending[0].connector, "cdp");
  assert.equal(paused.pending[0].method, "send");
  const log = await rpc(tab, "executions", [1]);
  const target = log[0].calls[0].result.targetId;
  assert.ok((await pageTargets()).some((t) => t.id === target), "the paused run's page stays open");
  // The alarm (heartbeat after the turn, then the idle deadline) sweeps the idle session.
  const until = Date.now() + 30000;
  while (Date.now() < until && (await pageTargets()).some((t) => t.id === target)) {
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.ok(!(await pageTargets()).some((t) => t.id === target), "the sweep closed the idle session");
  model.push({ text: "the session was gone" });
  const approved = await rpc(tab, "approveExecution", [paused.executionId]);
  assert.equal(approved.status, "error", JSON.stringify(approved));
  assert.match(approved.error, /closed by the sweep after 1 s idle.*Start a new browser_execute run/);
  tab.close();
});

test("THINK_BROWSER=false after a restart: no browser tool, and a paused browser_execute cannot be approved into running", async () => {
  let tab = await connect(reuse.host, "br-switch");
  const code = `
    const typed = await cdp.send({ method: "Input.dispatchKeyEvent", params: { type: "keyDown", key: "a" } }).then(() => "sent", (e) => "refused");
    return "ran after approval: " + typed;`;
  const paused = await callTool(tab, "browser_execute", { code });
  assert.equal(paused.status, "paused", JSON.stringify(paused));
  tab.close();
  await reuse.restart({ ...reuseVars, THINK_BROWSER: "false" });
  tab = await connect(reuse.host, "br-switch");
  await callTool(tab, "read", { path: "/none.txt" });
  const offered = model.requests.at(-2).tools.map((t) => t.function.name);
  assert.ok(!offered.some((n) => n.startsWith("browser_")), `browser tools offered: ${offered}`);
  const refused = await rpc(tab, "approveExecution", [paused.executionId]);
  assert.equal(refused.status, "error", JSON.stringify(refused));
  assert.match(refused.error, /The browser tools are switched off \(THINK_BROWSER=false\)/);
  tab.close();
  await reuse.restart();
  tab = await connect(reuse.host, "br-switch");
  model.push({ text: "done once the browser is back" });
  const approved = await rpc(tab, "approveExecution", [paused.executionId]);
  assert.equal(approved.status, "completed", JSON.stringify(approved));
  assert.match(approved.result, /^ran after approval: /);
  tab.close();
});

test("a browser that goes away mid-run is a clear error, and the agent keeps working", async () => {
  const tab = await connect(oneShot.host, "br-gone");
  const id = `call_br_${seq++}`;
  const code = `
    const { sessionId } = await cdp.openPage({ url: "${origin()}/docs" });
    await cdp.waitForEvent({ method: "Never.happens", sessionId, timeoutMs: 9000 });`;
  const earlier = new Set((await pageTargets()).map((t) => t.id));
  model.push({ toolCalls: [{ id, name: "browser_execute", args: { code } }] }, { text: "it broke" });
  const { id: requestId } = tab.chat("run until the browser dies");
  const until = Date.now() + 20000;
  const opened = async () => (await pageTargets()).some((t) => !earlier.has(t.id) && t.url.endsWith("/docs"));
  while (Date.now() < until && !(await opened())) {
    await new Promise((r) => setTimeout(r, 100));
  }
  chrome.proc.kill("SIGKILL");
  await tab.turn(requestId, { timeout: 30000 });
  const out = tab.chunks(requestId).find((c) => c.toolCallId === id && c.type === "tool-output-available").output;
  assert.equal(out.status, "error", JSON.stringify(out));
  assert.match(out.error, /The browser connection is gone \(the browser closed the connection\)/);
  // The next calls fail fast with the reason, and the turn still ends with the model's answer.
  const next = await callTool(tab, "browser_markdown", { url: `${origin()}/` });
  assert.match(next.error, /Could not connect to the browser/);
  const told = model.requests.some((r) => r.messages.some((m) => m.role === "tool" && /Could not connect to the browser/.test(m.content)));
  assert.ok(told, "the model was told and answered");
  tab.close();
});
