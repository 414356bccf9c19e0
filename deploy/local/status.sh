#!/usr/bin/env bash
# Prints each component of the local stack: running or not, and its log file.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

all=0
for c in "${components[@]}"; do
  if is_running "$c"; then
    printf '%-24s running (pid %s)  log: %s\n' "$c" "$(cat "$(pidfile "$c")")" "$run/logs/$c.log"
  else
    printf '%-24s stopped\n' "$c"
    all=1
  fi
done
if [ -f "$envfile" ]; then echo; cat "$envfile"; fi
exit $all
