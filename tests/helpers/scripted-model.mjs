// A scripted OpenAI-compatible Chat Completions server for tests. Each model call takes the
// next entry of a queue and streams it as SSE, exactly as OpenAI does; the agent's real
// provider code parses it. Every request body is recorded so tests can assert what the model saw.
// Entries: `{text, chunkSize?, delayMs?, toolCalls?, finishReason?, hang?}` streams an answer;
// `{status, message?, headers?}` fails with that HTTP status (e.g. 429 with `retry-after-ms`);
// `{text, streamError, streamErrorType?}` sends text then an error event (a `type` such as
// `server_error` marks it temporary); `{text, cut: true}` sends text then drops the connection.
import http from "node:http";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function startScriptedModel() {
  const queue = [];
  const requests = [];
  const waiters = [];
  const open = new Set();
  let fallback = null;

  async function respond(entry, body, res) {
    if (typeof entry === "function") entry = await entry(body);
    if (entry.status && entry.status >= 400) {
      res.writeHead(entry.status, { "content-type": "application/json", ...entry.headers });
      res.end(JSON.stringify({ error: { message: entry.message ?? "scripted failure" } }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const id = `chatcmpl-${requests.length}`;
    const send = (delta, finish = null, extra = {}) =>
      res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`);
    const delay = entry.delayMs ?? 0;
    if (entry.streamError) {
      send({ role: "assistant", content: entry.text ?? "" });
      const error = { message: entry.streamError, ...(entry.streamErrorType && { type: entry.streamErrorType }) };
      res.write(`data: ${JSON.stringify({ error })}\n\n`);
      res.end();
      return;
    }
    if (entry.text) {
      const size = entry.chunkSize ?? 4;
      for (let i = 0; i < entry.text.length; i += size) {
        if (res.destroyed) return;
        send(i === 0 ? { role: "assistant", content: entry.text.slice(i, i + size) } : { content: entry.text.slice(i, i + size) });
        if (delay) await sleep(delay);
      }
    }
    if (entry.cut) {
      // The stream drops mid-answer: once what was sent has left, the connection goes without
      // the chunked body's end.
      await new Promise((resolve) => res.write("", resolve));
      await sleep(50);
      res.destroy();
      return;
    }
    (entry.toolCalls ?? []).forEach((call, index) => {
      const args = typeof call.args === "string" ? call.args : JSON.stringify(call.args ?? {});
      const callId = call.id ?? `call_${requests.length}_${index}`;
      const half = Math.ceil(args.length / 2);
      send({ tool_calls: [{ index, id: callId, type: "function", function: { name: call.name, arguments: args.slice(0, half) } }] });
      send({ tool_calls: [{ index, function: { arguments: args.slice(half) } }] });
    });
    if (entry.hang) {
      // Keep the stream open until the client goes away (cancel tests).
      await new Promise((resolve) => res.on("close", resolve));
      return;
    }
    send({}, entry.toolCalls?.length ? "tool_calls" : (entry.finishReason ?? "stop"));
    res.write(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 } })}\n\n`);
    res.write("data: [DONE]\n\n");
    res.end();
  }

  const server = http.createServer((req, res) => {
    open.add(res);
    res.on("close", () => open.delete(res));
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", async () => {
      if (req.method === "GET" && req.url.endsWith("/models")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ object: "list", data: [{ id: "scripted", object: "model" }] }));
        return;
      }
      if (req.method !== "POST" || !req.url.endsWith("/chat/completions")) {
        res.writeHead(404).end();
        return;
      }
      let body;
      try {
        body = JSON.parse(raw);
      } catch {
        res.writeHead(400).end();
        return;
      }
      body.__headers = req.headers;
      requests.push(body);
      for (const w of waiters.splice(0)) w();
      const entry = queue.shift() ?? fallback ?? { text: "(no scripted reply left)" };
      try {
        await respond(entry, body, res);
      } catch (e) {
        if (!res.headersSent) res.writeHead(500);
        res.end(String(e));
      }
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    /** Queues replies for the next model calls, in order. */
    push(...entries) {
      queue.push(...entries);
    },
    /** The reply used when the queue is empty. */
    setFallback(entry) {
      fallback = entry;
    },
    pending: () => queue.length,
    /** Drops the replies not used yet. */
    clear() {
      queue.length = 0;
    },
    async waitForRequests(n, timeoutMs = 10000) {
      const until = Date.now() + timeoutMs;
      while (requests.length < n) {
        if (Date.now() > until) throw new Error(`model saw ${requests.length} requests, wanted ${n}`);
        await new Promise((r) => {
          waiters.push(r);
          setTimeout(r, 50);
        });
      }
    },
    async close() {
      for (const res of open) res.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/** The last message of a given role in a recorded model request. */
export function lastMessage(body, role) {
  return [...body.messages].reverse().find((m) => m.role === role);
}
