// `npm test`'s layer check: no cycle among the top-level modules of any crate of the
// workspace. It reads each crate's `src/<module>/` (and `src/<module>.rs`) and counts a
// module as using another when its non-test code names `crate::<other>` (in a path or a
// `use crate::{…}` group). Comments and `#[cfg(test)]` modules are skipped: a doc link or a
// test may reach anywhere. Cargo itself refuses cycles between crates.
// It also fails on a non-test Rust file over MAX_LINES lines: a file that long mixes concerns.
// Usage: node scripts/check-layers.mjs [crate-dir ...]; with no argument, every crate under
// crates/. Exits 1 and prints each cycle with the lines that close it, and each long file.
import { readdirSync, readFileSync, statSync, existsSync } from "node:fs";
import { join, relative } from "node:path";

/** Rust source with comments, strings' contents and `#[cfg(test)]` items removed. */
export function stripRust(src) {
  let out = "";
  for (let i = 0; i < src.length; ) {
    if (src.startsWith("//", i)) {
      const end = src.indexOf("\n", i);
      i = end < 0 ? src.length : end;
    } else if (src.startsWith("/*", i)) {
      const end = src.indexOf("*/", i + 2);
      const skipped = src.slice(i, end < 0 ? src.length : end + 2);
      out += skipped.replace(/[^\n]/g, "");
      i += skipped.length;
    } else if (src[i] === '"') {
      let j = i + 1;
      while (j < src.length && src[j] !== '"') j += src[j] === "\\" ? 2 : 1;
      out += src.slice(i + 1, j).replace(/[^\n]/g, "") + '""';
      i = j + 1;
    } else {
      out += src[i++];
    }
  }
  return out;
}

function stripTestModules(src) {
  const stripped = stripRust(src);
  // Remove bodies of `#[cfg(test)] mod x { … }` by brace matching on the stripped text.
  let out = "";
  const re = /#\[cfg\((?:all\()?test\b[^\]]*\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*(;|\{)/g;
  let last = 0;
  let m;
  while ((m = re.exec(stripped))) {
    out += stripped.slice(last, m.index);
    let j = m.index + m[0].length;
    if (m[1] === "{") {
      let depth = 1;
      while (j < stripped.length && depth > 0) {
        if (stripped[j] === "{") depth++;
        else if (stripped[j] === "}") depth--;
        j++;
      }
    }
    last = j;
    re.lastIndex = j;
  }
  return out + stripped.slice(last);
}

/** The longest a non-test Rust source file may be. */
export const MAX_LINES = 1200;

/** Whether `file` holds only tests (`tests.rs`, `*_tests.rs`). */
const isTestFile = (file) => /(^|\/)(tests|[a-z_]+_tests)\.rs$/.test(file);

function rustFiles(path) {
  if (statSync(path).isFile()) return path.endsWith(".rs") ? [path] : [];
  return readdirSync(path).flatMap((name) => rustFiles(join(path, name)));
}

/** The module graph of one crate: module → Map(other → [file:line, …]). */
export function moduleGraph(crateDir) {
  const src = join(crateDir, "src");
  const modules = new Map();
  for (const name of readdirSync(src)) {
    const full = join(src, name);
    if (statSync(full).isDirectory()) modules.set(name, rustFiles(full));
    else if (name.endsWith(".rs") && name !== "lib.rs" && name !== "main.rs") {
      const mod = name.slice(0, -3);
      const dir = join(src, mod);
      modules.set(mod, [full, ...(existsSync(dir) ? rustFiles(dir) : [])]);
    }
  }
  const graph = new Map();
  for (const [mod, files] of modules) {
    const edges = new Map();
    for (const file of files) {
      if (isTestFile(file)) continue;
      const code = stripTestModules(readFileSync(file, "utf8"));
      // `crate::x` in a path, and each `x::` of a `crate::{…}` group (which may span lines).
      for (const m of code.matchAll(/\bcrate::(?:(\w+)|\{([\s\S]*?)\};)/g)) {
        const used = m[1] ? [m[1]] : [...m[2].matchAll(/(?:^|[\s,{])(\w+)::/g)].map((p) => p[1]);
        const line = code.slice(0, m.index).split("\n").length;
        for (const other of new Set(used)) {
          if (other === mod || !modules.has(other)) continue;
          if (!edges.has(other)) edges.set(other, []);
          edges.get(other).push(`${relative(crateDir, file)}:${line}`);
        }
      }
    }
    graph.set(mod, edges);
  }
  return graph;
}

/** Strongly connected components with more than one module (Tarjan). */
export function cycles(graph) {
  let index = 0;
  const idx = new Map(), low = new Map(), stack = [], on = new Set(), out = [];
  const visit = (v) => {
    idx.set(v, index); low.set(v, index); index++;
    stack.push(v); on.add(v);
    for (const w of graph.get(v)?.keys() ?? []) {
      if (!idx.has(w)) { visit(w); low.set(v, Math.min(low.get(v), low.get(w))); }
      else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const comp = [];
      let w;
      do { w = stack.pop(); on.delete(w); comp.push(w); } while (w !== v);
      if (comp.length > 1) out.push(comp.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = new URL("..", import.meta.url).pathname;
  let crates = process.argv.slice(2);
  if (crates.length === 0) {
    const dir = join(root, "crates");
    crates = existsSync(dir)
      ? readdirSync(dir).map((c) => join(dir, c)).filter((c) => existsSync(join(c, "src")))
      : [root];
  }
  let failed = false;
  for (const crate of crates) {
    for (const file of rustFiles(join(crate, "src"))) {
      if (isTestFile(file)) continue;
      const lines = readFileSync(file, "utf8").split("\n").length - 1;
      if (lines > MAX_LINES) {
        failed = true;
        console.error(`layers: ${relative(root, file)} has ${lines} lines, over ${MAX_LINES}: split it by concern`);
      }
    }
    const graph = moduleGraph(crate);
    for (const comp of cycles(graph)) {
      failed = true;
      console.error(`layers: a cycle in ${relative(root, crate) || "."}: ${comp.join(", ")}`);
      for (const a of comp) {
        for (const [b, where] of graph.get(a)) {
          if (comp.includes(b)) console.error(`  ${a} -> ${b}: ${where.slice(0, 3).join(", ")}`);
        }
      }
    }
  }
  if (failed) process.exit(1);
  console.log(`layers: no module cycle in ${crates.length} crate(s), no source file over ${MAX_LINES} lines`);
}
