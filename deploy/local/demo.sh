#!/usr/bin/env bash
# The main job, locally: bring the stack up (Temporal, Kubernetes with simulated GPU nodes, the engine stand-in
# supervisor, a Ferry worker), serve an example model through Ferry, show it Ready with its endpoint, send one
# completion through that endpoint, and say where the Web UI is.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
example=${1:-$repo/examples/qwen.yaml}

bash "$here/up.sh"
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
echo "== one completion through $endpoint (the vLLM stand-in; see deploy/engine-sim/README.md)"
curl -sf "$endpoint/v1/completions" -H 'content-type: application/json' \
  -d "{\"model\":\"$served\",\"prompt\":\"Ferry carries models across\",\"max_tokens\":16}" |
  node -e "let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{const r=JSON.parse(s);console.log('answer:', JSON.stringify(r.choices[0].text));console.log('usage:', JSON.stringify(r.usage))})"

echo
echo "Temporal Web UI: $TEMPORAL_UI_URL/namespaces/default/workflows?query=FerryModel%3D%22$model%22"
echo "Delete it with: npx ferry delete $model -n $namespace --wait    Stop everything: npm run local:down"
