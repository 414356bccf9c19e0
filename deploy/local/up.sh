#!/usr/bin/env bash
# Brings the local stack up: installs what is missing, then starts (bound to 127.0.0.1 only) the Temporal dev
# server and a Kubernetes control plane with KWOK's simulated GPU nodes. A second run is a no-op when all is
# healthy. `up.sh temporal` (or any list of components) starts only those. `--clusters 2` adds a second control
# plane, cluster east, with a worker of its own (lib.sh, east_env).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/temporal-server.sh"

started_at=$SECONDS
parse_engine "$@"
want=("${rest[@]}")
[ ${#want[@]} -gt 0 ] || want=("${components[@]}")
[ "${FERRY_SKIP_INSTALL:-0}" = 1 ] || bash "$here/install.sh" "${want[@]}"
mkdir -p "$run/logs"
bash "$here/certs.sh"

# start NAME HEALTHCHECK-FUNCTION COMMAND...
start() {
  local name=$1 check=$2; shift 2
  if is_running "$name" && $check; then
    log "$name is already running (pid $(cat "$(pidfile "$name")"))"
    return
  fi
  if is_running "$name"; then
    log "$name is running but unhealthy; restarting it"
    bash "$here/down.sh" "$name"
  fi
  log "starting $name"
  [ -f "$run/logs/$name.log" ] && mv "$run/logs/$name.log" "$run/logs/$name.log.1"
  setsid "$@" >>"$run/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$(pidfile "$name")"
  if ! wait_for "$name" 90 $check; then
    tail -n 30 "$run/logs/$name.log" >&2 || true
    die "$name did not become healthy in 90s (log: $run/logs/$name.log)"
  fi
}

temporal_healthy() {
  if [ "$temporal_mode" = postgres ]; then
    "$temporal" operator cluster health --address "$host:$temporal_port" 2>/dev/null | grep -q SERVING
  else
    port_open "$temporal_port" && port_open "$temporal_ui_port"
  fi
}
postgres_healthy() { "$(postgres_bin)/pg_isready" -q -h "$host" -p "$postgres_port"; }
etcd_healthy() { curl -sf "http://$host:$etcd_port/health" | grep -q '"health":"true"'; }
apiserver_healthy() { kube_get /readyz >/dev/null; }
kcm_healthy() { curl -skf "https://$host:$kcm_port/healthz" >/dev/null; }
scheduler_healthy() { curl -skf "https://$host:$scheduler_port/healthz" >/dev/null; }
kwok_healthy() { curl -sf "http://$host:$kwok_port/healthz" >/dev/null; }
node_agent_healthy() { grep -q '"node agent ready"' "$run/logs/node-agent.log" 2>/dev/null; }
hub_healthy() { grep -q '"hub ready"' "$run/logs/hub.log" 2>/dev/null && curl -sf "http://$pod_gateway:$hub_port/api/models/ferry-local/tiny-llama/revision/main" >/dev/null; }
s3_healthy() { grep -q '"s3 ready"' "$run/logs/s3.log" 2>/dev/null && port_open_at "$pod_gateway" "$s3_port"; }
registry_healthy() { grep -q '"registry ready"' "$run/logs/registry.log" 2>/dev/null && port_open_at "$pod_gateway" "$registry_port"; }
engine_sim_healthy() { grep -q '"watching simulated engine pods"' "$run/logs/engine-sim.log" 2>/dev/null; }
worker_healthy() {
  "$temporal" task-queue describe --address "$host:$temporal_port" --task-queue "ferry-$cluster_name" -o json 2>/dev/null |
    grep -q '"identity"'
}

start_temporal() {
  # Another kind of server than the one running (`--temporal` changed): stopped first. Its workflows stay in its store.
  if is_running temporal && [ "$(cat "$run/temporal-mode" 2>/dev/null || echo dev)" != "$temporal_mode" ]; then
    log "switching Temporal to the $temporal_mode server"
    bash "$here/down.sh" temporal
  fi
  echo "$temporal_mode" > "$run/temporal-mode"
  if [ "$temporal_mode" = postgres ]; then
    start_temporal_server
    return
  fi
  # Back on the dev server: the database of Temporal's server is not needed (its data stays for a later switch).
  if is_running postgres; then bash "$here/down.sh" postgres; fi
  local sa=() a
  for a in "${search_attributes[@]}"; do sa+=(--search-attribute "$a"); done
  start temporal temporal_healthy "$temporal" server start-dev \
    --ip "$host" --port "$temporal_port" --ui-port "$temporal_ui_port" --http-port "$temporal_http_port" \
    --metrics-port "$temporal_metrics_port" --db-filename "$run/temporal.db" --namespace default \
    --log-level warn --ui-disable-news-fetch "${sa[@]}"
}

start_etcd() {
  start etcd etcd_healthy "$bin/etcd" --name ferry --data-dir "$run/etcd" \
    --listen-client-urls "http://$host:$etcd_port" --advertise-client-urls "http://$host:$etcd_port" \
    --listen-peer-urls "http://$host:$etcd_peer_port" --initial-advertise-peer-urls "http://$host:$etcd_peer_port" \
    --initial-cluster "ferry=http://$host:$etcd_peer_port" --listen-metrics-urls "" \
    --unsafe-no-fsync --log-level warn
}

start_apiserver() {
  start kube-apiserver apiserver_healthy "$bin/kube-apiserver" \
    --etcd-servers "http://$host:$etcd_port" --etcd-prefix "$etcd_prefix" \
    --bind-address "$host" --advertise-address "$host" --secure-port "$apiserver_port" \
    --endpoint-reconciler-type none \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP,ExternalIP,Hostname \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range "$service_cidr" \
    --authorization-mode RBAC \
    --enable-admission-plugins NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultStorageClass,DefaultTolerationSeconds,ResourceQuota,PodSecurity,Priority,StorageObjectInUseProtection,PersistentVolumeClaimResize,RuntimeClass \
    --profiling=false --v 1
}

start_kcm() {
  start kube-controller-manager kcm_healthy "$bin/kube-controller-manager" \
    --kubeconfig "$run/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig "$run/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig "$run/kube-controller-manager.kubeconfig" \
    --bind-address "$host" --secure-port "$kcm_port" \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --use-service-account-credentials \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --service-cluster-ip-range "$service_cidr" \
    --leader-elect=false --profiling=false --v 1
}

start_scheduler() {
  start kube-scheduler scheduler_healthy "$bin/kube-scheduler" \
    --kubeconfig "$run/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "$run/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig "$run/kube-scheduler.kubeconfig" \
    --bind-address "$host" --secure-port "$scheduler_port" \
    --leader-elect=false --profiling=false --v 1
}

# KWOK renews each simulated node's Lease (the heartbeat stage it pairs with writes node status only every 10 min);
# without it the node controller marks the nodes NotReady every minute and their pods not ready with them.
start_kwok() {
  local stages=$cache/kwok-stages configs=() f
  for f in "$stages/node/fast/node-initialize.yaml" "$stages/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
    "$here/kwok/volume-provision.yaml" "$stages/volume/fast/pv-delete.yaml" "$here/kwok/pod-stages.yaml"; do
    [ -f "$f" ] || die "missing KWOK stage file $f (run deploy/local/build-kube.sh kwok)"
    configs+=(--config "$f")
  done
  start kwok kwok_healthy "$bin/kwok" --kubeconfig "$run/kwok.kubeconfig" "${configs[@]}" \
    --manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --cidr 10.244.0.1/16 --node-ip 10.255.0.1 \
    --node-lease-duration-seconds 40 \
    --server-address "$host:$kwok_port" --v=warn
}

start_engine_sim() {
  [ -f "$endpoint_overrides" ] || echo '{}' > "$endpoint_overrides"
  start engine-sim engine_sim_healthy env KUBECONFIG="$kubeconfig" FERRY_ENDPOINT_OVERRIDES="$endpoint_overrides" \
    node --import tsx "$repo/deploy/engine-sim/supervisor-main.ts"
}

# The real engine's kubelet (deploy/local/node-agent): runs pods bound to its nodes as processes. Root: each pod gets a
# network namespace, a mount namespace and cgroups of its own.
start_node_agent() {
  [ "$(id -u)" = 0 ] || die "the node agent (--engine vllm) runs pods in namespaces and cgroups of their own: run local:up as root"
  [ -f "$agent_overrides" ] || echo '{}' > "$agent_overrides"
  start node-agent node_agent_healthy env KUBECONFIG="$run/node-agent.kubeconfig" FERRY_AGENT_STATE="$run/node-agent" \
    FERRY_AGENT_OVERRIDES="$agent_overrides" FERRY_POD_BRIDGE="$pod_bridge" FERRY_POD_GATEWAY="$pod_gateway" \
    FERRY_POD_PREFIX="${pod_cidr#*/}" FERRY_KUBELET_PORT="$kubelet_port" FERRY_PKI="$pki" \
    FERRY_VLLM_RUNTIME="$vllm_runtime" FERRY_VLLM_IMAGE="$VLLM_IMAGE" FERRY_KUBERNETES_VERSION="$KUBERNETES_VERSION" \
    node --import tsx "$repo/deploy/local/node-agent/main.ts"
}

# The local Hub (deploy/local/hub): olah behind a front that counts what it serves, on the pod network's gateway, where
# the agent's pods reach it (HF_ENDPOINT=http://10.245.0.1:16447). Needs the node agent's bridge.
start_hub() {
  start hub hub_healthy env FERRY_HUB_OLAH="$cache/hub/olah/bin/olah-cli" FERRY_HUB_MIRRORS="$hub_mirrors" \
    FERRY_HUB_STATE="$run/hub" FERRY_HUB_LISTEN="$pod_gateway:$hub_port" \
    node --import tsx "$repo/deploy/local/hub/main.ts"
}

# The local S3 store (deploy/local/s3): versitygw behind a front that counts what it serves, on the pod network's
# gateway beside the Hub, seeded with the Hub's tiny model; it makes the Secret local-s3 for examples/s3.yaml.
start_s3() {
  start s3 s3_healthy env KUBECONFIG="$kubeconfig" FERRY_S3_GATEWAY="$cache/s3/versitygw-$VERSITYGW_VERSION/versitygw" \
    FERRY_S3_STATE="$run/s3" FERRY_S3_LISTEN="$pod_gateway:$s3_port" \
    FERRY_S3_SEED="$hub_mirrors/models/ferry-local/tiny-llama" \
    node --import tsx "$repo/deploy/local/s3/main.ts"
}

# The local OCI registry (deploy/local/registry): the distribution registry behind the same front, seeded with the
# Hub's tiny model as an artifact; it makes the Secret local-registry for examples/oci.yaml.
start_registry() {
  start registry registry_healthy env KUBECONFIG="$kubeconfig" \
    FERRY_REGISTRY_BIN="$cache/registry/distribution-$DISTRIBUTION_VERSION/registry" \
    FERRY_REGISTRY_STATE="$run/registry" FERRY_REGISTRY_LISTEN="$pod_gateway:$registry_port" \
    FERRY_REGISTRY_SEED="$hub_mirrors/models/ferry-local/tiny-llama" \
    node --import tsx "$repo/deploy/local/registry/main.ts"
}

# The local worker serves cluster "default" (task queue ferry-default) with endpoints pointed at the stand-ins.
start_worker() {
  local ui=()
  [ "$temporal_mode" != dev ] || ui=(TEMPORAL_UI_URL="http://$host:$temporal_ui_port")
  start worker worker_healthy env KUBECONFIG="$kubeconfig" TEMPORAL_ADDRESS="$host:$temporal_port" \
    TEMPORAL_NAMESPACE=default "${ui[@]}" FERRY_CLUSTER="$cluster_name" \
    FERRY_ENDPOINT_MODE=override FERRY_ENDPOINT_OVERRIDES="$endpoint_overrides,$agent_overrides" \
    node --import tsx "$repo/worker/main.ts"
}

write_env() {
  mkdir -p "$(dirname "$envfile")"
  cat > "$envfile" <<ENV
KUBECONFIG=$kubeconfig
TEMPORAL_ADDRESS=$host:$temporal_port
ENV
  # Temporal's server on PostgreSQL has no Web UI; its metrics and its database are what bench:steady reads.
  if [ "$temporal_mode" = dev ]; then
    echo "TEMPORAL_UI_URL=http://$host:$temporal_ui_port" >> "$envfile"
  fi
  echo "TEMPORAL_METRICS_URL=http://$host:$temporal_metrics_port/metrics" >> "$envfile"
  if [ "$temporal_mode" = postgres ]; then echo "FERRY_TEMPORAL_POSTGRES=$host:$postgres_port" >> "$envfile"; fi
  # The second cluster's, while it runs (started now or by an earlier `--clusters 2`).
  if [ "$cluster_name" != east ] && [ -f "$east_run/kube-apiserver.pid" ] &&
    kill -0 "$(cat "$east_run/kube-apiserver.pid")" 2>/dev/null; then
    echo "KUBECONFIG_EAST=$east_run/admin.kubeconfig" >> "$envfile"
  fi
}

# Cluster east: the same script, for its components, from its own run directory (lib.sh, east_env).
start_east() {
  [ "$cluster_name" != east ] || die "--clusters 2 is for the first cluster's up.sh"
  log "starting cluster east"
  env "${east_env[@]}" bash "$here/up.sh" --engine sim --clusters 1 "${east_components[@]}" > /dev/null
}

# The Gateway API Inference Extension's CRDs (install.sh), so that the API server validates Ferry's InferencePool.
# With kubectl: client-node's typed serializer would drop the schema's `enum`, `default` and CEL rules.
apply_inference_crds() {
  [ -f "$inference_crds" ] || die "the Inference Extension CRDs are missing: run deploy/local/install.sh"
  KUBECONFIG=$kubeconfig "$bin/kubectl" apply --server-side --force-conflicts --field-manager=ferry-local-bootstrap \
    -f "$inference_crds" >/dev/null
  KUBECONFIG=$kubeconfig "$bin/kubectl" wait --for=condition=Established --timeout=60s \
    -f "$inference_crds" >/dev/null
  log "Gateway API Inference Extension $INFERENCE_EXTENSION_VERSION CRDs installed"
}

for c in "${want[@]}"; do
  case $c in
    postgres) start_postgres ;;
    temporal) start_temporal ;;
    etcd) start_etcd ;;
    kube-apiserver) start_apiserver ;;
    kube-controller-manager) start_kcm ;;
    kube-scheduler) start_scheduler ;;
    kwok) start_kwok; KUBECONFIG=$kubeconfig node --import tsx "$here/bootstrap.ts"; apply_inference_crds ;;
    engine-sim) start_engine_sim ;;
    node-agent) start_node_agent ;;
    hub) start_hub ;;
    s3) start_s3 ;;
    registry) start_registry ;;
    worker) start_worker ;;
    *) die "unknown component '$c' (one of: ${components[*]})" ;;
  esac
done

[ "$clusters" = 1 ] || start_east
write_env
echo "$engine" > "$run/engine"
log "stack is up in $((SECONDS - started_at))s"
cat "$envfile"
