// Runs a test file again inside a network namespace that has loopback only (`unshare --net`,
// then `ip link set lo up`), for tests that could make the agent connect somewhere: there
// any address but 127.0.0.0/8 fails locally with "network unreachable" and no packet leaves
// the machine. A file calls `runInNetns(import.meta.url, title)` when `!INSIDE_NETNS`, and
// defines its real tests when `INSIDE_NETNS`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** True in the copy of the file that runs inside the namespace. */
export const INSIDE_NETNS = process.env.THINK_TEST_NETNS === "1";

/** One test that runs `fileUrl` inside the namespace and passes when all its tests pass. */
export function runInNetns(fileUrl, title) {
  test(title, async () => {
    const script = 'ip link set lo up && exec "$0" --test --test-force-exit --test-reporter=tap "$1"';
    // Without NODE_TEST_CONTEXT the inner runner runs the file instead of deferring to this one.
    const { NODE_TEST_CONTEXT, ...env } = process.env;
    const child = spawn("unshare", ["--net", "sh", "-c", script, process.execPath, fileURLToPath(fileUrl)], {
      env: { ...env, THINK_TEST_NETNS: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d) => (output += d));
    child.stderr.on("data", (d) => (output += d));
    const code = await new Promise((resolve, reject) => {
      child.once("error", reject);
      child.once("exit", (c) => resolve(c));
    });
    process.stderr.write(output.replace(/^/gm, "  [netns] "));
    assert.equal(code, 0, "the tests in the namespace failed (their output is above)");
    assert.match(output, /^# pass [1-9]\d*$/m, "no test ran in the namespace");
    assert.match(output, /^# fail 0$/m);
  });
}
