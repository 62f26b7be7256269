// The workspace and its seven file tools, driven end to end: the scripted model calls each
// tool, the Rust Durable Object runs it against its SQLite (and R2) workspace in Miniflare,
// and the test checks what the client streamed (`tool-output-available` /
// `tool-output-error`) and what the model saw next (the `role: tool` message).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { asSchema } from "ai";
import * as think from "@cloudflare/think/tools/workspace";
import { startScriptedModel } from "./helpers/scripted-model.mjs";
import { startWorker, modelVars } from "./helpers/worker.mjs";
import { connect, closeTabs, newId } from "./helpers/client.mjs";

let model;
let worker;

/** Connects a tab (closed by `after` even when a test fails half-way). */
function open(name) {
  return connect(worker.host, name);
}

before(async () => {
  model = await startScriptedModel();
  // Files of several MB pass through tool calls here: a window that holds them keeps the
  // conversation from being compacted (compaction has its own tests, session.test.mjs).
  // One checkpoint kept: the R2 test below sees an object displaced by a turn go with the
  // checkpoint that held it, at the next turn.
  worker = await startWorker({
    vars: modelVars(model, { THINK_CONTEXT_WINDOW: "100000000", THINK_CHECKPOINTS: '{"maxCheckpoints": 1}' }),
  });
});

after(async () => {
  closeTabs();
  await worker?.dispose();
  await model?.close();
});

/**
 * Runs one turn in which the model calls the given tools (all in one step), then answers.
 * Returns, per call, the output chunk the client got and the tool message the model saw.
 */
async function callTools(tab, calls) {
  const withIds = calls.map((c) => ({ id: newId("call"), ...c }));
  const first = model.requests.length;
  model.push({ toolCalls: withIds }, { text: "done" });
  const { id } = tab.chat(`run ${calls.map((c) => c.name).join(", ")}`);
  await tab.turn(id, { timeout: 60000 });
  const chunks = tab.chunks(id);
  const next = model.requests[first + 1];
  assert.ok(next, "the model was called again with the tool results");
  return withIds.map((call) => {
    const chunk = chunks.find(
      (c) => (c.type === "tool-output-available" || c.type === "tool-output-error") && c.toolCallId === call.id,
    );
    assert.ok(chunk, `no output chunk for ${call.name}: ${JSON.stringify(chunks.map((c) => c.type))}`);
    const seen = next.messages.find((m) => m.role === "tool" && m.tool_call_id === call.id);
    assert.ok(seen, `the model did not see the result of ${call.name}`);
    return { chunk, output: chunk.output, errorText: chunk.errorText, seen: seen.content };
  });
}

async function callTool(tab, name, args) {
  const [r] = await callTools(tab, [{ name, args }]);
  return r;
}

/** Every object in the workspace bucket, by key. */
async function bucketKeys() {
  const bucket = await worker.mf.getR2Bucket("WORKSPACE_R2");
  const keys = [];
  let cursor;
  do {
    const page = await bucket.list({ cursor });
    keys.push(...page.objects.map((o) => o.key));
    cursor = page.truncated ? page.cursor : undefined;
  } while (cursor);
  return keys;
}

const MB = 1024 * 1024;

