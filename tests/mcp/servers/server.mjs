// An MCP test server on the real @modelcontextprotocol/sdk (pinned 1.30.0), for integration
// tests of think-rs's MCP client. One process serves both transports:
//
//   Streamable HTTP   POST/GET/DELETE /mcp
//   legacy HTTP+SSE   GET /sse, POST /messages?sessionId=...
//
// Options (all optional):
//   --port N          listen port (default 0 = any; the chosen port is printed as JSON)
//   --token T         require "Authorization: Bearer T" on every request
//   --page-size N     tools/list page size (default 3), so pagination is exercised
//   --json            answer Streamable HTTP POSTs with JSON instead of SSE streams
//   --resumable       keep an in-memory event store so closed streams can be resumed
//
// Tools: echo {text}; add {a,b} (structuredContent + outputSchema); fail (isError);
// image (image content); slow {ms}; mutate (changes echo's description, announces
// tools/list_changed inside the call's response stream); grow (adds a tool, announces
// list_changed on every session); interrupt (closes the response stream early, then
// answers; needs --resumable); filler_1..filler_4 (to make several pages; filler_3 is
// annotated destructive and idempotent, filler_4 read-only and closed-world).
//
// Control endpoints for tests (no token needed): /control/reset restores the initial tools;
// /control/notify broadcasts tools/list_changed; /control/sessions lists open sessions;
// /control/delay?list=MS delays the first page of every tools/list (0 turns it off), so a
// client's discovery takes a known time. /redirect?to=URL&status=307 answers with that
// redirect (default: 307 to /mcp), for the address filter's redirect checks.

import http from "node:http";
import { randomUUID } from "node:crypto";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { SSEServerTransport } from "@modelcontextprotocol/sdk/server/sse.js";
import { InMemoryEventStore } from "@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js";
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const args = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = args[i + 1];
  return v === undefined || v.startsWith("--") ? true : v;
};
const PORT = Number(opt("port", 0));
const TOKEN = opt("token", null);
const PAGE_SIZE = Number(opt("page-size", 3));
const JSON_RESPONSES = opt("json", false) === true;
const RESUMABLE = opt("resumable", false) === true;

// Tool annotations on two fillers (no test calls them, so a destructive one gates nothing).
const FILLER_HINTS = {
  3: { annotations: { title: "Drop everything", destructiveHint: true, idempotentHint: true } },
  4: { annotations: { readOnlyHint: true, openWorldHint: false } },
};

const initialTools = () => [
  {
    name: "echo",
    description: "Echo the text back.",
    inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  },
  {
    name: "add",
    description: "Add two numbers.",
    inputSchema: {
      type: "object",
      properties: { a: { type: "number" }, b: { type: "number" } },
      required: ["a", "b"],
    },
    outputSchema: { type: "object", properties: { sum: { type: "number" } }, required: ["sum"] },
  },
  { name: "fail", description: "Always reports an error.", inputSchema: { type: "object" } },
  { name: "image", description: "Returns a tiny PNG.", inputSchema: { type: "object" } },
  {
    name: "slow",
    description: "Answers after ms milliseconds.",
    inputSchema: { type: "object", properties: { ms: { type: "number" } } },
  },
  { name: "mutate", description: "Changes echo's description.", inputSchema: { type: "object" } },
  { name: "grow", description: "Adds a tool.", inputSchema: { type: "object" } },
  { name: "interrupt", description: "Closes its response stream, then answers.", inputSchema: { type: "object" } },
  ...[1, 2, 3, 4].map((n) => ({ name: `filler_${n}`, description: `Filler ${n}.`, inputSchema: { type: "object" }, ...FILLER_HINTS[n] })),
];

let tools = initialTools();
let listDelayMs = 0;
const servers = new Set();
const PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ content: [{ type: "text", text: t }] });

