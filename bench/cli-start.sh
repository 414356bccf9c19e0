#!/usr/bin/env bash
# How long `ferry --version` and `ferry --help` take to start, next to Node's own start (`node -e 0`), in wall
# seconds: median and max of N runs each (default 10). Builds dist/ first if it is missing. Results: docs/performance.md.
#   bash bench/cli-start.sh [N]
set -euo pipefail

cd "$(dirname "$0")/.."
runs="${1:-10}"
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: bash bench/cli-start.sh [RUNS]  (a positive number, default 10)" >&2
  exit 2
fi
if [[ ! -f dist/client/cli.js ]]; then
  echo "dist/ is missing: npm run build" >&2
  npm run --silent build
fi

# Wall seconds of one run of "$@" (output discarded; a failing command fails the benchmark).
wall() {
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null
  end=$(date +%s%N)
  awk -v ns=$((end - start)) 'BEGIN { printf "%.3f\n", ns / 1e9 }'
}

# "median max" of the numbers on stdin.
stats() {
  sort -n | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f\n", m, v[NR] }'
}

echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine: $(nproc) cores, node $(node --version), $(uname -sm), load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
echo "runs:    $runs each (wall seconds)"
echo
printf '%-28s %8s %8s\n' command median max
for cmd in 'node -e 0' 'node bin/ferry.js --version' 'node bin/ferry.js --help'; do
  read -r -a argv <<<"$cmd"
  wall "${argv[@]}" >/dev/null # warm the file cache; not counted
  read -r median max < <(for ((i = 0; i < runs; i++)); do wall "${argv[@]}"; done | stats)
  printf '%-28s %8s %8s\n' "$cmd" "$median" "$max"
done
