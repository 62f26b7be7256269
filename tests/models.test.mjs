// The model providers through the built Worker in Miniflare: the agent's real Anthropic and
// OpenAI-compatible providers against scripted servers of their own API shape on 127.0.0.1,
// and the real Workers AI provider against a local stand-in bound as `AI` (Workers AI cannot
// be reached offline; tests/helpers/workers-ai-binding.mjs says what it imitates).
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import { startScriptedAnthropic } from "./helpers/scripted-anthropic.mjs";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs } from "./helpers/client.mjs";

after(() => closeTabs());

const text = (chunks) => chunks.filter((c) => c.type === "text-delta").map((c) => c.delta).join("");
const failure = (frames) => frames.find((f) => f.error === true);

describe("Anthropic Messages provider", () => {
  let anthropic;
  let worker;

  before(async () => {
    anthropic = await startScriptedAnthropic();
    worker = await startWorker({
      vars: {
        THINK_MODEL_PROVIDER: "anthropic",
        THINK_MODEL_BASE_URL: anthropic.baseUrl,
        THINK_MODEL_API_KEY: "sk-ant-test",
        THINK_MODEL: "claude-scripted",
        THINK_MODEL_THINKING_BUDGET: "1024",
      },
    });
  });

  after(async () => {
    await worker?.dispose();
    await anthropic?.close();
  });

  test("streams text; the request has the headers, the model and cache breakpoints on the prefix", async () => {
    const tab = await connect(worker.host, "anthropic-text");
    anthropic.push({ text: "Hello from Claude." });
    const { id } = tab.chat("hi");
    await tab.turn(id);
    const chunks = tab.chunks(id);
    assert.equal(text(chunks), "Hello from Claude.");
    assert.equal(chunks.at(-1).type, "finish");
    assert.equal(chunks.at(-1).finishReason, "stop");
    const seen = anthropic.requests.at(-1);
    assert.equal(seen.__headers["x-api-key"], "sk-ant-test");
    assert.equal(seen.__headers["anthropic-version"], "2023-06-01");
    assert.equal(seen.model, "claude-scripted");
    assert.equal(seen.stream, true);
    assert.deepEqual(seen.thinking, { type: "enabled", budget_tokens: 1024 });
    assert.deepEqual(seen.system[0].cache_control, { type: "ephemeral" });
    assert.ok(seen.tools.length > 1, "the workspace tools are offered");
    assert.deepEqual(seen.tools.at(-1).cache_control, { type: "ephemeral" });
    assert.ok(seen.tools.slice(0, -1).every((t) => !t.cache_control), "one breakpoint, after the last tool");
    assert.deepEqual(seen.messages, [{ role: "user", content: [{ type: "text", text: "hi" }] }]);
    tab.close();
  });

  test("thinking streams as reasoning chunks; a tool_use runs the tool and goes back with its thinking and result", async () => {
    const tab = await connect(worker.host, "anthropic-tools");
    const before = anthropic.requests.length;
    anthropic.push(
      { thinking: "The user wants a file saved.", toolCalls: [{ id: "toolu_save", name: "write", args: { path: "/a.md", content: "alpha" } }] },
      { text: "Saved /a.md." },
    );
    const { id } = tab.chat("save alpha to /a.md");
    await tab.turn(id);
    const chunks = tab.chunks(id);
    const types = chunks.map((c) => c.type).filter((t) => !t.endsWith("-delta"));
    assert.deepEqual(types, [
      "start", "start-step", "reasoning-start", "reasoning-end", "tool-input-start", "tool-input-available",
      "tool-output-available", "finish-step", "start-step", "text-start", "text-end", "finish-step", "finish",
    ]);
    const reasoning = chunks.filter((c) => c.type === "reasoning-delta").map((c) => c.delta).join("");
    assert.equal(reasoning, "The user wants a file saved.");
    assert.ok(chunks.filter((c) => c.type === "tool-input-delta").length >= 2, "arguments arrive in deltas");
    assert.deepEqual(chunks.find((c) => c.type === "tool-input-available").input, { path: "/a.md", content: "alpha" });
    assert.equal(chunks.find((c) => c.type === "tool-output-available").toolCallId, "toolu_save");
    assert.equal(text(chunks), "Saved /a.md.");

    const second = anthropic.requests.at(-1);
    const [user, assistant, result] = second.messages;
    assert.deepEqual(user, { role: "user", content: [{ type: "text", text: "save alpha to /a.md" }] });
    assert.equal(assistant.role, "assistant");
    assert.deepEqual(assistant.content[0], {
      type: "thinking", thinking: "The user wants a file saved.", signature: `sig-${before + 1}`, // the server signs with its request count
    });
    assert.deepEqual(assistant.content.at(-1), {
      type: "tool_use", id: "toolu_save", name: "write", input: { path: "/a.md", content: "alpha" },
    });
    assert.equal(result.role, "user");
    assert.equal(result.content[0].type, "tool_result");
    assert.equal(result.content[0].tool_use_id, "toolu_save");
    assert.match(result.content[0].content, /bytesWritten/);
    tab.close();
  });

  test("an error answer reaches the client as the turn's error, and the agent keeps serving", async () => {
    const tab = await connect(worker.host, "anthropic-error");
    const before = anthropic.requests.length;
    anthropic.push({ status: 400, errorType: "invalid_request_error", message: "messages: roles must alternate" });
    const { id } = tab.chat("break");
    const frames = await tab.turn(id);
    assert.match(failure(frames)?.body ?? "", /HTTP 400: messages: roles must alternate/);
    assert.equal(anthropic.requests.length, before + 1, "a 400 is not retried");
    anthropic.push({ text: "fine again" });
    const next = tab.chat("again");
    await tab.turn(next.id);
    assert.equal(text(tab.chunks(next.id)), "fine again");
    tab.close();
  });

  test("a 429 with Retry-After is retried after that wait, then the turn succeeds", async () => {
    const tab = await connect(worker.host, "anthropic-429");
    const before = anthropic.requests.length;
    anthropic.push(
      { status: 429, errorType: "rate_limit_error", message: "slow down", headers: { "retry-after": "1" } },
      { text: "after the wait" },
    );
    const started = Date.now();
    const { id } = tab.chat("go");
    const frames = await tab.turn(id);
    assert.equal(failure(frames), undefined, JSON.stringify(failure(frames)));
    assert.ok(Date.now() - started >= 950, "waited the second Retry-After asked for");
    assert.equal(anthropic.requests.length, before + 2);
    assert.equal(text(tab.chunks(id)), "after the wait");
    tab.close();
  });

  test("stopping the turn during a retry wait ends it at once, without the retry", async () => {
    const tab = await connect(worker.host, "anthropic-stop-wait");
    const before = anthropic.requests.length;
    anthropic.push({ status: 429, errorType: "rate_limit_error", message: "slow down", headers: { "retry-after": "30" } }, { text: "too late" });
    const { id } = tab.chat("go");
    while (anthropic.requests.length === before) await new Promise((r) => setTimeout(r, 20));
    const started = Date.now();
    tab.send({ type: "cf_agent_chat_request_cancel", id });
    await tab.turn(id);
    assert.ok(Date.now() - started < 5000, "done long before the 30 s wait");
    assert.equal(anthropic.requests.length, before + 1, "the wait was not followed by the call");
    assert.equal(anthropic.pending(), 1);
    const next = tab.chat("again"); // the agent still serves: the queued answer is this turn's
    await tab.turn(next.id);
    assert.equal(text(tab.chunks(next.id)), "too late");
    tab.close();
  });

  test("an overloaded_error event is retried; three overloaded answers reach the client as the error", async () => {
    const tab = await connect(worker.host, "anthropic-overloaded");
    anthropic.push({ streamError: { type: "overloaded_error", message: "Overloaded" } }, { text: "made it" });
    const first = tab.chat("one");
    await tab.turn(first.id, { timeout: 15000 });
    assert.equal(text(tab.chunks(first.id)), "made it");

    const before = anthropic.requests.length;
    const busy = { status: 529, errorType: "overloaded_error", message: "Overloaded", headers: { "retry-after-ms": "30" } };
    anthropic.push(busy, busy, busy, { text: "never sent" });
    const second = tab.chat("two");
    const frames = await tab.turn(second.id);
    assert.match(failure(frames)?.body ?? "", /Failed after 3 attempts\. Last error: .*HTTP 529: Overloaded/);
    assert.equal(anthropic.requests.length, before + 3, "two retries, no fourth call");
    assert.equal(anthropic.pending(), 1);
    tab.close();
  });
});

