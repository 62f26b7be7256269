// Access control (README "Access control"): the Worker entry checks every /agents/... request
// before it reaches the Durable Object. Real keys made here (RS256, ES256 with node:crypto, a
// random HS256 secret), a JWKS served on 127.0.0.1, JWTs signed in the test, the real `agents`
// client and raw `ws`/`http` requests against the Worker in Miniflare. Also the per-instance
// limits (THINK_LIMITS) and usage(), over `rpc` and Durable Object RPC.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import WebSocket from "ws";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, newId } from "./helpers/client.mjs";
import { keyPair, newSecret, sign, jwt, now, startJwksServer } from "./helpers/auth.mjs";
import { launchBrowser, openPage } from "./helpers/browser.mjs";
import { send, assistant } from "./helpers/chat-page.mjs";
import fs from "node:fs";
import path from "node:path";
import { ROOT } from "./helpers/worker.mjs";
import { startOAuthServer } from "./mcp/start-server.mjs";

const ISSUER = "https://issuer.think-rs.test";
const AUDIENCE = "think-rs-tests";
const TOKENS = ["tok-alpha-0123456789", "tok-beta-9876543210"];

let model;
let jwks;
let closed;
let rsa1, rsa2, ec1, impostor;
/** The tail events of the shared worker's invocations (what Workers Logs would record). */
const tailEvents = [];
const secret = newSecret();

before(async () => {
  rsa1 = keyPair("RSA", "rsa-1");
  rsa2 = keyPair("RSA", "rsa-2");
  ec1 = keyPair("EC", "ec-1");
  // Another key published under a known kid.
  impostor = { ...keyPair("RSA", "rsa-1") };
  [model, jwks] = await Promise.all([startScriptedModel(), startJwksServer([rsa1, ec1])]);
  closed = await startWorker({
    vars: modelVars(model, {
      THINK_AUTH_TOKENS: TOKENS.join(", "),
      THINK_AUTH_JWKS_URL: jwks.url,
      THINK_AUTH_JWT_SECRET: secret,
      THINK_AUTH_ISSUER: ISSUER,
      THINK_AUTH_AUDIENCE: AUDIENCE,
    }),
    withCaller: true,
    tail: (events) => tailEvents.push(...events),
  });
});

after(async () => {
  closeTabs();
  await closed?.dispose();
  await model?.close();
  await jwks?.close();
});

const claims = (sub, extra = {}) => ({ sub, iss: ISSUER, aud: AUDIENCE, exp: now(600), iat: now(), ...extra });

