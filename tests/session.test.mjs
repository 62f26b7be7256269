// Session context in workerd: context blocks in the system prompt of the next model call,
// kept across a restart, FTS5 search in Durable Object SQLite, compaction of a long
// conversation (the transcript keeps every message), and THINK_CONTEXT=[] offering no tools.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, getMessages } from "./helpers/client.mjs";

const CONTEXT = JSON.stringify([
  { label: "memory", description: "Facts worth remembering across turns", type: "writable", maxTokens: 2000 },
  { label: "notes", description: "Indexed notes", type: "searchable" },
]);
const SUMMARY_START = "You summarize conversations";
const FLUSH_START = "The earlier part of this conversation";

let model;
let worker;

const systemOf = (body) => (body.messages[0]?.role === "system" ? body.messages[0].content : "");
const toolNames = (body) => (body.tools ?? []).map((t) => t.function.name);
const isTurn = (body) => !systemOf(body).startsWith(SUMMARY_START) && !systemOf(body).startsWith(FLUSH_START);

before(async () => {
  model = await startScriptedModel();
  model.setFallback((body) => {
    if (systemOf(body).startsWith(SUMMARY_START)) return { text: "SUMMARY-OF-THE-EARLIER-MESSAGES" };
    if (systemOf(body).startsWith(FLUSH_START)) return { text: "" };
    return { text: "(fallback)" };
  });
  worker = await startWorker({ vars: modelVars(model, { THINK_CONTEXT: CONTEXT, THINK_CONTEXT_WINDOW: "6000" }) });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

test("set_context shows in the next model call's system prompt, and a restart keeps it", async () => {
  const tab = await connect(worker.host, "memo");
  model.push({ toolCalls: [{ name: "set_context", args: { label: "memory", content: "The user's name is Ada." } }] }, { text: "Noted." });
  const start = model.requests.length;
  const { id } = tab.chat("My name is Ada, remember it.");
  await tab.turn(id);
  const [first, second] = model.requests.slice(start);
  assert.ok(toolNames(first).includes("set_context") && toolNames(first).includes("search_context"), toolNames(first).join());
  assert.ok(!toolNames(first).includes("load_context"), "no skill block, no load_context");
  assert.ok(!systemOf(first).includes("Ada"));
  assert.match(systemOf(first), /MEMORY \(Facts worth remembering across turns\) \[0% — 0\/2000 tokens\] \[writable\]/);
  assert.ok(systemOf(second).includes("The user's name is Ada."), systemOf(second));
  assert.match(systemOf(second), /MEMORY \(Facts worth remembering across turns\) \[\d+% — \d+\/2000 tokens\] \[writable\]/);
  const result = tab.chunks(id).find((c) => c.type === "tool-output-available");
  assert.match(result.output, /^Written to memory\. Usage: \d+% \(\d+\/2000 tokens\)$/);
  tab.close();

  await worker.restart();
  const again = await connect(worker.host, "memo");
  const before = model.requests.length;
  const next = again.chat("What is my name?");
  await again.turn(next.id);
  assert.ok(systemOf(model.requests[before]).includes("The user's name is Ada."), "the block survived the restart");
  const blocks = await again.client.call("getContext", []);
  assert.deepEqual(blocks.map((b) => [b.label, b.type]), [["memory", "writable"], ["notes", "searchable"]]);
  assert.equal(blocks[0].content, "The user's name is Ada.");
  again.close();
});

test("search_context finds an entry set_context indexed (FTS5 in DO SQLite)", async () => {
  const tab = await connect(worker.host, "search");
  model.push(
    { toolCalls: [{ name: "set_context", args: { label: "notes", content: "The staging database lives in eu-west.", metadata: { title: "Staging DB" } } }] },
    { toolCalls: [{ name: "search_context", args: { label: "notes", query: "staging database" } }] },
    { toolCalls: [{ name: "search_context", args: { label: "notes", query: "penguins" } }] },
    { text: "Found it." },
  );
  const { id } = tab.chat("Index and find the staging note.");
  await tab.turn(id);
  const outputs = tab.chunks(id).filter((c) => c.type === "tool-output-available").map((c) => c.output);
  assert.deepEqual(outputs, ['Indexed "staging-db" in notes.', "[staging-db]\nThe staging database lives in eu-west.", "No results found."]);
  tab.close();
});

test("a 300-message conversation is sent compacted; the transcript keeps all 300", async () => {
  const tab = await connect(worker.host, "long");
  const words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron";
  const messages = Array.from({ length: 299 }, (_, i) => ({ id: `old-${i}`, role: "user", parts: [{ type: "text", text: `message ${i}: ${words}` }] }));
  const start = model.requests.length;
  const { id } = tab.chat("message 299: and now?", { messages });
  await tab.turn(id, { timeout: 30000 });
  const seen = model.requests.slice(start);
  const summaries = seen.filter((b) => systemOf(b).startsWith(SUMMARY_START));
  const turn = seen.filter(isTurn).at(-1);
  assert.ok(summaries.length >= 1, "the model was asked for a summary");
  assert.ok(summaries[0].messages.at(-1).content.includes("message 3:"), "the middle starts after the head");
  const flush = seen.find((b) => systemOf(b).startsWith(FLUSH_START));
  assert.ok(flush, "the memory flush ran before the summary");
  assert.deepEqual(toolNames(flush), ["set_context"]);
  assert.ok(seen.indexOf(flush) < seen.indexOf(summaries[0]));
  const sent = turn.messages.filter((m) => m.role !== "system");
  assert.ok(sent.length < 100, `compacted: ${sent.length} messages sent`);
  assert.deepEqual(sent.slice(0, 3).map((m) => m.content), ["message 0: " + words, "message 1: " + words, "message 2: " + words], "head kept");
  assert.ok(sent[3].content.includes("SUMMARY-OF-THE-EARLIER-MESSAGES"), sent[3].content);
  assert.equal(sent.at(-1).content, "message 299: and now?", "tail kept");
  const stored = await getMessages(worker.url, "long");
  assert.equal(stored.filter((m) => m.role === "user").length, 300, "the stored transcript keeps every message");
  assert.equal(stored.length, 301);

  // The next turn uses the stored summary: no summary call, the same summary sent.
  const next = model.requests.length;
  const second = tab.chat("message 301: one more");
  await tab.turn(second.id);
  const later = model.requests.slice(next);
  assert.equal(later.filter((b) => !isTurn(b)).length, 0, "the summary is stored, not recomputed");
  const resent = later.at(-1).messages.filter((m) => m.role !== "system");
  assert.equal(resent[3].content, sent[3].content);
  assert.equal(resent.at(-1).content, "message 301: one more");
  tab.close();
});

test("a context-length error from the provider compacts once and retries", async () => {
  const tab = await connect(worker.host, "overflow");
  const messages = Array.from({ length: 11 }, (_, i) => ({ id: `o-${i}`, role: "user", parts: [{ type: "text", text: `short ${i}` }] }));
  model.push({ status: 400, message: "This model's maximum context length is 8192 tokens." });
  const start = model.requests.length;
  const { id } = tab.chat("short 11", { messages });
  await tab.turn(id);
  const turns = model.requests.slice(start).filter(isTurn);
  assert.equal(turns.length, 2, "the failed call and one retry");
  const retried = turns[1].messages.filter((m) => m.role !== "system");
  assert.ok(retried.length < 12, `${retried.length} messages on the retry`);
  assert.ok(retried[3].content.includes("SUMMARY-OF-THE-EARLIER-MESSAGES"), retried[3].content);
  assert.equal(tab.chunks(id).filter((c) => c.type === "text-delta").map((c) => c.delta).join(""), "(fallback)");
  assert.ok(!tab.responses(id).some((f) => f.error), "no error reached the tab");
  tab.close();
});

test("a skill block: set_context indexes an entry, the prompt lists it, load_context returns it", async () => {
  const playbooks = [{ label: "playbooks", description: "How we do things", type: "skill" }];
  await worker.restart(modelVars(model, { THINK_CONTEXT: JSON.stringify(playbooks) }));
  const tab = await connect(worker.host, "playbooks");
  const steps = "1. Tag the commit.\n2. Publish the package.";
  model.push(
    { toolCalls: [{ name: "set_context", args: { label: "playbooks", content: steps, metadata: { title: "release", description: "Shipping a version" } } }] },
    { toolCalls: [{ name: "load_context", args: { label: "playbooks", key: "release" } }] },
    { toolCalls: [{ name: "unload_context", args: { label: "playbooks", key: "release" } }] },
    { text: "Done." },
  );
  const start = model.requests.length;
  const { id } = tab.chat("Write down the release playbook, then read it back.");
  await tab.turn(id);
  const [first, second] = model.requests.slice(start);
  const set = first.tools.find((t) => t.function.name === "set_context");
  assert.ok(set, toolNames(first).join());
  assert.deepEqual(set.function.parameters.properties.label.enum, ["playbooks"]);
  assert.match(systemOf(first), /PLAYBOOKS \(How we do things\) \[loadable\]\n═+\n$/);
  assert.match(systemOf(second), /PLAYBOOKS \(How we do things\) \[loadable\]\n═+\n- release: Shipping a version$/);
  const outputs = tab.chunks(id).filter((c) => c.type === "tool-output-available").map((c) => c.output);
  assert.deepEqual(outputs, ['Indexed "release" in playbooks.', steps, 'Unloaded "release" from playbooks. Context reclaimed.']);
  const blocks = await tab.client.call("getContext", []);
  assert.deepEqual(blocks.map((b) => [b.label, b.type, b.entries]), [["playbooks", "skill", ["release"]]]);
  tab.close();
});

test("THINK_CONTEXT=[] offers none of the context tools and no blocks", async () => {
  await worker.restart(modelVars(model, { THINK_CONTEXT: "[]" }));
  const tab = await connect(worker.host, "none");
  const start = model.requests.length;
  const { id } = tab.chat("hello");
  await tab.turn(id);
  const body = model.requests[start];
  const names = toolNames(body);
  for (const t of ["set_context", "load_context", "unload_context", "search_context"]) assert.ok(!names.includes(t), `${t} in ${names}`);
  assert.ok(names.length > 0, "the other tools are still offered");
  assert.ok(!systemOf(body).includes("═"), "no block is rendered");
  tab.close();
});
