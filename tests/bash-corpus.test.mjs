// The bash corpus as a regression test: just-bash (the bundled browser build, through
// crates/think-worker/js/bash/bridge.mjs) against GNU bash over tests/bash-corpus/scripts. The match rate may not
// drop, and every mismatch must be one of the known, documented differences
// (crates/think-worker/js/bash/README.md). Run `node tests/bash-corpus/compare.mjs --verbose` for the report.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";

/** Scripts whose stdout or exit code differs from GNU bash, each for a documented reason. */
const KNOWN_MISMATCHES = [
  "15-until-loop.sh",
  "17-recursion.sh",
  "19-glob-star.sh",
  "28-sort-uniq-c.sh",
  "35-xargs-I.sh",
  "53-subshell-cd.sh",
  "60-diff.sh",
  "61-checksums.sh",
  "62-binary-copy.sh",
  "68-syntax-error.sh",
  "71-trap-exit.sh",
  "72-sort-stable-mixed.sh",
  "73-grep-r-root.sh",
  "74-find-root.sh",
  "75-ls-root.sh",
];
/** Scripts whose final files differ (gzip's bytes differ but are valid). */
const KNOWN_FILE_MISMATCHES = ["77-gzip-roundtrip.sh"];
const MIN_MATCHED = 75;

test("just-bash matches GNU bash on the corpus, except for known differences", { skip: !existsSync("/bin/bash") && "no /bin/bash" }, async () => {
  const { runCorpus } = await import("./bash-corpus/corpus.mjs");
  const results = await runCorpus();
  assert.equal(results.length, 90, "the corpus has 90 scripts");
  const matched = results.filter((r) => r.match).length;
  const mismatches = results.filter((r) => !r.match);
  const report = mismatches.map((r) => `${r.file}: ${r.reason}`).join("\n");
  const unknown = mismatches.filter((r) => !KNOWN_MISMATCHES.includes(r.file) || !r.reason.startsWith("known:"));
  assert.deepEqual(unknown.map((r) => `${r.file}: ${r.reason}`), [], `new mismatches:\n${report}`);
  assert.ok(matched >= MIN_MATCHED, `${matched}/${results.length} match, at least ${MIN_MATCHED} expected:\n${report}`);
  // A known difference that went away leaves a stale `# known:` note; update the lists.
  const stale = results.filter((r) => r.match && r.reason);
  assert.deepEqual(stale.map((r) => `${r.file}: ${r.reason}`), []);
  const fileMismatches = results.filter((r) => !r.fsMatch).map((r) => r.file);
  assert.deepEqual(fileMismatches.filter((f) => !KNOWN_FILE_MISMATCHES.includes(f)), [], "new final-file mismatches");
});
