#!/usr/bin/env bash
# Installs everything the build and the tests need, idempotently: the wasm32 target, the pinned
# wasm-bindgen CLI (into a version-keyed cache outside the clone, so a fresh clone reuses it),
# the pinned npm packages (esbuild and binaryen's wasm-opt among them), and Debian's chromium
# for the browser tests.
# Usage: setup.sh [start|test]. Without an argument (`npm run setup`) it returns once all is
# installed. `start` and `test` also start compiling the crate for wasm32 (in the
# $THINK_WASM_PROFILE profile, scripts/wasm-compile.sh), which needs nothing from npm, and leave
# it and the CLI compiling in the background while the build that comes next does what it can
# without them (scripts/wasm-build.sh waits on cargo's lock, and for the CLI only when it needs
# it); `start` skips what only the tests use (chromium, rustfmt, clippy).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
mode=${1:-all}

rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
  || rustup target add wasm32-unknown-unknown
if [ "$mode" != all ] && ! bash scripts/wasm-up-to-date.sh; then
  # The longest step of a fresh clone's first run, so it starts first; a failure shows again
  # (in the foreground) when scripts/wasm-build.sh runs the same compile.
  bash scripts/wasm-compile.sh crates/think-worker &
fi
if [ "$mode" != start ]; then
  # npm test's gates: cargo fmt --check and cargo clippy.
  for component in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
  done
fi

# The CLI compiles (CPU) while npm ci downloads (network), so the two run side by side.
bash scripts/wasm-bindgen-cli.sh &
cli_install=$!

# npm: reinstall only when package-lock.json changed since the last install.
lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.think-rs-lock 2>/dev/null)" != "$lock_hash" ]; then
  echo "setup: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_hash" > node_modules/.think-rs-lock
fi

# The browser tests drive Debian's chromium through playwright-core (which never downloads one).
if [ "$mode" != start ] && ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: apt-get install chromium (about 30 seconds, once)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "setup: chromium is missing; install Debian's chromium package for the browser tests" >&2
  fi
fi

if [ "$mode" = all ]; then
  wait "$cli_install"
fi
