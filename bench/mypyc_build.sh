#!/usr/bin/env bash
# A mypyc-compiled copy of this checkout, to measure (docs/benchmarks.md, "mypyc"); not an install path.
#
#   bench/mypyc_build.sh [DIR]      # default /tmp/interlock-mypyc; ~4-8 min of gcc on 2 cores
#   cd DIR && PYTHONPATH=$PWD python bench/hot_path.py           # the compiled tree's own code
#   cd DIR && PYTHONPATH=$PWD python bench/gateway.py --wrk      # the whole server (run from DIR)
#
# Copies the working tree (tracked and untracked files, not .git) to DIR and compiles MODULES there in
# place (a .so beside each .py: Python imports the extension first). The checkout itself is untouched.
# On the tree of 2026-12-02's merges the compiled server refused every request (docs/benchmarks.md).
# Needs a C compiler, the Python headers and mypy (the dev extra's); a module that is gone is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-/tmp/interlock-mypyc}"
# The modules that ran per request when this was measured, and the adapters and surfaces that subclass
# their classes. Left out for what mypyc refused: runtime/request/router.py (`continue` inside try/finally is
# unimplemented); books/record.py, request/services.py, books/metrics.py, net/connections.py (dataclass or class fields
# annotated with TYPE_CHECKING-only types: a compiled class looks them up at import, KeyError);
# app/server.py (a test subclasses its Supervisor); request/resume.py (an async generator: unimplemented);
# request/lifecycle.py (its Exchange's fields are annotated with TYPE_CHECKING-only types, as above: the
# lifecycle imports at most 11 modules; compiled, the import raised KeyError 'RequestServices').
modules="loaded/access loaded/callers app/gateway base/asgi books/facts books/fit fleet/prefix
  guards/capability guards/context_fit guards/circuit guards/preflight books/health
  books/journal books/learned books/estimate request/resolve request/keepalive
  features/taught features/ledger
  surfaces/anthropic surfaces/base surfaces/ollama surfaces/openai surfaces/responses upstream/anthropic
  upstream/base net/client net/cycle upstream/exchange net/http1 net/transport net/http_errors upstream/ollama
  upstream/openai usage/base usage/ledger usage/memory usage/metering usage/postgres usage/sql usage/sqlite
  wire/anthropic wire/anthropic_caller wire/base wire/fields wire/ollama
  wire/ollama_caller wire/openai_chat wire/openai_responses wire/sse"
rm -rf "$out" && mkdir -p "$out"
git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - | tar -xf - -C "$out"
# mypyc builds in a folder holding only the package (setuptools refuses a flat layout of several
# top-level folders), then the extensions go beside their .py files in DIR
mkdir "$out/.mypyc" && cp -r "$out/interlock" "$out/pyproject.toml" "$out/.mypyc/"
cd "$out/.mypyc"
files=()
for m in $modules; do
  if [ -f "interlock/runtime/$m.py" ]; then files+=("interlock/runtime/$m.py"); else echo "gone: $m" >&2; fi
done
mypyc "${files[@]}"
find . -name '*.so' -not -path './build/*' | tar -T - -cf - | tar -xf - -C "$out"
cd "$out" && rm -rf .mypyc
echo "compiled ${#files[@]} modules in $out"
