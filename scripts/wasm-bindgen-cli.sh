#!/usr/bin/env bash
# Installs the pinned wasm-bindgen CLI into its version-keyed cache ($THINK_RS_CACHE) unless it
# is there, one installer at a time per machine: a second caller waits on the lock, then finds
# the tool in place. scripts/setup.sh starts it in the background, so it compiles while npm ci
# downloads and the crate's wasm build compiles; scripts/wasm-build.sh calls it again right
# before it needs the CLI, which waits for that background install (or installs, if it failed).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
mkdir -p "$THINK_RS_CACHE"
exec 9>"$THINK_RS_CACHE/.install.lock"
flock 9
if "$WASM_BINDGEN_BIN" --version 2>/dev/null | grep -q " $WASM_BINDGEN_VERSION\$"; then
  exit 0
fi
echo "setup: compiling wasm-bindgen-cli $WASM_BINDGEN_VERSION into $THINK_RS_CACHE (about 3 minutes of CPU, once per machine)"
# Only the `wasm-bindgen` binary, without the TLS stack that only the test runner's downloads
# use (no `ring`, no `rustls`): the other two binaries and their features are never run here.
# Not --locked: its lockfile pins a webpki-roots release the registry mirror lacks.
# opt-level 1 instead of 3: less compile time, and it runs as fast here (1.5 s of CPU for the
# `start` build's 10 MB wasm at either level).
CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install --force --quiet --no-default-features --bin wasm-bindgen \
  --root "$THINK_RS_CACHE/wasm-bindgen-$WASM_BINDGEN_VERSION" \
  wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
