# Shared settings for the scripts: pinned tool versions and where the cached tools live.
# Sourced, not run.
export THINK_RS_CACHE="${THINK_RS_CACHE:-$HOME/.cache/think-rs}"
# The CLI must equal the wasm-bindgen crate in Cargo.lock; build.rs checks the crate pin.
WASM_BINDGEN_VERSION=$(awk -F'"' '$0=="name = \"wasm-bindgen\""{getline; print $2; exit}' Cargo.lock)
export WASM_BINDGEN_VERSION
# The tools scripts/wasm-build.sh runs: the cached CLI and binaryen's wasm-opt from npm.
export WASM_BINDGEN_BIN="$THINK_RS_CACHE/wasm-bindgen-$WASM_BINDGEN_VERSION/bin/wasm-bindgen"
export WASM_OPT_BIN="$PWD/node_modules/.bin/wasm-opt"
export WRANGLER_SEND_METRICS=false
# The cargo profile of the Worker's wasm: `release` (size-optimised, for tests and deploy), or
# `start`, the quicker-to-compile one `npm start` builds (Cargo.toml, CONTRIBUTING.md "Build profiles").
export THINK_WASM_PROFILE="${THINK_WASM_PROFILE:-release}"
