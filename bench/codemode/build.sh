#!/usr/bin/env bash
# Builds what the Code Mode rows of the bench run (bench/codemode/bench.mjs): the agent
# itself (scripts/build.sh) and the Think side (bench/codemode/ts-worker → dist/index.js,
# bundled with wrangler as bench/build.sh does for the workspace bench). Each is skipped when
# up to date.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/build.sh
out=bench/codemode/ts-worker/dist/index.js
if [ -f "$out" ] && [ -z "$(find bench/codemode/ts-worker/src bench/codemode/ts-worker/wrangler.toml package-lock.json -newer "$out" -print -quit)" ]; then
  echo "bench build: codemode ts worker up to date"
else
  (cd bench/codemode/ts-worker && WRANGLER_LOG=warn "$PWD/../../../node_modules/.bin/wrangler" deploy --dry-run --outdir dist >/dev/null)
fi