/** A plain HTTP request to the Worker, any Host header, any method: `{status, headers, body}`. */
function request(worker, path, { method = "GET", headers = {}, host, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port: worker.url.port, path, method, headers: { ...headers, ...(host ? { host } : {}) } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const getMessages = (worker, name, opts = {}) => request(worker, `/agents/think-agent/${encodeURIComponent(name)}/get-messages`, opts);
const bearer = (credential) => ({ headers: { authorization: `Bearer ${credential}` } });

/** Opens a raw WebSocket; resolves `{open: true, ws}` or `{status}` when the upgrade is refused. */
function upgrade(worker, path, headers = {}) {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${worker.url.port}${path}`, { headers });
    ws.once("open", () => resolve({ open: true, ws }));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c) => (body += c));
      res.on("end", () => resolve({ open: false, status: res.statusCode, headers: res.headers, body }));
    });
    ws.once("error", (error) => resolve({ open: false, error }));
  });
}

/** Runs one chat turn for instance `name` as a tab that authenticates with `query`; the text
 * the tab was streamed. */
async function turn(worker, name, text, query) {
  const tab = await connect(worker.host, name, { query });
  model.push({ text });
  const { id } = tab.chat(`say ${text}`);
  await tab.turn(id);
  const streamed = tab.chunks(id).filter((c) => c.type === "text-delta").map((c) => c.delta).join("");
  tab.close();
  return streamed;
}

test("without a credential every agent route is refused with 401 before the object, and says nothing of the instance", async () => {
  // An instance that exists (it has a transcript) and one that never did answer alike.
  await turn(closed, "existing", "hello", { token: TOKENS[0] });
  const answers = [];
  for (const name of ["existing", "never-created"]) {
    for (const [path, method] of [
      [`/agents/think-agent/${name}/get-messages`, "GET"],
      [`/agents/think-agent/${name}`, "GET"],
      [`/agents/think-agent/${name}/sub/call_1/get-messages`, "GET"],
      [`/agents/think-agent/${name}/anything-else`, "POST"],
    ]) {
      const res = await request(closed, path, { method });
      assert.equal(res.status, 401, `${method} ${path}`);
      assert.equal(res.headers["www-authenticate"], 'Bearer realm="think-rs"');
      answers.push(res.body);
    }
  }
  assert.equal(new Set(answers).size, 1, "one answer for every route and instance");
  assert.match(answers[0], /no credential/);
  // A refused upgrade: the client sees 401 and no socket.
  const ws = await upgrade(closed, "/agents/think-agent/existing?_pk=x");
  assert.equal(ws.open, false);
  assert.equal(ws.status, 401);
  assert.equal(ws.headers["www-authenticate"], 'Bearer realm="think-rs"');
  const wrong = await upgrade(closed, `/agents/think-agent/existing?_pk=x&token=not-${TOKENS[0]}`);
  assert.deepEqual([wrong.open, wrong.status], [false, 401]);
  assert.equal(wrong.headers["www-authenticate"], 'Bearer realm="think-rs", error="invalid_token"');
});

test("each shared token reaches every instance, by header, by ?token= and through AgentClient's query", async () => {
  for (const token of TOKENS) {
    for (const name of ["alice", "bob:notes"]) {
      const res = await getMessages(closed, name, bearer(token));
      assert.equal(res.status, 200, `${token} ${name}: ${res.body}`);
      const byQuery = await request(closed, `/agents/think-agent/${encodeURIComponent(name)}/get-messages?token=${token}`);
      assert.equal(byQuery.status, 200);
    }
  }
  assert.equal(await turn(closed, "shared", "from a tab", { token: TOKENS[1] }), "from a tab");
  const res = await getMessages(closed, "shared", bearer(TOKENS[0]));
  assert.equal(JSON.parse(res.body).length, 2);
  assert.equal((await getMessages(closed, "shared", bearer(`${TOKENS[0]}x`))).status, 401);
});

test("JWTs from the JWKS (RS256, ES256) and HS256 with the secret reach the instance their sub names, and those under it", async () => {
  for (const key of [rsa1, ec1, secret]) {
    const token = jwt(key, claims("alice"));
    for (const name of ["alice", "alice:project-1"]) {
      const res = await getMessages(closed, name, bearer(token));
      assert.equal(res.status, 200, `${key.kid ?? "HS256"} ${name}: ${res.body}`);
    }
    for (const name of ["alice2", "bob", "alic"]) {
      const res = await getMessages(closed, name, bearer(token));
      assert.equal(res.status, 403, `${key.kid ?? "HS256"} ${name}`);
      assert.equal(res.headers["www-authenticate"], undefined);
      assert.match(res.body, /^Forbidden: this credential reaches only instances named by its "sub" claim/);
    }
  }
  // The same 403 whether the other instance exists or not.
  const token = jwt(rsa1, claims("mallory"));
  const a = await getMessages(closed, "existing", bearer(token));
  const b = await getMessages(closed, "never-created-2", bearer(token));
  assert.deepEqual([a.status, a.body], [b.status, b.body]);
  // The Cf-Access-Jwt-Assertion header carries a JWT too; a WebSocket takes one by ?token=.
  const viaAccess = await getMessages(closed, "alice", { headers: { "cf-access-jwt-assertion": jwt(ec1, claims("alice")) } });
  assert.equal(viaAccess.status, 200);
  assert.equal(await turn(closed, "alice:chat", "jwt tab", { token: jwt(rsa1, claims("alice")) }), "jwt tab");
  const refused = await upgrade(closed, `/agents/think-agent/bob?token=${jwt(rsa1, claims("alice"))}`);
  assert.deepEqual([refused.open, refused.status], [false, 403]);
});

test("every refusal of a JWT: validity, issuer, audience, alg none, HS256 with the RSA key, a changed payload, another or unknown key", async () => {
  const refuse = async (token, reason, name = "alice") => {
    const res = await getMessages(closed, name, bearer(token));
    assert.equal(res.status, 401, `${reason}: ${res.body}`);
    assert.equal(res.headers["www-authenticate"], 'Bearer realm="think-rs", error="invalid_token"');
    assert.ok(res.body.includes(reason), `${res.body} should say ${reason}`);
  };
  await refuse(jwt(rsa1, claims("alice", { exp: now(-61) })), "the JWT has expired");
  assert.equal((await getMessages(closed, "alice", bearer(jwt(rsa1, claims("alice", { exp: now(-30) }))))).status, 200, "within the leeway");
  await refuse(jwt(ec1, claims("alice", { nbf: now(120) })), "the JWT is not valid yet (nbf)");
  assert.equal((await getMessages(closed, "alice", bearer(jwt(ec1, claims("alice", { nbf: now(30) }))))).status, 200, "within the leeway");
  const noExp = claims("alice");
  delete noExp.exp;
  await refuse(jwt(secret, noExp), "the JWT has no expiry (exp)");
  await refuse(jwt(rsa1, claims("alice", { iss: "https://evil.test" })), "the JWT's issuer is not accepted");
  await refuse(jwt(rsa1, claims("alice", { aud: "someone-else" })), "the JWT's audience is not accepted");
  assert.equal((await getMessages(closed, "alice", bearer(jwt(rsa1, claims("alice", { aud: ["x", AUDIENCE] }))))).status, 200);
  // alg none, with and without a signature part.
  const unsigned = sign({ alg: "none", typ: "JWT" }, claims("alice"), null);
  await refuse(unsigned, 'JWT algorithm "none" is refused');
  await refuse(`${unsigned}c2ln`, 'JWT algorithm "none" is refused');
  // HS256 "signed" with the RSA public key, the classic confusion: the JWKS is no HS256 key.
  const rsaPem = rsa1.publicKey.export({ type: "spki", format: "pem" });
  await refuse(sign({ alg: "HS256", kid: "rsa-1" }, claims("alice"), rsaPem), "the JWT's signature does not verify");
  await refuse(sign({ alg: "HS256", kid: "rsa-1" }, claims("alice"), JSON.stringify(rsa1.jwk)), "the JWT's signature does not verify");
  // The algorithm must fit the key: ES256 naming the RSA key.
  await refuse(sign({ alg: "ES256", kid: "rsa-1" }, claims("alice"), ec1), 'the JWT\'s algorithm ES256 does not fit key "rsa-1"');
  // A payload changed after signing: alice's token made to say bob.
  const [h, , s] = jwt(rsa1, claims("alice")).split(".");
  const forged = `${h}.${Buffer.from(JSON.stringify(claims("bob"))).toString("base64url")}.${s}`;
  await refuse(forged, "the JWT's signature does not verify", "bob");
  const [hh, , hs] = jwt(secret, claims("alice")).split(".");
  await refuse(`${hh}.${Buffer.from(JSON.stringify(claims("bob"))).toString("base64url")}.${hs}`, "the JWT's signature does not verify", "bob");
  // Another key under a known kid, and a kid the JWKS does not have.
  await refuse(jwt(impostor, claims("alice")), "the JWT's signature does not verify");
  await refuse(jwt(keyPair("EC", "ec-unknown"), claims("alice")), 'the JWT\'s key "ec-unknown" is not in the JWKS');
  await refuse("not-a-jwt-and-not-a-token", "the token is not accepted");
});

test("the JWKS is fetched once and cached; a key added after start is found by one refetch; then unknown kids fetch nothing for a minute; an unreachable JWKS keeps the cache", async () => {
  // The shared worker has fetched already; known keys come from its cache.
  const before = jwks.state.hits;
  assert.ok(before >= 1);
  for (let i = 0; i < 5; i++) {
    assert.equal((await getMessages(closed, "alice", bearer(jwt(rsa1, claims("alice"))))).status, 200);
    assert.equal((await getMessages(closed, "alice", bearer(jwt(ec1, claims("alice"))))).status, 200);
  }
  assert.equal(jwks.state.hits, before, "known keys are served from the cache");
  // A worker of its own, so that the counts start from its first request.
  const fresh = await startWorker({ vars: { THINK_AUTH_JWKS_URL: jwks.url } });
  const token = (key) => jwt(key, { sub: "alice", exp: now(60) });
  try {
    jwks.state.keys = [rsa1];
    const start = jwks.state.hits;
    for (let i = 0; i < 3; i++) assert.equal((await getMessages(fresh, "alice", bearer(token(rsa1)))).status, 200);
    assert.equal(jwks.state.hits, start + 1, "one fetch for three requests");
    // Rotation: rsa-2 is published after the worker loaded the keys.
    jwks.state.keys = [rsa1, rsa2];
    for (let i = 0; i < 3; i++) assert.equal((await getMessages(fresh, "alice", bearer(token(rsa2)))).status, 200);
    assert.equal(jwks.state.hits, start + 2, "the rotated-in key cost one refetch");
    for (let i = 0; i < 3; i++) {
      const res = await getMessages(fresh, "alice", bearer(token(keyPair("EC", `made-up-${i}`))));
      assert.equal(res.status, 401);
      assert.match(res.body, /"made-up-\d" is not in the JWKS/);
    }
    assert.equal(jwks.state.hits, start + 2, "unknown kids within the minute after a refetch fetch nothing");
    // The JWKS goes down: the cached keys still serve.
    jwks.state.down = true;
    assert.equal((await getMessages(fresh, "alice", bearer(token(rsa1)))).status, 200);
    assert.equal((await getMessages(fresh, "alice", bearer(token(rsa2)))).status, 200);
  } finally {
    jwks.state.down = false;
    jwks.state.keys = [rsa1, ec1];
    await fresh.dispose();
  }
});

test("Durable Object RPC from another Worker is not gated (it needs a binding), and usage() answers there", async () => {
  await turn(closed, "rpc-usage", "counted", { token: TOKENS[0] });
  const messages = await closed.caller("/messages?name=rpc-usage");
  assert.equal(messages.length, 2);
  const usage = await closed.caller("/call?name=rpc-usage", { method: "usage", args: [] });
  assert.equal(usage.turns.used, 1);
  assert.equal(usage.tokens.used, 15, "the scripted model reports 10 + 5 tokens per call");
  assert.deepEqual([usage.tokens.input, usage.tokens.output], [10, 5]);
  assert.equal(usage.turns.limit, null);
});

test("an unconfigured deploy serves loopback (npm start) and refuses any other host with a message naming the settings", async () => {
  const open = await startWorker({ vars: modelVars(model) });
  try {
    assert.equal((await getMessages(open, "local")).status, 200);
    const ws = await upgrade(open, "/agents/think-agent/local?_pk=y");
    assert.equal(ws.open, true);
    ws.ws.close();
    for (const host of ["think-rs.example.workers.dev", "agent.example.com:8787", "10.0.0.5"]) {
      const res = await getMessages(open, "local", { host });
      assert.equal(res.status, 401, host);
      assert.equal(res.headers["www-authenticate"], 'Bearer realm="think-rs"');
      for (const name of ["THINK_AUTH_TOKENS", "THINK_AUTH_JWKS_URL", "THINK_AUTH_JWT_SECRET", "THINK_AUTH_ACCESS_TEAM", "THINK_AUTH=none"]) {
        assert.ok(res.body.includes(name), `${name} in ${res.body}`);
      }
      const refused = await upgrade(open, "/agents/think-agent/local?_pk=z", { host });
      assert.deepEqual([refused.open, refused.status], [false, 401]);
    }
  } finally {
    await open.dispose();
  }
  // THINK_AUTH=none opens it on purpose.
  const none = await startWorker({ vars: { THINK_AUTH: "none" } });
  try {
    assert.equal((await getMessages(none, "x", { host: "think-rs.example.workers.dev" })).status, 200);
  } finally {
    await none.dispose();
  }
});

test("Cloudflare Access: the Cf-Access-Jwt-Assertion header, the team's issuer, the AUD tag, a claim naming the instance (JWKS stood in on 127.0.0.1)", async () => {
  const aud = "a3b1c2d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9";
  const access = await startWorker({
    vars: {
      THINK_AUTH_ACCESS_TEAM: "think-rs-test",
      THINK_AUTH_AUDIENCE: aud,
      THINK_AUTH_INSTANCE_CLAIM: "email",
      THINK_AUTH_JWKS_URL: jwks.url,
    },
  });
  try {
    const accessClaims = (extra = {}) => ({
      aud: [aud],
      email: "ada@example.com",
      sub: "7335d417-61da-459d-899c-0a01c76a2b8e",
      iss: "https://think-rs-test.cloudflareaccess.com",
      exp: now(300),
      iat: now(),
      type: "app",
      ...extra,
    });
    const header = (claimsSet) => ({ headers: { "cf-access-jwt-assertion": jwt(rsa1, claimsSet) } });
    assert.equal((await getMessages(access, "ada@example.com", header(accessClaims()))).status, 200);
    assert.equal((await getMessages(access, "ada@example.com:work", header(accessClaims()))).status, 200);
    assert.equal((await getMessages(access, "bob@example.com", header(accessClaims()))).status, 403);
    const otherTeam = await getMessages(access, "ada@example.com", header(accessClaims({ iss: "https://other-team.cloudflareaccess.com" })));
    assert.equal(otherTeam.status, 401);
    assert.match(otherTeam.body, /issuer is not accepted/);
    const otherApp = await getMessages(access, "ada@example.com", header(accessClaims({ aud: ["another-application"] })));
    assert.match(otherApp.body, /audience is not accepted/);
    // HS256 is off without a secret, whatever the token says.
    const hs = await getMessages(access, "ada@example.com", { headers: { "cf-access-jwt-assertion": jwt(secret, accessClaims()) } });
    assert.match(hs.body, /HS256 JWTs are not accepted/);
  } finally {
    await access.dispose();
  }
  // Without the AUD tag the Access setting closes everything and says why.
  const misconfigured = await startWorker({ vars: { THINK_AUTH_ACCESS_TEAM: "think-rs-test" } });
  try {
    const res = await getMessages(misconfigured, "x");
    assert.equal(res.status, 500);
    assert.match(res.body, /THINK_AUTH_ACCESS_TEAM needs THINK_AUTH_AUDIENCE/);
  } finally {
    await misconfigured.dispose();
  }
});

test("a turn over THINK_LIMITS does not reach the model: the tab gets an error naming the limit and its reset, usage() shows it, and the limit resets", async () => {
  const limited = await startWorker({
    vars: modelVars(model, {
      THINK_AUTH_TOKENS: TOKENS[0],
      // Turns in 5 s windows (the general form of turnsPerMinute), tokens per day.
      THINK_LIMITS: JSON.stringify({ turns: { max: 2, windowMs: 5000 }, tokensPerDay: 40 }),
    }),
    withCaller: true,
  });
  try {
    const tab = await connect(limited.host, "limited", { query: { token: TOKENS[0] } });
    const run = async (text) => {
      const { id } = tab.chat(text);
      await tab.turn(id);
      return tab.responses(id);
    };
    const requestsBefore = model.requests.length;
    model.push({ text: "one" }, { text: "two" });
    await run("first");
    await run("second");
    const refused = await run("third");
    assert.equal(model.requests.length, requestsBefore + 2, "the third turn did not reach the model");
    const error = refused.find((f) => f.error);
    assert.ok(error, JSON.stringify(refused));
    assert.match(error.body, /^Limit reached: turns \(2 turns per 5 s\) is used up for this agent instance; it resets at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(in [1-5] s\)\.$/);
    const usage = await tab.client.call("usage", []);
    assert.deepEqual(
      { used: usage.turns.used, limit: usage.turns.limit, name: usage.turns.name, windowMs: usage.turns.windowMs },
      { used: 2, limit: 2, name: "turns", windowMs: 5000 },
    );
    assert.deepEqual([usage.tokens.used, usage.tokens.limit, usage.tokens.name], [30, 40, "tokensPerDay"]);
    // The object keeps serving: the transcript holds the refused message, and after the
    // window closes (at resetsAt, which usage() gives) a turn runs again.
    const transcript = await (await fetch(new URL("/agents/think-agent/limited/get-messages", limited.url), bearer(TOKENS[0]))).json();
    assert.equal(transcript.filter((m) => m.role === "user").length, 3);
    await new Promise((r) => setTimeout(r, Math.max(0, usage.turns.resetsAt - Date.now()) + 100));
    model.push({ text: "four" });
    const fourth = await run("fourth");
    assert.ok(!fourth.some((f) => f.error), JSON.stringify(fourth));
    assert.equal(model.requests.length, requestsBefore + 3);
    // 45 tokens now: the next turn hits tokensPerDay, which resets in a day.
    const fifth = await run("fifth");
    assert.match(fifth.find((f) => f.error).body, /^Limit reached: tokensPerDay \(40 tokens per day\) is used up/);
    assert.equal(model.requests.length, requestsBefore + 3);
    const rpcUsage = await limited.caller("/call?name=limited", { method: "usage", args: [] });
    assert.equal(rpcUsage.tokens.used, 45);
    assert.equal(rpcUsage.tokens.resetsAt - rpcUsage.tokens.windowMs <= Date.now(), true);
    tab.close();
  } finally {
    await limited.dispose();
  }
});

test("a THINK_LIMITS that cannot be read refuses every turn, naming the setting and why, instead of running unlimited", async () => {
  const typo = await startWorker({
    vars: modelVars(model, { THINK_AUTH_TOKENS: TOKENS[0], THINK_LIMITS: '{"turnsPerMinit": 3}' }),
  });
  try {
    const tab = await connect(typo.host, "typo", { query: { token: TOKENS[0] } });
    const requestsBefore = model.requests.length;
    for (const text of ["first", "second"]) {
      const { id } = tab.chat(text);
      await tab.turn(id);
      const error = tab.responses(id).find((f) => f.error);
      assert.ok(error, JSON.stringify(tab.responses(id)));
      assert.match(error.body, /^Turns are refused: THINK_LIMITS could not be read \(unknown key "turnsPerMinit".*\)\./);
    }
    assert.equal(model.requests.length, requestsBefore, "no turn reached the model");
    const transcript = await (await fetch(new URL("/agents/think-agent/typo/get-messages", typo.url), bearer(TOKENS[0]))).json();
    assert.equal(transcript.filter((m) => m.role === "user").length, 2, "the messages are kept");
    tab.close();
  } finally {
    await typo.dispose();
  }
});

test("the MCP OAuth callback passes without a credential and is answered by its state alone", async () => {
  const res = await request(closed, `/agents/think-agent/existing/callback?code=c&state=${newId("state")}`);
  assert.equal(res.status, 400);
  assert.match(res.body, /Authorization failed.*unknown or already used OAuth state/);
  // The same answer for an instance that never existed, and nothing else on that path.
  const nowhere = await request(closed, `/agents/think-agent/never-created-3/callback?code=c&state=s`);
  assert.deepEqual([nowhere.status, nowhere.body], [res.status, res.body]);
  assert.equal((await request(closed, "/agents/think-agent/existing/callback")).status, 401, "no state, no exemption");
  assert.equal((await request(closed, "/agents/think-agent/existing/callback?state=s", { method: "POST" })).status, 401);
  // The static assets (the page) need no credential.
  const page = await request(closed, "/");
  assert.equal(page.status, 200);
  assert.match(page.body, /<div id="root">/);
  // A forged exemption header is removed by the Worker, not trusted.
  const forged = await request(closed, "/agents/think-agent/existing/get-messages", { headers: { "x-think-auth-exempt": "oauth-callback" } });
  assert.equal(forged.status, 401);
});

test("the token query parameter is stripped before the request reaches the object: its invocation, as a tail (logs) sees it, has no token", async () => {
  const marker = newId("strip");
  const res = await request(closed, `/agents/think-agent/${marker}/get-messages?token=${TOKENS[0]}&keep=1`);
  assert.equal(res.status, 200);
  const ws = await upgrade(closed, `/agents/think-agent/${marker}?_pk=conn-1&token=${TOKENS[1]}`);
  assert.equal(ws.open, true);
  const identity = await new Promise((resolve) => ws.ws.on("message", (d) => {
    const f = JSON.parse(d.toString());
    if (f.type === "cf_agent_identity") resolve(f);
  }));
  assert.equal(identity.name, marker);
  ws.ws.close();
  const objectUrls = async () => {
    for (let i = 0; i < 100; i++) {
      const urls = tailEvents.filter((e) => e.entrypoint === "ThinkAgent" && e.event?.request?.url?.includes(marker)).map((e) => e.event.request.url);
      if (urls.length >= 2) return urls;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no tail events of the object: ${JSON.stringify(tailEvents.map((e) => [e.entrypoint, e.event?.request?.url]))}`);
  };
  const urls = (await objectUrls()).map((u) => new URL(u));
  const byPath = Object.fromEntries(urls.map((u) => [u.pathname, u.search]));
  assert.deepEqual(byPath, {
    [`/agents/think-agent/${marker}/get-messages`]: "?keep=1",
    [`/agents/think-agent/${marker}`]: "?_pk=conn-1",
  });
  for (const u of urls) assert.ok(!u.href.includes("tok-"), u.href);
  // The entry's own invocation is the incoming request, recorded as the client sent it.
  const entry = tailEvents.find((e) => e.entrypoint !== "ThinkAgent" && e.event?.request?.url?.includes(`${marker}/get-messages`));
  assert.ok(entry?.event.request.url.includes("token="), "the platform records the request as it arrived");
});