function makeServer() {
  const server = new Server(
    { name: "think-rs-test-server", version: "1.0.0" },
    {
      capabilities: { tools: { listChanged: true }, prompts: {}, resources: {} },
      instructions: "A test server. Use echo to echo.",
    },
  );
  server.setRequestHandler(ListToolsRequestSchema, async (req) => {
    const start = Number(req.params?.cursor ?? 0) || 0;
    if (start === 0 && listDelayMs > 0) await sleep(listDelayMs);
    const page = tools.slice(start, start + PAGE_SIZE);
    const next = start + PAGE_SIZE < tools.length ? String(start + PAGE_SIZE) : undefined;
    return next ? { tools: page, nextCursor: next } : { tools: page };
  });
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: [{ name: "greet", description: "Greets someone." }],
  }));
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [{ uri: "test://readme", name: "readme", mimeType: "text/plain" }],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const a = req.params.arguments ?? {};
    switch (req.params.name) {
      case "echo":
        return text(String(a.text ?? ""));
      case "add": {
        const sum = Number(a.a) + Number(a.b);
        return { content: [{ type: "text", text: JSON.stringify({ sum }) }], structuredContent: { sum } };
      }
      case "fail":
        return { content: [{ type: "text", text: "the tool failed on purpose" }], isError: true };
      case "image":
        return { content: [{ type: "image", data: PNG, mimeType: "image/png" }] };
      case "slow":
        await sleep(Number(a.ms ?? 1000));
        return text("done");
      case "mutate": {
        const echo = tools.find((t) => t.name === "echo");
        echo.description = "Echo the text back. Mutated.";
        await extra.sendNotification({ method: "notifications/tools/list_changed" });
        return text("mutated");
      }
      case "grow": {
        tools.push({ name: `grown_${tools.length}`, description: "Grown.", inputSchema: { type: "object" } });
        await Promise.all([...servers].map((s) => s.sendToolListChanged().catch(() => {})));
        return text("grown");
      }
      case "interrupt":
        if (!extra.closeSSEStream) return { ...text("not resumable"), isError: true };
        extra.closeSSEStream();
        await sleep(100);
        return text("answered after the stream closed");
      default:
        if (req.params.name.startsWith("filler_")) return text(req.params.name);
        throw new Error(`Unknown tool: ${req.params.name}`);
    }
  });
  servers.add(server);
  server.onclose = () => servers.delete(server);
  return server;
}

const streamable = new Map(); // session id -> transport
const legacy = new Map(); // session id -> SSE transport

async function readJson(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks).toString("utf8");
  return body ? JSON.parse(body) : undefined;
}

async function handleStreamable(req, res) {
  const sid = req.headers["mcp-session-id"];
  if (req.method === "POST") {
    const body = await readJson(req);
    let transport = sid ? streamable.get(sid) : undefined;
    if (!transport) {
      if (sid || !body || body.method !== "initialize") {
        res.writeHead(sid ? 404 : 400, { "content-type": "application/json" });
        res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message: "No valid session" }, id: null }));
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: JSON_RESPONSES,
        eventStore: RESUMABLE ? new InMemoryEventStore() : undefined,
        retryInterval: RESUMABLE ? 50 : undefined,
        onsessioninitialized: (id) => streamable.set(id, transport),
      });
      transport.onclose = () => transport.sessionId && streamable.delete(transport.sessionId);
      await makeServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
    return;
  }
  const transport = sid ? streamable.get(sid) : undefined;
  if (!transport) {
    res.writeHead(sid ? 404 : 400).end("No valid session");
    return;
  }
  await transport.handleRequest(req, res);
}

async function handleLegacy(req, res, url) {
  if (req.method === "GET" && url.pathname === "/sse") {
    const transport = new SSEServerTransport("/messages", res);
    legacy.set(transport.sessionId, transport);
    res.on("close", () => legacy.delete(transport.sessionId));
    await makeServer().connect(transport);
    return;
  }
  if (req.method === "POST" && url.pathname === "/messages") {
    const transport = legacy.get(url.searchParams.get("sessionId"));
    if (!transport) {
      res.writeHead(404).end("Session not found");
      return;
    }
    await transport.handlePostMessage(req, res);
    return;
  }
  res.writeHead(405).end("Method Not Allowed");
}

const httpServer = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, "http://localhost");
    if (url.pathname.startsWith("/control/")) {
      if (url.pathname === "/control/reset") tools = initialTools();
      if (url.pathname === "/control/delay") listDelayMs = Number(url.searchParams.get("list") ?? 0) || 0;
      if (url.pathname === "/control/notify") await Promise.all([...servers].map((s) => s.sendToolListChanged().catch(() => {})));
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ streamable: [...streamable.keys()], sse: [...legacy.keys()], tools: tools.length }));
      return;
    }
    if (url.pathname === "/redirect") {
      res.writeHead(Number(url.searchParams.get("status") ?? 307), { location: url.searchParams.get("to") ?? "/mcp" });
      res.end();
      return;
    }
    if (TOKEN && req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401, { "content-type": "application/json", "www-authenticate": "Bearer" });
      res.end(JSON.stringify({ error: "unauthorized" }));
      return;
    }
    if (url.pathname === "/mcp") return await handleStreamable(req, res);
    if (url.pathname === "/sse" || url.pathname === "/messages") return await handleLegacy(req, res, url);
    res.writeHead(404).end("Not Found");
  } catch (e) {
    if (!res.headersSent) res.writeHead(500).end(String(e?.message ?? e));
  }
});

httpServer.listen(PORT, "127.0.0.1", () => {
  const { port } = httpServer.address();
  console.log(JSON.stringify({ ready: true, port, mcp: `http://127.0.0.1:${port}/mcp`, sse: `http://127.0.0.1:${port}/sse` }));
});
