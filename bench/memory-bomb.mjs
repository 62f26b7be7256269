// What a new user sees when model-written code exhausts memory under `npm start`: starts
// scripts/start.sh (wrangler dev, workerd under scripts/workerd-supervisor.mjs) against a
// scripted model, has the model run an `execute` that grows an array without bound, and asks
// another instance for its transcript every second. Prints when that instance stopped and
// started answering again, how the call ended, and whether the next turn is answered.
// Usage: node bench/memory-bomb.mjs   (THINK_LOCAL_HEAP_MB and PORT are passed on)
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { startScriptedModel } from "../tests/helpers/scripted-model.mjs";
import { connect, newId, getMessages, closeTabs } from "../tests/helpers/client.mjs";
import { ROOT } from "../tests/helpers/worker.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const model = await startScriptedModel();
const port = Number(process.env.PORT ?? 8791);
const state = fs.mkdtempSync(path.join(os.tmpdir(), "think-rs-bomb-"));
const child = spawn("bash", ["scripts/start.sh"], {
  cwd: ROOT,
  env: { ...process.env, PORT: String(port), THINK_STATE_DIR: state, THINK_MODEL_BASE_URL: model.baseUrl, THINK_MODEL: "scripted", THINK_MODEL_API_KEY: "k" },
  stdio: ["ignore", "ignore", "pipe"],
  detached: true,
});
child.stderr.on("data", (d) => {
  const line = d.toString();
  if (/think-rs:|start:/.test(line)) process.stdout.write(line);
});
const base = `http://127.0.0.1:${port}`;
for (;;) {
  try {
    if ((await fetch(base)).ok) break;
  } catch {
    // wrangler is still building or starting.
  }
  await sleep(500);
}
const t0 = Date.now();
const at = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
const tab = await connect(`127.0.0.1:${port}`, "bomb");
const callId = newId("call");
model.push({ toolCalls: [{ id: callId, name: "execute", args: { code: 'async () => { const a = []; for (;;) a.push("x".repeat(1 << 20) + a.length); }' } }] }, { text: "after the bomb" });
tab.chat("allocate");
console.log(`0.0 s: the model runs the bomb`);
let down = null;
for (let i = 0; i < 120; i++) {
  await sleep(1000);
  const ok = await fetch(`${base}/agents/think-agent/bystander/get-messages`, { signal: AbortSignal.timeout(900) }).then((r) => r.ok, () => false);
  if (!ok && down === null) {
    down = at();
    console.log(`${down}: another instance does not answer`);
  }
  if (ok && down !== null) {
    console.log(`${at()}: it answers again`);
    break;
  }
}
for (let i = 0; i < 60; i++) {
  const part = await getMessages(base, "bomb").then((m) => m.flatMap((x) => x.parts).find((p) => p.toolCallId === callId && p.state?.startsWith("output")), () => null);
  if (part) {
    console.log(`${at()}: the call ended ${part.state}: ${part.errorText ?? ""}`);
    break;
  }
  await sleep(1000);
}
const next = await connect(`127.0.0.1:${port}`, "bomb");
model.push({ text: "next" });
const turn = next.chat("and now?");
await next.turn(turn.id, { timeout: 60000 }).then(() => console.log(`${at()}: the next turn was answered`), (e) => console.log(`the next turn failed: ${e.message}`));
closeTabs();
process.kill(-child.pid, "SIGINT");
await model.close();
fs.rmSync(state, { recursive: true, force: true });
process.exit(0);
