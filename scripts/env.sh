# Shared settings for the scripts: pinned tool versions and where the cached tools live.
# Sourced, not run.
export THINK_RS_CACHE="${THINK_RS_CACHE:-$HOME/.cache/think-rs}"
export WORKER_BUILD_VERSION=0.8.7
# The CLI must equal the wasm-bindgen crate in Cargo.lock; build.rs checks the crate pin.
WASM_BINDGEN_VERSION=$(awk -F'"' '$0=="name = \"wasm-bindgen\""{getline; print $2; exit}' Cargo.lock)
export WASM_BINDGEN_VERSION
export WORKER_BUILD_BIN="$THINK_RS_CACHE/worker-build-$WORKER_BUILD_VERSION/bin/worker-build"
# worker-build would otherwise download these from GitHub/npm; point it at local binaries.
export WASM_BINDGEN_BIN="$THINK_RS_CACHE/wasm-bindgen-$WASM_BINDGEN_VERSION/bin/wasm-bindgen"
export ESBUILD_BIN="$PWD/scripts/esbuild.sh"
export WASM_OPT_BIN="$PWD/node_modules/.bin/wasm-opt"
export WRANGLER_SEND_METRICS=false