test("write reports bytes and lines; read numbers lines, pages with offset/limit and cuts long lines", async () => {
  const tab = await open("ws-read");
  const text = "héllo\nwörld\nthird line";
  let r = await callTool(tab, "write", { path: "/docs/a.txt", content: text });
  assert.equal(r.chunk.type, "tool-output-available");
  assert.deepEqual(r.output, { path: "/docs/a.txt", bytesWritten: 24, lines: 3 });
  assert.equal(r.seen, JSON.stringify(r.output));

  // `version` is the one addition to Think's output (README, "Versioned writes"): the counter
  // and the content's XXH3-64, here the empty text's value from xxHash's own sanity check.
  await callTool(tab, "write", { path: "/docs/empty.txt", content: "" });
  r = await callTool(tab, "read", { path: "/docs/empty.txt" });
  assert.equal(r.output.version, "1:2d06800538d394c2");
  r = await callTool(tab, "read", { path: "/docs/a.txt" });
  const version = r.output.version;
  assert.match(version, /^1:[0-9a-f]{16}$/);
  assert.deepEqual(r.output, { path: "/docs/a.txt", content: "1\théllo\n2\twörld\n3\tthird line", totalLines: 3, version });
  assert.equal(r.seen, "1\théllo\n2\twörld\n3\tthird line", "the model gets the numbered text, not JSON");

  r = await callTool(tab, "read", { path: "/docs/a.txt", offset: 2, limit: 1 });
  assert.deepEqual(r.output, { path: "/docs/a.txt", content: "2\twörld", totalLines: 3, fromLine: 2, toLine: 2, version });
  r = await callTool(tab, "read", { path: "/docs/a.txt", offset: 2 });
  assert.deepEqual(r.output, { path: "/docs/a.txt", content: "2\twörld\n3\tthird line", totalLines: 3, fromLine: 2, toLine: 3, version });
  r = await callTool(tab, "read", { path: "/docs/a.txt", limit: 10 });
  assert.equal(r.output.toLine, 3);
  r = await callTool(tab, "read", { path: "/docs/a.txt", offset: 9 });
  assert.deepEqual(r.output, { path: "/docs/a.txt", content: "", totalLines: 3, fromLine: 9, toLine: 3, version });

  const long = "x".repeat(2500);
  const many = Array.from({ length: 2005 }, (_, i) => `l${i + 1}`).join("\n");
  const [w1, w2] = await callTools(tab, [
    { name: "write", args: { path: "/docs/long.txt", content: `${long}\nshort` } },
    { name: "write", args: { path: "/docs/many.txt", content: many } },
  ]);
  assert.deepEqual(w1.output, { path: "/docs/long.txt", bytesWritten: 2506, lines: 2 });
  assert.equal(w2.output.lines, 2005);
  const [longRead, manyRead] = await callTools(tab, [
    { name: "read", args: { path: "/docs/long.txt" } },
    { name: "read", args: { path: "/docs/many.txt" } },
  ]);
  assert.equal(longRead.output.content, `1\t${"x".repeat(2000)}... (truncated)\n2\tshort`);
  const lines = manyRead.output.content.split("\n");
  assert.equal(lines.length, 2001);
  assert.equal(lines[1999], "2000\tl2000");
  assert.equal(lines[2000], "... (5 more lines truncated)");
  assert.equal(manyRead.output.totalLines, 2005);

  const [missing, dir] = await callTools(tab, [
    { name: "read", args: { path: "/nope.txt" } },
    { name: "read", args: { path: "/docs" } },
  ]);
  assert.equal(missing.chunk.type, "tool-output-available", "a missing file is an output, not a tool error");
  assert.deepEqual(missing.output, { error: "File not found: /nope.txt" });
  assert.deepEqual(dir.output, { error: "/docs is a directory, not a file" });
  tab.close();
});

