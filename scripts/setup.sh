#!/usr/bin/env bash
# Installs everything the build and the tests need, idempotently: the wasm32 target, the pinned
# wasm-bindgen CLI (into a version-keyed cache outside the clone, so a fresh clone reuses it),
# the pinned npm packages (esbuild and binaryen's wasm-opt among them), and Debian's chromium
# for the browser test.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown \
  || rustup target add wasm32-unknown-unknown
# npm test's gates: cargo fmt --check and cargo clippy.
for component in rustfmt clippy; do
  rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
done

mkdir -p "$THINK_RS_CACHE"
# The CLI compiles (CPU) while npm ci downloads (network), so the two run side by side.
(
  # One installer at a time per machine; a second run waits, then finds the tools in place.
  flock 9
  if ! "$WASM_BINDGEN_BIN" --version 2>/dev/null | grep -q " $WASM_BINDGEN_VERSION\$"; then
    echo "setup: installing wasm-bindgen-cli $WASM_BINDGEN_VERSION into $THINK_RS_CACHE (about 3 minutes, once)"
    # Not --locked: its lockfile pins a webpki-roots release the registry mirror lacks.
    cargo install --force --quiet --root "$THINK_RS_CACHE/wasm-bindgen-$WASM_BINDGEN_VERSION" \
      wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
  fi
) 9>"$THINK_RS_CACHE/.install.lock" &
cli_install=$!

# npm: reinstall only when package-lock.json changed since the last install.
lock_hash=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ "$(cat node_modules/.think-rs-lock 2>/dev/null)" != "$lock_hash" ]; then
  echo "setup: npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  echo "$lock_hash" > node_modules/.think-rs-lock
fi
wait "$cli_install"

# The browser test drives Debian's chromium through playwright-core (which never downloads one).
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: apt-get install chromium (about 30 seconds, once)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  else
    echo "setup: chromium is missing; install Debian's chromium package for tests/browser.test.mjs" >&2
  fi
fi
