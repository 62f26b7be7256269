#!/usr/bin/env node
// Prints the bash corpus report (see corpus.mjs): the match rate of just-bash against GNU
// bash and every mismatch with its reason.
//
// Usage: node tests/bash-corpus/compare.mjs [--verbose] [--json out.json] [name-filter]
//   JUST_BASH, JUST_BASH_BUILD: which just-bash to use, see load-bridge.mjs
import { writeFileSync } from "node:fs";
import { build, gnuVersion, runCorpus, version as jbVersion } from "./corpus.mjs";

const args = process.argv.slice(2);
const verbose = args.includes("--verbose");
const jsonOut = args.includes("--json") ? args[args.indexOf("--json") + 1] : null;
const filter = args.find((a, i) => !a.startsWith("--") && args[i - 1] !== "--json");

const results = await runCorpus(filter);
const matched = results.filter((r) => r.match).length;
const fsMatched = results.filter((r) => r.fsMatch).length;
const pct = (n) => ((100 * n) / results.length).toFixed(1);
console.log(`just-bash ${jbVersion} (${build} build) vs ${gnuVersion()}`);
console.log(`stdout + exit code: ${matched}/${results.length} match (${pct(matched)}%)`);
console.log(`final files:        ${fsMatched}/${results.length} match (${pct(fsMatched)}%)`);
const mismatches = results.filter((r) => !r.match);
if (mismatches.length) console.log(`\nMismatches (${mismatches.length}):`);
for (const r of mismatches) {
  console.log(`- ${r.file} (${r.title}): ${r.reason}`);
  if (verbose) {
    console.log(`    just-bash exit ${r.jb.exitCode} stdout ${JSON.stringify(r.jb.stdout)} stderr ${JSON.stringify(r.jb.stderr)}`);
    console.log(`    bash      exit ${r.gnu.exitCode} stdout ${JSON.stringify(r.gnu.stdout)} stderr ${JSON.stringify(r.gnu.stderr)}`);
  }
}
for (const r of results.filter((r) => r.match && r.reason)) console.log(`- ${r.file}: ${r.reason}`);
const unexplained = mismatches.filter((r) => !r.reason.startsWith("known:")).length;
console.log(`\n${mismatches.length - unexplained} mismatches have a known cause, ${unexplained} unexplained.`);
const fsMismatches = results.filter((r) => !r.fsMatch);
if (fsMismatches.length) console.log(`\nFinal-file mismatches (${fsMismatches.length}):`);
for (const r of fsMismatches) console.log(`- ${r.file}: ${r.fsDiff.join("; ")}${r.fsKnown ? ` (known: ${r.fsKnown})` : ""}`);
if (jsonOut) writeFileSync(jsonOut, JSON.stringify(results, null, 1));
