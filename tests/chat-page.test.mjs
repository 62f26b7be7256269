// The chat page's panels in headless Chromium, against the Rust agent in Miniflare, the
// scripted model and a real MCP server on 127.0.0.1: the workspace tree following the agent's
// writes by push (write tool, bash, Code Mode, another tab), the viewer, download and a
// dropped upload; the MCP panel (add with headers, tools, a held-back change and Accept,
// remove, a failing server); the Activity panel (a paused Code Mode execution approved from
// the page, context blocks); sub-agent runs nested under their tool calls two levels deep, a
// child's approval answered from its run;
// extensions (the approval card's permissions, listed with their tools, Unload); collapsible,
// folded tool JSON; no empty bubble for a failed turn; the workspace callables over Durable
// Object RPC. Screenshots go to test-output/.
import { test, before, after, afterEach } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars, ROOT } from "./helpers/worker.mjs";
import { connect, closeTabs } from "./helpers/client.mjs";
import { launchBrowser, openPage } from "./helpers/browser.mjs";
import { openChat as openChatPage, send, slow, assistant } from "./helpers/chat-page.mjs";
import { startMcpServer } from "./mcp/start-server.mjs";

let model;
let worker;
let browser;
let mcp;
const pages = [];
const OUT = path.join(ROOT, "test-output");

before(async () => {
  [model, mcp] = await Promise.all([startScriptedModel(), startMcpServer("--token", "sekret")]);
  worker = await startWorker({
    vars: modelVars(model, {
      THINK_APPROVAL: "edit",
      THINK_ALLOW_PRIVATE_NETWORK: "true",
      THINK_EXECUTE: JSON.stringify({ timeout: 5000 }),
      THINK_SUBAGENT: JSON.stringify({ depth: 2 }),
      // A wait long enough to see the page's recovering indicator.
      THINK_CHAT_RECOVERY: JSON.stringify({ initialDelayMs: 1500, maxDelayMs: 3000 }),
    }),
    withCaller: true,
  });
  browser = await launchBrowser();
  fs.mkdirSync(OUT, { recursive: true });
});

afterEach(async () => {
  for (const page of pages.splice(0)) await page.context().close();
});

after(async () => {
  closeTabs();
  await browser?.close();
  await worker?.dispose();
  await model?.close();
  await mcp?.kill();
});

const openChat = (name) => openChatPage(browser, worker, pages, name, { width: 1360, height: 900 });
const treeRow = (page, p) => page.locator(`[data-testid=panel-workspace] .tree-row[data-path="${p}"]`);

async function shot(page, name, locator) {
  const file = path.join(OUT, `chat-page-${name}.png`);
  await (locator ?? page).screenshot({ path: file });
  console.log(`screenshot: ${file}`);
}

/** Calls a callable from a Node tab of the same instance, as another client would. */
async function rpc(name, method, args = []) {
  const tab = await connect(worker.host, name);
  try {
    return await tab.client.call(method, args);
  } finally {
    tab.close();
  }
}

