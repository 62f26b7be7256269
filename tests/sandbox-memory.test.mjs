// Model- and extension-written code that exhausts memory, run as `npm start` runs it: workerd
// under scripts/workerd-supervisor.mjs (MINIFLARE_WORKERD_PATH, as scripts/start.sh sets it),
// here with a 128 MB heap cap so that the runtime dies in seconds. Local workerd has no
// per-isolate memory limit, so such code ends the whole runtime; the supervisor starts it
// again, durable recovery settles the interrupted call as an error that names memory (never
// running it again), the model is asked to go on, other instances answer again, and nothing
// stored is lost. A hook that did the same is off after the restart. The bounds that need no
// crash (deep recursion, a 50 MB result, a flood of logs) are checked on the same runtime.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars, ROOT } from "./helpers/worker.mjs";
import { connect, closeTabs, getMessages, newId, toolTurn } from "./helpers/client.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let model;
let worker;

before(async () => {
  process.env.MINIFLARE_WORKERD_PATH = path.join(ROOT, "scripts/workerd-supervisor.mjs");
  process.env.THINK_LOCAL_HEAP_MB = "128";
  model = await startScriptedModel();
  worker = await startWorker({ vars: modelVars(model) });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

const BOMB = 'async () => { const a = []; for (;;) a.push("x".repeat(1 << 20) + a.length); }';

const GROW = `({
  tools: {
    grow: { description: "Grows an array without bound", parameters: {},
      execute: async () => { const a = []; for (;;) a.push("y".repeat(1 << 20) + a.length); } },
    huge: { description: "A 50 MB result", parameters: {}, execute: async () => "z".repeat(50 * 1024 * 1024) },
    deep: { description: "Recurses without end", parameters: {}, execute: async () => { const f = (n) => f(n + 1) + 1; return f(0); } },
  },
})`;

const GREEDY_HOOK = `({
  hooks: { beforeTurn: async () => { const a = []; for (;;) a.push("h".repeat(1 << 20) + a.length); } },
})`;

/** Polls `name`'s transcript until `pick(messages)` returns something (or `ms` pass). */
async function waitForTranscript(name, pick, ms = 240000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await getMessages(worker.url, name);
      const found = pick(last);
      if (found) return found;
    } catch {
      // The runtime is down or restarting.
    }
    await sleep(500);
  }
  throw new Error(`timed out; last transcript: ${JSON.stringify(last)?.slice(0, 2000)}`);
}

/** Asks `name` for its transcript every 250 ms until stopped; the times it could not answer. */
function watch(name) {
  const log = [];
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      const at = Date.now();
      const ok = await fetch(new URL(`/agents/think-agent/${name}/get-messages`, worker.url), { signal: AbortSignal.timeout(1000) })
        .then((r) => r.ok, () => false);
      log.push({ at, ok });
      await sleep(250);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await done;
      const down = log.filter((e) => !e.ok);
      const lastDown = down.at(-1)?.at;
      const backAt = log.find((e) => e.ok && lastDown !== undefined && e.at > lastDown)?.at;
      return { down: down.length, outageMs: down.length ? (backAt ?? Date.now()) - down[0].at : 0, back: backAt !== undefined };
    },
  };
}

const toolPart = (messages, toolCallId) =>
  messages.flatMap((m) => m.parts).find((p) => p.toolCallId === toolCallId && ["output-error", "output-available"].includes(p.state));

test("an execute that grows an array without bound ends as an error naming memory; the runtime comes back and nothing is lost", async () => {
  const tab = await connect(worker.host, "bomb");
  model.push({ text: "first answer" });
  const first = tab.chat("hello");
  await tab.turn(first.id);
  await getMessages(worker.url, "bystander");
  const bystander = watch("bystander");

  const callId = newId("call");
  model.push({ toolCalls: [{ id: callId, name: "execute", args: { code: BOMB } }] }, { text: "after the bomb" });
  const requestsBefore = model.requests.length;
  tab.chat("allocate");
  const part = await waitForTranscript("bomb", (m) => toolPart(m, callId));
  assert.equal(part.state, "output-error");
  assert.match(part.errorText, /exhausts memory/);
  assert.match(part.errorText, /not run again/);

  // The model was asked to go on, and was told what happened to its code.
  const answered = await waitForTranscript("bomb", (m) => m.some((x) => x.parts.some((p) => p.text === "after the bomb")) && m);
  const continuation = model.requests.slice(requestsBefore).find((r) => r.messages.some((x) => x.role === "tool" && x.tool_call_id === callId));
  assert.ok(continuation, "the model saw the call's result");
  assert.match(continuation.messages.find((x) => x.tool_call_id === callId).content, /exhausts memory/);
  // Nothing stored before the bomb was lost.
  assert.ok(answered.some((x) => x.parts.some((p) => p.text === "first answer")));
  assert.ok(answered.some((x) => x.role === "user" && x.parts.some((p) => p.text === "hello")));

  // Another instance stopped answering when the runtime died, and answers again.
  const outage = await bystander.stop();
  assert.ok(outage.down > 0, "the runtime died (otherwise this test does not exercise the restart)");
  assert.ok(outage.back, "the other instance answers again");
  console.log(`# runtime outage seen by another instance: ${(outage.outageMs / 1000).toFixed(1)} s`);

  // The agent answers its next turn.
  const next = await connect(worker.host, "bomb");
  model.push({ text: "next answer" });
  const turn = next.chat("and now?");
  await next.turn(turn.id, { timeout: 60000 });
  assert.ok(next.chunks(turn.id).some((c) => c.type === "text-delta" && "next answer".startsWith(c.delta)));
});

