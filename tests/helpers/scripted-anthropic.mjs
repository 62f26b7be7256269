// A scripted Anthropic Messages API server for tests, on 127.0.0.1. Each `POST /v1/messages`
// takes the next queued entry and streams it as the API does (message_start,
// content_block_start/delta/stop for thinking, text and tool_use blocks, message_delta,
// message_stop), or answers an error status with Anthropic's error body. Every request body is
// recorded with its headers so tests can assert what the model saw.
//
// Entry fields: thinking (text, streamed with a signature), text, toolCalls [{ id?, name, args }],
// status + errorType + message (+ headers) for an HTTP error, streamError { type, message } for
// an `error` event after message_start.
import http from "node:http";

export async function startScriptedAnthropic() {
  const queue = [];
  const requests = [];

  function stream(entry, res) {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
    const send = (event) => res.write(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`);
    const n = requests.length;
    send({
      type: "message_start",
      message: {
        id: `msg_${n}`, type: "message", role: "assistant", model: "scripted", content: [],
        stop_reason: null, usage: { input_tokens: 11, cache_read_input_tokens: 7, output_tokens: 1 },
      },
    });
    if (entry.streamError) {
      send({ type: "error", error: entry.streamError });
      res.end();
      return;
    }
    let index = 0;
    if (entry.thinking) {
      send({ type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } });
      for (const piece of entry.thinking.match(/.{1,5}/gs)) {
        send({ type: "content_block_delta", index, delta: { type: "thinking_delta", thinking: piece } });
      }
      send({ type: "content_block_delta", index, delta: { type: "signature_delta", signature: `sig-${n}` } });
      send({ type: "content_block_stop", index });
      index++;
    }
    if (entry.text) {
      send({ type: "content_block_start", index, content_block: { type: "text", text: "" } });
      send({ type: "ping" });
      for (const piece of entry.text.match(/.{1,4}/gs)) {
        send({ type: "content_block_delta", index, delta: { type: "text_delta", text: piece } });
      }
      send({ type: "content_block_stop", index });
      index++;
    }
    for (const [i, call] of (entry.toolCalls ?? []).entries()) {
      const id = call.id ?? `toolu_${n}_${i}`;
      send({ type: "content_block_start", index, content_block: { type: "tool_use", id, name: call.name, input: {} } });
      const args = JSON.stringify(call.args ?? {});
      const half = Math.ceil(args.length / 2);
      send({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: args.slice(0, half) } });
      send({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: args.slice(half) } });
      send({ type: "content_block_stop", index });
      index++;
    }
    const stop = entry.toolCalls?.length ? "tool_use" : "end_turn";
    send({ type: "message_delta", delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 9 } });
    send({ type: "message_stop" });
    res.end();
  }

  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      if (req.method !== "POST" || !req.url.endsWith("/v1/messages")) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ type: "error", error: { type: "not_found_error", message: `no route ${req.url}` } }));
        return;
      }
      const body = JSON.parse(raw);
      body.__headers = req.headers;
      requests.push(body);
      const entry = queue.shift() ?? { text: "(no scripted reply left)" };
      if (entry.status) {
        res.writeHead(entry.status, { "content-type": "application/json", ...entry.headers });
        res.end(JSON.stringify({ type: "error", error: { type: entry.errorType ?? "api_error", message: entry.message ?? "scripted failure" } }));
        return;
      }
      stream(entry, res);
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
    pending: () => queue.length,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