test("the workspace tree follows the agent's writes by push, and the viewer highlights and downloads", async () => {
  const page = await openChat("ws");
  await page.locator("[data-testid=panel-workspace] .empty", { hasText: "empty" }).waitFor();
  // Count the listWorkspace calls the page makes: one per push, none in between (no polling).
  await page.evaluate(() => {
    window.__frames = [];
    const orig = WebSocket.prototype.send;
    WebSocket.prototype.send = function (data) {
      if (typeof data === "string" && data.includes('"listWorkspace"')) window.__frames.push(Date.now());
      return orig.call(this, data);
    };
  });

  // The write tool, in a turn.
  const code = 'export function greet(name) {\n  // say hello\n  return "hi " + name + 42;\n}\n';
  model.push({ toolCalls: [{ id: "call_w", name: "write", args: { path: "/src/greet.js", content: code } }] }, slow("Wrote it."));
  await send(page, "write a greeter");
  await treeRow(page, "/src/greet.js").waitFor();
  await assistant(page, "Wrote it.").waitFor();

  // bash write-back and Code Mode's state.writeFile, in one more turn.
  model.push(
    { toolCalls: [{ id: "call_b", name: "bash", args: { script: "mkdir -p /sh && echo from-bash > /sh/out.txt" } }] },
    { toolCalls: [{ id: "call_x", name: "execute", args: { code: 'await state.writeFile({ path: "/cm/state.txt", content: "from code" }); return 1' } }] },
    slow("Both done."),
  );
  await send(page, "use bash and code");
  await treeRow(page, "/sh/out.txt").waitFor();
  await treeRow(page, "/cm/state.txt").waitFor();
  await assistant(page, "Both done.").waitFor();

  // Another client's upload reaches this page too.
  const before = await page.evaluate(() => window.__frames.length);
  await rpc("ws", "writeWorkspaceFile", ["/other/tab.md", Buffer.from("# from another tab\n").toString("base64"), "text/markdown"]);
  await treeRow(page, "/other/tab.md").waitFor();
  const calls = await page.evaluate(() => window.__frames.length);
  assert.ok(calls > before, "the page re-listed after the push");
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(await page.evaluate(() => window.__frames.length), calls, "no listing without a push");

  // The viewer: highlighted source with line numbers.
  await treeRow(page, "/src/greet.js").click();
  const viewer = page.getByTestId("file-viewer");
  await viewer.locator("[data-testid=file-text]", { hasText: "say hello" }).waitFor();
  assert.equal(await viewer.getByTestId("file-text").textContent(), code);
  assert.deepEqual(await viewer.locator(".tok-keyword").allTextContents(), ["export", "function", "return"]);
  assert.deepEqual(await viewer.locator(".tok-comment").allTextContents(), ["// say hello"]);
  assert.deepEqual(await viewer.locator(".tok-string").allTextContents(), ['"hi "']);
  assert.deepEqual(await viewer.locator(".tok-number").allTextContents(), ["42"]);

  // The open file is re-read when a write names it.
  model.push({ toolCalls: [{ id: "call_w2", name: "write", args: { path: "/src/greet.js", content: "export const v = 2;\n" } }] }, slow("Rewrote it."));
  await send(page, "rewrite the greeter");
  await viewer.locator("[data-testid=file-text]", { hasText: "export const v = 2;" }).waitFor();

  const [download] = await Promise.all([page.waitForEvent("download"), viewer.locator("button.download").click()]);
  assert.equal(download.suggestedFilename(), "greet.js");
  assert.equal(fs.readFileSync(await download.path(), "utf8"), "export const v = 2;\n");
  await shot(page, "workspace");
  assert.deepEqual(page.errors, []);
});

/** Drops `files` ([{name, type, base64}]) on the workspace panel, as a user's drag would. */
async function drop(page, files) {
  const dataTransfer = await page.evaluateHandle((files) => {
    const dt = new DataTransfer();
    for (const f of files) {
      const bin = atob(f.base64);
      const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
      dt.items.add(new File([bytes], f.name, { type: f.type }));
    }
    return dt;
  }, files);
  await page.getByTestId("panel-workspace").dispatchEvent("dragover", { dataTransfer });
  await page.getByTestId("panel-workspace").dispatchEvent("drop", { dataTransfer });
}

