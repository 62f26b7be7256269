#!/usr/bin/env bash
# Times a fresh clone's `npm start` until the chat page answers (README, "Measured figures"):
# clones this repository's HEAD into /tmp/fresh-start, runs `npm start` there with an empty
# THINK_RS_CACHE (so the wasm-bindgen CLI is compiled too) and PORT (default 18787), and prints
# each output line with the seconds since the clone and, where cgroup v1's cpuacct is writable,
# the CPU seconds the run has used so far, up to "PAGE ANSWERS". Then it stops the run.
# Usage: bench/fresh-start.sh [keep-cache]: with keep-cache, ~/.cache/think-rs is used as is.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dir=/tmp/fresh-start
port=${PORT:-18787}
cache=$dir-cache
if [ "${1:-}" = keep-cache ]; then cache=$HOME/.cache/think-rs; else rm -rf "$cache"; fi
rm -rf "$dir"
cg=/sys/fs/cgroup/cpuacct/think-rs-fresh-start
rmdir "$cg" 2>/dev/null
mkdir -p "$cg" 2>/dev/null || cg=
cpu() { if [ -n "$cg" ]; then echo "$(cat "$cg/cpuacct.usage") / 1000000000" | bc -l; else echo 0; fi; }
t0=$(date +%s.%N)
stamp() { printf '%7.1f s %7.1f cpu-s | %s\n' "$(echo "$(date +%s.%N) - $t0" | bc)" "$(cpu)" "$1"; }
git clone -q "$src" "$dir"
(
  if [ -n "$cg" ]; then echo "$BASHPID" > "$cg/tasks"; fi
  cd "$dir" && exec setsid env THINK_RS_CACHE="$cache" PORT="$port" npm start
) > >(while IFS= read -r line; do [ -n "${line// /}" ] && stamp "$line"; done) 2>&1 &
run=$!
until curl -s -o /dev/null -m 2 "http://127.0.0.1:$port/"; do
  if ! kill -0 "$run" 2>/dev/null; then stamp "npm start exited before the page answered"; exit 1; fi
  sleep 1
done
stamp "PAGE ANSWERS (load average $(cut -d' ' -f1-3 /proc/loadavg))"
# setsid made the run's shell (now npm) the leader of its own process group: all of this run.
kill -- -"$run" 2>/dev/null
sleep 3
[ -n "$cg" ] && rmdir "$cg" 2>/dev/null
exit 0
