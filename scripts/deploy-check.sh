#!/usr/bin/env bash
# `wrangler deploy --dry-run` as `npm test` runs it: bundles the Worker exactly as a deploy
# would, prints the upload size, and fails unless every binding the features use is declared
# (docs/deploy.md). It runs in a network namespace with only loopback, so it can never
# reach Cloudflare, and with metrics off.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
log="$out/dry-run.log"
if ! unshare --net bash -c 'ip link set lo up && exec "$0" deploy --dry-run --outdir "$1"' \
  node_modules/.bin/wrangler "$out/bundle" > "$log" 2>&1; then
  cat "$log" >&2
  echo "deploy-check: wrangler deploy --dry-run failed" >&2
  exit 1
fi
echo "deploy-check: $(grep -m1 '^Total Upload:' "$log")"
for binding in ThinkAgent WORKSPACE_R2 LOADER BROWSER AI; do
  if ! grep -q "^env\.$binding\b" "$log"; then
    cat "$log" >&2
    echo "deploy-check: wrangler.toml does not declare the $binding binding" >&2
    exit 1
  fi
done
echo "deploy-check: bindings ThinkAgent WORKSPACE_R2 LOADER BROWSER AI declared"