test("a file dropped on the workspace panel is uploaded into the workspace", async () => {
  const page = await openChat("upload");
  await drop(page, [{ name: "notes.txt", type: "text/plain", base64: Buffer.from("dropped text\n").toString("base64") }]);
  await page.getByTestId("upload-status").filter({ hasText: "Uploaded /notes.txt" }).waitFor();
  await treeRow(page, "/notes.txt").waitFor();
  const stored = await rpc("upload", "readWorkspaceFile", ["/notes.txt"]);
  assert.equal(stored.text, "dropped text\n");
  assert.equal(stored.mimeType, "text/plain");

  // Into the selected folder; a binary file larger than 1 MiB survives the round trip.
  await rpc("upload", "writeWorkspaceFile", ["/bin/.keep", "", null]);
  await treeRow(page, "/bin").click();
  const big = Buffer.alloc(1_500_000);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) % 256;
  await drop(page, [{ name: "blob.bin", type: "application/octet-stream", base64: big.toString("base64") }]);
  await page.getByTestId("upload-status").filter({ hasText: "Uploaded /bin/blob.bin" }).waitFor({ timeout: 20000 });
  const back = await rpc("upload", "readWorkspaceFile", ["/bin/blob.bin", "base64"]);
  assert.ok(Buffer.from(back.base64, "base64").equals(big), "the uploaded bytes are stored unchanged");
  await treeRow(page, "/bin/blob.bin").click();
  await page.getByTestId("file-viewer").locator(".panel-note", { hasText: "Too large to show here" }).waitFor();

  // Over the page's limit: a clear error, nothing written.
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(8 * 1024 * 1024 + 1)], "huge.bin"));
    const panel = document.querySelector("[data-testid=panel-workspace]");
    panel.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await page.getByTestId("upload-status").filter({ hasText: "huge.bin failed" }).waitFor();
  await assert.rejects(rpc("upload", "readWorkspaceFile", ["/bin/huge.bin"]), /no such file/);
  await shot(page, "upload", page.getByTestId("panel-workspace"));
  assert.deepEqual(page.errors, []);
});

test("the MCP panel adds a server with headers, lists its tools, accepts a changed definition and removes it", async () => {
  await mcp.control("reset");
  const page = await openChat("mcp");
  const panel = page.getByTestId("panel-mcp");
  await panel.locator(".empty", { hasText: "No MCP servers" }).waitFor();

  // A wrong token: the server is listed as failed with its error.
  await panel.locator("input[name=name]").fill("locked");
  await panel.locator("input[name=url]").fill(mcp.mcp);
  await panel.locator("textarea[name=headers]").fill("Authorization: Bearer wrong");
  await panel.locator("button[type=submit]").click();
  const locked = panel.locator(".mcp-server", { hasText: "locked" });
  await locked.locator(".mcp-error").waitFor();
  assert.notEqual(await locked.getAttribute("data-state"), "ready");
  await locked.locator("button.remove").click();
  await locked.waitFor({ state: "detached" });

  // A header line without a colon is refused before anything is sent.
  await panel.locator("input[name=url]").fill(mcp.mcp);
  await panel.locator("textarea[name=headers]").fill("Authorization Bearer sekret");
  await panel.locator("button[type=submit]").click();
  await panel.getByTestId("mcp-add-error").filter({ hasText: "is not" }).waitFor();

  await panel.locator("input[name=name]").fill("tools");
  await panel.locator("textarea[name=headers]").fill("Authorization: Bearer sekret");
  await panel.locator("button[type=submit]").click();
  const server = panel.locator('.mcp-server[data-state="ready"]', { hasText: "tools" });
  await server.waitFor();
  const id = await server.getAttribute("data-server");
  // The tool list shows without a click: each tool's name, description and the hints its
  // annotations give (the test server annotates filler_3 and filler_4), as the agent's state has them.
  assert.equal(await server.locator(".mcp-tools").evaluate((d) => d.open), true, "the tool list is open");
  const tool = (name) => server.locator(`[data-tool-name="${name}"]`);
  await tool("echo").waitFor();
  await tool("mutate").waitFor();
  assert.equal(await tool("add").locator(".mcp-tool-description").textContent(), "Add two numbers.");
  await tool("filler_3").locator("[data-hint=destructive][data-value=true]", { hasText: "destructive" }).waitFor();
  await tool("filler_3").locator("[data-hint=idempotent][data-value=true]", { hasText: "idempotent" }).waitFor();
  assert.match(await tool("filler_3").textContent(), /filler_3 Drop everything .*Filler 3\./);
  await tool("filler_4").locator("[data-hint=readOnly][data-value=true]", { hasText: "read-only" }).waitFor();
  await tool("filler_4").locator("[data-hint=openWorld][data-value=false]", { hasText: "closed world" }).waitFor();
  assert.equal(await tool("filler_4").locator("[data-hint=destructive]").count(), 0, "no hint the server did not give");
  assert.equal(await tool("echo").locator("[data-hint]").count(), 0, "no badge for a tool without annotations");
  const listed = await rpc("mcp", "getMcpServers");
  const own = listed.tools.filter((t) => t.serverId === id);
  assert.deepEqual(own.find((t) => t.name === "filler_3").annotations, { title: "Drop everything", destructiveHint: true, idempotentHint: true }, "annotations are in the state");
  assert.deepEqual(await server.locator("[data-tool-name]").evaluateAll((els) => els.map((e) => e.dataset.toolName)), own.map((t) => t.name));

  // `mutate` changes echo's description: the change is held back until Accept.
  // The model-facing name drops the id's dashes (src/mcp/tools.rs `tool_name`).
  model.push({ toolCalls: [{ id: "call_mut", name: `tool_${id.replaceAll("-", "")}_mutate`, args: {} }] }, slow("Mutated."));
  await send(page, "mutate the tools");
  const pending = server.getByTestId("mcp-pending");
  await pending.filter({ hasText: "echo" }).waitFor();
  assert.match(await pending.textContent(), /description/);
  assert.equal(await server.locator('[data-tool-name="echo"]').count(), 0, "the held-back tool is not listed");
  await shot(page, "mcp", panel);
  await pending.locator("button.accept").click();
  await pending.waitFor({ state: "detached" });
  await server.locator('[data-tool-name="echo"]', { hasText: "Mutated." }).waitFor();

  await server.locator("button.remove").click();
  await panel.locator(".empty", { hasText: "No MCP servers" }).waitFor();
  const state = await rpc("mcp", "getMcpServers");
  assert.deepEqual(state.servers, {});
  assert.deepEqual(page.errors, []);
});

