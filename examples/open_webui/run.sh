#!/usr/bin/env bash
# Open WebUI, unchanged, through interlock in a real Chromium page: one chat over its Ollama connection,
# one over its OpenAI connection (examples/open_webui/drive.py says what runs). Run it from the
# project's venv before each release; its output is in docs/clients.md.
#
# Open WebUI gets a venv of its own, never the project's: the first run installs it there (PyPI
# `open-webui`, with torch: ~12 minutes and ~7 GB on a 2-core machine), later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/../.."
OPEN_WEBUI_VERSION=0.12.4  # the version whose requests are in tests/fixtures/clients/
OPEN_WEBUI_VENV="${OPEN_WEBUI_VENV:-$HOME/.cache/interlock/open-webui}"
installed() {
  "$OPEN_WEBUI_VENV/bin/python" - "$OPEN_WEBUI_VERSION" 2>/dev/null <<'PY'
import importlib.metadata, sys
sys.exit(importlib.metadata.version("open-webui") != sys.argv[1])
PY
}
if ! installed; then
  python3.11 -m venv "$OPEN_WEBUI_VENV"
  "$OPEN_WEBUI_VENV/bin/pip" install -q "open-webui==$OPEN_WEBUI_VERSION"
fi
command -v chromium >/dev/null || { echo "no chromium on PATH (apt-get install chromium)" >&2; exit 1; }
OPEN_WEBUI="$OPEN_WEBUI_VENV/bin/open-webui" exec "${PYTHON:-python}" examples/open_webui/drive.py "$@"
