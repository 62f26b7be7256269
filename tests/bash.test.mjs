// The `bash` tool in the built Worker: the scripted model calls it, just-bash (bundled from
// crates/think-worker/js/bash/bridge.mjs) runs the script in workerd, and the changes land in the agent's real
// workspace, where the other tools see them.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs } from "./helpers/client.mjs";

let model;
let worker;
/** Workers started with other settings, disposed at the end. */
const extra = [];
/** Every tab, closed at the end even when a test fails (a live client keeps node running). */
before(async () => {
  model = await startScriptedModel();
  worker = await startWorker({ vars: modelVars(model) });
});

after(async () => {
  closeTabs();
  for (const w of extra) await w.dispose();
  await worker?.dispose();
  await model?.close();
});

async function workerWith(vars) {
  const w = await startWorker({ vars: modelVars(model, vars) });
  extra.push(w);
  return w;
}

let calls = 0;

/**
 * Runs one turn in which the model makes `steps` tool calls one after the other, then answers.
 * Returns each call's result: `{output}` or `{error}` (the tool-output-error text).
 */
async function runTools(tab, ...steps) {
  const ids = steps.map(() => `call_${++calls}`);
  model.push(...steps.map(([name, args], i) => ({ toolCalls: [{ id: ids[i], name, args }] })), { text: "Done." });
  const { id } = tab.chat(`run ${steps.map(([n]) => n).join(", ")}`);
  await tab.turn(id, { timeout: 60_000 });
  const chunks = tab.chunks(id);
  return ids.map((toolCallId) => {
    const c = chunks.find((c) => c.toolCallId === toolCallId && /^tool-(output-available|output-error|input-error)$/.test(c.type));
    assert.ok(c, `no output for ${toolCallId}: ${JSON.stringify(chunks.map((c) => c.type))}`);
    return c.type === "tool-output-available" ? { output: c.output } : { error: c.errorText, type: c.type };
  });
}

/** Runs a single `bash` call and returns its output object. */
async function bash(tab, script, cwd) {
  const [r] = await runTools(tab, ["bash", cwd ? { script, cwd } : { script }]);
  assert.ok(r.output, `bash failed: ${r.error}`);
  return r.output;
}

const noChanges = { created: [], updated: [], deleted: [], directoriesCreated: [], directoriesDeleted: [] };

test("the model is offered bash with Think's definition", async () => {
  const tab = await connect(worker.host, "bash-offered");
  await bash(tab, "true");
  const tools = model.requests.at(-1).tools.map((t) => t.function);
  const def = tools.find((t) => t.name === "bash");
  assert.ok(def, tools.map((t) => t.name).join());
  assert.match(def.description, /^Run a Bash script against the workspace\./);
  assert.deepEqual(def.parameters.required, ["script"]);
  assert.deepEqual(tools.map((t) => t.name).slice(0, 8), ["read", "write", "edit", "list", "find", "grep", "delete", "bash"]);
});

test("writes persist in the workspace and are readable with read", async () => {
  const tab = await connect(worker.host, "bash-writes");
  const out = await bash(tab, "mkdir -p /notes\nprintf 'alpha\\nbeta\\n' > /notes/a.txt\necho hi > top.txt\nwc -l /notes/a.txt");
  assert.deepEqual(out, {
    stdout: "2 /notes/a.txt\n",
    stderr: "",
    exitCode: 0,
    changedFiles: { ...noChanges, created: ["/notes/a.txt", "/top.txt"], directoriesCreated: ["/notes"] },
  });
  const [read, again] = await runTools(tab, ["read", { path: "/notes/a.txt" }], ["bash", { script: "cat top.txt; echo more >> notes/a.txt; pwd", cwd: "/notes/.." }]);
  const { version, ...output } = read.output;
  assert.match(version, /^1:[0-9a-f]{16}$/, "bash's write is version 1");
  assert.deepEqual(output, { path: "/notes/a.txt", content: "1\talpha\n2\tbeta\n3\t", totalLines: 3 });
  assert.equal(again.output.stdout, "hi\n/\n");
  assert.deepEqual(again.output.changedFiles, { ...noChanges, updated: ["/notes/a.txt"] });
  const [reread] = await runTools(tab, ["read", { path: "/notes/a.txt" }]);
  assert.equal(reread.output.content, "1\talpha\n2\tbeta\n3\tmore\n4\t");
});