test("the Activity panel approves a paused Code Mode execution and shows the context blocks", async () => {
  const page = await openChat("activity");
  const panel = page.getByTestId("panel-activity");
  // The default context: one writable `memory` block with its token budget.
  await panel.locator('.context-block[data-label="memory"] .context-usage', { hasText: "tokens" }).waitFor();
  const extensions = await rpc("activity", "listExtensions").then(
    () => true,
    () => false,
  );
  assert.equal(await panel.getByTestId("activity-extensions").count(), extensions ? 1 : 0, "extensions are shown exactly when the agent has them");
  await panel.getByTestId("activity-subagents").locator(".empty", { hasText: "None running" }).waitFor();

  await rpc("activity", "writeWorkspaceFile", ["/ap/f.txt", Buffer.from("v1").toString("base64"), "text/plain"]);
  const code = 'return await tools.edit({ path: "/ap/f.txt", old_string: "v1", new_string: "v2" })';
  model.push({ toolCalls: [{ id: "call_pause", name: "execute", args: { code } }] }, slow("Waiting for your approval."));
  await send(page, "edit with code");
  await assistant(page, "Waiting for your approval.").waitFor();
  const execution = panel.locator(".execution", { hasText: "tools.edit" });
  await execution.waitFor();
  assert.match(await execution.textContent(), /new_string/);
  await shot(page, "activity", panel);

  model.push(slow("The edit is done."));
  await execution.locator("button.approve").click();
  await execution.waitFor({ state: "detached" });
  await panel.getByTestId("activity-executions").locator(".empty", { hasText: "Nothing waiting" }).waitFor();
  await assistant(page, "The edit is done.").waitFor();
  assert.equal((await rpc("activity", "readWorkspaceFile", ["/ap/f.txt"])).text, "v2");

  // Reject: the execution goes away and the file stays.
  await rpc("activity", "writeWorkspaceFile", ["/ap/g.txt", Buffer.from("v1").toString("base64"), "text/plain"]);
  const reject = 'return await tools.edit({ path: "/ap/g.txt", old_string: "v1", new_string: "v3" })';
  model.push({ toolCalls: [{ id: "call_pause2", name: "execute", args: { code: reject } }] }, slow("Waiting again."));
  await send(page, "edit again");
  await assistant(page, "Waiting again.").waitFor();
  const second = panel.locator(".execution", { hasText: "g.txt" });
  await second.waitFor();
  model.push(slow("Understood, not edited."));
  await second.locator("button.deny").click();
  await second.waitFor({ state: "detached" });
  assert.equal((await rpc("activity", "readWorkspaceFile", ["/ap/g.txt"])).text, "v1");
  assert.deepEqual(page.errors, []);
});

