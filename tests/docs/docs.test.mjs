// Keeps the documentation true (issue 40). `npm test` runs this file before the build
// (scripts/test.sh); alone: `node --test tests/docs/`. It needs no build and no network.
// - every THINK_* setting the code reads is in docs/configuration.md;
// - every RPC method of an agent class (crates/think-worker/js/agent.mjs) is in docs/rpc.md and in
//   types/think-rs.d.ts, and the declarations name no method the class lacks;
// - the caller Worker example and the declarations type-check (tsc --noEmit), and
//   docs/rpc.md shows the example as it is;
// - every fenced code block of the docs has a language and parses: JS with `node --check`,
//   TS with tsc, JSON, TOML (smol-toml), shell with `bash -n`; a page with Rust blocks must be
//   included in a lib.rs as doc-tests (`cargo test` compiles them);
// - relative links and their anchors resolve; no line outside code blocks is over 400
//   characters; the README is at most 12 KB.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parse as parseToml } from "smol-toml";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const read = (p) => fs.readFileSync(path.join(ROOT, p), "utf8");
const exists = (p) => fs.existsSync(path.join(ROOT, p));
const TSC = path.join(ROOT, "node_modules/.bin/tsc");
const WORK = path.join(ROOT, "test-output/docs-check");

/** Files under `dir` (relative to the root) whose name passes `keep`, recursively. */
function walk(dir, keep, out = []) {
  const abs = path.join(ROOT, dir);
  if (!fs.existsSync(abs)) return out;
  for (const entry of fs.readdirSync(abs, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== "node_modules" && entry.name !== "target" && entry.name !== "build") walk(p, keep, out);
    } else if (keep(entry.name)) out.push(p);
  }
  return out;
}

/** The documentation pages: the README, the top-level guides, docs/ and the examples' READMEs. */
function pages() {
  const top = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md", "CONTRIBUTING.md"].filter(exists);
  const docs = walk("docs", (n) => n.endsWith(".md"));
  const examples = walk("examples", (n) => n === "README.md");
  return [...top, ...docs, ...examples];
}

