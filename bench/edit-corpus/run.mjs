// Runs Think 0.16's own `edit` tool over tests/edit-corpus/cases.json and prints its
// success rate, for comparison with the Rust edit tool (`cargo test --lib edit_corpus`).
//
// Think 0.16.0 is a pinned devDependency (installed by `npm run bench`'s setup); THINK_DIR
// may point at another installation.
import { readFile } from "node:fs/promises";
import { join, dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const thinkDir = process.env.THINK_DIR ?? join(here, "../..");
const casesPath = process.argv[2] ?? join(here, "../../tests/edit-corpus/cases.json");

// The package's `./tools/workspace` export, loaded by file path so THINK_DIR can point
// anywhere.
const toolsUrl = pathToFileURL(join(thinkDir, "node_modules/@cloudflare/think/dist/tools/workspace.js"));
const { createEditTool } = await import(toolsUrl.href);
const pkg = JSON.parse(await readFile(join(thinkDir, "node_modules/@cloudflare/think/package.json"), "utf8"));

/** The error kind an edit error message names (same rule as the Rust test). */
function errorKind(msg) {
  if (msg.includes("times in the file") || msg.includes("multiple locations")) return "ambiguous";
  if (msg.startsWith("old_string not found")) return "not_found";
  if (msg.startsWith("File already exists")) return "exists";
  if (msg.startsWith("File not found")) return "file_not_found";
  return "other";
}

const { cases } = JSON.parse(await readFile(casesPath, "utf8"));
const byCategory = new Map();
const failures = [];
for (const c of cases) {
  const files = new Map();
  if (c.file !== null) files.set(c.path, c.file);
  const ops = {
    readFile: async (p) => (files.has(p) ? files.get(p) : null),
    writeFile: async (p, content) => void files.set(p, content),
  };
  const tool = createEditTool({ ops });
  let out;
  try {
    out = await tool.execute(
      { path: c.path, old_string: c.old_string, new_string: c.new_string },
      { toolCallId: c.id, messages: [] },
    );
  } catch (e) {
    out = { thrown: String(e?.message ?? e) };
  }
  const now = files.has(c.path) ? files.get(c.path) : null;
  let passed;
  if (c.expected !== undefined) {
    passed = !out.error && !out.thrown && now === c.expected;
  } else {
    passed = typeof out.error === "string" && errorKind(out.error) === c.expected_error && now === c.file;
  }
  const entry = byCategory.get(c.category) ?? [0, 0];
  entry[1]++;
  if (passed) entry[0]++;
  else failures.push(`${c.id}: ${JSON.stringify(out)} -> ${JSON.stringify(now)}`);
  byCategory.set(c.category, entry);
}

const passed = cases.length - failures.length;
console.log(`Think ${pkg.version} edit tool: ${passed}/${cases.length} passed (${((100 * passed) / cases.length).toFixed(1)}%)`);
for (const [cat, [p, n]] of [...byCategory].sort()) console.log(`  ${cat.padEnd(20)} ${p}/${n}`);
if (process.env.VERBOSE) for (const f of failures) console.log(`  FAIL ${f}`);
