// Tests of crates/think-worker/js/bash/bridge.mjs against the real just-bash:
//   node --test tests/bash-corpus/bridge.test.mjs   (part of `npm test`; JUST_BASH: see load-bridge.mjs)
import assert from "node:assert/strict";
import { test } from "node:test";
import { EXCLUDED_ROOTS, runBash } from "./load-bridge.mjs";

const enc = (s) => new TextEncoder().encode(s);
const binary = new Uint8Array([0, 1, 2, 255, 254, 128, 10]);

function request(script, extra = {}) {
  return {
    files: [["/a.txt", enc("1\n2\n3\n")], ["/d/bin.dat", binary], ["/d/e/keep.txt", enc("keep\n")]],
    dirs: ["/", "/d", "/d/e", "/empty"],
    script,
    cwd: "/",
    timeoutMs: 10_000,
    network: false,
    excludeRoots: EXCLUDED_ROOTS,
    ...extra,
  };
}

const byPath = (entries) => new Map(entries.map(([p, kind, bytes]) => [p, { kind, bytes }]));

test("untouched files come back without content; workspace dirs exist", async () => {
  const r = await runBash(request("wc -l < a.txt; ls -d empty"));
  assert.equal(r.stdout, "3\nempty\n");
  assert.equal(r.exitCode, 0);
  assert.equal(r.aborted, false);
  assert.equal(r.error, null);
  const sorted = [...r.entries].sort((x, y) => (x[0] < y[0] ? -1 : 1));
  assert.deepEqual(sorted, [
    ["/a.txt", "file", null],
    ["/d", "dir", null],
    ["/d/bin.dat", "file", null],
    ["/d/e", "dir", null],
    ["/d/e/keep.txt", "file", null],
    ["/empty", "dir", null],
  ]);
});

test("changes come back with bytes; binary copies are byte for byte", async () => {
  const r = await runBash(request("echo 4 >> a.txt; cp d/bin.dat copy.dat; mkdir -p n/m; rm d/e/keep.txt; rmdir d/e"));
  const e = byPath(r.entries);
  assert.deepEqual(e.get("/a.txt").bytes, enc("1\n2\n3\n4\n"));
  assert.deepEqual(e.get("/copy.dat").bytes, binary);
  assert.equal(e.get("/d/bin.dat").bytes, null);
  assert.equal(e.get("/n/m").kind, "dir");
  assert.equal(e.has("/d/e/keep.txt"), false);
  assert.equal(e.has("/d/e"), false);
});

test("new paths under excluded roots are left out, workspace ones are kept", async () => {
  const r = await runBash(request("echo s > /tmp/scratch; mkdir -p /usr/local; echo x > /tmp.txt", {
    files: [["/tmp/mine.txt", enc("mine")]],
    dirs: ["/", "/tmp"],
  }));
  const paths = r.entries.map((e) => e[0]).sort();
  assert.deepEqual(paths, ["/tmp", "/tmp.txt", "/tmp/mine.txt"]);
});

test("stdout, stderr and exit code pass through", async () => {
  const r = await runBash(request("echo out; echo err >&2; exit 3"));
  assert.deepEqual([r.stdout, r.stderr, r.exitCode], ["out\n", "err\n", 3]);
});

test("the timeout aborts a sleeping script with exit code 124", async () => {
  const t0 = Date.now();
  const r = await runBash(request("echo start; sleep 20; echo never > never.txt", { timeoutMs: 300 }));
  assert.ok(Date.now() - t0 < 5_000);
  assert.equal(r.aborted, true);
  assert.equal(r.exitCode, 124);
  // The abort timer says "aborted"; just-bash's own deadline, which can fire a moment first
  // inside `sleep`, says the command exceeded it. Either tells the model the timeout hit.
  assert.match(r.stderr, /aborted|exceeded its execution deadline/);
  assert.equal(byPath(r.entries).has("/never.txt"), false);
});

test("the deadline stops a CPU-bound loop that never yields to the timer", async () => {
  const t0 = Date.now();
  const r = await runBash(request("i=0; while true; do i=$((i+1)); x=$(echo $i); done", { timeoutMs: 300 }));
  assert.ok(Date.now() - t0 < 5_000, `took ${Date.now() - t0} ms`);
  assert.equal(r.exitCode, 124);
  assert.match(r.stderr, /deadline/);
});

test("a script is run raw: here-doc indentation is kept", async () => {
  const r = await runBash(request("cat <<EOF\n  two spaces\nEOF"));
  assert.equal(r.stdout, "  two spaces\n");
});

test("cwd is honoured", async () => {
  const r = await runBash(request("pwd; ls", { cwd: "/d" }));
  assert.equal(r.stdout, "/d\nbin.dat\ne\n");
});

test("gzip works (maxLiveBytes keeps zlib's output buffer in range)", async () => {
  const r = await runBash(request("gzip -c a.txt | gunzip | wc -l"));
  assert.equal(r.stdout, "3\n");
});

test("network is off unless asked for", async () => {
  assert.equal((await runBash(request("curl -s https://example.com"))).exitCode, 127);
  assert.notEqual((await runBash(request("curl -s https://example.com", { network: true }))).exitCode, 127);
});