test("binary files round-trip byte for byte", async () => {
  const tab = await connect(worker.host, "bash-binary");
  // 256 bytes 0x00..0xff, made by base64 -d (which keeps raw bytes).
  const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i)).toString("base64");
  const made = await bash(tab, `echo '${all}' | base64 -d > /all.bin; cp /all.bin /copy.bin; wc -c < /all.bin`);
  assert.equal(made.stdout, "256\n");
  assert.deepEqual(made.changedFiles.created, ["/all.bin", "/copy.bin"]);
  // A later call mounts what the workspace stored.
  const check = await bash(tab, "base64 -w0 /all.bin; echo; sha256sum /all.bin /copy.bin | cut -c1-64 | uniq | wc -l");
  assert.equal(check.stdout, `${all}\n1\n`);
  assert.deepEqual(check.changedFiles, noChanges);
  const [read] = await runTools(tab, ["read", { path: "/all.bin" }]);
  assert.equal(read.output.kind, "binary");
  assert.equal(read.output.sizeBytes, 256);
});

test("deletes of files and directories persist", async () => {
  const tab = await connect(worker.host, "bash-deletes");
  await bash(tab, "mkdir -p /d/e /keep; echo 1 > /d/e/one.txt; echo 2 > /d/two.txt; echo x > /x.txt; echo k > /keep/k.txt");
  const out = await bash(tab, "rm /x.txt; rm -r /d; ls /");
  assert.equal(out.exitCode, 0);
  assert.deepEqual(out.changedFiles, {
    ...noChanges,
    deleted: ["/d/e/one.txt", "/d/two.txt", "/x.txt"],
    directoriesDeleted: ["/d", "/d/e"],
  });
  const [read, list] = await runTools(tab, ["read", { path: "/x.txt" }], ["list", { path: "/" }]);
  assert.deepEqual(read.output, { error: "File not found: /x.txt" });
  assert.doesNotMatch(JSON.stringify(list.output), /"\/d"|x\.txt/);
  assert.match(JSON.stringify(list.output), /keep/);
});

test("files over maxWorkspaceFileBytes are skipped and protected", async () => {
  const tab = await connect(worker.host, "bash-protected");
  const big = "x".repeat(1_199_999) + "\n";
  // One write per turn: a message holding both 1.2 MB inputs would pass SQLite's 2 MB row limit.
  const [w1] = await runTools(tab, ["write", { path: "/big.txt", content: big }]);
  const [w2] = await runTools(tab, ["write", { path: "/keep/big2.txt", content: big }]);
  assert.equal(w1.output.bytesWritten, 1_200_000);
  assert.equal(w2.output.bytesWritten, 1_200_000);
  const out = await bash(tab, "ls /big.txt 2>&1; echo changed > /big.txt; rm -rf /keep; echo small > /small.txt");
  assert.match(out.stdout, /No such file/);
  assert.deepEqual(out.skippedFiles, ["/big.txt", "/keep/big2.txt"]);
  assert.deepEqual(out.errors, [
    "Skipped deleting protected workspace directory: /keep",
    "Skipped writing protected workspace file: /big.txt",
  ]);
  assert.deepEqual(out.changedFiles, { ...noChanges, created: ["/small.txt"] });
  const [r1, r2] = await runTools(tab, ["read", { path: "/big.txt", limit: 1 }], ["read", { path: "/keep/big2.txt", limit: 1 }]);
  for (const r of [r1, r2]) {
    assert.equal(r.output.totalLines, 2);
    assert.equal(r.output.content, "1\t" + "x".repeat(2000) + "... (truncated)");
  }
});