test("tool input and output are collapsible JSON, long outputs start folded", async () => {
  const page = await openChat("json");
  const long = Array.from({ length: 120 }, (_, i) => `line ${i + 1}`).join("\n");
  await rpc("json", "writeWorkspaceFile", ["/long.txt", Buffer.from(long).toString("base64"), "text/plain"]);
  model.push(
    { toolCalls: [{ id: "call_list", name: "list", args: { path: "/" } }] },
    { toolCalls: [{ id: "call_read", name: "read", args: { path: "/long.txt" } }] },
    slow("Read it."),
  );
  await send(page, "read the long file");
  await assistant(page, "Read it.").waitFor();
  const list = page.locator('[data-tool="list"]');
  const read = page.locator('[data-tool="read"]');
  // A short output is open, as a tree whose nodes fold.
  assert.equal(await list.locator(".tool-output").getAttribute("data-folded"), "false");
  assert.equal(await list.locator(".tool-output").evaluate((d) => d.open), true);
  const input = read.locator(".tool-input");
  assert.match(await input.locator(".json-key").first().textContent(), /"path"/);
  assert.match(await input.textContent(), /"\/long.txt"/);
  // The long one starts folded; opening it shows the value, its long string cut short.
  const output = read.locator(".tool-output");
  assert.equal(await output.getAttribute("data-folded"), "true");
  assert.equal(await output.evaluate((d) => d.open), false);
  assert.match(await output.locator(":scope > summary").textContent(), /lines/);
  await output.locator(":scope > summary").click();
  await output.locator("button.link", { hasText: "more characters" }).click();
  await output.locator(".json-string", { hasText: "line 120" }).waitFor();
  await shot(page, "tool-json", page.locator(".messages"));
  assert.deepEqual(page.errors, []);
});

test("a turn that fails before any text leaves no empty bubble", async () => {
  const page = await openChat("fail");
  model.push({ status: 400, message: "the scripted model is down" });
  await send(page, "Are you there?");
  await page.getByTestId("error").filter({ hasText: "the scripted model is down" }).waitFor();
  await page.locator("button.stop:disabled").waitFor();
  assert.equal(await page.locator(".msg-assistant").count(), 0);
  // A fresh tab, from the server's transcript, shows none either.
  const fresh = await openChat("fail");
  await fresh.locator(".msg-user", { hasText: "Are you there?" }).waitFor();
  assert.equal(await fresh.locator(".msg-assistant").count(), 0);
  await shot(fresh, "full");
  assert.deepEqual(page.errors, []);
});

/** The first user message's text in a model request (who is asking, for the sub-agent script). */
const firstUserText = (body) => {
  const m = body.messages.find((x) => x.role === "user");
  return typeof m?.content === "string" ? m.content : (m?.content ?? []).map((c) => c.text ?? "").join("");
};
const lastToolResult = (body) => (body.messages.at(-1)?.role === "tool" ? body.messages.at(-1).content : null);

