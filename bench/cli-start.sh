#!/usr/bin/env bash
# How long `ferry` takes to start, in wall seconds: median and max of N runs each (default 10), the commands taking
# turns run by run so that the machine's noise falls on all of them alike. Builds dist/ first if it is missing.
#   - `node -e 0` (Node's own start), `ferry --version`, `ferry --help`;
#   - when Temporal answers (the local stack, or TEMPORAL_ADDRESS): `ferry delete --cluster` and `ferry update -f` of a
#     model that does not run (exit 3), which load everything those commands load: the prelude sends the update
#     (answered: not found), then the commands load and the SDK asks again and describes. With Node's compile cache
#     as people run it (warm), the same with an empty cache each run (cold: the first run of a build), and with the
#     update sent by the SDK alone (FERRY_CLI_EARLY=0).
# Results: docs/performance.md.
#   bash bench/cli-start.sh [N]
set -euo pipefail

cd "$(dirname "$0")/.."
runs="${1:-10}"
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: bash bench/cli-start.sh [RUNS]  (a positive number, default 10)" >&2
  exit 2
fi
if [[ ! -f dist/client/cli/run.js ]]; then
  echo "dist/ is missing: npm run build" >&2
  npm run --silent build
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# Wall seconds of one run of "$@" (output discarded). Exit codes other than 0, and 3 for the absent model, fail the
# benchmark.
wall() {
  local start end code=0
  start=$(date +%s%N)
  "$@" >/dev/null 2>&1 || code=$?
  end=$(date +%s%N)
  if [[ $code -ne 0 && $code -ne 3 ]]; then
    echo "failed (exit $code): $*" >&2
    exit 1
  fi
  awk -v ns=$((end - start)) 'BEGIN { printf "%.3f\n", ns / 1e9 }'
}

# "median max" of the numbers on stdin.
stats() {
  sort -n | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f\n", m, v[NR] }'
}

absent=(node bin/ferry.js delete ferry-bench-absent -n ferry-bench --cluster ferry-bench-absent)
printf 'apiVersion: ferry.dev/v1alpha1\nkind: ServedModel\nmetadata: {name: ferry-bench-absent, namespace: ferry-bench}\nspec:\n  cluster: ferry-bench-absent\n  source: {huggingface: {repo: Qwen/Qwen2.5-0.5B-Instruct}}\n' >"$scratch/absent.yaml"
update=(node bin/ferry.js update -f "$scratch/absent.yaml")
labels=('node -e 0' 'ferry --version' 'ferry --help')
commands=('node -e 0' 'node bin/ferry.js --version' 'node bin/ferry.js --help')
if node bin/ferry.js list -n ferry-bench >/dev/null 2>&1; then
  labels+=('ferry delete (warm cache)' 'ferry delete (cold cache)' 'ferry delete (sent by the SDK)'
    'ferry update (warm cache)' 'ferry update (sent by the SDK)')
  commands+=("env XDG_CACHE_HOME=$scratch/warm ${absent[*]}" "COLD ${absent[*]}"
    "env XDG_CACHE_HOME=$scratch/warm FERRY_CLI_EARLY=0 ${absent[*]}"
    "env XDG_CACHE_HOME=$scratch/warm ${update[*]}" "env XDG_CACHE_HOME=$scratch/warm FERRY_CLI_EARLY=0 ${update[*]}")
  server=yes
else
  server=no
fi

echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "machine: $(nproc) cores, node $(node --version), $(uname -sm), load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?')"
echo "runs:    $runs each, in turns (wall seconds)"
[[ $server == no ]] && echo "server:  Temporal does not answer (npm run local:up): only the commands that need none"
echo

# One run of command $1 (an index); the cold variant gets a cache folder of its own each time.
run_one() {
  local -a argv
  read -r -a argv <<<"${commands[$1]}"
  if [[ ${argv[0]} == COLD ]]; then
    wall env XDG_CACHE_HOME="$(mktemp -d -p "$scratch")" "${argv[@]:1}"
  else
    wall "${argv[@]}"
  fi
}

for i in "${!commands[@]}"; do run_one "$i" >/dev/null; done # warm the file cache and the warm code cache
for ((r = 0; r < runs; r++)); do
  for i in "${!commands[@]}"; do echo "$(run_one "$i")" >>"$scratch/times-$i"; done
done
printf '%-40s %8s %8s\n' command median max
for i in "${!commands[@]}"; do
  read -r median max < <(stats <"$scratch/times-$i")
  printf '%-40s %8s %8s\n' "${labels[$i]}" "$median" "$max"
done
