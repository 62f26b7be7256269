#!/usr/bin/env bash
# `npm start`: install what is missing, build, and serve the agent with `wrangler dev --local`
# on 127.0.0.1:$PORT (default 8787), persisting state to $THINK_STATE_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
# The quick-to-compile wasm profile (Cargo.toml); THINK_WASM_PROFILE=release serves the tests'
# build instead. A release build already in build/ is used as it is.
export THINK_WASM_PROFILE="${THINK_WASM_PROFILE:-start}"
# The crate and the wasm-bindgen CLI go on compiling in the background, started before npm ci;
# wrangler's build (below) waits for them just before it needs them.
bash scripts/setup.sh start
source scripts/env.sh
# wrangler runs scripts/build.sh itself ([build] in wrangler.toml), with this environment, and
# rebuilds on edits. It runs it twice at start (wrangler 4.86 builds once to find the entry and
# again when its file watcher is ready, printing "The file src changed"); the second finds
# everything up to date and only checks timestamps.

# Model settings come from the environment when set; otherwise wrangler reads .dev.vars.
vars=()
for name in THINK_MODEL_PROVIDER THINK_MODEL_BASE_URL THINK_MODEL_API_KEY THINK_MODEL THINK_MODEL_THINKING_BUDGET THINK_APPROVAL THINK_BASH THINK_EXECUTE THINK_MESSAGE_CONCURRENCY THINK_WAIT_FOR_MCP_CONNECTIONS THINK_SKILLS_DIR THINK_SKILLS THINK_ALLOW_PRIVATE_NETWORK THINK_CONTEXT THINK_CONTEXT_WINDOW THINK_MODEL_VISION THINK_EXTENSIONS THINK_SUBAGENT THINK_MCP_RESOURCES THINK_BROWSER THINK_BROWSER_CDP_URL THINK_BROWSER_ALLOW THINK_BROWSER_SESSION THINK_CHECKPOINTS THINK_AUTH THINK_AUTH_TOKENS THINK_AUTH_JWKS_URL THINK_AUTH_JWT_SECRET THINK_AUTH_ISSUER THINK_AUTH_AUDIENCE THINK_AUTH_ACCESS_TEAM THINK_AUTH_INSTANCE_CLAIM THINK_LIMITS THINK_CHAT_RECOVERY THINK_IDLE_RESET_MB; do
  if [ -n "${!name:-}" ]; then vars+=(--var "$name:${!name}"); fi
done

# A setting as the Worker will see it: the environment first, then .dev.vars.
setting() {
  if [ -n "${!1:-}" ]; then
    echo "${!1}"
  elif [ -f .dev.vars ]; then
    sed -n "s/^$1 *= *\"\{0,1\}\([^\"]*\)\"\{0,1\} *\$/\1/p" .dev.vars | tail -n 1
  fi
}
# Which model the agent will use, by the rules of `ModelChoice` (docs/configuration.md, "Models").
provider=$(setting THINK_MODEL_PROVIDER)
base=$(setting THINK_MODEL_BASE_URL)
model=$(setting THINK_MODEL)
if [ -z "$provider" ]; then provider=$([ -n "$base" ] && echo openai || echo workers-ai); fi
case "$provider" in
  workers-ai)
    default=$(sed -n 's/^pub const DEFAULT_WORKERS_AI_MODEL: &str = "\(.*\)";/\1/p' crates/think-core/src/model/workers_ai.rs)
    echo "start: model: Workers AI ${model:-$default} through the AI binding, which runs only on Cloudflare: under npm start (wrangler dev --local) each turn answers with an error saying so. Set THINK_MODEL_BASE_URL (and THINK_MODEL) for an OpenAI-compatible or Anthropic endpoint, e.g. Ollama's http://127.0.0.1:11434/v1 (docs/getting-started.md)." >&2
    ;;
  anthropic)
    if [ -z "$model" ]; then
      echo "start: no model configured: THINK_MODEL_PROVIDER is anthropic but THINK_MODEL is unset; the agent will answer with a setup hint." >&2
    else
      echo "start: model: Anthropic $model at ${base:-https://api.anthropic.com/v1}." >&2
    fi
    ;;
  *)
    if [ -z "$base" ] || [ -z "$model" ]; then
      echo "start: no model configured: the OpenAI-compatible provider needs THINK_MODEL_BASE_URL and THINK_MODEL; the agent will answer with a setup hint." >&2
    else
      echo "start: model: $model at the OpenAI-compatible $base." >&2
    fi
    ;;
esac
# workerd runs under scripts/workerd-supervisor.mjs: a heap cap per isolate
# (THINK_LOCAL_HEAP_MB, default 256) and a restart when the runtime dies, so that code that
# exhausts memory ends its own call instead of the whole local server (docs/deploy.md, "Local and Cloudflare").
export MINIFLARE_WORKERD_PATH="$PWD/scripts/workerd-supervisor.mjs"
# The browser tools' browser: THINK_BROWSER_CDP_URL, or a local Chromium started here; never
# the BROWSER binding, which reaches no Browser Run under --local (scripts/start-browser.sh).
source scripts/start-browser.sh
start_browser
# wrangler leaves a large bundle in .wrangler/tmp when killed; start clean.
rm -rf .wrangler/tmp
exec node_modules/.bin/wrangler dev --local --ip 127.0.0.1 --port "${PORT:-8787}" \
  --persist-to "${THINK_STATE_DIR:-.wrangler/state}" \
  --show-interactive-dev-session=false \
  "${vars[@]}"
