// An MCP server behind OAuth 2.1, on the real @modelcontextprotocol/sdk 1.30.0: the SDK's
// `mcpAuthRouter` is the authorization server (metadata, dynamic client registration,
// /authorize, /token with PKCE) and its `requireBearerAuth` guards /mcp (Streamable HTTP), so
// an unauthenticated request gets 401 with `WWW-Authenticate: Bearer ...resource_metadata=...`.
// One process, one origin: http://127.0.0.1:<port>.
//
// /authorize shows a consent page with "Approve" and "Deny" buttons (a browser clicks one);
// approving redirects to the client's redirect_uri with a code bound to the PKCE challenge.
//
// Tools: whoami (readOnlyHint; says which client the token belongs to), wipe (destructiveHint),
// ask (sends `elicitation/create` for {name, age?} on the call's stream, answers with the result).
// Prompt: greet {name}. Resource: test://notes.
//
// Control endpoints for tests (any method, no token): /control/stats (elicitation results, grants by type, 401s
// answered on /mcp, registrations, the resource indicators seen, live tokens);
// /control/ttl?s=N (lifetime of access tokens issued from now on); /control/revoke-access
// (every access token stops working); /control/revoke-all (access and refresh tokens).

import http from "node:http";
import { randomUUID, randomBytes } from "node:crypto";
import express from "express";
import { mcpAuthRouter } from "@modelcontextprotocol/sdk/server/auth/router.js";
import { requireBearerAuth } from "@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js";
import { InvalidGrantError, InvalidTokenError } from "@modelcontextprotocol/sdk/server/auth/errors.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import {
  CallToolRequestSchema,
  ElicitResultSchema,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";

const args = process.argv.slice(2);
const portArg = args.indexOf("--port");
const PORT = portArg >= 0 ? Number(args[portArg + 1]) : 0;

const secret = () => randomBytes(16).toString("hex");
const escape = (s) => String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

const stats = { grants: { authorization_code: 0, refresh_token: 0 }, unauthorized: 0, registrations: 0, resources: [], consents: 0, elicited: [] };
let accessTtl = 3600;

const clients = new Map(); // client_id -> client
const requests = new Map(); // consent id -> { client, params }
const codes = new Map(); // code -> { clientId, challenge, redirectUri, resource, scopes }
const access = new Map(); // token -> { clientId, scopes, expiresAt (s), resource }
const refresh = new Map(); // token -> { clientId, scopes, resource }

function issue(clientId, scopes, resource) {
  const at = `at_${secret()}`;
  const rt = `rt_${secret()}`;
  access.set(at, { clientId, scopes, resource, expiresAt: Math.floor(Date.now() / 1000) + accessTtl });
  refresh.set(rt, { clientId, scopes, resource });
  return { access_token: at, token_type: "bearer", expires_in: accessTtl, refresh_token: rt, scope: scopes.join(" ") };
}

const provider = {
  clientsStore: {
    getClient: (id) => clients.get(id),
    registerClient: (client) => {
      stats.registrations++;
      clients.set(client.client_id, client);
      return client;
    },
  },
  async authorize(client, params, res) {
    const id = secret();
    requests.set(id, { client, params });
    res.type("html").send(`<!doctype html><meta charset=utf-8><title>Authorize</title>
<h1>Authorize ${escape(client.client_name ?? client.client_id)}</h1>
<p>Resource: <span id=resource>${escape(params.resource?.href ?? "")}</span></p>
<form method=post action="/consent">
  <input type=hidden name=id value="${id}">
  <button name=decision value=approve>Approve</button>
  <button name=decision value=deny>Deny</button>
</form>`);
  },
  async challengeForAuthorizationCode(client, code) {
    const c = codes.get(code);
    if (!c || c.clientId !== client.client_id) throw new InvalidGrantError("unknown authorization code");
    return c.challenge;
  },
  async exchangeAuthorizationCode(client, code, _verifier, redirectUri, resource) {
    const c = codes.get(code);
    codes.delete(code);
    if (!c || c.clientId !== client.client_id) throw new InvalidGrantError("unknown authorization code");
    if (redirectUri !== undefined && redirectUri !== c.redirectUri) throw new InvalidGrantError("redirect_uri mismatch");
    stats.grants.authorization_code++;
    stats.resources.push(resource?.href ?? null);
    return issue(client.client_id, c.scopes, resource?.href);
  },
  async exchangeRefreshToken(client, token, _scopes, resource) {
    const r = refresh.get(token);
    if (!r || r.clientId !== client.client_id) throw new InvalidGrantError("unknown refresh token");
    refresh.delete(token);
    stats.grants.refresh_token++;
    stats.resources.push(resource?.href ?? null);
    return issue(client.client_id, r.scopes, resource?.href);
  },
  async verifyAccessToken(token) {
    const a = access.get(token);
    if (!a) throw new InvalidTokenError("unknown or revoked token");
    return { token, clientId: a.clientId, scopes: a.scopes, expiresAt: a.expiresAt, resource: a.resource ? new URL(a.resource) : undefined };
  },
};

const ASK_SCHEMA = {
  type: "object",
  properties: { name: { type: "string", minLength: 1 }, age: { type: "integer", minimum: 0 } },
  required: ["name"],
};

