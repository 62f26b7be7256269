#!/usr/bin/env node
// Rough cost of one bash tool call in just-bash: mount N files of ~1 KB (Think's default
// limit is 1,000), run a script over them, and collect the final filesystem, all through
// crates/think-worker/js/bash/bridge.mjs. Prints the median wall time per script over several runs (the `true`
// script is the fixed cost: mount plus collecting the final filesystem).
//
// Usage: JUST_BASH=/path/to/node_modules/just-bash node tests/bash-corpus/bench.mjs [files] [runs]
//   (JUST_BASH and JUST_BASH_BUILD: see load-bridge.mjs)
import { EXCLUDED_ROOTS, entry, runBash } from "./load-bridge.mjs";

const count = Number(process.argv[2] ?? 1000);
const runs = Number(process.argv[3] ?? 7);
const line = "the quick brown fox jumps over the lazy dog 0123456789\n"; // 55 bytes
const body = new TextEncoder().encode(line.repeat(19)); // 1,045 bytes, 19 lines
const files = [];
const dirs = ["/"];
for (let i = 0; i < count; i++) {
  const dir = `/d${String(Math.floor(i / 100)).padStart(2, "0")}`;
  if (!dirs.includes(dir)) dirs.push(dir);
  files.push([`${dir}/f${String(i).padStart(4, "0")}.txt`, body]);
}

const scripts = {
  "true": "true",
  "wc -l (find | xargs)": "find . -name '*.txt' | xargs wc -l | tail -1",
  "wc -l (glob)": "wc -l d*/*.txt | tail -1",
  "cat | wc -l": "cat d*/*.txt | wc -l",
  "sed -i on every file": "for f in d*/*.txt; do sed -i 's/fox/cat/' \"$f\"; done; echo ok",
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`${count} files × ${body.length} B in ${dirs.length - 1} dirs, ${runs} runs each, just-bash ${entry}`);
for (const [name, script] of Object.entries(scripts)) {
  const totals = [];
  let last;
  for (let r = 0; r < runs; r++) {
    const t0 = performance.now();
    last = await runBash({
      files, dirs, script, cwd: "/", timeoutMs: 30_000, network: false,
      excludeRoots: EXCLUDED_ROOTS,
    });
    totals.push(performance.now() - t0);
  }
  const changed = last.entries.filter(([, kind, bytes]) => kind === "file" && bytes !== null).length;
  console.log(
    `${name.padEnd(22)} median ${median(totals).toFixed(1).padStart(7)} ms  (first ${totals[0].toFixed(1)} ms)` +
      `  exit ${last.exitCode}  stdout ${JSON.stringify(last.stdout.trim().slice(0, 40))}  changed files ${changed}`,
  );
}
