#!/usr/bin/env bash
# `npm start`: install what is missing, build, and serve the agent with `wrangler dev --local`
# on 127.0.0.1:$PORT (default 8787), persisting state to $THINK_STATE_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
source scripts/env.sh
# wrangler runs scripts/build.sh itself ([build] in wrangler.toml) and rebuilds on edits.

# Model settings come from the environment when set; otherwise wrangler reads .dev.vars.
vars=()
for name in THINK_MODEL_PROVIDER THINK_MODEL_BASE_URL THINK_MODEL_API_KEY THINK_MODEL THINK_MODEL_THINKING_BUDGET THINK_APPROVAL THINK_BASH THINK_MESSAGE_CONCURRENCY THINK_WAIT_FOR_MCP_CONNECTIONS THINK_SKILLS_DIR THINK_ALLOW_PRIVATE_NETWORK; do
  if [ -n "${!name:-}" ]; then vars+=(--var "$name:${!name}"); fi
done
if [ -z "${THINK_MODEL_BASE_URL:-}" ] && ! grep -qs '^THINK_MODEL_BASE_URL' .dev.vars; then
  echo "start: no model configured (THINK_MODEL_BASE_URL/THINK_MODEL); the agent will answer with a setup hint." >&2
fi
# wrangler leaves a large bundle in .wrangler/tmp when killed; start clean.
rm -rf .wrangler/tmp
exec node_modules/.bin/wrangler dev --local --ip 127.0.0.1 --port "${PORT:-8787}" \
  --persist-to "${THINK_STATE_DIR:-.wrangler/state}" \
  --show-interactive-dev-session=false \
  "${vars[@]}"