/** The fenced code blocks of a Markdown text: `{lang, code, line}`; prose lines beside them. */
function parseMarkdown(text) {
  const blocks = [];
  const prose = [];
  const lines = text.split("\n");
  let open = null;
  lines.forEach((line, i) => {
    if (open) {
      const close = line.match(/^(\s*)(`{3,}|~{3,})\s*$/);
      if (close && close[2][0] === open.fence[0] && close[2].length >= open.fence.length) {
        blocks.push({ lang: open.lang, code: open.body.join("\n") + "\n", line: open.line });
        open = null;
      } else {
        open.body.push(line.startsWith(open.indent) ? line.slice(open.indent.length) : line.trimStart());
      }
      return;
    }
    const start = line.match(/^(\s*)(`{3,}|~{3,})\s*([^`\s]*)/);
    if (start) {
      open = { indent: start[1], fence: start[2], lang: start[3].split(",")[0].toLowerCase(), body: [], line: i + 1 };
    } else {
      prose.push({ text: line, line: i + 1 });
    }
  });
  if (open) blocks.push({ lang: open.lang, code: open.body.join("\n"), line: open.line, unclosed: true });
  return { blocks, prose };
}

/** GitHub's anchor for a heading text. */
function slug(heading) {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/`/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** Every anchor a Markdown page offers (headings, with GitHub's -1, -2 for repeats). */
function anchors(text) {
  const seen = new Map();
  const out = new Set();
  for (const { text: line } of parseMarkdown(text).prose) {
    const m = line.match(/^#{1,6}\s+(.*?)\s*#*\s*$/);
    if (!m) continue;
    const base = slug(m[1]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

function runTsc(project) {
  const r = spawnSync(TSC, ["-p", project], { cwd: ROOT, encoding: "utf8" });
  return r.status === 0 ? null : `${r.stdout}${r.stderr}`.trim();
}

test("every THINK_* setting the code reads is in docs/configuration.md", () => {
  const sources = ["src", "crates", "js", "scripts", "examples", "web/src"].flatMap((d) =>
    walk(d, (n) => /\.(rs|mjs|js|ts|jsx|tsx|sh)$/.test(n)),
  );
  assert.ok(sources.length > 50, `found only ${sources.length} source files`);
  const names = new Map();
  for (const file of sources) {
    for (const [name] of read(file).matchAll(/\bTHINK_[A-Z0-9_]*[A-Z0-9]\b/g)) {
      if (!names.has(name)) names.set(name, file);
    }
  }
  const page = read("docs/configuration.md");
  const documented = new Set([...page.matchAll(/`(THINK_[A-Z0-9_]+)`/g)].map((m) => m[1]));
  const missing = [...names].filter(([name]) => !documented.has(name)).map(([n, f]) => `${n} (read in ${f})`);
  assert.deepEqual(missing, [], "settings the code reads but docs/configuration.md does not name");
});

test("npm start forwards every setting docs/configuration.md says the Worker, the entry or the shim reads", () => {
  const rows = [...read("docs/configuration.md").matchAll(/^\| `(THINK_[A-Z0-9_]+)` \|[^|]*\| ([^|]+?) \|/gm)];
  const readBy = new Map(rows.map((m) => [m[1], m[2]]));
  assert.ok(readBy.size > 40, `found only ${readBy.size} rows in the settings table`);
  const start = read("scripts/start.sh");
  const forwarded = new Set(start.match(/for name in ([A-Z0-9_ ]+); do/)[1].split(" "));
  // start-browser.sh sets THINK_BROWSER_BINDING itself (the binding reaches no Browser Run there).
  const setByScript = new Set(["THINK_BROWSER_BINDING"]);
  const missing = [...readBy]
    .filter(([name, by]) => /^(Worker|entry|shim)\b/.test(by) && !forwarded.has(name) && !setByScript.has(name))
    .map(([name]) => name);
  assert.deepEqual(missing, [], "settings the agent reads that npm start does not pass on from its environment");
});

/** Where every agent class gets its RPC methods (`agentClass`). */
const AGENT_JS = "crates/think-worker/js/agent.mjs";

/** The RPC methods of the agent class: its methods but the Durable Object handlers. */
function entryMethods() {
  const entry = read(AGENT_JS);
  const body = entry.slice(entry.indexOf("return class extends DurableObject"));
  const handlers = new Set(["constructor", "fetch", "webSocketMessage", "webSocketClose", "webSocketError", "alarm"]);
  const methods = [...body.matchAll(/^ {4}([a-zA-Z]\w*)\(/gm)].map((m) => m[1]).filter((m) => !handlers.has(m));
  assert.ok(methods.length > 30, `found only ${methods.length} methods in ${AGENT_JS}`);
  return methods;
}

test("every RPC method of ThinkAgent is in docs/rpc.md and types/think-rs.d.ts, and no other", () => {
  const methods = entryMethods();
  const doc = read("docs/rpc.md");
  const missingDoc = methods.filter((m) => !new RegExp("`" + m + "\\(").test(doc));
  assert.deepEqual(missingDoc, [], `methods of ${AGENT_JS} that docs/rpc.md does not describe as \`name(\``);
  const dts = read("types/think-rs.d.ts");
  const cls = dts.slice(dts.indexOf("export class ThinkAgent"), dts.indexOf("\n  }\n", dts.indexOf("export class ThinkAgent")));
  const declared = [...cls.matchAll(/^ {4}([a-zA-Z]\w*)\(/gm)].map((m) => m[1]);
  assert.deepEqual(
    methods.filter((m) => !declared.includes(m)),
    [],
    `methods of ${AGENT_JS} that types/think-rs.d.ts does not declare`,
  );
  assert.deepEqual(
    declared.filter((m) => !methods.includes(m)),
    [],
    `methods types/think-rs.d.ts declares that ${AGENT_JS} does not have`,
  );
});

test("the caller Worker example type-checks against the declarations, and docs/rpc.md shows it", () => {
  const failed = runTsc("examples/caller-worker/tsconfig.json");
  assert.equal(failed, null, `tsc --noEmit -p examples/caller-worker:\n${failed}`);
  const doc = read("docs/rpc.md");
  for (const file of ["examples/caller-worker/wrangler.toml", "examples/caller-worker/src/index.ts"]) {
    assert.ok(doc.includes(read(file)), `docs/rpc.md does not show ${file} as it is`);
  }
  const toml = parseToml(read("examples/caller-worker/wrangler.toml"));
  const agent = parseToml(read("wrangler.toml"));
  const binding = toml.durable_objects.bindings[0];
  assert.equal(binding.script_name, agent.name, "the caller binds the agent's Worker by its name");
  assert.ok(
    agent.durable_objects.bindings.some((b) => b.class_name === binding.class_name),
    `the agent's wrangler.toml has no Durable Object class ${binding.class_name}`,
  );
});

test("every code block of the docs has a language and parses", () => {
  fs.rmSync(WORK, { recursive: true, force: true });
  fs.mkdirSync(WORK, { recursive: true });
  const failures = [];
  const ts = { ts: [], tsx: [] };
  let n = 0;
  for (const page of pages()) {
    for (const block of parseMarkdown(read(page)).blocks) {
      const where = `${page}:${block.line}`;
      const file = path.join(WORK, `block${n++}`);
      if (block.unclosed) failures.push(`${where}: the code block is not closed`);
      switch (block.lang) {
        case "js":
        case "javascript":
        case "mjs": {
          fs.writeFileSync(`${file}.mjs`, block.code);
          const r = spawnSync(process.execPath, ["--check", `${file}.mjs`], { encoding: "utf8" });
          if (r.status !== 0) failures.push(`${where}: node --check: ${r.stderr.trim()}`);
          break;
        }
        case "ts":
        case "typescript":
        case "tsx": {
          const kind = block.lang === "tsx" ? "tsx" : "ts";
          const name = `${path.basename(file)}.${kind}`;
          fs.writeFileSync(path.join(WORK, name), /\b(import|export)\b/.test(block.code) ? block.code : `${block.code}\nexport {};\n`);
          ts[kind].push({ name, where });
          break;
        }
        case "json":
          try {
            JSON.parse(block.code);
          } catch (e) {
            failures.push(`${where}: JSON: ${e.message}`);
          }
          break;
        case "toml":
          try {
            parseToml(block.code);
          } catch (e) {
            failures.push(`${where}: TOML: ${e.message.split("\n")[0]}`);
          }
          break;
        case "sh":
        case "bash":
        case "shell": {
          fs.writeFileSync(`${file}.sh`, block.code);
          const r = spawnSync("bash", ["-n", `${file}.sh`], { encoding: "utf8" });
          if (r.status !== 0) failures.push(`${where}: bash -n: ${r.stderr.trim()}`);
          break;
        }
        case "rust":
          // Compiled by `cargo test` as doc-tests (checked below: the page is included).
          break;
        case "text":
        case "markdown":
          break;
        default:
          failures.push(`${where}: a code block needs a checked language (js, ts, tsx, json, toml, sh, rust) or text/markdown, not "${block.lang}"`);
      }
    }
  }
  // Worker code (`ts`) against the Workers types; browser code (`tsx`) against the DOM and React.
  const base = { target: "es2022", module: "esnext", moduleResolution: "bundler", strict: true, noEmit: true, skipLibCheck: true };
  const projects = {
    ts: { ...base, lib: ["es2022"], types: ["@cloudflare/workers-types"] },
    // JSX is left as it is and untyped (no @types/react here); the hooks' options and results
    // are checked against the pinned `agents` package's declarations.
    tsx: { ...base, lib: ["es2022", "dom", "dom.iterable"], types: [], jsx: "preserve", noImplicitAny: false },
  };
  for (const [kind, files] of Object.entries(ts)) {
    if (files.length === 0) continue;
    const config = path.join(WORK, `tsconfig.${kind}.json`);
    const list = files.map((f) => f.name);
    if (kind === "ts") list.push(path.relative(WORK, path.join(ROOT, "types/think-rs.d.ts")));
    fs.writeFileSync(config, JSON.stringify({ compilerOptions: projects[kind], files: list }));
    const out = runTsc(config);
    if (out) {
      // Name each error by the page and line of its block.
      const byName = new Map(files.map((f) => [f.name, f.where]));
      failures.push(out.replace(/^(?:\S*\/)?(block\d+\.tsx?)\((\d+),\d+\)/gm, (_, f, l) => `${byName.get(f) ?? f} (+${Number(l) - 1} lines)`));
    }
  }
  assert.deepEqual(failures, []);
});

test("every page with a Rust block is compiled as doc-tests (an include_str! in a lib.rs)", () => {
  const included = new Set();
  const libs = ["src/lib.rs", ...walk("crates", (n) => n === "lib.rs")].filter(exists);
  for (const lib of libs) {
    for (const [, target] of read(lib).matchAll(/include_str!\("([^"]+\.md)"\)/g)) {
      included.add(path.normalize(path.join(path.dirname(lib), target)));
    }
  }
  const withRust = pages().filter((page) => parseMarkdown(read(page)).blocks.some((b) => b.lang === "rust"));
  assert.deepEqual(
    withRust.filter((page) => !included.has(page)),
    [],
    `pages with Rust blocks that no lib.rs includes under cfg(doctest) (included: ${[...included].join(", ")})`,
  );
});

test("relative links and their anchors resolve", () => {
  const failures = [];
  const anchorCache = new Map();
  const anchorsOf = (file) => {
    if (!anchorCache.has(file)) anchorCache.set(file, anchors(read(file)));
    return anchorCache.get(file);
  };
  for (const page of pages()) {
    for (const { text, line } of parseMarkdown(read(page)).prose) {
      const code = text.replace(/`[^`]*`/g, "");
      for (const [, target] of code.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        if (/^[a-z]+:/i.test(target)) continue;
        const [file, anchor] = target.split("#");
        const resolved = file ? path.normalize(path.join(path.dirname(page), decodeURIComponent(file))) : page;
        if (!exists(resolved)) {
          failures.push(`${page}:${line}: ${target}: ${resolved} does not exist`);
          continue;
        }
        if (anchor && resolved.endsWith(".md") && !anchorsOf(resolved).has(anchor)) {
          failures.push(`${page}:${line}: ${target}: ${resolved} has no heading #${anchor}`);
        }
      }
    }
  }
  assert.deepEqual(failures, []);
});

test("no line outside code blocks is over 400 characters, and the README is at most 12 KB", () => {
  const failures = [];
  for (const page of pages()) {
    for (const { text, line } of parseMarkdown(read(page)).prose) {
      if (text.length > 400) failures.push(`${page}:${line}: ${text.length} characters`);
    }
  }
  assert.deepEqual(failures, []);
  const size = fs.statSync(path.join(ROOT, "README.md")).size;
  assert.ok(size <= 12 * 1024, `README.md is ${size} bytes, over 12 KB`);
});

test("the Markdown reading the checks rely on finds blocks, prose and anchors", () => {
  const { blocks, prose } = parseMarkdown("a\n```js\nlet x = ;\n```\n  ```toml\n  a = 1\n  ```\nb [l](x.md#y)\n");
  assert.deepEqual(
    blocks.map((b) => [b.lang, b.code]),
    [
      ["js", "let x = ;\n"],
      ["toml", "a = 1\n"],
    ],
  );
  assert.deepEqual(
    prose.map((p) => p.text),
    ["a", "b [l](x.md#y)", ""],
  );
  assert.equal(slug("Code Mode: the `execute` tool"), "code-mode-the-execute-tool");
  assert.equal(slug("Workers AI, R2 & the [AI](x) binding"), "workers-ai-r2--the-ai-binding");
  assert.deepEqual([...anchors("# A\n## A\n```text\n# not a heading\n```\n")], ["a", "a-1"]);
});
