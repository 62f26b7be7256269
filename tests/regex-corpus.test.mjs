// The JS-regex corpus's expectations are Node's own: tests/regex-corpus/cases.json must be
// exactly what `new RegExp(pattern, flags)` gives on this Node for every case, so the Rust
// test that compares the translation with it (`regex_corpus` in
// src/tools/workspace/grep/jsregex.rs) compares with JavaScript, not with a copy of itself.
// After editing source.mjs, run `node tests/regex-corpus/generate.mjs`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { corpus } from "./regex-corpus/generate.mjs";

test("regex corpus expectations are Node's RegExp results", () => {
  const stored = JSON.parse(readFileSync(new URL("./regex-corpus/cases.json", import.meta.url), "utf8"));
  const fresh = corpus();
  assert.ok(fresh.cases.length >= 100, `${fresh.cases.length} cases`);
  assert.ok(fresh.cases.some((c) => c.pattern === "[\\D]") && fresh.cases.some((c) => c.pattern === "[\\W]") && fresh.cases.some((c) => c.pattern === "[\\S]"));
  assert.deepEqual(stored, fresh, "cases.json is stale: run node tests/regex-corpus/generate.mjs");
});