describe("OpenAI-compatible provider retries", () => {
  let model;
  let worker;

  before(async () => {
    model = await startScriptedModel();
    worker = await startWorker({ vars: modelVars(model) });
  });

  after(async () => {
    await worker?.dispose();
    await model?.close();
  });

  test("a 429 with Retry-After, then success; three 503s reach the client as the error", async () => {
    const tab = await connect(worker.host, "openai-retry");
    model.push({ status: 429, message: "rate limited", headers: { "retry-after": "1" } }, { text: "second time lucky" });
    const started = Date.now();
    const first = tab.chat("go");
    await tab.turn(first.id);
    assert.ok(Date.now() - started >= 950, "waited the second Retry-After asked for");
    assert.equal(text(tab.chunks(first.id)), "second time lucky");
    assert.equal(model.requests.length, 2);

    const down = { status: 503, message: "upstream down", headers: { "retry-after-ms": "30" } };
    model.push(down, down, down, { text: "never sent" });
    const second = tab.chat("again");
    const frames = await tab.turn(second.id);
    assert.match(failure(frames)?.body ?? "", /Failed after 3 attempts\. Last error: .*HTTP 503: upstream down/);
    assert.equal(model.requests.length, 5);
    assert.equal(model.pending(), 1);
    tab.close();
  });
});