function makeServer(auth) {
  const server = new Server({ name: "think-rs-oauth-test-server", version: "1.0.0" }, { capabilities: { tools: {}, prompts: {}, resources: {} } });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: "whoami", description: "Says which OAuth client is calling.", inputSchema: { type: "object" }, annotations: { readOnlyHint: true } },
      { name: "wipe", description: "Wipes everything.", inputSchema: { type: "object" }, annotations: { destructiveHint: true } },
      { name: "ask", description: "Asks the user for their name (elicitation).", inputSchema: { type: "object" } },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (req, extra) => {
    const client = extra.authInfo?.clientId ?? auth?.clientId;
    if (req.params.name === "whoami") return { content: [{ type: "text", text: `client ${client}` }] };
    if (req.params.name === "wipe") return { content: [{ type: "text", text: "wiped" }] };
    if (req.params.name === "ask") {
      const params = { mode: "form", message: "What is your name?", requestedSchema: ASK_SCHEMA };
      const r = await extra.sendRequest({ method: "elicitation/create", params }, ElicitResultSchema, { timeout: 120000 });
      stats.elicited.push(r);
      return { content: [{ type: "text", text: r.action === "accept" ? `accept ${JSON.stringify(r.content)}` : r.action }] };
    }
    throw new Error(`Unknown tool: ${req.params.name}`);
  });
  server.setRequestHandler(ListPromptsRequestSchema, async () => ({
    prompts: [{ name: "greet", description: "Greets someone.", arguments: [{ name: "name", required: true }] }],
  }));
  server.setRequestHandler(GetPromptRequestSchema, async (req) => ({
    description: "A greeting.",
    messages: [{ role: "user", content: { type: "text", text: `Hello, ${req.params.arguments?.name ?? "nobody"}!` } }],
  }));
  server.setRequestHandler(ListResourcesRequestSchema, async () => ({
    resources: [{ uri: "test://notes", name: "notes", mimeType: "text/plain" }],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, async (req) => {
    if (req.params.uri !== "test://notes") throw new Error(`Unknown resource: ${req.params.uri}`);
    return { contents: [{ uri: "test://notes", mimeType: "text/plain", text: "The notes behind OAuth." }] };
  });
  return server;
}

const app = express();
const httpServer = http.createServer(app);
await new Promise((resolve) => httpServer.listen(PORT, "127.0.0.1", resolve));
const { port } = httpServer.address();
const origin = `http://127.0.0.1:${port}`;
const mcpUrl = `${origin}/mcp`;

app.all("/control/:what", (req, res) => {
  const what = req.params.what;
  if (what === "ttl") accessTtl = Number(req.query.s ?? 3600);
  if (what === "revoke-access" || what === "revoke-all") access.clear();
  if (what === "revoke-all") refresh.clear();
  res.json({ ...stats, accessTtl, tokens: [...access.keys(), ...refresh.keys()], clients: [...clients.keys()] });
});

app.post("/consent", express.urlencoded({ extended: false }), (req, res) => {
  const pending = requests.get(req.body.id);
  requests.delete(req.body.id);
  if (!pending) return res.status(400).send("unknown consent request");
  stats.consents++;
  const { client, params } = pending;
  const target = new URL(params.redirectUri);
  if (req.body.decision === "approve") {
    const code = secret();
    codes.set(code, { clientId: client.client_id, challenge: params.codeChallenge, redirectUri: params.redirectUri, resource: params.resource?.href, scopes: params.scopes ?? [] });
    target.searchParams.set("code", code);
  } else {
    target.searchParams.set("error", "access_denied");
  }
  if (params.state !== undefined) target.searchParams.set("state", params.state);
  res.redirect(302, target.href);
});

const off = { rateLimit: false };
app.use(
  mcpAuthRouter({
    provider,
    issuerUrl: new URL(`${origin}/`),
    resourceServerUrl: new URL(mcpUrl),
    scopesSupported: ["mcp"],
    resourceName: "think-rs OAuth test server",
    authorizationOptions: off,
    clientRegistrationOptions: off,
    tokenOptions: off,
    revocationOptions: off,
  }),
);

const bearer = requireBearerAuth({ verifier: provider, resourceMetadataUrl: `${origin}/.well-known/oauth-protected-resource/mcp` });
const sessions = new Map(); // session id -> transport

app.all(
  "/mcp",
  (req, res, next) => {
    res.on("finish", () => res.statusCode === 401 && stats.unauthorized++);
    next();
  },
  bearer,
  express.json(),
  async (req, res) => {
    try {
      const sid = req.headers["mcp-session-id"];
      let transport = sid ? sessions.get(sid) : undefined;
      if (req.method === "POST" && !transport) {
        if (sid || req.body?.method !== "initialize") return res.status(sid ? 404 : 400).json({ jsonrpc: "2.0", error: { code: -32000, message: "No valid session" }, id: null });
        transport = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (id) => sessions.set(id, transport) });
        transport.onclose = () => transport.sessionId && sessions.delete(transport.sessionId);
        await makeServer(req.auth).connect(transport);
      }
      if (!transport) return res.status(req.method === "GET" ? 405 : 404).send("No valid session");
      await transport.handleRequest(req, res, req.body);
    } catch (e) {
      if (!res.headersSent) res.status(500).send(String(e?.message ?? e));
    }
  },
);

console.log(JSON.stringify({ ready: true, port, origin, mcp: mcpUrl }));
