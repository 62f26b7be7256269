#!/usr/bin/env bash
# Builds the two benchmark workers: the think-rs bench crate (bench/rust-worker → its build/)
# with the same scripts/wasm-build.sh as the agent, and the TypeScript reference worker
# (bench/ts-worker → dist/index.js) bundled by wrangler, since Miniflare does not bundle.
# Each is skipped when its output is newer than every input.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
root=$PWD

rust_out=bench/rust-worker/build/index_bg.wasm
if [ -f "$rust_out" ] && [ "${THINK_FORCE_BUILD:-}" != 1 ] \
   && [ -z "$(find crates Cargo.toml Cargo.lock bench/rust-worker/src bench/rust-worker/Cargo.toml bench/rust-worker/Cargo.lock -newer "$rust_out" -print -quit)" ]; then
  echo "bench build: rust worker up to date"
else
  bash scripts/wasm-build.sh bench/rust-worker
fi

ts_out=bench/ts-worker/dist/index.js
if [ -f "$ts_out" ] && [ "${THINK_FORCE_BUILD:-}" != 1 ] \
   && [ -z "$(find bench/ts-worker/src bench/ts-worker/wrangler.toml package-lock.json -newer "$ts_out" -print -quit)" ]; then
  echo "bench build: ts worker up to date"
else
  # wrangler's bundler, so the reference gets the nodejs_compat polyfills it has under
  # `wrangler dev` (just-bash imports node:worker_threads, which workerd lacks).
  (cd bench/ts-worker && WRANGLER_LOG=warn "$root/node_modules/.bin/wrangler" deploy --dry-run --outdir dist >/dev/null)
fi

# The Code Mode rows: the agent itself and the Think side of bench/codemode.
bash bench/codemode/build.sh
