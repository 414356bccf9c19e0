#!/usr/bin/env bash
# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from the Go module proxy
# into a cache outside the clone. Idempotent: a binary that is already built for the pinned version is kept.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/versions.env"

cache=${FERRY_CACHE:-$HOME/.cache/ferry}
bin="$cache/bin"
mkdir -p "$bin"
export GOFLAGS=-mod=mod

# kubectl installs the Gateway API Inference Extension's CRDs (up.sh), and is there for people who want to look around.
kube_commands="kube-apiserver kube-controller-manager kube-scheduler kubectl"

log() { printf '[build-kube] %s\n' "$*" >&2; }

have() { [ -x "$bin/$1" ] && [ -f "$bin/$1.version" ] && [ "$(cat "$bin/$1.version")" = "$2" ]; }

build_kubernetes() {
  local v=$KUBERNETES_VERSION staging=v0.${KUBERNETES_VERSION#v1.}
  local all=1
  for c in $kube_commands; do have "$c" "$v" || all=0; done
  if [ $all = 1 ]; then log "kubernetes $v already built"; return; fi
  local mod="$cache/src/kubernetes-$v"
  mkdir -p "$mod"
  cd "$mod"
  if [ ! -f go.mod ]; then
    log "preparing wrapper module for k8s.io/kubernetes $v"
    go mod init ferry.local/kube-build >/dev/null 2>&1
    # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local paths;
    # point each at its published version instead.
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    local stagings
    stagings=$(grep -E '^\s*k8s.io/[a-z0-9-]+ => \./staging' "$gomod" | awk '{print $1}')
    for m in $stagings; do go mod edit -replace "$m=$m@$staging"; done
    go mod edit -require "k8s.io/kubernetes@$v"
  fi
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$v" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"
  for c in $kube_commands; do
    if have "$c" "$v"; then continue; fi
    log "building $c $v (cold: many minutes on 2 cores)"
    go get "k8s.io/kubernetes/cmd/$c@$v" >/dev/null 2>&1 || true
    go build -trimpath -ldflags "$ldflags" -o "$bin/$c" "k8s.io/kubernetes/cmd/$c"
    echo "$v" > "$bin/$c.version"
  done
}

build_etcd() {
  local v=$ETCD_VERSION
  if have etcd "$v"; then log "etcd $v already built"; return; fi
  local mod="$cache/src/etcd-$v"
  mkdir -p "$mod"
  cd "$mod"
  if [ ! -f go.mod ]; then
    go mod init ferry.local/etcd-build >/dev/null 2>&1
    cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    go get "go.etcd.io/etcd/server/v3@$v" >/dev/null
    go mod tidy >/dev/null
  fi
  log "building etcd $v"
  go build -trimpath -ldflags "-s -w" -o "$bin/etcd" .
  echo "$v" > "$bin/etcd.version"
}

build_kwok() {
  local v=$KWOK_VERSION
  if have kwok "$v"; then log "kwok $v already built"; return; fi
  log "building kwok $v"
  GOBIN="$bin" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$v"
  echo "$v" > "$bin/kwok.version"
  # KWOK's stage definitions ship in its module source; keep a copy beside the binary.
  local src
  src=$(go mod download -json "sigs.k8s.io/kwok@$v" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  rm -rf "$cache/kwok-stages" && cp -r "$src/kustomize/stage" "$cache/kwok-stages" && chmod -R u+w "$cache/kwok-stages"
}

what=${1:-all}
case $what in
  etcd) build_etcd ;;
  kubernetes) build_kubernetes ;;
  kwok) build_kwok ;;
  all) build_etcd; build_kwok; build_kubernetes ;;
  *) echo "usage: $0 [all|etcd|kubernetes|kwok]" >&2; exit 2 ;;
esac
