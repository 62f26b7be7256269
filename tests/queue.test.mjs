// `queue` mode answers every message of a burst, each in its own turn: the model is sent the
// conversation up to that turn's own message (messages still waiting are not in it), and
// the answer follows its message in the transcript.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel, lastMessage } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, getMessages } from "./helpers/client.mjs";

let model;
let worker;

before(async () => {
  model = await startScriptedModel();
  // Each answer names the message it answers, so a wrong pairing shows in the transcript.
  model.setFallback((body) => ({ text: `answer to ${lastMessage(body, "user")?.content}`, chunkSize: 5, delayMs: 2 }));
  worker = await startWorker({ vars: modelVars(model, { THINK_MESSAGE_CONCURRENCY: "queue" }) });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

const textOf = (m) => m.parts.filter((p) => p.type === "text").map((p) => p.text).join("");

test("a burst from several tabs within a few ms: each turn sees up to its own message and answers it", async () => {
  const name = "burst";
  const TABS = 5;
  const PER_TAB = 4;
  const tabs = [];
  for (let t = 0; t < TABS; t++) {
    const tab = await connect(worker.host, name);
    await tab.waitFor((f) => f.type === "cf_agent_identity");
    tabs.push(tab);
  }
  const before = model.requests.length;
  // Round-robin over the tabs, with no wait: every message arrives before the first turn ends.
  const sent = [];
  const mine = tabs.map(() => []);
  for (let k = 0; k < PER_TAB; k++) {
    for (let t = 0; t < TABS; t++) {
      const text = `hammer ${t}.${k}`;
      const r = tabs[t].chat(text, { messages: mine[t] });
      mine[t].push(r.userMessage);
      sent.push({ tab: tabs[t], text, ...r });
    }
  }
  for (const r of sent) await r.tab.turn(r.id, { timeout: 30000 });

  const calls = model.requests.slice(before);
  assert.equal(calls.length, sent.length, "one model call per message");
  const answered = calls.map((c) => {
    const last = c.messages.at(-1);
    assert.equal(last.role, "user", "each model request ends with a user message");
    return last.content;
  });
  assert.deepEqual([...answered].sort(), sent.map((r) => r.text).sort(), "each request ends with its own message, each message once");
  for (const c of calls) {
    // The history a turn sees alternates user/answer up to its own message: nothing queued is in it.
    const roles = c.messages.filter((m) => m.role !== "system").map((m) => m.role);
    roles.forEach((role, i) => assert.equal(role, i % 2 === 0 ? "user" : "assistant", JSON.stringify(roles)));
  }

  const stored = await getMessages(worker.url, name);
  assert.equal(stored.length, 2 * sent.length);
  for (let i = 0; i < stored.length; i += 2) {
    assert.equal(stored[i].role, "user");
    assert.equal(stored[i + 1].role, "assistant");
    assert.equal(textOf(stored[i + 1]), `answer to ${textOf(stored[i])}`, `answer ${i / 2} follows its own message`);
  }
  // Every tab's own messages keep their order.
  for (let t = 0; t < TABS; t++) {
    const order = stored.filter((m) => m.role === "user" && textOf(m).startsWith(`hammer ${t}.`)).map(textOf);
    assert.deepEqual(order, mine[t].map((m) => m.parts[0].text));
  }
  for (const tab of tabs) tab.close();
});

test("a queued message is shown to every tab at once, before its turn runs", async () => {
  const name = "queued-visible";
  const a = await connect(worker.host, name);
  const b = await connect(worker.host, name);
  await b.waitFor((f) => f.type === "cf_agent_identity");
  model.push({ text: "a slow first answer, streamed in small pieces", chunkSize: 2, delayMs: 20 });
  const one = a.chat("first");
  await a.waitFor((f) => f.id === one.id && f.body?.includes("text-delta"));
  const two = a.chat("second", { messages: [one.userMessage] });
  const shown = await b.waitFor((f) => f.type === "cf_agent_chat_messages" && f.messages.some((m) => m.id === two.userMessage.id));
  assert.deepEqual(shown.messages.map(textOf), ["first", "second"], "the queued message is shown after the stored ones");
  await a.turn(two.id, { timeout: 20000 });
  assert.deepEqual((await getMessages(worker.url, name)).map(textOf), ["first", "a slow first answer, streamed in small pieces", "second", "answer to second"]);
  a.close();
  b.close();
});