test("edit: exact, whitespace-fuzzy, create, ambiguous, not found with the closest region", async () => {
  const tab = await open("ws-edit");
  const src = "function add(a, b) {\n    return  a + b;\n}\n\nconst x = 1;\nconst y = 1;\n";
  await callTool(tab, "write", { path: "/src/add.js", content: src });

  let r = await callTool(tab, "edit", { path: "/src/add.js", old_string: "function add", new_string: "function sum" });
  assert.deepEqual(r.output, { path: "/src/add.js", replaced: true, lines: 7 });
  assert.equal(r.seen, JSON.stringify(r.output));

  r = await callTool(tab, "edit", { path: "/src/add.js", old_string: "return a + b;", new_string: "return a + b + 0;" });
  assert.deepEqual(r.output, { path: "/src/add.js", replaced: true, fuzzyMatch: true, lines: 7, matchLevel: "whitespace" });

  // The Unicode level decomposes compatibility forms with the platform's NFKD (ligature,
  // full-width letters, a precomposed letter against its decomposed spelling).
  await callTool(tab, "write", { path: "/src/uni.js", content: "let \uFB01le = \uFF21\uFF22; // caf\u00E9\n" });
  r = await callTool(tab, "edit", { path: "/src/uni.js", old_string: "let file = AB; // cafe\u0301", new_string: "let x = 1;" });
  assert.deepEqual(r.output, { path: "/src/uni.js", replaced: true, fuzzyMatch: true, lines: 2, matchLevel: "unicode" });
  assert.equal((await callTool(tab, "read", { path: "/src/uni.js" })).output.content, "1\tlet x = 1;\n2\t");

  r = await callTool(tab, "edit", { path: "/src/add.js", old_string: "= 1;", new_string: "= 2;" });
  assert.deepEqual(r.output, {
    error: "old_string appears 2 times in the file. Include more surrounding context to make the match unique.",
  });

  r = await callTool(tab, "edit", {
    path: "/src/add.js",
    old_string: "function sum(a, b) {\n    return a + c + 0;\n",
    new_string: "replacement",
  });
  const notFound =
    "old_string not found in file. Make sure it matches exactly, including whitespace and indentation. Read the file first to verify.";
  assert.ok(r.output.error.startsWith(`${notFound}\n\nClosest match: lines 1-2`), r.output.error);
  assert.match(r.output.error, /^-    return a \+ c \+ 0;$/m);
  assert.match(r.output.error, /^\+    return a \+ b \+ 0;$/m);
  assert.equal(r.seen, JSON.stringify(r.output), "edit errors are plain outputs, sent as JSON");

  r = await callTool(tab, "edit", { path: "/src/add.js", old_string: "nothing like this at all, zzz", new_string: "qqq" });
  assert.deepEqual(r.output, { error: notFound });

  r = await callTool(tab, "edit", { path: "/src/new.js", old_string: "", new_string: "a\nb" });
  assert.deepEqual(r.output, { path: "/src/new.js", created: true, lines: 2 });
  r = await callTool(tab, "edit", { path: "/src/new.js", old_string: "", new_string: "c" });
  assert.deepEqual(r.output, { error: "File already exists. Provide old_string to edit, or use the write tool to overwrite." });
  r = await callTool(tab, "edit", { path: "/src/missing.js", old_string: "a", new_string: "b" });
  assert.deepEqual(r.output, { error: "File not found: /src/missing.js" });

  r = await callTool(tab, "read", { path: "/src/add.js" });
  assert.equal(
    r.output.content,
    "1\tfunction sum(a, b) {\n2\t    return a + b + 0;\n3\t}\n4\t\n5\tconst x = 1;\n6\tconst y = 1;\n7\t",
  );
  tab.close();
});

test("list shows directories first, then files with sizes; missing directories list as empty", async () => {
  const tab = await open("ws-list");
  await callTools(tab, [
    { name: "write", args: { path: "/proj/b.txt", content: "0123456789" } },
    { name: "write", args: { path: "/proj/a.md", content: "m".repeat(2048) } },
    { name: "write", args: { path: "/proj/zeta/inner.txt", content: "" } },
    { name: "write", args: { path: "/proj/alpha/deep/x.txt", content: "x" } },
    { name: "write", args: { path: "/proj/c.bin", content: "c".repeat(1536 * 1024) } },
  ]);
  let r = await callTool(tab, "list", { path: "/proj" });
  assert.deepEqual(r.output, {
    path: "/proj",
    count: 5,
    entries: ["alpha/", "zeta/", "a.md (2.0 KB)", "b.txt (10 B)", "c.bin (1.5 MB)"],
  });
  assert.equal(r.seen, JSON.stringify(r.output));
  r = await callTool(tab, "list", { path: "/proj", limit: 2, offset: 1 });
  assert.deepEqual(r.output, { path: "/proj", count: 2, entries: ["zeta/", "a.md (2.0 KB)"] });
  r = await callTool(tab, "list", {});
  assert.deepEqual(r.output, { path: "/", count: 1, entries: ["proj/"] });
  r = await callTool(tab, "list", { path: "/nowhere" });
  assert.deepEqual(r.output, { path: "/nowhere", count: 0, entries: [] });
  tab.close();
});

test("find matches **/*.md across directories, marks directories, and truncates at 200", async () => {
  const tab = await open("ws-find");
  await callTools(tab, [
    { name: "write", args: { path: "/README.md", content: "top" } },
    { name: "write", args: { path: "/docs/guide.md", content: "g" } },
    { name: "write", args: { path: "/docs/api/ref.md", content: "r" } },
    { name: "write", args: { path: "/docs/notes.txt", content: "n" } },
    { name: "write", args: { path: "/odd.md/inside.txt", content: "i" } },
  ]);
  let r = await callTool(tab, "find", { pattern: "**/*.md" });
  assert.deepEqual(r.output, {
    pattern: "**/*.md",
    count: 4,
    files: ["/README.md", "/docs/api/ref.md", "/docs/guide.md", "/odd.md/"],
  });
  assert.equal(r.seen, JSON.stringify(r.output));
  r = await callTool(tab, "find", { pattern: "/docs/*.{md,txt}" });
  assert.deepEqual(r.output.files, ["/docs/guide.md", "/docs/notes.txt"]);
  r = await callTool(tab, "find", { pattern: "*.md" });
  assert.deepEqual(r.output.files, ["/README.md", "/odd.md/"]);

  const calls = Array.from({ length: 205 }, (_, i) => ({
    name: "write",
    args: { path: `/many/f${String(i).padStart(3, "0")}.md`, content: "" },
  }));
  await callTools(tab, calls);
  r = await callTool(tab, "find", { pattern: "/many/**/*.md" });
  assert.equal(r.output.count, 205);
  assert.equal(r.output.files.length, 200);
  assert.equal(r.output.truncated, true);
  assert.equal(r.output.showing, 200);
  assert.equal(r.output.files[199], "/many/f199.md");
  tab.close();
});