test("new files under /tmp and the system directories are not persisted", async () => {
  const tab = await connect(worker.host, "bash-tmp");
  const out = await bash(tab, "echo s > /tmp/scratch.txt; mkdir -p /usr/local/x; cat /tmp/scratch.txt; echo kept > /tmpfile");
  assert.equal(out.stdout, "s\n");
  assert.deepEqual(out.changedFiles, { ...noChanges, created: ["/tmpfile"] });
  const [list] = await runTools(tab, ["list", { path: "/" }]);
  assert.doesNotMatch(JSON.stringify(list.output), /"tmp"|usr/);
});

test("output over 64,000 bytes is truncated with Think's marker", async () => {
  const tab = await connect(worker.host, "bash-truncate");
  const out = await bash(tab, "seq 1 20000; seq 1 20000 >&2");
  const full = Array.from({ length: 20000 }, (_, i) => `${i + 1}\n`).join("");
  assert.equal(full.length, 108_894);
  // 44,894 bytes cut = 43.8 KB.
  const expected = full.slice(0, 64_000) + "\n... (43.8 KB truncated)";
  assert.equal(out.stdout, expected);
  assert.equal(out.stderr, expected);
});

test("the network is off: curl and wget to the model server fail", async () => {
  const tab = await connect(worker.host, "bash-network");
  const url = `${model.baseUrl}/models`;
  const out = await bash(tab, `curl -s ${url}; echo "curl=$?"; wget -qO- ${url}; echo "wget=$?"`);
  assert.equal(out.stdout, "curl=127\nwget=127\n");
  assert.match(out.stderr, /curl: command not found/);
  assert.match(out.stderr, /wget: command not found/);
  assert.doesNotMatch(out.stdout + out.stderr, /scripted/);
});

test("a 1,000-file workspace: one call creates them, later calls see them all", async () => {
  const tab = await connect(worker.host, "bash-thousand");
  const made = await bash(tab, "mkdir -p /f; for i in $(seq 1000); do echo $i > /f/$i.txt; done; echo made");
  assert.equal(made.stdout, "made\n");
  assert.equal(made.changedFiles.created.length, 1000);
  assert.deepEqual(made.changedFiles.directoriesCreated, ["/f"]);
  assert.equal(made.skippedFiles, undefined);
  // Every array is sorted (JavaScript order).
  assert.deepEqual(made.changedFiles.created, [...made.changedFiles.created].sort());

  const counted = await bash(tab, "cat /f/*.txt | wc -l; find /f -type f | wc -l; wc -l /f/*.txt | tail -1; cat /f/1000.txt");
  assert.equal(counted.stdout, "1000\n1000\n1000 total\n1000\n");
  assert.deepEqual(counted.changedFiles, noChanges);
  assert.equal(counted.skippedFiles, undefined);

  // One more file passes the 1,000-file mount limit: the walk mounts / first, then /f in
  // name order, so the last name (999.txt) is left out and protected.
  await bash(tab, "echo extra > /g.txt");
  const over = await bash(tab, "find / -name '*.txt' -path '/f/*' | wc -l; rm -f /f/999.txt");
  assert.equal(over.stdout, "999\n");
  assert.deepEqual(over.skippedFiles, ["/f/999.txt"]);
  assert.deepEqual(over.changedFiles, noChanges);
});

