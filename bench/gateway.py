"""Requests per second and added latency of `interlock serve` in front of a fast fake upstream.

Starts the fake OpenAI upstream in its own process, compiles a one-alias plan for it, starts
`interlock serve` (one worker unless --workers), and drives both the fake directly and the gateway with
bench/load.py at each concurrency. Prints req/s, latency percentiles, the p50 added by the gateway, and
the gateway's own CPU time per request (from /proc: the cost that matters when cores are scarce).

    .venv/bin/python bench/gateway.py [--seconds 5] [--concurrency 1 16] [--workers 1] [--stream] [--wrk]
                                      [--base DIR] [--rounds 1]

``--base DIR`` also serves the gateway from another checkout (e.g. ``git worktree add --detach DIR
main``) beside this one, the two taking turns at each concurrency for ``--rounds`` rounds, so a
before/after comes from one run; the medians close the report.

On a 2-core machine the load generator, the fake and the gateway share the cores: compare figures
taken on the same machine only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO

sys.path.insert(0, str(Path(__file__).resolve().parent))

from load import LoadResult, chat_body, run_load, run_wrk

from interlock.runtime.app.server import wait_ready
from interlock.testing.fake_process import FakeProcess

CONFIG = """\
version: 1
server: {{default_alias: bench/chat, alias_namespace: bench/}}
providers:
  fake: {{kind: openai, base_url: "{url}", api_key_env: BENCH_KEY}}
aliases:
  bench/chat: {{description: bench, chain: [fake/bench-model]}}
"""


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """CPU of ``pid`` and its children (worker processes)."""
    total = cpu_seconds(pid)
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        for child in children.read_text().split():
            total += tree_cpu_seconds(int(child))
    return total


def serve_command(
    config: Path, source: Path | None = None, *extra: str
) -> tuple[list[str], dict[str, str], Path | None]:
    """The command, environment and working folder of `interlock serve CONFIG --port 0 EXTRA...`, of
    this checkout or, ``source``, of that source tree (a worktree or `git archive` of another commit)."""
    env = {**os.environ, "BENCH_KEY": "sk-bench"}
    cwd = None
    if source is not None:
        env["PYTHONPATH"] = str(source.resolve())
        cwd = source.resolve()  # not this checkout, whose interlock/ `-m` would import first
    return [sys.executable, "-m", "interlock", "serve", str(config), "--port", "0", *extra], env, cwd


def launched(
    command: list[str], env: dict[str, str], cwd: Path | None, wait_s: float = 10
) -> tuple[subprocess.Popen[bytes], list[str], IO[bytes]]:
    """``command`` started, its first line of output read and split (a server says where it listens);
    its stderr kept in a temporary file, returned open (RuntimeError with it when that line is short)."""
    log = tempfile.TemporaryFile()  # noqa: SIM115 - the server's stderr, kept open while it runs
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, env=env, cwd=cwd)
    assert proc.stdout is not None
    first = proc.stdout.readline().decode().split()
    if len(first) < 3:
        proc.wait(timeout=wait_s)
        log.seek(0)
        raise RuntimeError(f"{command} did not start:\n{log.read().decode(errors='replace')}")
    return proc, first, log


def start_gateway(
    config: Path, workers: int, source: Path | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """`interlock serve` with one line of output read; ``source``: run it from that source tree (a
    `git archive` of another commit) instead of the installed one."""
    proc, first, log = launched(*serve_command(config, source, "--workers", str(workers)))
    url = first[2]
    if not wait_ready(url, 30, alive=lambda: proc.poll() is None):
        proc.kill()
        log.seek(0)
        raise RuntimeError(
            f"interlock serve at {url} never became ready:\n{log.read().decode(errors='replace')}"
        )
    return proc, url


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument(
        "--wrk", action="store_true", help="drive the load with wrk (far cheaper than aiohttp)"
    )
    parser.add_argument("--base", type=Path, default=None, help="also serve from this checkout")
    parser.add_argument("--rounds", type=int, default=1, help="turns of each gateway per concurrency")
    args = parser.parse_args()

    def load(url: str, model: str, concurrency: int, warmup_s: float = 0.5) -> LoadResult:
        body = chat_body(model, stream=args.stream)
        if args.wrk:
            return run_wrk(url, body, concurrency, args.seconds)
        return asyncio.run(run_load(url, body, concurrency, args.seconds, warmup_s=warmup_s))

    with FakeProcess("openai", "--no-record") as fake, tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "bench.yaml"
        config.write_text(CONFIG.format(url=fake.base_url))
        gateways = {"this": start_gateway(config, args.workers)}
        if args.base is not None:
            gateways["base"] = start_gateway(config, args.workers, args.base)
        figures: dict[tuple[str, int], list[tuple[float, float]]] = {}
        try:
            workers = f"{args.workers} worker(s)"
            urls = "   ".join(f"{name} {url}" for name, (_, url) in gateways.items())
            print(f"fake upstream {fake.base_url}   gateway {urls} ({workers})   stream={args.stream}")
            for concurrency in args.concurrency:
                for round_ in range(args.rounds):
                    direct = load(f"{fake.base_url}/chat/completions", "bench-model", concurrency)
                    print(f"  direct   {direct.line()}")
                    turns = list(gateways.items())
                    for name, (gateway, url) in turns if round_ % 2 == 0 else turns[::-1]:
                        before = tree_cpu_seconds(gateway.pid)
                        through = load(f"{url}/v1/chat/completions", "bench/chat", concurrency, warmup_s=0)
                        cpu = tree_cpu_seconds(gateway.pid) - before
                        added = through.percentile_ms(0.5) - direct.percentile_ms(0.5)
                        per_request = cpu / through.requests * 1e6 if through.requests else float("nan")
                        figures.setdefault((name, concurrency), []).append((through.rps, per_request))
                        print(f"  {name:8} {through.line()}")
                        print(
                            f"           p50 added: {added:.2f} ms; gateway CPU {per_request:.0f} µs/request"
                        )
            if args.rounds > 1 or len(gateways) > 1:
                print("medians:")
                for (name, concurrency), rows in figures.items():
                    rps = statistics.median(r for r, _ in rows)
                    cpu_us = statistics.median(c for _, c in rows)
                    print(
                        f"  {name:8} c={concurrency:<3} {rps:9.1f} req/s   "
                        f"gateway CPU {cpu_us:.0f} µs/request"
                    )
        finally:
            for gateway, _ in gateways.values():
                gateway.terminate()
                gateway.wait(10)


if __name__ == "__main__":
    main()
