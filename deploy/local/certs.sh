#!/usr/bin/env bash
# Generates the local cluster's CA, serving and client certificates, the service-account signing key and a
# kubeconfig per client. Idempotent: existing files are kept.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
mkdir -p "$pki"
cd "$pki"

if [ ! -f ca.crt ]; then
  log "generating the cluster CA"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=ferry-local-ca" 2>/dev/null
fi

# client NAME CN [O]
client() {
  local name=$1 cn=$2 org=${3:-}
  [ -f "$name.crt" ] && return
  local subj="/CN=$cn"
  [ -n "$org" ] && subj="/O=$org$subj"
  openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' > "$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$name.crt" -days 3650 \
    -extfile "$name.ext" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

if [ ! -f apiserver.crt ]; then
  log "generating the API server's serving certificate"
  openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
  cat > apiserver.ext <<EXT
extendedKeyUsage=serverAuth
keyUsage=digitalSignature,keyEncipherment
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EXT
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 3650 \
    -extfile apiserver.ext 2>/dev/null
  rm -f apiserver.csr apiserver.ext
fi

# The node agent's serving certificate: the kubelet endpoint the API server reads container logs from.
if [ ! -f node-agent-serving.crt ]; then
  openssl req -newkey rsa:2048 -nodes -keyout node-agent-serving.key -out node-agent-serving.csr -subj "/CN=ferry-node-agent" 2>/dev/null
  printf 'extendedKeyUsage=serverAuth\nkeyUsage=digitalSignature,keyEncipherment\nsubjectAltName=IP:%s,IP:127.0.0.1\n' "$pod_gateway" > node-agent-serving.ext
  openssl x509 -req -in node-agent-serving.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out node-agent-serving.crt -days 3650 \
    -extfile node-agent-serving.ext 2>/dev/null
  rm -f node-agent-serving.csr node-agent-serving.ext
fi

client admin ferry-admin system:masters
client apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
client kube-controller-manager system:kube-controller-manager
client kube-scheduler system:kube-scheduler
client kwok kwok system:masters
client node-agent ferry-node-agent system:masters

if [ ! -f sa.key ]; then
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
fi

# kubeconfig FILE CLIENT
kubeconfig_for() {
  local file=$1 name=$2
  cat > "$file" <<KC
apiVersion: v1
kind: Config
clusters:
- name: ferry-local
  cluster:
    server: https://$host:$apiserver_port
    certificate-authority: $pki/ca.crt
users:
- name: $name
  user:
    client-certificate: $pki/$name.crt
    client-key: $pki/$name.key
contexts:
- name: ferry-local
  context: { cluster: ferry-local, user: $name }
current-context: ferry-local
KC
}
kubeconfig_for "$run/admin.kubeconfig" admin
kubeconfig_for "$run/kube-controller-manager.kubeconfig" kube-controller-manager
kubeconfig_for "$run/kube-scheduler.kubeconfig" kube-scheduler
kubeconfig_for "$run/kwok.kubeconfig" kwok
kubeconfig_for "$run/node-agent.kubeconfig" node-agent
