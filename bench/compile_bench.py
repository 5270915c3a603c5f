"""Compile generated configurations of 10 to 10,000 aliases (200 Ollama workers) and print the timings.

Usage: python bench/compile_bench.py [--sizes 10,100,1000,10000] [--repeat 3] [--workers 200]

Each configuration is split like a real one: a main file with providers, workers, health and timeouts,
and an included file with the aliases and model facts. Every alias has a three-entry chain: a local
Ollama model, a cloud model, and every tenth alias names an earlier alias (nested expansion). The
figures reported are the best of ``--repeat`` runs, measured with ``time.perf_counter``: `compile s` is
``compile_config`` (read, parse, every pass, emit and validate the plan), `to JSON s` is writing the
plan's canonical JSON.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from interlock.compiler import compile_config
from interlock.schema.canonical import canonical_json

CLOUDS = ("groq", "openrouter", "google", "mistral", "together")
LOCAL_PROVIDERS = 10
LOCAL_MODELS = 60


def generate(folder: Path, aliases: int, workers: int) -> Path:
    """Write ``main.yaml`` and ``aliases.yaml`` into ``folder``; return the main file."""
    main = ["version: 1", "include: [aliases.yaml]", "server:", "  alias_namespace: gen/", "providers:"]
    per_provider = max(workers // LOCAL_PROVIDERS, 1)
    for p in range(LOCAL_PROVIDERS):
        main += [f"  local{p}:", "    kind: ollama", "    timeouts: {first_byte: 120s}", "    workers:"]
        for w in range(per_provider):
            n = p * per_provider + w
            main += [
                f"      - name: box{n}",
                f"        url: http://10.{n // 250}.{n % 250}.1:11434",
                f"        profile: {('rtx4090', 'mac-studio-256g', 'cpu-only')[n % 3]}",
                "        max_concurrent: 4",
                '        model_concurrency: {"qwen3:8b": 2, "gemma4:*": 1, "m1*": 2, "*": 1}',
            ]
    for cloud in CLOUDS:
        main += [
            f"  {cloud}:",
            "    kind: openai",
            f"    base_url: https://api.{cloud}.example/v1",
            f"    api_key_env: {cloud.upper()}_API_KEY",
        ]
    main += [
        "health: {probe_interval: 30s, probe_timeout: 3s}",
        "timeouts: {connect: 2s, first_byte: 60s, total: 10m}",
    ]
    facts = ["models:"]
    lines = ["aliases:"]
    for i in range(aliases):
        local = f"local{i % LOCAL_PROVIDERS}/m{(i // LOCAL_PROVIDERS) % LOCAL_MODELS}:7b"
        cloud = f"{CLOUDS[i % len(CLOUDS)]}/model-{i}"
        chain = [local, cloud]
        if i % 10 == 9:
            chain.append(f"gen/a{i - 9}")
        else:
            chain.append(f"{CLOUDS[(i + 1) % len(CLOUDS)]}/model-{i}-b")
        lines += [f"  gen/a{i}:", f"    description: generated alias {i}", f"    chain: [{', '.join(chain)}]"]
        if i < LOCAL_MODELS * LOCAL_PROVIDERS:
            facts.append(f"  {local}: {{capabilities: [completion, tools], context_tokens: 32768}}")
    (folder / "main.yaml").write_text("\n".join(main) + "\n", encoding="utf-8")
    (folder / "aliases.yaml").write_text("\n".join(lines + facts) + "\n", encoding="utf-8")
    return folder / "main.yaml"


def measure(path: Path, repeat: int) -> tuple[float, float, int, int, int]:
    """Best compile and serialise times in seconds, diagnostics, plan bytes, and source lines."""
    best_compile = best_json = float("inf")
    diagnostics = size = 0
    for _ in range(repeat):
        start = time.perf_counter()
        ctx = compile_config(str(path))
        middle = time.perf_counter()
        text = canonical_json(ctx.plan.model_dump(mode="json")) if ctx.plan else ""
        end = time.perf_counter()
        best_compile, best_json = min(best_compile, middle - start), min(best_json, end - middle)
        diagnostics, size = len(ctx.sink.items), len(text)
    lines = sum(len(p.read_text().splitlines()) for p in path.parent.glob("*.yaml"))
    return best_compile, best_json, diagnostics, size, lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=200)
    args = parser.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs")
    print(
        f"{'aliases':>8} {'workers':>8} {'yaml lines':>10} {'compile s':>10} {'to JSON s':>10} "
        f"{'plan KiB':>9} {'diags':>6}"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            path = generate(Path(tmp), size, args.workers)
            seconds, json_seconds, diagnostics, plan_bytes, lines = measure(path, args.repeat)
        print(
            f"{size:>8} {args.workers:>8} {lines:>10} {seconds:>10.3f} {json_seconds:>10.3f} "
            f"{plan_bytes / 1024:>9.0f} {diagnostics:>6}"
        )
        if diagnostics:
            print("  (the generated configuration has diagnostics: a bug in the generator)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
