#!/usr/bin/env bash
# Builds the Worker: Rust → wasm plus the JS shim, into crates/think-worker/build/ (scripts/wasm-build.sh), and the
# chat page into web/dist (scripts/build-web.sh) at the same time, since the page needs nothing
# from the wasm. The wasm is the size-optimised release build (wasm-opt -O1 --shrink-level=2), or
# under
# `npm start` the quicker `start` profile (THINK_WASM_PROFILE, CONTRIBUTING.md "Build profiles"). Each step is
# skipped when its output is newer than every input (scripts/wasm-up-to-date.sh for the wasm).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
bash scripts/build-web.sh &
web=$!
if bash scripts/wasm-up-to-date.sh; then
  echo "build: up to date ($(cat crates/think-worker/build/profile 2>/dev/null || echo release) build)"
else
  bash scripts/wasm-build.sh crates/think-worker "$@"
  out=crates/think-worker/build/index_bg.wasm
  raw=$(stat -c %s "$out")
  if [ "$THINK_WASM_PROFILE" = release ]; then
    echo "build: index_bg.wasm $raw bytes raw, $(gzip -9 -c "$out" | wc -c) bytes gzip"
  else
    # The gzip size matters only for what is deployed; gzip -9 of the larger `start` wasm would
    # delay `npm start` by a second or two.
    echo "build: index_bg.wasm ($THINK_WASM_PROFILE build) $raw bytes raw"
  fi
fi
wait "$web"
