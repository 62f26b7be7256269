#!/usr/bin/env bash
# Builds the Worker: Rust → wasm (release, size-optimised, wasm-opt -Oz) plus the JS shim, into
# build/ (scripts/wasm-build.sh), and the chat page into web/dist (scripts/build-web.sh) at the
# same time, since the page needs nothing from the wasm. Each step is skipped when its output is
# newer than every input.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
bash scripts/build-web.sh &
web=$!
out=build/index_bg.wasm
if [ -f "$out" ] && [ -f build/index.js ] && [ "${THINK_FORCE_BUILD:-}" != 1 ] \
   && [ -z "$(find src js build.rs Cargo.toml Cargo.lock package-lock.json .cargo -newer "$out" -print -quit)" ]; then
  echo "build: up to date"
else
  bash scripts/wasm-build.sh . "$@"
fi
raw=$(stat -c %s "$out")
gz=$(gzip -9 -c "$out" | wc -c)
echo "build: index_bg.wasm $raw bytes raw, $gz bytes gzip"
wait "$web"
