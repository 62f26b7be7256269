#!/usr/bin/env bash
# worker-build's bundling step (ESBUILD_BIN): the project's esbuild, with Node builtins left to
# the runtime. just-bash (bundled through js/bash/bridge.mjs) imports `node:zlib`, which workerd
# serves under `compatibility_flags = ["nodejs_compat"]` (wrangler.toml, tests/helpers/worker.mjs).
exec "$(dirname "$0")/../node_modules/.bin/esbuild" "$@" '--external:node:*'