test("grep: plain matches, context objects, case, fixed strings, invalid regex, truncation, the 1 MB skip", async () => {
  const tab = await open("ws-grep");
  await callTools(tab, [
    { name: "write", args: { path: "/g/a.ts", content: "import x\nconst Foo = 1;\nlet foo = Foo + 1;\nend" } },
    { name: "write", args: { path: "/g/b.md", content: "a (paren) here\nno match\nFOO upper" } },
    { name: "write", args: { path: "/g/big.log", content: `foo\n${"y".repeat(MB + 10)}` } },
  ]);
  let r = await callTool(tab, "grep", { query: "foo", include: "/g/*.{ts,md}" });
  assert.deepEqual(r.output, {
    query: "foo",
    filesSearched: 2,
    filesWithMatches: 2,
    totalMatches: 3,
    matches: ["/g/a.ts:2: const Foo = 1;", "/g/a.ts:3: let foo = Foo + 1;", "/g/b.md:3: FOO upper"],
  });
  assert.equal(r.seen, JSON.stringify(r.output));

  r = await callTool(tab, "grep", { query: "foo", include: "/g/*.ts", caseSensitive: true, contextLines: 1 });
  assert.deepEqual(r.output.matches, [{ file: "/g/a.ts", line: 3, context: "  2\tconst Foo = 1;\n> 3\tlet foo = Foo + 1;\n  4\tend" }]);

  r = await callTool(tab, "grep", { query: "(paren)", fixedString: true });
  assert.deepEqual(r.output.matches, ["/g/b.md:1: a (paren) here"]);
  assert.equal(r.output.filesSkipped, 1);
  assert.equal(r.output.note, "1 file(s) skipped (larger than 1 MB)");
  assert.equal(r.output.filesSearched, 2, "the big file is skipped, not searched");

  r = await callTool(tab, "grep", { query: "\\bconst\\s+\\w+\\s*=", include: "**/*.ts" });
  assert.deepEqual(r.output.matches, ["/g/a.ts:2: const Foo = 1;"]);

  r = await callTool(tab, "grep", { query: "(unclosed" });
  assert.equal(r.chunk.type, "tool-output-available");
  assert.deepEqual(r.output, { error: "Invalid regex: (unclosed" });

  const hits = Array.from({ length: 250 }, (_, i) => `hit ${i}`).join("\n");
  await callTool(tab, "write", { path: "/g/hits.txt", content: hits });
  r = await callTool(tab, "grep", { query: "hit", include: "/g/hits.txt" });
  assert.equal(r.output.totalMatches, 200);
  assert.equal(r.output.matches.length, 200);
  assert.equal(r.output.truncated, true);
  assert.equal(r.output.matches[199], "/g/hits.txt:200: hit 199");
  tab.close();
});

test("delete: files, missing paths, recursive directories; a non-empty directory without recursive is a tool error", async () => {
  const tab = await open("ws-delete");
  await callTools(tab, [
    { name: "write", args: { path: "/d/one.txt", content: "1" } },
    { name: "write", args: { path: "/d/sub/two.txt", content: "2" } },
  ]);
  let r = await callTool(tab, "delete", { path: "/d/one.txt" });
  assert.deepEqual(r.output, { deleted: "/d/one.txt" });
  assert.equal(r.seen, JSON.stringify(r.output));
  r = await callTool(tab, "delete", { path: "/d/never-existed" });
  assert.deepEqual(r.output, { deleted: "/d/never-existed" }, "a missing path is a silent success (force)");

  r = await callTool(tab, "delete", { path: "/d" });
  assert.equal(r.chunk.type, "tool-output-error");
  assert.equal(r.errorText, "ENOTEMPTY: directory not empty: /d", "worded as Think's Workspace words it");
  r = await callTool(tab, "read", { path: "/d/sub/two.txt" });
  assert.equal(r.output.content, "1\t2", "nothing was deleted");

  r = await callTool(tab, "delete", { path: "/", recursive: true });
  assert.equal(r.chunk.type, "tool-output-error");
  assert.equal(r.errorText, "EPERM: cannot remove root directory");

  r = await callTool(tab, "delete", { path: "/d", recursive: true });
  assert.deepEqual(r.output, { deleted: "/d" });
  r = await callTool(tab, "list", { path: "/" });
  assert.deepEqual(r.output.entries, []);
  tab.close();
});