test("the page asks for a token, keeps it in the tab's session storage, chats with it and shows the usage counters", async () => {
  const browser = await launchBrowser();
  try {
    const page = await openPage(browser, new URL("/?name=page-user", closed.url).href);
    const form = page.locator("[data-testid=access]");
    await form.locator("[data-testid=access-reason]", { hasText: "no credential" }).waitFor();
    // A wrong token is refused with the agent's reason, and the form stays.
    await form.locator("[data-testid=token]").fill("wrong-token");
    await form.locator("button[type=submit]").click();
    await form.locator("p", { hasText: "The agent refused this token." }).waitFor();
    await form.locator("[data-testid=access-reason]", { hasText: "the token is not accepted" }).waitFor();
    const out = path.join(ROOT, "test-output");
    fs.mkdirSync(out, { recursive: true });
    await page.screenshot({ path: path.join(out, "auth-form.png") });
    // A JWT for another instance: 403, said so.
    await form.locator("[data-testid=token]").fill(jwt(rsa1, claims("someone-else")));
    await form.locator("button[type=submit]").click();
    await form.locator("p", { hasText: 'This token does not reach the instance "page-user".' }).waitFor();
    // The right one opens the chat: the WebSocket and get-messages carry it.
    await form.locator("[data-testid=token]").fill(TOKENS[1]);
    await form.locator("button[type=submit]").click();
    await page.locator("[data-testid=connection].on").waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem("think-rs-token")), TOKENS[1]);
    await page.locator("[data-testid=usage-turns]", { hasText: "turns 0 per min" }).waitFor();
    model.push({ text: "Hello through the lock." });
    await send(page, "hello");
    await assistant(page, "Hello through the lock.").waitFor();
    await page.locator("[data-testid=usage-turns]", { hasText: "turns 1 per min" }).waitFor();
    await page.locator("[data-testid=usage-tokens]", { hasText: "tokens 15 per day" }).waitFor();
    await page.screenshot({ path: path.join(out, "auth-page.png") });
    // A reload keeps the token (session storage) and shows the transcript read with it.
    await page.reload();
    await page.locator("[data-testid=connection].on").waitFor();
    await assistant(page, "Hello through the lock.").waitFor();
    // Lock forgets it and asks again.
    await page.locator("button.forget").click();
    await form.locator("[data-testid=token]").waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.getItem("think-rs-token")), null);
    assert.deepEqual(page.errors, []);
    // Another tab of the same browser has its own session storage: it asks.
    const other = await openPage(browser, new URL("/?name=page-user", closed.url).href);
    await other.locator("[data-testid=access] [data-testid=token]").waitFor();
  } finally {
    await browser.close();
  }
});

