#!/usr/bin/env bash
# Builds one workers-rs crate into <crate-dir>/build (index.js + index_bg.wasm), doing what
# worker-build 0.8.7 does for a plain wasm32-unknown-unknown crate, with the project's own
# tools (CONTRIBUTING.md, "Build profiles"):
#   1. cargo build --lib --target wasm32-unknown-unknown in the $THINK_WASM_PROFILE profile
#      (scripts/wasm-compile.sh);
#   2. wasm-bindgen --target module, with the reset-state function and the abort handler that
#      the shim uses to recover from a trap;
#   3. wasm-opt -O1 --shrink-level=2 with workerd's feature set, then the code ordered by
#      function name, then the names dropped (THINK_WASM_KEEP_NAMES=1 keeps them, for
#      bench/wasm-crates.py). Release only: the `start` profile is for a quick local start,
#      where size does not matter. Measured on the same wasm-bindgen output (gzip -9, BENCHMARKS.md
#      "Sizes"): -O1 --shrink-level=2 1,268,006 B in 16 s; -O1 1,271,052; no pass
#      1,279,558; -Oz 1,358,628 in 1 m 42 s; -Os 1,354,986; -O2 1,360,322 (the -O2 passes
#      shrink the raw module, 3.30 MB against 3.52 MB, but cost 90 KB of gzip, which is what
#      is deployed). Later, on another input: 1,223,294 without the ordering, 1,161,275 with
#      --reorder-functions-by-name (similar functions, such as the serde impls and
#      drop_in_place of each type, fall within gzip's window), 1,212,332 with
#      --reorder-functions (by call count). A second round of -O1's global passes after the
#      ordering (--dae-optimizing --duplicate-function-elimination
#      --simplify-globals-optimizing --remove-unused-module-elements) saves about 3 KB gzip for
#      about 10 s more of every release build (a fresh clone's first build included), so it is
#      not run.
#   4. think-worker's js/shim.mjs writes the entry module (handlers + class proxies) and esbuild bundles it
#      with the glue and its JS snippets into one minified index.js.
# worker-build's other steps are left out on purpose: installing wasm-bindgen and esbuild
# (scripts/wasm-bindgen-cli.sh and npm do that), a `producers` custom section naming workers-rs
# (metadata only), package.json and the build/worker/shim.mjs alias (nothing imports them).
# Usage: scripts/wasm-build.sh <crate-dir> [extra cargo build args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
crate=$(cd "$1" && pwd)
shift
cd "$root"
source scripts/env.sh
name=$(awk -F'"' '/^\[package\]/{p=1} p && $1 ~ /^name *= */{print $2; exit}' "$crate/Cargo.toml")
# Where cargo puts the wasm (the workspace's target/ for a member), and where the think-worker
# package is, whose js/ the bundle takes (a path dependency here, the registry's copy for a
# crate that depends on a published version): nothing is copied by hand.
meta=$(cd "$crate" && cargo metadata --format-version 1 --filter-platform wasm32-unknown-unknown)
read -r target_dir worker_js < <(node -e '
  const m = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const w = m.packages.find((p) => p.name === "think-worker");
  if (!w) { console.error("wasm-build: the crate does not depend on think-worker"); process.exit(1); }
  console.log(m.target_directory, require("path").join(require("path").dirname(w.manifest_path), "js"));
' <<< "$meta")
wasm="$target_dir/wasm32-unknown-unknown/$THINK_WASM_PROFILE/${name//-/_}.wasm"

bash "$root/scripts/wasm-compile.sh" "$crate" "$@"

# Build into a staging directory and swap it in, so a failed build leaves the last good one.
# The CLI may still be compiling in the background (scripts/setup.sh); wait for it here.
bash "$root/scripts/wasm-bindgen-cli.sh"
stage=$(mktemp -d "$crate/.build.XXXXXX")
trap 'rm -rf "$stage"' EXIT
"$WASM_BINDGEN_BIN" "$wasm" --out-dir "$stage" --no-typescript --target module --out-name index \
  --experimental-reset-state-function --force-enable-abort-handler
if [ "$THINK_WASM_PROFILE" = release ]; then
  names=--strip-debug
  if [ -n "${THINK_WASM_KEEP_NAMES:-}" ]; then names=--debuginfo; fi
  # Explicit features, not --all-features, so binaryen never emits an encoding workerd lacks.
  "$WASM_OPT_BIN" "$stage/index_bg.wasm" -o "$stage/index_bg.opt.wasm" -O1 --shrink-level=2 --enable-simd \
    --enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int \
    --enable-bulk-memory --enable-multivalue --enable-reference-types \
    --enable-exception-handling --reorder-functions-by-name \
    "$names"
  mv "$stage/index_bg.opt.wasm" "$stage/index_bg.wasm"
fi
node "$worker_js/shim.mjs" "$stage"
# Node builtins stay imports: just-bash (js/bash/bridge.mjs) needs `node:zlib`, which workerd
# serves under `compatibility_flags = ["nodejs_compat"]`.
(cd "$stage" && "$root/node_modules/.bin/esbuild" ./shim.js --bundle --format=esm --minify \
  --external:./index_bg.wasm '--external:cloudflare:*' '--external:node:*' \
  --outfile=index.bundle.js --log-level=warning)
# The bundle keeps wasm-bindgen's source-phase import; wrangler and Miniflare take the plain
# form, which gives the same WebAssembly.Module for a .wasm module rule.
sed 's/import source /import /' "$stage/index.bundle.js" > "$stage/index.js"
rm -rf "$stage/index.bundle.js" "$stage/shim.js" "$stage/snippets"

# Which profile built it, so scripts/build.sh rebuilds a `start` build for the tests or deploy.
echo "$THINK_WASM_PROFILE" > "$stage/profile"

mkdir -p "$crate/build"
mv -f "$stage/index.js" "$stage/index_bg.wasm" "$stage/profile" "$crate/build/"
# A crate other than think-worker gets think-worker's JS beside its build, for its entry module
# to import (`./build/think-worker/agent.mjs`, examples/custom-agent/entry.mjs).
if [ "$worker_js" != "$crate/js" ]; then
  rm -rf "$crate/build/think-worker"
  cp -R "$worker_js" "$crate/build/think-worker"
fi