test("large files spill to R2; an object a change displaces is kept while a checkpoint holds it, then deleted: no orphans", async () => {
  const tab = await open("ws-r2");
  const big = (c) => c.repeat(2 * MB);
  const ours = async () => (await bucketKeys()).filter((k) => k.includes("/default/spill/"));
  assert.deepEqual(await ours(), []);

  await callTools(tab, [
    { name: "write", args: { path: "/spill/a.txt", content: big("a") } },
    { name: "write", args: { path: "/spill/dir/b.txt", content: big("b") } },
    { name: "write", args: { path: "/spill/dir/c.txt", content: big("c") } },
    { name: "write", args: { path: "/spill/small.txt", content: "tiny" } },
  ]);
  const keys = await ours();
  assert.equal(keys.length, 3, JSON.stringify(keys));
  assert.ok(keys.every((k) => k.startsWith("think-agent/")), "keys are prefixed by the agent");
  assert.ok(keys.some((k) => k.endsWith("/default/spill/a.txt")));
  const bucket = await worker.mf.getR2Bucket("WORKSPACE_R2");
  const obj = await bucket.get(keys.find((k) => k.endsWith("/spill/a.txt")));
  assert.equal((await obj.text()).length, 2 * MB);

  let r = await callTool(tab, "read", { path: "/spill/a.txt", offset: 1, limit: 1 });
  assert.equal(r.output.content.length, "1\t".length + 2000 + "... (truncated)".length);
  r = await callTool(tab, "list", { path: "/spill" });
  assert.deepEqual(r.output.entries, ["dir/", "a.txt (2.0 MB)", "small.txt (4 B)"]);
  r = await callTool(tab, "grep", { query: "tiny", include: "/spill/**" });
  assert.equal(r.output.filesSkipped, 3);
  assert.deepEqual(r.output.matches, ["/spill/small.txt:1: tiny"]);
  r = await callTool(tab, "edit", { path: "/spill/small.txt", old_string: "tiny", new_string: big("s") });
  assert.equal(r.output.replaced, true);
  assert.equal((await ours()).length, 4, "an edit that grows a file spills it");

  // Overwriting with something small moves the file back inline. The object stays while the
  // checkpoint taken at this turn's start holds it (a rewind brings it back), and is deleted
  // when the next turn's checkpoint drops that one (one is kept here).
  const aKeys = async () => (await ours()).filter((k) => k.endsWith("/spill/a.txt"));
  r = await callTool(tab, "write", { path: "/spill/a.txt", content: "small now" });
  assert.deepEqual(r.output, { path: "/spill/a.txt", bytesWritten: 9, lines: 1 });
  assert.equal((await aKeys()).length, 1, "held by the turn's checkpoint");
  r = await callTool(tab, "read", { path: "/spill/a.txt" });
  assert.equal(r.output.content, "1\tsmall now");
  assert.deepEqual(await aKeys(), [], "deleted once no checkpoint holds it");

  r = await callTool(tab, "delete", { path: "/spill/small.txt" });
  assert.deepEqual(r.output, { deleted: "/spill/small.txt" });
  assert.equal((await ours()).length, 3, "held by the turn's checkpoint");
  await callTool(tab, "list", { path: "/spill" });
  assert.equal((await ours()).length, 2);

  r = await callTool(tab, "delete", { path: "/spill/dir", recursive: true });
  assert.equal((await ours()).length, 2, "held by the turn's checkpoint");
  await callTool(tab, "list", { path: "/" });
  assert.deepEqual(await ours(), [], "a recursive delete's objects go with the checkpoint that held them");
  tab.close();
});

