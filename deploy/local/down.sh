#!/usr/bin/env bash
# Stops exactly what up.sh started (by the PID files in the run directory), in reverse order.
# `down.sh temporal` stops only that component; with none named, cluster east (`up.sh --clusters 2`) stops too, and
# `down.sh east` stops only cluster east. Data (Temporal's SQLite file, etcd) is kept; `--purge` removes it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

purge=0
want=()
for a in "$@"; do
  case $a in
    --purge) purge=1 ;;
    *) want+=("$a") ;;
  esac
done
if [ ${#want[@]} -eq 0 ]; then
  for ((i = ${#all_components[@]} - 1; i >= 0; i--)); do want+=("${all_components[$i]}"); done
fi

stop() {
  local name=$1 f pid
  f=$(pidfile "$name")
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $name (pid $pid)"
    # setsid made each component its own process group: stop the group, children included.
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    # The node agent stops its pods' processes first (each gets 5 s after SIGTERM).
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

stop_east() {
  [ "$cluster_name" != east ] && [ -d "$east_run" ] || return 0
  local east_reversed=() i
  for ((i = ${#east_components[@]} - 1; i >= 0; i--)); do east_reversed+=("${east_components[$i]}"); done
  env "${east_env[@]}" bash "$here/down.sh" "${east_reversed[@]}"
}

if [ "${want[*]}" = east ]; then
  stop_east
  [ ! -f "$envfile" ] || sed -i '/^KUBECONFIG_EAST=/d' "$envfile"
  exit 0
fi
# Cluster east first (its worker polls this stack's Temporal), when all is stopped.
if [ ${#want[@]} -eq ${#all_components[@]} ]; then stop_east; fi
for c in "${want[@]}"; do stop "$c"; done

if [ $purge = 1 ]; then
  log "removing $run"
  rm -rf "$run" "$envfile"
fi
