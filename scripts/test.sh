#!/usr/bin/env bash
# `npm test`: install what is missing, build, then run the Rust unit tests on the host and the
# integration tests against the built Worker in Miniflare, two test files at a time (each file
# runs its own Miniflare and model server, so they do not share state).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
echo "test: cargo test (host)"
cargo test --lib --quiet
echo "test: node --test tests/*.test.mjs tests/bash-corpus/*.test.mjs"
node --test --test-concurrency=2 --test-force-exit --test-reporter=spec tests/*.test.mjs tests/bash-corpus/*.test.mjs