test("a 5 MB file written through the tool round-trips through R2", async () => {
  const tab = await open("ws-5mb");
  const line = "0123456789abcdef".repeat(4) + "\n";
  const content = line.repeat(Math.ceil((5 * MB) / line.length)).slice(0, 5 * MB);
  let r = await callTool(tab, "write", { path: "/huge/five.txt", content });
  assert.deepEqual(r.output, { path: "/huge/five.txt", bytesWritten: 5 * MB, lines: content.split("\n").length });
  const keys = (await bucketKeys()).filter((k) => k.endsWith("/default/huge/five.txt"));
  assert.equal(keys.length, 1);
  const bucket = await worker.mf.getR2Bucket("WORKSPACE_R2");
  assert.equal(await (await bucket.get(keys[0])).text(), content);
  const lastLine = content.split("\n").length;
  r = await callTool(tab, "read", { path: "/huge/five.txt", offset: lastLine - 1, limit: 5 });
  assert.equal(r.output.totalLines, lastLine);
  assert.equal(r.output.content, `${lastLine - 1}\t${line.trimEnd()}\n${lastLine}\t${content.split("\n").at(-1)}`);
  r = await callTool(tab, "list", { path: "/huge" });
  assert.deepEqual(r.output.entries, ["five.txt (5.0 MB)"]);
  tab.close();
});

test("paths that climb above the root stay inside the workspace", async () => {
  const tab = await open("ws-traversal");
  let r = await callTool(tab, "write", { path: "../../etc/passwd", content: "root:x:0:0" });
  assert.deepEqual(r.output, { path: "../../etc/passwd", bytesWritten: 10, lines: 1 }, "the path is echoed as given");
  r = await callTool(tab, "read", { path: "/etc/passwd" });
  assert.equal(r.output.content, "1\troot:x:0:0", "it landed at /etc/passwd inside the workspace");
  r = await callTool(tab, "read", { path: "/../../../etc/./passwd" });
  assert.equal(r.output.content, "1\troot:x:0:0");
  r = await callTool(tab, "list", { path: "../.." });
  assert.deepEqual(r.output, { path: "../..", count: 1, entries: ["etc/"] });
  r = await callTool(tab, "find", { pattern: "../**/passwd" });
  assert.deepEqual(r.output.files, ["/etc/passwd"]);
  r = await callTool(tab, "delete", { path: "../../etc", recursive: true });
  assert.deepEqual(r.output, { deleted: "../../etc" });
  r = await callTool(tab, "list", { path: "/" });
  assert.deepEqual(r.output.entries, []);
  tab.close();
});

test("the workspace, inline and in R2, survives a restart", async () => {
  const tab = await open("ws-restart");
  await callTools(tab, [
    { name: "write", args: { path: "/keep/small.txt", content: "kept\ntwo" } },
    { name: "write", args: { path: "/keep/big.txt", content: "B".repeat(2 * MB) } },
  ]);
  tab.close();
  await worker.restart();
  const again = await open("ws-restart");
  const [small, big, list] = await callTools(again, [
    { name: "read", args: { path: "/keep/small.txt" } },
    { name: "grep", args: { query: "two" } },
    { name: "list", args: { path: "/keep" } },
  ]);
  assert.equal(small.output.content, "1\tkept\n2\ttwo");
  assert.deepEqual(big.output.matches, ["/keep/small.txt:2: two"]);
  assert.equal(big.output.filesSkipped, 1);
  assert.deepEqual(list.output.entries, ["big.txt (2.0 MB)", "small.txt (8 B)"]);
  const r = await callTool(again, "read", { path: "/keep/big.txt", limit: 1 });
  assert.equal(r.output.totalLines, 1);
  assert.ok(r.output.content.startsWith("1\tBBBB"));
  again.close();
});

// What the model is sent for failures, as the TypeScript Think 0.16 agent sends it through
// @ai-sdk/openai 4.0.118 (observed against the reference): error-text outputs and thrown tool
// errors both become `{"error": …}` JSON, thrown errors as `String(error)`.
test("the model sees failures as Think sends them", async () => {
  const tab = await open("ws-error-view");
  await callTool(tab, "write", { path: "/e/x.txt", content: "x" });
  const [missing, notEmpty] = await callTools(tab, [
    { name: "read", args: { path: "/nope.txt" } },
    { name: "delete", args: { path: "/e" } },
  ]);
  assert.equal(missing.seen, JSON.stringify({ error: "File not found: /nope.txt" }));
  assert.equal(notEmpty.seen, JSON.stringify({ error: "Error: ENOTEMPTY: directory not empty: /e" }));
  tab.close();
});

