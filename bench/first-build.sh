#!/usr/bin/env bash
# Times the release build of our own crates, every dependency already built, at each commit
# named, alternated for ROUNDS rounds (issue 39's first-build figure, BENCHMARKS.md "Sizes"):
# `cargo clean` of our crates for wasm32, then `THINK_FORCE_BUILD=1 bash scripts/build.sh`
# under /usr/bin/time. Run it in a scratch clone, since it checks out each commit:
#   git clone . /tmp/first-build && cd /tmp/first-build && bash bench/first-build.sh c0dabdd main
set -euo pipefail
# Checking out an older commit removes this file, which bash reads as it runs: run a copy.
if [ -z "${FIRST_BUILD_COPY:-}" ]; then
  copy=$(mktemp)
  cp "$0" "$copy"
  FIRST_BUILD_COPY=1 exec bash "$copy" "$@"
fi
rounds=${ROUNDS:-2}
[ $# -ge 1 ] || { echo "usage: bench/first-build.sh <commit>..." >&2; exit 2; }
bench=$(mktemp -d)
for round in $(seq 1 "$rounds"); do
  for rev in "$@"; do
    git checkout -q "$rev"
    # Before the workspace (c0dabdd and older) the crate was think-rs.
    if git cat-file -e "$rev:crates/think-core/Cargo.toml" 2>/dev/null; then
      crates=(-p think-regexp -p think-core -p think-worker)
    else
      crates=(-p think-rs)
    fi
    cargo clean -q "${crates[@]}" --release --target wasm32-unknown-unknown
    rm -rf build crates/think-worker/build
    /usr/bin/time -f "%e s wall, %U s user" -o "$bench/time" \
      env THINK_FORCE_BUILD=1 bash scripts/build.sh > "$bench/log" 2>&1
    cargo_s=$(grep -o 'Finished .* in .*' "$bench/log" | sed 's/.* in //')
    size=$(grep -o '[0-9]* bytes gzip' "$bench/log" | tail -1)
    echo "$rev round $round: cargo $cargo_s; script $(tail -1 "$bench/time"); $size; load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
