// The browser where `npm start` runs the agent (README, "Browser tools"): `wrangler dev --local`
// declares the BROWSER binding but reaches no Browser Run, so start.sh tells the agent so
// (THINK_BROWSER_BINDING=false) and gives it a local Chromium's DevTools URL instead
// (scripts/start-browser.sh, run here directly). The agent runs in Miniflare with the same
// BROWSER binding wrangler dev gives it; the tools it offers are read from the scripted model's
// requests.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { spawn } from "node:child_process";
import path from "node:path";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars, ROOT } from "./helpers/worker.mjs";
import { connect, closeTabs } from "./helpers/client.mjs";

const workers = [];
const shells = [];
let model;
let seq = 0;

after(async () => {
  closeTabs();
  for (const w of workers) await w.dispose();
  for (const s of shells) s.kill("SIGKILL");
  await model?.close();
});

// start.sh's own steps: `setting` reads the environment (start.sh also reads .dev.vars), then
// start_browser fills `vars`. The shell then waits on stdin, as npm start lives on in wrangler.
// Its messages (stderr) come first on stdout, then the settings, in order.
const HARNESS = `
set -euo pipefail
exec 2>&1
setting() { if [ -n "\${!1:-}" ]; then echo "\${!1}"; fi; }
vars=()
source scripts/start-browser.sh
start_browser
echo VARS
printf '%s\\n' "\${vars[@]}"
echo END
read -r _ || true
`;

/** Runs start_browser in a shell of its own; resolves with the --var settings it chose, what
 *  it printed, and the shell (alive until its stdin closes). */
function startBrowser(env) {
  const shell = spawn("/bin/bash", ["-c", HARNESS], { cwd: ROOT, env, stdio: ["pipe", "pipe", "ignore"] });
  shells.push(shell);
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`start_browser did not finish: ${out}`)), 30000);
    shell.stdout.on("data", (d) => {
      out += d;
      if (!out.includes("\nEND\n")) return;
      clearTimeout(timer);
      const all = out.split("\n");
      const lines = all.slice(all.indexOf("VARS") + 1, all.indexOf("END"));
      const settings = Object.fromEntries(
        lines.filter((l, i) => lines[i - 1] === "--var").map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 1)]),
      );
      resolve({ settings, said: all.slice(0, all.indexOf("VARS")).join("\n"), shell });
    });
    shell.on("exit", (code) => reject(new Error(`start_browser's shell exited (${code}): ${out}`)));
  });
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** One turn in which the model calls `name` with `args`, then says "ok"; returns the tool's
 *  output (or error) and the tool names the model was offered. */
async function turn(tab, name, args) {
  const id = `call_local_${seq++}`;
  model.push({ toolCalls: [{ id, name, args }] }, { text: "ok" });
  const { id: requestId } = tab.chat(`run ${id}`);
  await tab.turn(requestId, { timeout: 40000 });
  const out = tab.chunks(requestId).find((c) => c.toolCallId === id && /^tool-(output-available|output-error|input-error)$/.test(c.type));
  assert.ok(out, `no output for ${id}`);
  const offered = model.requests.at(-2).tools.map((t) => t.function.name);
  return { out: out.type === "tool-output-available" ? out.output : { error: out.errorText }, offered };
}

const browserTools = (names) => names.filter((n) => n.startsWith("browser_"));

test("start.sh says why there is no browser and tells the agent the binding is unusable", async () => {
  // No chromium on PATH and no CDP URL.
  const none = await startBrowser({ PATH: "/nonexistent" });
  assert.deepEqual(none.settings, { THINK_BROWSER_BINDING: "false" });
  assert.match(none.said, /no browser tools: no THINK_BROWSER_CDP_URL and no chromium on PATH/);
  none.shell.stdin.end();
  // A CDP URL nothing answers on: the tools are switched off for the run, and it says so.
  const closed = http.createServer();
  await new Promise((r) => closed.listen(0, "127.0.0.1", r));
  const dead = `http://127.0.0.1:${closed.address().port}`;
  await new Promise((r) => closed.close(r));
  const unreachable = await startBrowser({ ...process.env, THINK_BROWSER_CDP_URL: dead });
  assert.deepEqual(unreachable.settings, { THINK_BROWSER_BINDING: "false", THINK_BROWSER: "false" });
  assert.match(unreachable.said, new RegExp(`THINK_BROWSER_CDP_URL=${dead} does not answer`));
  unreachable.shell.stdin.end();
});

