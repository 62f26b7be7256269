#!/usr/bin/env bash
# Compiles one workers-rs crate to wasm32 with cargo, the first step of scripts/wasm-build.sh,
# in the cargo profile $THINK_WASM_PROFILE (release unless `npm start` picks `start`).
# scripts/setup.sh runs it in the background beside npm ci, which it does not need; the later
# call from wasm-build.sh then waits on cargo's lock and finds the crate built.
# Usage: scripts/wasm-compile.sh <crate-dir> [extra cargo build args]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
crate=$(cd "$1" && pwd)
shift
cd "$root"
source scripts/env.sh
# WASM_BINDGEN_USE_JS_SYS=1: the `worker` macros read it.
cd "$crate"
WASM_BINDGEN_USE_JS_SYS=1 exec cargo build --lib --profile "$THINK_WASM_PROFILE" \
  --target wasm32-unknown-unknown "$@"