test("an extension tool that exhausts memory ends as an error naming memory; one whose hook does is off after the restart", async () => {
  const tab = await connect(worker.host, "ext-bomb");
  await tab.client.call("loadExtension", [{ name: "grow", version: "1" }, GROW]);
  const callId = newId("call");
  model.push({ toolCalls: [{ id: callId, name: "grow_grow", args: {} }] }, { text: "after grow" });
  tab.chat("grow");
  const part = await waitForTranscript("ext-bomb", (m) => toolPart(m, callId));
  assert.equal(part.state, "output-error");
  assert.match(part.errorText, /exhausts memory/);
  await waitForTranscript("ext-bomb", (m) => m.some((x) => x.parts.some((p) => p.text === "after grow")));

  // A beforeTurn hook that exhausts memory: the turn is recovered without it, and it stays off.
  const hooked = await connect(worker.host, "hook-bomb");
  await hooked.client.call("loadExtension", [{ name: "greedy", version: "1" }, GREEDY_HOOK]);
  model.setFallback(() => ({ text: "answered without the hook" }));
  try {
    hooked.chat("hi");
    await waitForTranscript("hook-bomb", (m) => m.some((x) => x.parts.some((p) => p.text === "answered without the hook")));
    const again = await connect(worker.host, "hook-bomb");
    const [info] = await again.client.call("listExtensions", []);
    assert.deepEqual(info.stoppedHooks, ["beforeTurn"]);
    const turn = again.chat("once more");
    await again.turn(turn.id, { timeout: 60000 });
    assert.ok(again.chunks(turn.id).some((c) => c.type === "text-delta"), "the next turn is answered at once");
  } finally {
    model.setFallback(null);
  }
});

test("a skill's .js script that exhausts memory ends as an error naming memory", async () => {
  const tab = await connect(worker.host, "skill-bomb");
  const files = {
    "/skills/grow/SKILL.md": "---\nname: grow\ndescription: Grows a list.\n---\nRun scripts/grow.mjs.\n",
    "/skills/grow/scripts/grow.mjs": 'export default async () => { const a = []; for (;;) a.push("s".repeat(1 << 20) + a.length); };\n',
  };
  for (const [p, content] of Object.entries(files)) {
    const out = await toolTurn(model, tab, { name: "write", args: { path: p, content } });
    assert.equal(out.type, "tool-output-available", JSON.stringify(out));
  }
  const callId = newId("call");
  model.push({ toolCalls: [{ id: callId, name: "run_skill_script", args: { name: "grow", path: "scripts/grow.mjs" } }] }, { text: "after the script" });
  tab.chat("run it");
  const part = await waitForTranscript("skill-bomb", (m) => toolPart(m, callId));
  assert.equal(part.state, "output-error");
  assert.match(part.errorText, /exhausts memory/);
  await waitForTranscript("skill-bomb", (m) => m.some((x) => x.parts.some((p) => p.text === "after the script")));
});

test("deep recursion, a 50 MB result and a flood of logs end as bounded errors without a restart", async () => {
  const tab = await connect(worker.host, "bounds");
  const deep = await toolTurn(model, tab, { name: "execute", args: { code: "async () => { const f = (n) => f(n + 1) + 1; return f(0); }" } });
  assert.equal(deep.type, "tool-output-available");
  assert.equal(deep.output.status, "error");
  assert.match(deep.output.error, /Maximum call stack size exceeded/);

  const huge = await toolTurn(model, tab, { name: "execute", args: { code: 'async () => "x".repeat(50 * 1024 * 1024)' } });
  assert.equal(huge.output.status, "error");
  assert.match(huge.output.error, /The result is 52\.4 million characters of JSON, over the limit of 1000000/);

  const noisy = await toolTurn(model, tab, {
    name: "execute",
    args: { code: 'async () => { for (let i = 0; i < 20000; i++) console.log("line " + i + " " + "y".repeat(1000)); return "quiet now"; }' },
  });
  assert.equal(noisy.output.status, "completed");
  assert.equal(noisy.output.result, "quiet now");
  const logs = noisy.output.logs;
  assert.ok(logs.join("").length <= 100000 + 200, `logs are bounded: ${logs.join("").length}`);
  assert.match(logs.at(-1), /^\[\d+ more log lines dropped: the logs are limited to 100000 characters\]$/);
  assert.equal(Number(/\[(\d+) more/.exec(logs.at(-1))[1]) + logs.length - 1, 20000, "every line is kept or counted");
  // The run was journaled in full (its row fits), so the executions list has it.
  const [latest] = await tab.client.call("executions", [1]);
  assert.equal(latest.status, "completed");

  await tab.client.call("loadExtension", [{ name: "grow", version: "1" }, GROW]).catch(() => {});
  const extHuge = await toolTurn(model, tab, { name: "grow_huge", args: {} });
  assert.equal(extHuge.type, "tool-output-error");
  assert.match(extHuge.errorText, /over the limit of 1000000/);
  const extDeep = await toolTurn(model, tab, { name: "grow_deep", args: {} });
  assert.equal(extDeep.type, "tool-output-error");
  assert.match(extDeep.errorText, /Maximum call stack size exceeded/);
});
