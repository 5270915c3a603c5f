"""How long `interlock serve` takes to be ready on a big plan (cold starts matter for rolling deploys).

Generates the configuration of bench/compile_bench.py (10,000 aliases, 200 Ollama workers, 5 cloud
providers by default), points every cloud provider at one fake OpenAI and every worker at its own
loopback address where nothing listens (``127.1.x.y:9``: the compiler refuses two workers with one URL,
and a refused connection ends a probe at once), so the first probe round, which readiness waits for,
runs without a network; compiles it to a plan file, then starts `interlock serve` on the plan file and
on the configuration, ``--runs`` times each, and prints the time from starting the process to its
``serving`` line and to ``/readyz`` 200.

It also times each step of loading the plan in this process (read, validate, content hash, references,
tables), and the JSON-schema check that loading ran before (for comparison: it now runs only to word
the errors of a plan that fails).

    .venv/bin/python bench/serve_start.py [--aliases 10000] [--workers 200] [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_bench import CLOUDS, generate

from interlock.testing.fake_process import FakeProcess

ENV = {f"{cloud.upper()}_API_KEY": "sk-bench" for cloud in CLOUDS}


def point_at_loopback(main: Path, openai_url: str) -> None:
    text = main.read_text()
    text = re.sub(r"http://10\.(\d+)\.(\d+)\.1:11434", r"http://127.1.\1.\2:9", text)
    text = re.sub(r"https://api\.[a-z]+\.example/v1", openai_url, text)
    main.write_text(text)


def ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/readyz", timeout=1) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, from /proc (the machine's noise does not add to it)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_once(path: Path) -> tuple[float, float, float]:
    """Seconds from spawning `interlock serve` to its serving line and to /readyz 200, and the CPU
    seconds it had used when ready."""
    env = {**os.environ, **ENV}
    command = [sys.executable, "-m", "interlock", "serve", str(path), "--port", "0", "--log-level", "warning"]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        serving = time.perf_counter() - started
        if not line.startswith("interlock serving "):
            raise RuntimeError(f"interlock serve did not start: {line!r}")
        url = line.split()[2]
        while not ready(url):
            if proc.poll() is not None:
                raise RuntimeError("interlock serve exited before it was ready")
            if time.perf_counter() - started > 120:
                raise RuntimeError("not ready after 120 s")
            time.sleep(0.005)
        return serving, time.perf_counter() - started, cpu_seconds(proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


def steps(plan_path: Path) -> list[tuple[str, float]]:
    """Each step of ``load_plan`` timed in this process (the collector paused, as loading does), and
    the checks it used to run (a full JSON-schema check; the content hash through ``json.dumps``)."""
    from interlock.common.gc_pause import collector_paused
    from interlock.runtime.base import gc_policy
    from interlock.runtime.loaded import plan as runtime_plan
    from interlock.schema.canonical import content_hash, has_content_hash

    timings: list[tuple[str, float]] = []
    with collector_paused():
        t = time.perf_counter()
        data = runtime_plan.read_plan_file(plan_path)
        timings.append(("read + parse the JSON", time.perf_counter() - t))
        t = time.perf_counter()
        plan = runtime_plan._validated(data, "bench")
        timings.append(("validate (strict model)", time.perf_counter() - t))
        t = time.perf_counter()
        has_content_hash(data, data["content_hash"])
        timings.append(("content hash (orjson's bytes)", time.perf_counter() - t))
        t = time.perf_counter()
        runtime_plan._check_references(plan, "bench")
        timings.append(("check references", time.perf_counter() - t))
        t = time.perf_counter()
        tables = runtime_plan.build_tables(plan, ENV, origin="bench")
        timings.append(("build the tables", time.perf_counter() - t))
        t = time.perf_counter()
        content_hash(dict(data))
        timings.append(("(before: content hash through json.dumps)", time.perf_counter() - t))
    thresholds = gc.get_threshold()
    t = time.perf_counter()
    gc_policy.settle()  # what `interlock serve` does once the plan is loaded, before serving
    timings.append(("collect and freeze (runtime/base/gc_policy.py)", time.perf_counter() - t))
    gc_policy.thaw()
    gc.set_threshold(*thresholds)
    del tables
    t = time.perf_counter()
    runtime_plan._validate_schema(data, "bench")
    timings.append(("(before: jsonschema check, no longer run on a valid plan)", time.perf_counter() - t))
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--aliases", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--no-config", action="store_true", help="start on the plan file only (compiling takes seconds)"
    )
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}", flush=True)
    with FakeProcess("openai", "--no-record") as openai, tempfile.TemporaryDirectory() as folder:
        main_file = generate(Path(folder), args.aliases, args.workers)
        point_at_loopback(main_file, openai.base_url)
        plan_path = Path(folder) / "plan.json"
        compiled = subprocess.run(
            [sys.executable, "-m", "interlock", "compile", str(main_file), "-o", str(plan_path)],
            capture_output=True,
            text=True,
            check=False,
        )
        if compiled.returncode != 0 or not plan_path.exists():
            raise SystemExit(f"compiling failed:\n{compiled.stdout}{compiled.stderr}")
        size = plan_path.stat().st_size
        print(f"{args.aliases} aliases, {args.workers} workers: plan {size / 1e6:.1f} MB", flush=True)
        sources = [("plan file (.json)", plan_path), ("configuration (.yaml)", main_file)]
        for label, path in sources[:1] if args.no_config else sources:
            results = [start_once(path) for _ in range(args.runs)]
            serving = sorted(r[0] for r in results)
            readied = sorted(r[1] for r in results)
            cpu = sorted(r[2] for r in results)
            print(
                f"  serve {label:<22} serving line {serving[len(serving) // 2]:6.2f} s   "
                f"ready {readied[len(readied) // 2]:6.2f} s   CPU when ready {cpu[len(cpu) // 2]:5.2f} s   "
                f"(medians of {args.runs}; ready min {readied[0]:.2f} s, max {readied[-1]:.2f} s)",
                flush=True,
            )
        print("  loading the plan file, step by step (in this process):")
        for name, seconds in steps(plan_path):
            print(f"    {name:<58} {seconds:6.3f} s")


if __name__ == "__main__":
    main()
