// The layer check of `npm test` (scripts/check-layers.mjs): a module cycle in a crate fails
// it, naming the line that closes the cycle; comments, strings and test modules do not count.
// So does a non-test source file over 1,200 lines.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

const script = new URL("../scripts/check-layers.mjs", import.meta.url).pathname;

function crate(files) {
  const dir = mkdtempSync(join(tmpdir(), "layers-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, "src", path, ".."), { recursive: true });
    writeFileSync(join(dir, "src", path), text);
  }
  return dir;
}

function check(dir) {
  const r = spawnSync(process.execPath, [script, dir], { encoding: "utf8" });
  rmSync(dir, { recursive: true, force: true });
  return r;
}

test("a cycle between two modules fails and names the lines that close it", () => {
  const r = check(
    crate({
      "lib.rs": "pub mod low;\npub mod high;\n",
      "low/mod.rs": "use crate::high::Thing;\n",
      "high/mod.rs": "pub struct Thing;\nuse crate::low;\n",
    }),
  );
  assert.equal(r.status, 1);
  assert.match(r.stderr, /a cycle in .*: high, low/);
  assert.match(r.stderr, /low -> high: src\/low\/mod\.rs:1/);
});

test("a multi-line use group counts, and so does a three-module cycle", () => {
  const r = check(
    crate({
      "a.rs": "use crate::{\n    b::X,\n};\n",
      "b/mod.rs": "fn f() { crate::c::g() }\n",
      "c/mod.rs": "pub fn g() { let _ = crate::a::Y; }\n",
    }),
  );
  assert.equal(r.status, 1);
  assert.match(r.stderr, /a, b, c/);
});

test("doc comments, strings and test modules may reach upward", () => {
  const r = check(
    crate({
      "low/mod.rs":
        "//! See [`crate::high`].\nconst S: &str = \"crate::high\";\n#[cfg(test)]\nmod tests {\n    use crate::high::Thing;\n    fn f() { let _ = { 1 }; }\n}\n",
      "low/tests.rs": "use crate::high::Thing;\n",
      "high/mod.rs": "pub struct Thing;\nuse crate::low;\n",
    }),
  );
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /no module cycle/);
});

test("a non-test source file over 1,200 lines fails; a long tests.rs does not", () => {
  const long = "fn f() {}\n".repeat(1201);
  const r = check(crate({ "big/mod.rs": long, "small/tests.rs": long, "small/mod.rs": "fn g() {}\n" }));
  assert.equal(r.status, 1);
  assert.match(r.stderr, /big\/mod\.rs has 1201 lines, over 1200/);
  assert.doesNotMatch(r.stderr, /small/);
});