describe("Workers AI provider over the AI binding", () => {
  const calls = [];
  const answers = [];
  let worker;

  const sse = (...events) => events.map((e) => `data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`).join("");

  before(async () => {
    // The AI binding's Node side: records each run and answers with the next scripted body.
    const ai = async (request) => {
      const call = await request.json();
      calls.push(call);
      const next = answers.shift() ?? { body: sse({ response: "(no scripted reply left)" }, "[DONE]") };
      return new Response(next.body, { status: next.status ?? 200 });
    };
    // No THINK_MODEL_BASE_URL: the binding's presence alone selects Workers AI.
    worker = await startWorker({ vars: {}, ai });
  });

  after(async () => {
    await worker?.dispose();
  });

  test("streams reasoning and a tool call (OpenAI-style deltas), runs the tool, then native text with usage", async () => {
    const tab = await connect(worker.host, "workers-ai-tools");
    const args = JSON.stringify({ path: "/w.md", content: "from workers ai" });
    answers.push(
      {
        body: sse(
          { choices: [{ index: 0, delta: { reasoning_content: "Saving a file." } }] },
          { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "chatcmpl-tool-1", type: "function", function: { name: "write", arguments: args.slice(0, 10) } }] } }] },
          { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: args.slice(10) } }] } }] },
          { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }], usage: { prompt_tokens: 40, completion_tokens: 12 } },
          "[DONE]",
        ),
      },
      { body: sse({ response: "Wrote " }, { response: "/w.md." }, { response: "", usage: { prompt_tokens: 60, completion_tokens: 4 } }, "[DONE]") },
    );
    const { id } = tab.chat("write it");
    await tab.turn(id);
    const chunks = tab.chunks(id);
    const types = chunks.map((c) => c.type).filter((t) => !t.endsWith("-delta"));
    assert.deepEqual(types, [
      "start", "start-step", "reasoning-start", "reasoning-end", "tool-input-start", "tool-input-available",
      "tool-output-available", "finish-step", "start-step", "text-start", "text-end", "finish-step", "finish",
    ]);
    assert.deepEqual(chunks.find((c) => c.type === "tool-input-available").input, { path: "/w.md", content: "from workers ai" });
    assert.equal(text(chunks), "Wrote /w.md.");

    const [first, second] = calls.slice(-2);
    assert.equal(first.model, "@cf/moonshotai/kimi-k2.7-code", "the default model");
    assert.equal(first.inputs.stream, true);
    assert.ok(first.inputs.tools.some((t) => t.type === "function" && t.function.name === "write"));
    assert.equal(first.inputs.messages[0].role, "system");
    assert.deepEqual(first.inputs.messages.at(-1), { role: "user", content: "write it" });
    const assistant = second.inputs.messages.find((m) => m.role === "assistant");
    assert.equal(assistant.content, "", "no null content for the binding");
    assert.equal(assistant.tool_calls[0].function.name, "write");
    const result = second.inputs.messages.at(-1);
    assert.equal(result.role, "tool");
    assert.equal(result.tool_call_id, "chatcmpl-tool-1");
    tab.close();
  });

  test("a run that throws reaches the client as the turn's error", async () => {
    const tab = await connect(worker.host, "workers-ai-error");
    answers.push({ status: 500, body: "5007: No such model @cf/none" });
    const { id } = tab.chat("hello");
    const frames = await tab.turn(id);
    assert.match(failure(frames)?.body ?? "", /5007: No such model @cf\/none/);
    tab.close();
  });

  test("a capacity error is retried after the 2 s backoff", async () => {
    const tab = await connect(worker.host, "workers-ai-capacity");
    const before = calls.length;
    answers.push(
      { status: 500, body: "3040: Capacity temporarily exceeded, please try again." },
      { body: sse({ response: "there you are" }, "[DONE]") },
    );
    const started = Date.now();
    const { id } = tab.chat("busy?");
    await tab.turn(id);
    assert.ok(Date.now() - started >= 1900, "waited the AI SDK's first backoff");
    assert.equal(calls.length, before + 2);
    assert.equal(text(tab.chunks(id)), "there you are");
    tab.close();
  });

  test("THINK_MODEL picks another Workers AI model", async () => {
    await worker.restart({ THINK_MODEL: "@cf/openai/gpt-oss-120b" });
    const tab = await connect(worker.host, "workers-ai-model");
    answers.push({ body: sse({ choices: [{ index: 0, delta: { content: "hi" }, finish_reason: "stop" }] }, "[DONE]") });
    const { id } = tab.chat("which model?");
    await tab.turn(id);
    assert.equal(text(tab.chunks(id)), "hi");
    assert.equal(calls.at(-1).model, "@cf/openai/gpt-oss-120b");
    tab.close();
  });
});
