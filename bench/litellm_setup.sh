#!/usr/bin/env bash
# Install LiteLLM's proxy in a virtual environment of its own, for bench/compare.py.
#
#   bench/litellm_setup.sh                 # -> bench/.litellm-venv (gitignored)
#   bench/litellm_setup.sh /path/to/venv   # anywhere else; pass --litellm PATH/bin/litellm to compare.py
#   LITELLM_SPEC='litellm[proxy]==1.108.7' bench/litellm_setup.sh   # pin a version
#
# LiteLLM gets its own environment because it pins many libraries (pydantic, fastapi, openai, ...) that
# must not change interlock's own. Needs Python 3.10+ (python3 on PATH, or $PYTHON) and PyPI access.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${1:-$here/.litellm-venv}"
python="${PYTHON:-python3}"
spec="${LITELLM_SPEC:-litellm[proxy]}"

if [[ ! -x "$venv/bin/python" ]]; then
    echo "creating $venv"
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
echo "installing $spec into $venv (a few minutes: it is a large dependency tree)"
"$venv/bin/python" -m pip install --quiet "$spec"
version="$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("litellm"))')"
echo "litellm $version ready: $venv/bin/litellm"
echo "run: .venv/bin/python bench/compare.py --litellm $venv/bin/litellm"
