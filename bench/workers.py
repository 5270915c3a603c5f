"""`interlock serve --workers N` scaling: requests/s at 1, 2, 4 and 8 workers, one command.

Starts ``--upstreams`` fake OpenAI upstreams (one process each, so the upstream is not what limits a
many-core run), compiles a plan with one provider and one alias per upstream, and for each ``N`` in
``--workers`` starts `interlock serve --workers N` with its default shared slot state (the
supervisor's slot table, leased by the workers over a Unix socket: ``runtime/state/embedded.py``),
warms it up, and drives it with wrk (``--threads`` threads, ``--concurrency`` keep-alive connections,
requests spread round-robin over the aliases). ``--state-url redis://...`` runs the same with the
slots in Redis instead. It prints requests/s, p50 and p99, the gateway's CPU per request (all its
processes, from /proc) and the speed-up over one worker.

    .venv/bin/python bench/workers.py                          # 1 2 4 8 workers, 16 connections
    .venv/bin/python bench/workers.py --workers 1 2 --seconds 5

Everything runs on one machine: wrk and the upstreams take cores from the gateway's workers, so a
machine with fewer cores than workers plus upstreams cannot show the scaling (on 2 cores, 2 workers
only share what 1 had).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway import start_gateway, tree_cpu_seconds

from interlock.testing.process import FakeProcess

WRK_SCRIPT = """\
local aliases = {%(aliases)s}
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  n = n + 1
  local model = aliases[(n %% #aliases) + 1]
  local body = '{"model":"' .. model .. '","messages":[{"role":"user","content":"hi"}]}'
  return wrk.format(nil, "/v1/chat/completions", nil, body)
end
"""


def plan_text(urls: list[str]) -> str:
    providers = "\n".join(
        f'  fake{i}: {{kind: openai, base_url: "{url}", api_key_env: BENCH_KEY}}'
        for i, url in enumerate(urls)
    )
    aliases = "\n".join(
        f"  bench/a{i}: {{description: upstream {i}, chain: [fake{i}/bench-model]}}" for i in range(len(urls))
    )
    return (
        "version: 1\nserver: {default_alias: bench/a0, alias_namespace: bench/}\n"
        f"providers:\n{providers}\naliases:\n{aliases}\n"
    )


def wrk(url: str, script: Path, threads: int, connections: int, seconds: float) -> tuple[int, str, str]:
    """Requests answered (non-2xx excluded), p50 and p99 as wrk prints them."""
    command = [
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds:g}s",
        "-s",
        str(script),
        "--latency",
        url,
    ]
    out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: .*", out)
    if bad or errors:
        print(f"    wrk: {bad.group(0) if bad else ''} {errors.group(0) if errors else ''}".rstrip())
    p50 = re.search(r"50%\s+(\S+)", out)
    p99 = re.search(r"99%\s+(\S+)", out)
    return (
        total - (int(bad.group(1)) if bad else 0),
        p50.group(1) if p50 else "?",
        p99.group(1) if p99 else "?",
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--concurrency", type=int, default=16, help="wrk connections (default: 16)")
    parser.add_argument("--threads", type=int, default=2, help="wrk threads (default: 2)")
    parser.add_argument("--upstreams", type=int, default=6, help="fake upstream processes (default: 6)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--state-url", default=None, help="redis://... : slots in Redis (default: embedded)")
    args = parser.parse_args()
    if args.state_url is not None:
        os.environ["INTERLOCK_STATE_URL"] = args.state_url  # `interlock serve` reads it at start
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, "
        f"load average {os.getloadavg()[0]:.2f}; slot state: {args.state_url or 'embedded (unix socket)'}"
    )
    print(
        f"method: wrk -t{args.threads} -c{args.concurrency}, {args.seconds:g} s per row after "
        f"{args.warmup_s:g} s of warm-up; {args.upstreams} fake upstream processes"
    )
    with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        fakes = [stack.enter_context(FakeProcess("openai", "--no-record")) for _ in range(args.upstreams)]
        config = Path(folder) / "bench.yaml"
        config.write_text(plan_text([fake.base_url for fake in fakes]))
        script = Path(folder) / "rotate.lua"
        aliases = ", ".join(f'"bench/a{i}"' for i in range(args.upstreams))
        script.write_text(WRK_SCRIPT % {"aliases": aliases})
        print(f"{'workers':>7} | {'req/s':>8} | {'speed-up':>8} | {'p50':>8} | {'p99':>8} | CPU µs/request")
        print("-" * 66)
        first: float | None = None
        for workers in args.workers:
            gateway, url = start_gateway(config, workers)
            try:
                time.sleep(0.5)  # every worker accepting
                wrk(url, script, args.threads, args.concurrency, args.warmup_s)
                before = tree_cpu_seconds(gateway.pid)
                answered, p50, p99 = wrk(url, script, args.threads, args.concurrency, args.seconds)
                cpu = tree_cpu_seconds(gateway.pid) - before
            finally:
                gateway.terminate()
                gateway.wait(10)
            rate = answered / args.seconds
            first = first or rate
            per_request = cpu / answered * 1e6 if answered else float("nan")
            print(
                f"{workers:>7} | {rate:>8.0f} | {rate / first:>7.2f}x | {p50:>8} | {p99:>8} | "
                f"{per_request:.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
