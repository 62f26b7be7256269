// The bash corpus: every script in tests/bash-corpus/scripts runs twice over the fixture tree
// in fixture.json: once in just-bash through crates/think-worker/js/bash/bridge.mjs (fixture mounted at /, cwd /),
// once in /bin/bash (fixture written to a temp dir, cwd there). Scripts use relative paths, so
// both sides see the same tree. Results compare stdout and exit code (and, separately, the
// final files) and name the known cause of each mismatch.
// Used by compare.mjs (report) and tests/bash-corpus.test.mjs (regression test).
// Real bash runs with env -i PATH=/usr/bin:/bin LC_ALL=C.UTF-8 TZ=UTC HOME=<tree>.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { EXCLUDED_ROOTS, runBash } from "./load-bridge.mjs";

export { build, version } from "./load-bridge.mjs";

const here = dirname(fileURLToPath(import.meta.url));

const fixture = JSON.parse(readFileSync(join(here, "fixture.json"), "utf8"));
const fixtureFiles = new Map();
for (const [p, text] of Object.entries(fixture.files)) fixtureFiles.set("/" + p, new TextEncoder().encode(text));
for (const [p, b64] of Object.entries(fixture.binary)) fixtureFiles.set("/" + p, new Uint8Array(Buffer.from(b64, "base64")));
const fixtureDirs = new Set(fixture.dirs.map((d) => "/" + d));
for (const p of [...fixtureFiles.keys(), ...fixtureDirs]) {
  for (let d = dirname(p); d !== "/"; d = dirname(d)) fixtureDirs.add(d);
}

function runJustBash(script) {
  return runBash({
    files: [...fixtureFiles],
    dirs: [...fixtureDirs].sort(),
    script,
    cwd: "/",
    timeoutMs: 10_000,
    network: false,
    excludeRoots: EXCLUDED_ROOTS,
  }).then((r) => {
    const tree = new Map();
    for (const [path, kind, bytes] of r.entries) {
      tree.set(path, kind === "dir" ? "dir" : Buffer.from(bytes ?? fixtureFiles.get(path)).toString("base64"));
    }
    return { stdout: r.error ? "" : r.stdout, stderr: r.error ?? r.stderr, exitCode: r.error ? 1 : r.exitCode, tree };
  });
}

function runRealBash(script) {
  const root = mkdtempSync(join(tmpdir(), "bash-corpus-"));
  const tree = join(root, "tree");
  mkdirSync(tree);
  for (const d of fixtureDirs) mkdirSync(join(tree, d), { recursive: true });
  for (const [p, bytes] of fixtureFiles) writeFileSync(join(tree, p), bytes);
  const scriptFile = join(root, "script.sh");
  writeFileSync(scriptFile, script);
  const r = spawnSync("/bin/bash", [scriptFile], {
    cwd: tree,
    env: { PATH: "/usr/bin:/bin", LC_ALL: "C.UTF-8", TZ: "UTC", HOME: tree },
    timeout: 10_000,
    encoding: "utf8",
  });
  const result = { stdout: r.stdout, stderr: r.stderr, exitCode: r.status ?? 124, tree: walk(tree) };
  rmSync(root, { recursive: true, force: true });
  return result;
}

function walk(base) {
  const tree = new Map();
  const visit = (dir) => {
    for (const name of readdirSync(dir)) {
      const full = join(dir, name);
      const path = "/" + relative(base, full);
      if (statSync(full).isDirectory()) {
        tree.set(path, "dir");
        visit(full);
      } else {
        tree.set(path, readFileSync(full).toString("base64"));
      }
    }
  };
  visit(base);
  return tree;
}

function treeDiff(a, b) {
  const out = [];
  for (const [p, v] of a) if (!b.has(p)) out.push(`only in just-bash: ${p}`);
  else if (b.get(p) !== v) out.push(`differs: ${p}`);
  for (const p of b.keys()) if (!a.has(p)) out.push(`only in bash: ${p}`);
  return out.sort();
}

