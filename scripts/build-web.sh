#!/usr/bin/env bash
# Builds the chat page (web/) with Vite into web/dist, which the Worker serves as static assets.
# Skips the build when web/dist is newer than every page source and the npm lockfile.
set -euo pipefail
cd "$(dirname "$0")/.."
out=web/dist/index.html
if [ -f "$out" ] && [ "${THINK_FORCE_BUILD:-}" != 1 ] \
   && [ -z "$(find web package-lock.json -path web/dist -prune -o -newer "$out" -print -quit)" ]; then
  echo "build-web: up to date"
else
  node_modules/.bin/vite build --config web/vite.config.mjs
  echo "build-web: web/dist built"
fi