// The corpus's expectations are Node's own `new RegExp(pattern, flags)` (regex-corpus.test.mjs):
// the wasm build runs grep's patterns on V8's RegExp (src/regexp), so every line it reports
// is exactly a line JS matches, with none of the host translation's known differences.
test("grep matches each line of the JS regex corpus exactly as JS's RegExp does", async () => {
  const { cases } = JSON.parse(readFileSync(new URL("./regex-corpus/cases.json", import.meta.url), "utf8"));
  const tab = await open("ws-grep-corpus");
  const path = (n) => `/rc/c${n}.txt`;
  await callTools(tab, cases.map((c, n) => ({ name: "write", args: { path: path(n), content: c.inputs.join("\n") } })));
  const calls = cases.map((c, n) => ({
    name: "grep",
    args: { query: c.pattern, include: path(n), caseSensitive: !c.flags.includes("i") },
  }));
  const results = await callTools(tab, calls);
  const wrong = [];
  cases.forEach((c, n) => {
    const expected =
      c.js === "SyntaxError"
        ? { error: `Invalid regex: ${c.pattern}` }
        : c.inputs.flatMap((input, k) => (c.js[k] === null ? [] : [`${path(n)}:${k + 1}: ${input}`]));
    const got = c.js === "SyntaxError" ? results[n].output : results[n].output.matches;
    if (JSON.stringify(got) !== JSON.stringify(expected)) wrong.push(`/${c.pattern}/${c.flags}: ${JSON.stringify(got)}`);
  });
  assert.deepEqual(wrong, []);
  assert.ok(cases.some((c) => c.inputs.includes("\u212A") && c.flags === "gi"), "the corpus has KELVIN SIGN under i");
});

test("grep refuses an exponential pattern at once with a tool error, and the object keeps answering", async () => {
  // V8's RegExp has no backtracking limit: before regexp::guard, /(a+)+$/ over this line ran
  // into the 30 s CPU limit (1.9 s on 26 a's alone).
  const tab = await open("ws-redos");
  await callTool(tab, "write", { path: "/redos.txt", content: "a".repeat(5000) + "!" });
  const started = Date.now();
  const r = await callTool(tab, "grep", { query: "(a+)+$", include: "/redos.txt" });
  assert.deepEqual(r.output, {
    error:
      'grep: the pattern "(a+)+$" nests a repeat inside a repeat ("(a+)+"), which can take exponential time; ' +
      'use a single repeat such as "a+", or make what follows "a+" start with a character it cannot match',
  });
  const alt = await callTool(tab, "grep", { query: "^(a|ab)*$", include: "/redos.txt" });
  assert.match(alt.output.error, /^grep: the pattern "\^\(a\|ab\)\*\$" repeats alternatives that can start with the same character/);
  const ok = await callTool(tab, "grep", { query: "a+!$", include: "/redos.txt" });
  assert.equal(ok.output.matches.length, 1);
  assert.ok(Date.now() - started < 10_000, `${Date.now() - started} ms`);
  tab.close();
});

test("an edit that shrinks a file in R2 moves it inline; an inline file's edit writes it once", async () => {
  // The edit's one-statement `UPDATE` learns whether it matched from workerd's
  // `rowsWritten` (no `RETURNING`): on a file in R2 it matches no row and the general write
  // moves the file inline; on an inline file it matches, and nothing is written twice (the
  // version grows by one per edit).
  const tab = await open("ws-edit-r2");
  const tail = "x".repeat(2 * MB);
  await callTool(tab, "write", { path: "/shrink/f.txt", content: `keep\n${tail}` });
  assert.equal((await bucketKeys()).filter((k) => k.endsWith("/shrink/f.txt")).length, 1);
  let r = await callTool(tab, "edit", { path: "/shrink/f.txt", old_string: tail, new_string: "small" });
  assert.deepEqual(r.output, { path: "/shrink/f.txt", replaced: true, lines: 2 });
  r = await callTool(tab, "read", { path: "/shrink/f.txt" });
  assert.equal(r.output.content, "1\tkeep\n2\tsmall");
  assert.match(r.output.version, /^2:/);
  r = await callTool(tab, "edit", { path: "/shrink/f.txt", old_string: "small", new_string: "tiny" });
  assert.deepEqual(r.output, { path: "/shrink/f.txt", replaced: true, lines: 2 });
  r = await callTool(tab, "read", { path: "/shrink/f.txt" });
  assert.equal(r.output.content, "1\tkeep\n2\ttiny");
  assert.match(r.output.version, /^3:/);
  tab.close();
});