test("sub-agent runs show under their tool calls, two levels deep, and in the Activity panel while running", async () => {
  // One script answers parent, child and grandchild by their first user message.
  model.setFallback((body) => {
    const who = firstUserText(body).match(/^(PARENT|CHILD|GRANDCHILD):/)?.[1];
    const result = lastToolResult(body);
    if (who === "PARENT") return result === null ? { toolCalls: [{ id: "call_root", name: "subagent", args: { task: "CHILD: delegate further" } }] } : slow(`Root: ${result}`);
    if (who === "CHILD") return result === null ? { toolCalls: [{ id: "call_mid", name: "subagent", args: { task: "GRANDCHILD: the leaf" } }] } : { text: `Child got ${result}` };
    if (who === "GRANDCHILD") return { text: "The leaf answer, streamed slowly in small pieces.", chunkSize: 2, delayMs: 80 };
    return { text: "(unexpected)" };
  });
  try {
    const page = await openChat("subagents");
    const activity = page.getByTestId("activity-subagents");
    await send(page, "PARENT: nest");
    // While the grandchild streams, both runs are listed as running, each under its tool call.
    await activity.locator('li[data-run="agent-tool:call_root"]', { hasText: "under call_root" }).waitFor({ timeout: 20000 });
    await activity.locator('li[data-run="agent-tool:call_mid"]', { hasText: "under call_mid" }).waitFor({ timeout: 20000 });
    const root = page.locator('.msg-assistant [data-tool="subagent"] > [data-testid=subagent-run][data-run="agent-tool:call_root"]');
    const mid = root.locator('[data-tool="subagent"] > [data-testid=subagent-run][data-run="agent-tool:call_mid"]');
    await mid.locator(".text", { hasText: "The leaf" }).waitFor();
    assert.equal(await root.evaluate((d) => d.open), true, "a running run is open");
    assert.equal(await root.locator(":scope > summary .tool-state").textContent(), "running");
    await shot(page, "subagents-running");

    await assistant(page, 'Root: "Child got \\"The leaf answer').waitFor({ timeout: 30000 });
    await activity.locator(".empty", { hasText: "None running (2 finished)" }).waitFor();
    assert.equal(await root.locator(":scope > summary .tool-state").textContent(), "completed");
    assert.equal(await mid.locator(":scope > summary .tool-state").textContent(), "completed");
    assert.equal(await root.evaluate((d) => d.open), false, "a finished run folds");
    // The grandchild's whole stream, and the answers each level returned.
    await root.locator(":scope > summary").click();
    await mid.locator(":scope > summary").click();
    assert.deepEqual(await mid.locator(".subagent-parts > .text").allTextContents(), ["The leaf answer, streamed slowly in small pieces."], "the answer is shown once");
    assert.deepEqual(await root.locator(":scope > .subagent-parts > .text").allTextContents(), ['Child got "The leaf answer, streamed slowly in small pieces."']);
    await shot(page, "subagents", page.locator(".msg-assistant").last());
    assert.equal(await page.getByTestId("subagent-transcript").count(), 0, "a tab that saw the runs shows them, not the drill-in");

    // A tab opened afterwards has no events for the finished runs: it reads the child's steps,
    // then the grandchild's, from the drill-in route when they are opened.
    const fresh = await openChat("subagents");
    const call = fresh.locator('.msg-assistant > [data-tool="subagent"]');
    await call.waitFor();
    assert.equal(await call.getByTestId("subagent-run").count(), 0);
    const child = call.getByTestId("subagent-transcript");
    await child.locator(":scope > summary").click();
    await child.locator(".child-assistant .text", { hasText: 'Child got "The leaf answer' }).waitFor();
    const grandchild = child.locator('[data-tool="subagent"]').getByTestId("subagent-transcript");
    await grandchild.locator(":scope > summary").click();
    await grandchild.locator(".child-assistant .text", { hasText: "The leaf answer, streamed slowly in small pieces." }).waitFor();
    assert.equal(await grandchild.locator(".child-user .text").textContent(), "GRANDCHILD: the leaf");
    await shot(fresh, "subagents-drill-in", call);
    assert.deepEqual(page.errors, []);
    assert.deepEqual(fresh.errors, []);
  } finally {
    model.setFallback(null);
  }
});

const MATH = `({ tools: { add: { description: "Add two numbers", parameters: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"], execute: async ({ a, b }) => a + b } } })`;