test("start.sh starts the chromium on PATH, whose DevTools answer on 127.0.0.1, and stops it when it exits", async () => {
  const started = await startBrowser({ ...process.env, PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin` });
  const url = started.settings.THINK_BROWSER_CDP_URL;
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/, started.said);
  assert.equal(started.settings.THINK_BROWSER_BINDING, "false");
  const version = await (await fetch(`${url}/json/version`)).json();
  assert.match(version.Browser, /Chrom/);
  const pid = Number(/\(pid (\d+)\)/.exec(started.said)[1]);
  assert.ok(alive(pid));
  // npm start exits: its chromium goes within a few seconds.
  started.shell.stdin.end();
  const deadline = Date.now() + 10000;
  while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  assert.ok(!alive(pid), `chromium ${pid} outlived npm start`);
  await assert.rejects(fetch(`${url}/json/version`));
});

test("with the BROWSER binding unusable no browser tool is offered; with a local chromium they are, and run", async () => {
  model = await startScriptedModel();
  // The binding as wrangler dev --local has it: the agent would offer the tools on it.
  const declared = await startWorker({ vars: modelVars(model), browserBinding: true });
  workers.push(declared);
  let tab = await connect(declared.host, "local-declared");
  const { offered: before } = await turn(tab, "list", { path: "/" });
  assert.ok(before.includes("browser_execute"), `the binding alone offers the tools: ${before}`);
  tab.close();

  // What npm start passes without a browser: nothing browser-related is offered or runs.
  const none = await startWorker({ vars: modelVars(model, { THINK_BROWSER_BINDING: "false" }), browserBinding: true });
  workers.push(none);
  tab = await connect(none.host, "local-none");
  const plain = await turn(tab, "execute", { code: "return typeof cdp" });
  assert.deepEqual(browserTools(plain.offered), [], plain.offered.join());
  assert.ok(plain.offered.includes("execute"));
  assert.equal(plain.out.result, "undefined", JSON.stringify(plain.out));
  const refused = await turn(tab, "browser_execute", { code: "return 1" });
  assert.match(refused.out.error ?? JSON.stringify(refused.out), /unavailable tool 'browser_execute'/);
  tab.close();

  // What npm start passes with the chromium it started: the tools are offered and work.
  const started = await startBrowser({ ...process.env });
  const cdpUrl = started.settings.THINK_BROWSER_CDP_URL;
  assert.ok(cdpUrl, started.said);
  const local = await startWorker({ vars: modelVars(model, started.settings), browserBinding: true });
  workers.push(local);
  tab = await connect(local.host, "local-chromium");
  const ran = await turn(tab, "browser_execute", {
    code: `const v = await cdp.send({ method: "Browser.getVersion" }); return v.product;`,
  });
  for (const n of ["browser_execute", "browser_markdown", "browser_links", "browser_scrape", "browser_extract"]) {
    assert.ok(ran.offered.includes(n), `${n} missing from ${ran.offered}`);
  }
  assert.equal(ran.out.status, "completed", JSON.stringify(ran.out));
  const version = await (await fetch(`${cdpUrl}/json/version`)).json();
  assert.equal(ran.out.result, version.Browser);
  const links = await turn(tab, "browser_links", { html: "<a href='https://example.com/a'>a</a>" });
  assert.match(JSON.stringify(links.out), /https:\/\/example\.com\/a/);
  tab.close();
  started.shell.stdin.end();
});