test("THINK_BASH sets the timeout: a sleeping script and a busy loop end with exit code 124", async () => {
  const w = await workerWith({ THINK_BASH: JSON.stringify({ timeout: 500 }) });
  const tab = await connect(w.host, "bash-timeout");
  let t0 = Date.now();
  const slept = await bash(tab, "echo start; sleep 10; echo never > /never.txt");
  assert.ok(Date.now() - t0 < 8_000, `took ${Date.now() - t0} ms`);
  assert.equal(slept.exitCode, 124);
  // just-bash drops the output of a stopped run, as in Think. Either the abort signal or
  // just-bash's own deadline (set to the same timeout by the bridge) stops it first.
  assert.equal(slept.stdout, "");
  assert.match(slept.stderr, /^bash: (execution aborted|sleep exceeded its execution deadline)\n$/);
  assert.deepEqual(slept.changedFiles, noChanges);
  t0 = Date.now();
  // A loop that never yields to the abort timer; just-bash's deadline stops it (a cheaper
  // loop body would hit just-bash's 100,000-command limit, exit 126, before 500 ms).
  const busy = await bash(tab, "i=0; while true; do i=$((i+1)); x=$(echo $i); done");
  assert.ok(Date.now() - t0 < 8_000, `took ${Date.now() - t0} ms`);
  assert.equal(busy.exitCode, 124);
  assert.match(busy.stderr, /deadline|aborted/);
});

test("THINK_BASH network: true registers curl with Think's empty allow-list", async () => {
  const w = await workerWith({ THINK_BASH: JSON.stringify({ network: true, maxOutputBytes: 100 }) });
  const tab = await connect(w.host, "bash-network-on");
  const out = await bash(tab, `curl -s ${model.baseUrl}/models; echo "curl=$?"; seq 1 100`);
  assert.match(out.stdout, /^curl=(?!127\b|0\b)\d+\n/);
  assert.doesNotMatch(out.stdout, /scripted/);
  assert.match(out.stdout, /\n\.\.\. \(\d+ B truncated\)$/);
});

test("THINK_BASH=false removes the tool", async () => {
  const w = await workerWith({ THINK_BASH: "false" });
  const tab = await connect(w.host, "bash-off");
  const [r] = await runTools(tab, ["bash", { script: "echo hi > /hi.txt" }]);
  const names = model.requests.at(-2).tools.map((t) => t.function.name);
  // The merge order: workspace, agent (subagent), extensions, context (the memory block brings
  // set_context); `execute` is built last (its `tools.*` are the rest of the turn).
  assert.deepEqual(names, ["read", "write", "edit", "list", "find", "grep", "delete", "subagent", "load_extension", "list_extensions", "set_context", "execute"]);
  assert.equal(r.type, "tool-input-error", "an unknown tool cannot run");
  assert.match(r.error, /bash/);
});

test("THINK_APPROVAL=bash gates bash like any tool", async () => {
  const w = await workerWith({ THINK_APPROVAL: "bash" });
  const tab = await connect(w.host, "bash-approval");
  model.push({ toolCalls: [{ id: "call_gated", name: "bash", args: { script: "echo hi > /hi.txt" } }] });
  const { id } = tab.chat("make a file");
  await tab.turn(id);
  const types = tab.chunks(id).map((c) => c.type);
  assert.ok(types.includes("tool-approval-request"), types.join());
  assert.ok(!types.includes("tool-output-available"), "the script did not run");
});

test("a model edit is refused after bash changed the file behind it (versioned writes)", async () => {
  const tab = await connect(worker.host, "bash-guard");
  const [, read, , edit, reread, redo] = await runTools(
    tab,
    ["write", { path: "/g/a.txt", content: "keep\nold\n" }],
    ["read", { path: "/g/a.txt" }],
    ["bash", { script: "printf 'keep\\nbash\\n' > /g/a.txt" }],
    ["edit", { path: "/g/a.txt", old_string: "keep", new_string: "k" }],
    ["read", { path: "/g/a.txt" }],
    ["edit", { path: "/g/a.txt", old_string: "keep", new_string: "k" }],
  );
  assert.match(read.output.version, /^1:[0-9a-f]{16}$/);
  const msg = edit.output?.error ?? edit.error;
  assert.match(msg, /changed since version 1:[0-9a-f]{16}: it is now version 2:[0-9a-f]{16} \(changed by bash at \d{4}-\d\d-\d\dT/, msg);
  assert.match(msg, /-old\n\+bash/, msg);
  assert.match(reread.output.version, /^2:/);
  assert.deepEqual(redo.output, { path: "/g/a.txt", replaced: true, lines: 3 });
  tab.close();
});
