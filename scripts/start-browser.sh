# The browser of `npm start` (sourced by scripts/start.sh; docs/browser.md).
# `wrangler dev --local` declares the BROWSER binding but has no Browser Run behind it (Miniflare's
# stand-in downloads Chrome for Testing from the internet at the first use), so the agent is told
# with THINK_BROWSER_BINDING=false, and its browser is a Chrome's DevTools URL: the one
# THINK_BROWSER_CDP_URL names, or a headless Chromium found on PATH and started here on
# 127.0.0.1, stopped when npm start (the process $$ becomes by exec) exits. Without either, the
# agent offers no browser tool, and this says why.

# The first Chromium or Chrome on PATH.
find_chromium() {
  local name
  for name in chromium chromium-browser google-chrome-stable google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

# Whether the Chrome at DevTools URL $1 answers /json/version (within 3 s).
cdp_answers() {
  node -e '
    fetch(process.argv[1].replace(/\/+$/, "") + "/json/version", { signal: AbortSignal.timeout(3000) })
      .then((r) => r.json())
      .then((v) => process.exit(v.webSocketDebuggerUrl ? 0 : 1), () => process.exit(1));
  ' "$1" 2>/dev/null
}

# Starts headless $1 on a free 127.0.0.1 port with a fresh profile; prints its DevTools URL and
# pid ("URL PID"). A watchdog stops it and removes the profile once process $$ is gone.
start_chromium() {
  local chromium=$1 profile pid port="" i
  profile=$(mktemp -d "${TMPDIR:-/tmp}/think-rs-chromium.XXXXXX")
  local args=(--headless --remote-debugging-address=127.0.0.1 --remote-debugging-port=0
    "--user-data-dir=$profile" --no-first-run --no-default-browser-check --disable-gpu
    --disable-background-networking --disable-component-update --disable-sync --mute-audio)
  # Chromium refuses to run as root inside its sandbox.
  if [ "$(id -u)" = 0 ]; then args+=(--no-sandbox); fi
  "$chromium" "${args[@]}" about:blank </dev/null >"$profile.log" 2>&1 &
  pid=$!
  # Chromium writes the port it bound to DevToolsActivePort in its profile.
  for ((i = 0; i < 150; i++)); do
    if [ -s "$profile/DevToolsActivePort" ]; then
      port=$(head -n 1 "$profile/DevToolsActivePort")
      [ -n "$port" ] && break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  local owner=$$
  (
    # Outlive a Ctrl-C long enough to clean up; Chromium gets the same SIGINT and quits.
    trap '' INT
    while kill -0 "$owner" 2>/dev/null && kill -0 "$pid" 2>/dev/null; do sleep 1; done
    kill "$pid" 2>/dev/null
    for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    rm -rf "$profile" "$profile.log"
  ) </dev/null >/dev/null 2>&1 &
  if [ -z "$port" ]; then
    echo "$chromium did not open its DevTools port within 15 s: $(tail -n 3 "$profile.log" 2>/dev/null | tr '\n' ' ')" >&2
    kill "$pid" 2>/dev/null
    return 1
  fi
  echo "http://127.0.0.1:$port $pid"
}

# Decides the browser; appends the agent's settings for it to the array `vars` and prints on
# stderr what the agent will use, or why it has no browser tool.
# Reads THINK_BROWSER and THINK_BROWSER_CDP_URL through `setting` (env, then .dev.vars).
start_browser() {
  vars+=(--var "THINK_BROWSER_BINDING:false")
  local off cdp chromium started
  off=$(setting THINK_BROWSER)
  cdp=$(setting THINK_BROWSER_CDP_URL)
  if [ "$off" = false ] || [ "$off" = 0 ]; then
    echo "start: browser tools: off (THINK_BROWSER=$off)." >&2
  elif [ -n "$cdp" ]; then
    if cdp_answers "$cdp"; then
      echo "start: browser: the Chrome at $cdp (THINK_BROWSER_CDP_URL)." >&2
      vars+=(--var "THINK_BROWSER_CDP_URL:$cdp")
    else
      echo "start: no browser tools: THINK_BROWSER_CDP_URL=$cdp does not answer $cdp/json/version; start that Chrome with --remote-debugging-port and restart, or unset THINK_BROWSER_CDP_URL to let npm start run a local Chromium." >&2
      vars+=(--var "THINK_BROWSER:false")
    fi
  elif ! chromium=$(find_chromium); then
    echo "start: no browser tools: no THINK_BROWSER_CDP_URL and no chromium on PATH (Debian: apt-get install chromium). Browser Run, the BROWSER binding, answers only on Cloudflare." >&2
  elif started=$(start_chromium "$chromium"); then
    echo "start: browser: $chromium (pid ${started#* }), headless at ${started%% *}; it stops when npm start exits." >&2
    vars+=(--var "THINK_BROWSER_CDP_URL:${started%% *}")
  else
    echo "start: no browser tools: $chromium did not start (see above)." >&2
  fi
}