// Known just-bash differences. Each generic rule recognises its cause from the two results;
// a script can also name its known cause on a `# known: <reason>` line.
const uniqPad = (s) => s.replace(/^ *(\d+) /gm, "$1 ");
const KNOWN = [
  {
    reason: () => "uniq -c pads counts to width 4 (GNU: 7)",
    test: (jb, gnu) => jb.exitCode === gnu.exitCode && uniqPad(jb.stdout) === uniqPad(gnu.stdout),
  },
  {
    reason: () => "a syntax error stops the whole script before it runs (bash runs the lines before it)",
    test: (jb, gnu) => jb.stdout === "" && jb.exitCode === 2 && /syntax error|unexpected/i.test(jb.stderr) && gnu.stdout !== "",
  },
  {
    reason: (jb) => `command not in just-bash: ${jb.stderr.match(/: ([\w.-]+): command not found/)[1]}`,
    test: (jb, gnu) => /: [\w.-]+: command not found/.test(jb.stderr) && !/command not found/.test(gnu.stderr),
  },
  {
    reason: (jb) => `unsupported option: ${jb.stderr.match(/^.*(?:invalid|unrecognized|unknown) option.*$/m)[0]}`,
    test: (jb, gnu) => /(?:invalid|unrecognized|unknown) option/.test(jb.stderr) && !/option/.test(gnu.stderr),
  },
];

function firstDifference(a, b) {
  const al = a.split("\n");
  const bl = b.split("\n");
  for (let i = 0; i < Math.max(al.length, bl.length); i++) {
    if (al[i] !== bl[i]) return `line ${i + 1}: just-bash ${JSON.stringify(al[i] ?? null)} vs bash ${JSON.stringify(bl[i] ?? null)}`;
  }
  return "";
}

/** GNU bash's version line. */
export const gnuVersion = () => spawnSync("/bin/bash", ["--version"], { encoding: "utf8" }).stdout.split("\n")[0];

/**
 * Runs every corpus script (whose name contains `filter`, if given) on both sides. Each
 * result: `{file, title, match, reason, fsMatch, fsDiff, fsKnown, jb, gnu}`; `reason` starts
 * with "known:" for a documented difference.
 */
export async function runCorpus(filter) {
  const scripts = readdirSync(join(here, "scripts"))
    .filter((f) => f.endsWith(".sh") && (!filter || f.includes(filter)))
    .sort();
  const results = [];
  for (const file of scripts) {
    const script = readFileSync(join(here, "scripts", file), "utf8");
    const title = script.split("\n")[0].replace(/^#\s*/, "");
    const jb = await runJustBash(script);
    const gnu = runRealBash(script);
    const match = jb.stdout === gnu.stdout && jb.exitCode === gnu.exitCode;
    const fsDiff = treeDiff(jb.tree, gnu.tree);
    let reason = null;
    const annotated = script.match(/^# known: (.*)$/m)?.[1];
    if (!match) {
      const known = KNOWN.find((k) => k.test(jb, gnu));
      reason = annotated
        ? `known: ${annotated}`
        : known
          ? `known: ${known.reason(jb, gnu)}`
          : jb.exitCode !== gnu.exitCode && jb.stdout === gnu.stdout
          ? `exit code ${jb.exitCode} vs ${gnu.exitCode}`
          : `stdout ${firstDifference(jb.stdout, gnu.stdout)}` + (jb.exitCode !== gnu.exitCode ? `; exit ${jb.exitCode} vs ${gnu.exitCode}` : "");
    }
    if (match && annotated) reason = `annotated "${annotated}" but now matches`;
    const fsKnown = script.match(/^# known-files: (.*)$/m)?.[1] ?? null;
    results.push({ file, title, match, reason, fsMatch: fsDiff.length === 0, fsDiff, fsKnown, jb: { ...jb, tree: undefined }, gnu: { ...gnu, tree: undefined } });
  }
  return results;
}
