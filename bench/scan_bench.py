"""How long `interlock lint CONFIG --scan PATH` takes on a generated tree of source files.

Generates a tree like a mid-sized monorepo (TypeScript, Python, Go, Markdown, JSON; a few binary files;
a `node_modules` and a virtual environment that must be skipped), plants hard-coded models in some
files, then times the scan in-process (``scan_into``) and end to end (`interlock lint` as a subprocess,
interpreter start-up and compile included). Page cache is warm after the first run; the median is shown.

    .venv/bin/python bench/scan_bench.py [--files 2500] [--runs 5] [--seed 1] [--hit-every 50]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from interlock.compiler import compile_config
from interlock.scan import scan_into

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = (".ts", ".tsx", ".py", ".go", ".md", ".json", ".svelte")
MODELS = ("ollama/qwen2.5:7b", "groq/llama-3.1-8b-instant", "openrouter/openai/gpt-4o", "ollama/gemma3:4b")
WORDS = ("const", "model", "request", "response", "alias", "fallback", "stream", "token", "route", "health")


def _source(rng: random.Random, size: int, hit: bool) -> str:
    lines = []
    total = 0
    while total < size:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
        line = f"  {words} = fetch('https://api.example.com/v1/{rng.choice(WORDS)}'); // {rng.random():.6f}"
        lines.append(line)
        total += len(line) + 1
    if hit:
        lines.insert(rng.randrange(len(lines)), f"const MODEL = '{rng.choice(MODELS)}';")
    return "\n".join(lines) + "\n"


def generate(root: Path, files: int, seed: int, every: int = 50) -> tuple[int, int]:
    """Write the tree; returns (files that should be scanned, planted hits)."""
    rng = random.Random(seed)
    shutil.copy(ROOT / "config.rtx4090.yaml", root / "config.rtx4090.yaml")
    shutil.copytree(ROOT / "aliases", root / "aliases")
    scanned = hits = 0
    for index in range(files):
        folder = root / "apps" / f"app{index % 12}" / "src" / f"module{index % 37}"
        folder.mkdir(parents=True, exist_ok=True)
        if index % 100 == 0:  # binary assets
            (folder / f"asset{index}.png").write_bytes(b"\x89PNG\r\n\x1a\n\0" + os.urandom(20_000))
            continue
        hit = index % every == 1 % every
        size = int(rng.lognormvariate(8.3, 0.9))  # median ~4 KB, a long tail of large files
        path = folder / f"file{index}{rng.choice(EXTENSIONS)}"
        path.write_text(_source(rng, size, hit), encoding="utf-8")
        scanned += 1
        hits += hit
    for skipped in ("node_modules/pkg", ".venv/lib/python3.11/site-packages/pkg"):
        folder = root / skipped
        folder.mkdir(parents=True)
        for index in range(500):
            (folder / f"dep{index}.js").write_text(_source(rng, 4000, True), encoding="utf-8")
    (root / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    return scanned, hits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2500)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--hit-every",
        type=int,
        default=50,
        help="plant a hard-coded model in every Nth file (1: every file, so the regex runs on all of them)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scan-bench-") as tmp:
        root = Path(tmp)
        expected_files, expected_hits = generate(root, args.files, args.seed, args.hit_every)
        size = sum(p.stat().st_size for p in (root / "apps").rglob("*") if p.is_file())
        os.chdir(root)
        inproc = []
        stats = None
        for _ in range(args.runs):
            ctx = compile_config("config.rtx4090.yaml")
            start = time.perf_counter()
            stats = scan_into(ctx, "config.rtx4090.yaml", ["."])
            inproc.append(time.perf_counter() - start)
        assert stats is not None
        assert (stats.files, stats.hits) == (expected_files, expected_hits), (
            stats,
            expected_files,
            expected_hits,
        )
        cli = []
        interlock = Path(sys.executable).parent / "interlock"
        for _ in range(args.runs):
            start = time.perf_counter()
            done = subprocess.run(
                [str(interlock), "lint", "config.rtx4090.yaml", "--scan", ".", "--format", "github"],
                capture_output=True,
                check=False,
            )
            cli.append(time.perf_counter() - start)
            assert done.stdout.count(b"IL601") == expected_hits
        print(
            f"tree: {args.files} files ({expected_files} text, {args.files - expected_files} binary, "
            f"{size / 1e6:.1f} MB) + 1000 files in node_modules/.venv (skipped)"
        )
        print(
            f"found: {stats.hits} hard-coded models in {stats.files} scanned files, {stats.skipped} skipped"
        )
        print(
            f"scan_into (in-process), median of {args.runs}: {statistics.median(inproc) * 1000:.0f} ms "
            f"(min {min(inproc) * 1000:.0f}, max {max(inproc) * 1000:.0f})"
        )
        median = statistics.median(cli) * 1000
        print(
            f"`interlock lint --scan .` (subprocess), median of {args.runs}: {median:.0f} ms "
            f"(min {min(cli) * 1000:.0f}, max {max(cli) * 1000:.0f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
