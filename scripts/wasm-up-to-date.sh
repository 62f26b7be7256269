#!/usr/bin/env bash
# Exits 0 when build/ holds a Worker newer than every input of the wasm build, built in the
# profile $THINK_WASM_PROFILE asks for or in release (which also serves `npm start`); a `start`
# build does not count when release is asked for (tests, deploy). THINK_FORCE_BUILD=1: never.
# scripts/build.sh skips the wasm build on it, and scripts/setup.sh the early compile.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
build=crates/think-worker/build
out=$build/index_bg.wasm
# Builds from before build/profile existed were all release builds.
built=$(cat $build/profile 2>/dev/null || echo release)
[ -f "$out" ] && [ -f $build/index.js ] && [ "${THINK_FORCE_BUILD:-}" != 1 ] \
  && { [ "$built" = "$THINK_WASM_PROFILE" ] || [ "$built" = release ]; } \
  && [ -z "$(find crates Cargo.toml Cargo.lock package-lock.json .cargo scripts/wasm-build.sh scripts/wasm-compile.sh -path "$build" -prune -o -type f -newer "$out" -print -quit)" ]
