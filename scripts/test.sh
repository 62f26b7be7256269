#!/usr/bin/env bash
# `npm test`: install what is missing, build, then run the Rust unit tests on the host and the
# integration tests against the built Worker in Miniflare.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
echo "test: cargo test (host)"
cargo test --lib --quiet
echo "test: node --test tests/*.test.mjs tests/bash-corpus/*.test.mjs"
node --test --test-concurrency=1 --test-reporter=spec tests/*.test.mjs tests/bash-corpus/*.test.mjs
