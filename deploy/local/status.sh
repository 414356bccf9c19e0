#!/usr/bin/env bash
# Prints each component of the local stack: running or not, and its log file. The real engine's components (node-agent,
# hub, s3, registry) count only when the stack was last brought up with --engine vllm, and PostgreSQL only with
# --temporal postgres.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

parse_engine --engine "$(cat "$run/engine" 2>/dev/null || echo sim)"
all=0
for c in "${all_components[@]}"; do
  if is_running "$c"; then
    printf '%-24s running (pid %s)  log: %s\n' "$c" "$(cat "$(pidfile "$c")")" "$run/logs/$c.log"
  elif [[ " ${components[*]} " == *" $c "* ]]; then
    printf '%-24s stopped\n' "$c"
    all=1
  elif [ "$c" = postgres ]; then
    printf '%-24s not started (Temporal is the dev server; --temporal postgres starts it)\n' "$c"
  else
    printf '%-24s not started (the engine is the stand-in; --engine vllm starts it)\n' "$c"
  fi
done
# Cluster east, when it was started (`up.sh --clusters 2`).
if [ "$cluster_name" != east ] && [ -d "$east_run" ]; then
  echo
  echo "cluster east ($east_run):"
  for c in "${east_components[@]}"; do
    if [ -f "$east_run/$c.pid" ] && kill -0 "$(cat "$east_run/$c.pid")" 2>/dev/null; then
      printf '%-24s running (pid %s)  log: %s\n' "$c" "$(cat "$east_run/$c.pid")" "$east_run/logs/$c.log"
    else
      printf '%-24s stopped\n' "$c"
    fi
  done
fi
if [ -f "$envfile" ]; then echo; cat "$envfile"; fi
exit $all