test("the page on an open local deploy goes straight to the chat", async () => {
  const open = await startWorker({ vars: modelVars(model) });
  const browser = await launchBrowser();
  try {
    const page = await openPage(browser, new URL("/?name=local-page", open.url).href);
    await page.locator("[data-testid=connection].on").waitFor();
    await page.locator("[data-testid=usage-turns]", { hasText: "turns 0 per min" }).waitFor();
    assert.equal(await page.locator("button.forget").count(), 0);
  } finally {
    await browser.close();
    await open.dispose();
  }
});

test("a real MCP OAuth flow on a closed deploy: the browser's callback carries no credential and completes the authorization", async () => {
  const [oauth, browser] = await Promise.all([startOAuthServer(), launchBrowser()]);
  try {
    const tab = await connect(closed.host, "oauth-closed", { query: { token: TOKENS[0] } });
    const added = await tab.client.call("addMcpServer", ["secure", oauth.mcp, { id: "secure" }]);
    assert.equal(added.state, "authenticating", JSON.stringify(added));
    assert.equal(new URL(added.authUrl).searchParams.get("redirect_uri"), `${closed.url.origin}/agents/think-agent/oauth-closed/callback`);
    const context = await browser.newContext();
    const page = await context.newPage();
    page.setDefaultTimeout(15000);
    await page.goto(added.authUrl);
    await page.getByRole("button", { name: "Approve" }).click();
    await page.getByRole("heading", { name: "Authorized" }).waitFor();
    await context.close();
    const ready = await tab.waitFor((f) => f.type === "cf_agent_mcp_servers" && f.mcp.servers.secure?.state === "ready");
    assert.ok(ready.mcp.tools.some((t) => t.name === "whoami"));
    tab.close();
  } finally {
    await browser.close();
    await oauth.kill();
  }
});
