#!/usr/bin/env bash
# The main job, locally: bring the stack up (Temporal, Kubernetes with simulated GPU nodes, the engine stand-in
# supervisor, a Ferry worker), serve an example model through Ferry, show it Ready with its endpoint, send one
# completion through that endpoint, and say where the Web UI is.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
# --engine vllm (or FERRY_ENGINE=vllm): the real engine, and examples/tiny.yaml, a real model from the local Hub.
parse_engine "$@"
default_example=$repo/examples/qwen.yaml
[ "$engine" = vllm ] && default_example=$repo/examples/tiny.yaml
example=${rest[0]:-$default_example}

bash "$here/up.sh" --engine "$engine"
set -a; source "$envfile"; set +a
ferry() { node "$repo/bin/ferry.js" "$@"; }

name=$(node -e "const y=require('yaml');const d=y.parse(require('fs').readFileSync(process.argv[1],'utf8'));console.log(d.metadata.name, d.metadata.namespace ?? 'default', d.spec?.engine?.servedModelName ?? d.metadata.name)" "$example")
read -r model namespace served <<<"$name"

echo
echo "== ferry serve -f ${example#"$repo"/} --wait"
ferry serve -f "$example" --wait --timeout 10m
echo
echo "== ferry status $model -n $namespace"
ferry status "$model" -n "$namespace"
endpoint=$(ferry status "$model" -n "$namespace" -o json | node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>console.log(JSON.parse(s).endpoint))")

echo
if [ "$engine" = vllm ]; then
  echo "== one completion through $endpoint (a real vLLM on this machine's CPUs; random weights, so the text is noise)"
else
  echo "== one completion through $endpoint (the vLLM stand-in; see deploy/engine-sim/README.md)"
fi
curl -sf "$endpoint/v1/completions" -H 'content-type: application/json' \
  -d "{\"model\":\"$served\",\"prompt\":\"Ferry carries models across\",\"max_tokens\":16}" |
  node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const r=JSON.parse(s);console.log('answer:', JSON.stringify(r.choices[0].text));console.log('usage:', JSON.stringify(r.usage))})"

echo
echo "Temporal Web UI: $TEMPORAL_UI_URL/namespaces/default/workflows?query=FerryModel%3D%22$model%22"
echo "Delete it with: npx ferry delete $model -n $namespace --wait    Stop everything: npm run local:down"