test("an extension load shows its permissions for approval, is listed with its tools, and Unload removes it", async () => {
  const page = await openChat("extensions");
  const panel = page.getByTestId("activity-extensions");
  await panel.locator(".empty", { hasText: "None loaded" }).waitFor();
  const args = { name: "math", version: "1.2.0", description: "Arithmetic", source: MATH, network: ["127.0.0.1", "api.example.test"], workspace_access: "read-write" };
  model.push({ toolCalls: [{ id: "call_load", name: "load_extension", args }] });
  await send(page, "load math");
  const card = page.locator('[data-tool="load_extension"][data-state="approval-requested"]');
  const request = card.getByTestId("extension-permissions");
  await request.waitFor({ timeout: 20000 });
  assert.match(await request.textContent(), /Extension math 1\.2\.0 — Arithmetic/);
  assert.deepEqual(await request.locator('[data-permission="network"] code').allTextContents(), ["127.0.0.1", "api.example.test"]);
  assert.equal(await request.locator('[data-permission="workspace"]').textContent(), "read and write");
  await shot(page, "extension-approval", card);

  model.push(slow("Loaded math."));
  await card.locator("button.approve").click();
  await assistant(page, "Loaded math.").waitFor({ timeout: 20000 });
  const item = panel.locator('li[data-extension="math"]');
  await item.waitFor();
  assert.deepEqual(await item.locator(".extension-tools code").allTextContents(), ["math_add"]);
  assert.match(await item.textContent(), /1\.2\.0/);
  assert.deepEqual(await item.locator('[data-permission="network"] code').allTextContents(), ["127.0.0.1", "api.example.test"]);
  assert.equal(await item.locator('[data-permission="workspace"]').textContent(), "read and write");
  await shot(page, "extensions", page.getByTestId("panel-activity"));

  await item.locator("button.remove").click();
  await panel.locator(".empty", { hasText: "None loaded" }).waitFor();
  assert.deepEqual(await rpc("extensions", "listExtensions"), []);
  assert.deepEqual(page.errors, []);
});

test("the workspace callables are Durable Object RPC methods too", async () => {
  const call = (method, args) => worker.caller("/call?name=do-files", { method, args });
  const bytes = Buffer.from([0, 1, 2, 250, 251, 252]);
  assert.deepEqual(await call("writeWorkspaceFile", ["/do/a.txt", Buffer.from("hello").toString("base64"), "text/plain"]), { path: "/do/a.txt", size: 5 });
  await call("writeWorkspaceFile", ["/do/b.bin", bytes.toString("base64")]);
  const listed = await call("listWorkspace", []);
  assert.deepEqual(listed.entries.filter((e) => e.path.startsWith("/do/")).map((e) => [e.path, e.type, e.size]), [["/do/a.txt", "file", 5], ["/do/b.bin", "file", 6]]);
  assert.equal((await call("readWorkspaceFile", ["/do/a.txt"])).text, "hello");
  assert.equal((await call("readWorkspaceFile", ["/do/b.bin", "base64"])).base64, bytes.toString("base64"));
  // A bad call is an error, and the object keeps answering.
  const res = await worker.caller("/call?name=do-files", { method: "readWorkspaceFile", args: ["/do/missing.txt"] }).then(() => null, (e) => e);
  assert.ok(res instanceof Error, "a missing file is refused");
  assert.equal((await call("readWorkspaceFile", ["/do/a.txt"])).text, "hello");
});

