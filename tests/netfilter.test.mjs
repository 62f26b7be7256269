// The private-address filter end to end: `addMcpServer` over the real `agents` client, the
// Rust agent in Miniflare, and a real MCP server on loopback. A filter that failed would make
// the agent connect to the address it was given, so this file runs itself inside a network
// namespace that has loopback only (`unshare --net`, then `ip link set lo up`): there any
// other address fails locally, with "network unreachable", and no packet leaves the machine.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import os from "node:os";
import { INSIDE_NETNS, runInNetns } from "./helpers/netns.mjs";
import { startWorker } from "./helpers/worker.mjs";
import { connect, closeTabs } from "./helpers/client.mjs";
import { startMcpServer } from "./mcp/start-server.mjs";

if (!INSIDE_NETNS) {
  runInNetns(import.meta.url, "the address-filter tests pass inside a loopback-only network namespace");
} else {
  let worker;
  let open;
  let server;
  const tabs = [];

  before(async () => {
    // The premise of every test below: no interface but loopback.
    assert.deepEqual(Object.keys(os.networkInterfaces()), ["lo"], "not in a loopback-only namespace");
    server = await startMcpServer();
    [worker, open] = await Promise.all([startWorker(), startWorker({ vars: { THINK_ALLOW_PRIVATE_NETWORK: "true" } })]);
  });

  after(async () => {
    closeTabs();
    for (const tab of tabs) tab.close();
    await worker?.dispose();
    await open?.dispose();
    await server?.kill();
  });

  async function tab(w, name) {
    const t = await connect(w.host, name);
    tabs.push(t);
    return t;
  }

  const rpcError = (call) =>
    call.then(
      (v) => assert.fail(`expected a refusal, got ${JSON.stringify(v)}`),
      (e) => String(e?.message ?? e),
    );

  // Each spelling and the address `fetch` would reach with it.
  const REFUSED = [
    ["http://169.254.169.254/latest", "169.254.169.254"],
    ["http://2852039166/", "169.254.169.254"],
    ["http://0xa9.0xfe.0xa9.0xfe/", "169.254.169.254"],
    ["http://169.254.169.254./", "169.254.169.254"],
    ["http://0251.0376.0251.0376/", "169.254.169.254"],
    ["http://%31%36%39.254.169.254/", "169.254.169.254"],
    ["http://[0:0:0:0:0:ffff:a9fe:a9fe]/", "[::ffff:a9fe:a9fe]"],
    ["http://[2002:a9fe:a9fe::1]/", "[2002:a9fe:a9fe::1]"],
    ["http://10.1/", "10.0.0.1"],
    ["http://0/", "0.0.0.0"],
    ["http://192.168.0.1./", "192.168.0.1"],
    ["http://[0000::ffff:10.0.0.1]/", "[::ffff:a00:1]"],
    ["http://100.64.0.1/", "100.64.0.1"],
    ["http://198.18.0.1/", "198.18.0.1"],
    ["http://[fd00::1]/", "[fd00::1]"],
    ["http://[fe80::1]/", "[fe80::1]"],
    ["http://metadata.google.internal./", "metadata.google.internal."],
  ];

  test("private spellings are refused with a clear error, and nothing is stored", async () => {
    const t = await tab(worker, "refused");
    for (const [url, host] of REFUSED) {
      const message = await rpcError(t.client.call("addMcpServer", ["x", url]));
      assert.match(message, /^Blocked URL: http:\/\/\S+: MCP client connections to private\/internal addresses are not allowed/, url);
      assert.ok(message.includes(`: ${host} is `), `${url}: ${message}`);
    }
    assert.match(await rpcError(t.client.call("addMcpServer", ["x", "http://1.2.3.4.5/"])), /^invalid MCP server URL: /);
    assert.match(await rpcError(t.client.call("addMcpServer", ["x", "http://user:pw@127.0.0.1/"])), /credentials/);
    const listed = await t.client.call("getMcpServers", []);
    assert.deepEqual(listed.servers, {}, "a refused URL is not stored");
  });

  test("loopback spellings reach the local MCP server", async () => {
    const t = await tab(worker, "loopback");
    const { port } = server;
    for (const [i, url] of [`http://127.1:${port}/mcp`, `http://0x7f000001:${port}/mcp`, `http://LocalHost:${port}/mcp`].entries()) {
      const added = await t.client.call("addMcpServer", [`local${i}`, url]);
      assert.equal(added.state, "ready", `${url}: ${JSON.stringify(added)}`);
    }
    const listed = await t.client.call("getMcpServers", []);
    assert.deepEqual(
      Object.values(listed.servers).map((s) => s.server_url).sort(),
      [`http://127.0.0.1:${port}/mcp`, `http://0x7f000001:${port}/mcp`, `http://localhost:${port}/mcp`].sort().map((u) => u.replace("0x7f000001", "127.0.0.1")),
      "the stored URL is the one that was checked and fetched",
    );
  });

  test("a trailing-dot localhost is localhost, not an internal error", async () => {
    const t = await tab(worker, "dot");
    const added = await t.client.call("addMcpServer", ["dot", `http://LOCALHOST.:${server.port}/mcp`]);
    assert.equal(added.state, "ready", JSON.stringify(added));
    const listed = await t.client.call("getMcpServers", []);
    assert.equal(listed.servers[added.id].server_url, `http://localhost:${server.port}/mcp`);
  });

  test("a redirect is checked like the URL itself: to loopback it is followed, to a private address refused", async () => {
    const t = await tab(worker, "redirect");
    const base = `http://127.0.0.1:${server.port}/redirect`;
    const followed = await t.client.call("addMcpServer", ["hop", `${base}?to=/mcp`]);
    assert.equal(followed.state, "ready", JSON.stringify(followed));
    const to = encodeURIComponent("http://0xa9fea9fe/latest");
    const refused = await t.client.call("addMcpServer", ["bounce", `${base}?status=302&to=${to}`]);
    assert.equal(refused.state, "failed", JSON.stringify(refused));
    assert.match(refused.error, /redirected to http:\/\/169\.254\.169\.254\/latest: 169\.254\.169\.254 is a link-local address/);
  });

  test("a public look-alike is not refused: the agent tries it, and the namespace stops it", async () => {
    const t = await tab(worker, "public");
    // 010.0.0.1 is octal: 8.0.0.1, a public address.
    const added = await t.client.call("addMcpServer", ["octal", "http://010.0.0.1/mcp"]);
    assert.equal(added.state, "failed", JSON.stringify(added));
    assert.match(added.error, /Network connection lost/, "the namespace, not the filter, stopped it");
    const listed = await t.client.call("getMcpServers", []);
    assert.equal(listed.servers[added.id].server_url, "http://8.0.0.1/mcp");
  });

  test("THINK_ALLOW_PRIVATE_NETWORK lets an app add private addresses on purpose", async () => {
    const t = await tab(open, "lan");
    const added = await t.client.call("addMcpServer", ["lan", "http://10.1:9/mcp"]);
    assert.equal(added.state, "failed", JSON.stringify(added));
    assert.match(added.error, /Network connection lost/, "attempted (and unreachable in the namespace), not refused");
    const listed = await t.client.call("getMcpServers", []);
    assert.equal(listed.servers[added.id].server_url, "http://10.0.0.1:9/mcp");
  });
}