test("edit and grep answer at once on a 1 MB line (issue 10: this froze workerd)", async () => {
  const tab = await open("ws-freeze");
  await callTool(tab, "write", { path: "/r.txt", content: "a".repeat(1_000_000) + "b" });
  const started = Date.now();
  const r = await callTool(tab, "edit", { path: "/r.txt", old_string: "q".repeat(10_000), new_string: "z" });
  assert.deepEqual(r.output, {
    error: "old_string not found in file. Make sure it matches exactly, including whitespace and indentation. Read the file first to verify.",
  });
  const g = await callTool(tab, "grep", { query: "b$", include: "/r.txt" });
  assert.deepEqual(g.output.matches, [`/r.txt:1: [… 999501 characters cut] ${"a".repeat(499)}b`]);
  assert.ok(Date.now() - started < 20_000, `${Date.now() - started} ms`);
  tab.close();
});

// The tools' model-facing definitions against Think's own: the goldens are made at test time
// from the pinned @cloudflare/think package (its tool factories, through the same
// `asSchema(...).jsonSchema` the AI SDK sends), and compared with what the built Worker offers
// the scripted model in the request body's `tools`. A drift on either side fails.
/** Think's factories, in createWorkspaceTools's order. */
const FACTORIES = {
  read: think.createReadTool,
  write: think.createWriteTool,
  edit: think.createEditTool,
  list: think.createListTool,
  find: think.createFindTool,
  grep: think.createGrepTool,
  delete: think.createDeleteTool,
  bash: think.createBashTool,
};

/**
 * The documented additions to Think's schemas (README, "Versioned writes"): optional
 * properties appended after Think's own, never required. `withoutAdditions` checks that and
 * removes them, so everything else is still compared byte for byte.
 */
const ADDITIONS = { write: ["expectedVersion"], edit: ["expectedVersion"] };

function withoutAdditions(name, fn) {
  const added = ADDITIONS[name] ?? [];
  if (added.length === 0) return fn;
  const props = Object.keys(fn.parameters.properties);
  assert.deepEqual(props.slice(-added.length), added, `${name}: additions come last`);
  for (const key of added) {
    assert.ok(!fn.parameters.required.includes(key), `${name}.${key} is optional`);
    assert.equal(fn.parameters.properties[key].type, "string", `${name}.${key}`);
  }
  const properties = Object.fromEntries(
    Object.entries(fn.parameters.properties).filter(([k]) => !added.includes(k)),
  );
  return { ...fn, parameters: { ...fn.parameters, properties } };
}

/** Think's definition of one tool, as an OpenAI-style function (without `$schema`). */
async function thinkDefinition(name) {
  const tool = FACTORIES[name]({ ops: {} });
  const { $schema, ...parameters } = await asSchema(tool.inputSchema).jsonSchema;
  assert.equal($schema, "http://json-schema.org/draft-07/schema#");
  return { name, description: tool.description, parameters };
}

test("the workspace tools the model is offered are Think's, byte for byte", async () => {
  const tab = await open("ws-schemas");
  const first = model.requests.length;
  model.push({ text: "ok" });
  const { id } = tab.chat("hello");
  await tab.turn(id, { timeout: 60000 });
  const offered = model.requests[first].tools.map((t) => {
    assert.equal(t.type, "function");
    return t.function;
  });
  const names = offered.map((f) => f.name);
  assert.deepEqual(names.slice(0, 7), ["read", "write", "edit", "list", "find", "grep", "delete"]);
  for (const name of Object.keys(FACTORIES)) {
    const ours = offered.find((f) => f.name === name);
    if (name === "bash" && !ours) continue; // only with a bash engine (THINK_BASH)
    assert.ok(ours, `${name} is offered`);
    const expected = await thinkDefinition(name);
    const { strict, ...rest } = ours;
    assert.ok(strict === undefined || strict === false, `${name}: strict ${strict}`);
    assert.equal(JSON.stringify(withoutAdditions(name, rest)), JSON.stringify(expected), name);
  }
  assert.ok(names.includes("bash"), "the default Worker offers bash too");
});