test("a sub-agent's tool call waiting for approval is approved from its run, and the child goes on", async () => {
  // THINK_APPROVAL=edit: the child writes a note, then its edit of it waits for the page.
  model.setFallback((body) => {
    const who = firstUserText(body).match(/^(PARENT|CHILD):/)?.[1];
    const steps = body.messages.filter((m) => m.role === "tool").length;
    if (who === "PARENT") return steps === 0 ? { toolCalls: [{ id: "call_delegate", name: "subagent", args: { task: "CHILD: write and edit the note" } }] } : slow(`Parent: ${lastToolResult(body)}`);
    if (who === "CHILD") {
      if (steps === 0) return { toolCalls: [{ id: "call_child_write", name: "write", args: { path: "/note.txt", content: "draft" } }] };
      if (steps === 1) return { toolCalls: [{ id: "call_child_edit", name: "edit", args: { path: "/note.txt", old_string: "draft", new_string: "final" } }] };
      return { text: "The note is final." };
    }
    return { text: "(unexpected)" };
  });
  try {
    const page = await openChat("subagent-approval");
    await send(page, "PARENT: delegate");
    const run = page.locator('[data-testid=subagent-run][data-run="agent-tool:call_delegate"]');
    const edit = run.locator('[data-tool="edit"][data-state="approval-requested"]');
    await edit.locator("button.approve").waitFor({ timeout: 20000 });
    await shot(page, "subagent-approval", run);
    await edit.locator("button.approve").click();
    await assistant(page, 'Parent: "The note is final."').waitFor({ timeout: 20000 });
    await run.locator(":scope > summary").click();
    await run.locator('[data-tool="edit"][data-state="output-available"]').waitFor();
    const drill = await fetch(new URL("/agents/think-agent/subagent-approval/sub/call_delegate/get-messages", worker.url)).then((r) => r.json());
    assert.match(JSON.stringify(drill), /The note is final\./, "the child ran its edit and answered");
    assert.deepEqual(page.errors, []);
  } finally {
    model.setFallback(null);
  }
});

test("an answer the model dropped mid-way shows recovering, then goes on in the same bubble", async () => {
  model.push({ text: "Let me think about ", cut: true }, slow("that more carefully."));
  const page = await openChat("recovering");
  await send(page, "think it through");
  const indicator = page.getByTestId("recovering");
  await indicator.waitFor();
  await assistant(page, "Let me think about").waitFor();
  await shot(page, "recovering", page.locator(".chat"));
  await assistant(page, "that more carefully.").waitFor({ timeout: 20000 });
  await indicator.waitFor({ state: "detached" });
  const bubbles = page.locator(".msg-assistant");
  assert.equal(await bubbles.count(), 1, "one assistant message");
  assert.match(await bubbles.first().textContent(), /Let me think about\s*that more carefully\./);
  assert.equal(await page.getByTestId("error").count(), 0, "no error is shown");
  assert.deepEqual(page.errors, []);
});

test("a message sent while the page reconnects stays in view through its turn", async () => {
  const sockets = [];
  const page = await openPage(browser, new URL("/?name=reconnect-send", worker.url).href, {
    setup: (p) =>
      p.routeWebSocket(/\/agents\/think-agent\//, (ws) => {
        const server = ws.connectToServer();
        sockets.push({ ws, server });
      }),
  });
  pages.push(page);
  await page.locator("[data-testid=connection].on").waitFor();
  // The connection drops (a deploy, a network change); the tab reconnects on its own.
  const { ws, server } = sockets.at(-1);
  await ws.close({ code: 1012, reason: "restart" });
  await server.close({ code: 1012, reason: "restart" });
  await page.locator("[data-testid=connection].off").waitFor();
  model.push({ text: "Got it while you were away, and this answer takes a while to stream.", chunkSize: 4, delayMs: 60 });
  // Sent while disconnected: the client buffers the request and sends it once it is back.
  await page.locator(".composer textarea").fill("sent while offline");
  await page.locator("button.send").click();
  const mine = page.locator(".msg-user", { hasText: "sent while offline" });
  await mine.waitFor();
  await page.locator("[data-testid=connection].on").waitFor({ timeout: 15000 });
  // The transcript the server sends on connect predates the buffered request; the page keeps
  // the message in view while its answer streams, not only once the turn has ended.
  await assistant(page, "Got it").waitFor({ timeout: 15000 });
  assert.equal(await mine.count(), 1, "the sent message is in view while its answer streams");
  await assistant(page, "takes a while to stream.").waitFor({ timeout: 15000 });
  assert.equal(await mine.count(), 1);
  // The old socket may still be open on the server while the new one serves the same tab:
  // every frame still reaches the page once.
  assert.equal(await page.locator(".msg-assistant .text").textContent(), "Got it while you were away, and this answer takes a while to stream.");
  assert.deepEqual(page.errors, []);
});
