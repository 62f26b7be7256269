#!/usr/bin/env bash
# `npm test`: install what is missing, check the docs (tests/docs: settings, RPC methods, code
# blocks, links; no build needed), build, check the Rust gates (format, clippy for the host
# and for wasm32, rustdoc's link checks, doc-tests), run the Rust tests on the host, then the integration tests against
# the built Worker in Miniflare (after a `wrangler deploy --dry-run`, offline, that checks the
# deploy bundle and its bindings), two test files at a time (each file runs its own Miniflare and
# model server, so they do not share state). The files that exercise the chat protocol then run a
# second time against the newest `agents` client (`agents-next`, THINK_TEST_AGENTS=next): the
# chat turn and its frames, resume and durability, approvals and client tools, the queue, and the
# newer clients' fields and recovery.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
echo "test: node --test tests/docs/ (the docs checks)"
node --test --test-reporter=spec tests/docs/
bash scripts/build.sh
bash scripts/deploy-check.sh
echo "test: cargo fmt --check"
cargo fmt --all --check
echo "test: module layers (no cycle in any crate)"
node scripts/check-layers.mjs
echo "test: cargo clippy (host, all targets; wasm32, lib; every workspace member) -D warnings"
cargo clippy --quiet --workspace --all-targets -- -D warnings
cargo clippy --quiet --workspace --target wasm32-unknown-unknown --lib -- -D warnings
echo "test: cargo doc -D warnings (the API docs docs.rs would build: no broken or private links)"
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps -p think-regexp -p think-core
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps -p think-worker --target wasm32-unknown-unknown
echo "test: cargo test (host: unit tests and doc-tests of every crate)"
cargo test --quiet --workspace
echo "test: node --test tests/*.test.mjs tests/bash-corpus/*.test.mjs"
node --test --test-concurrency=2 --test-force-exit --test-reporter=spec tests/*.test.mjs tests/bash-corpus/*.test.mjs
PROTOCOL_FILES="tests/foundation.test.mjs tests/resume.test.mjs tests/durable.test.mjs tests/hitl.test.mjs tests/queue.test.mjs tests/clients.test.mjs"
echo "test: node --test $PROTOCOL_FILES with THINK_TEST_AGENTS=next"
# shellcheck disable=SC2086
THINK_TEST_AGENTS=next node --test --test-concurrency=2 --test-force-exit --test-reporter=spec $PROTOCOL_FILES
