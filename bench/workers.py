"""`interlock serve --workers N` scaling with the shared slot state on: requests/s at 1, 2, 4 and 8
workers, one command, ratios to one worker.

One nginx process answers every request with a fixed chat completion (bench/compare.py's upstream: C,
so the upstream is not what limits a many-core run). The plan has ``--upstreams`` providers, each an
OpenAI-compatible server listed under ``workers:`` with ``--slots`` slots and a queue, so every request
leases a slot from the shared slot state: under ``--workers N`` the supervisor's slot table, leased by
the workers over a Unix socket (``runtime/state/embedded.py``); with ``--state-url redis://...`` a
Redis. ``--slots 0`` lists the providers by ``base_url`` instead (no slots, nothing shared). For each
``N`` in ``--workers`` it starts `interlock serve --workers N`, warms it up, and drives it with wrk
(``--threads`` threads, ``--concurrency`` keep-alive connections, requests rotated over the aliases).
It prints requests/s, p50 and p99 (as measured: wrk's correction undone), the gateway's CPU per request
(every process of it, from /proc; "of which supervisor": its own process, where the slot server runs),
and each figure's ratio to the first row's of the same tree (the
issue's target: with ``--workers 2`` and slots on, CPU per request at most 1.15x one worker's).
``--against DIR`` runs another source tree (a detached worktree of the commit before, say) beside this
one, row by row, ``--rounds`` times over: before and after share the machine's noise alike.

    .venv/bin/python bench/workers.py                       # 1 2 (4 8: as the CPUs allow), 16 connections
    .venv/bin/python bench/workers.py --workers 1 2 4 8 --concurrency 64 --threads 4
    .venv/bin/python bench/workers.py --workers 1 2 --against ../base --rounds 3

Everything runs on one machine: wrk and the upstream take cores from the gateway's workers, so a
machine with fewer cores than workers plus wrk's threads plus the upstream cannot show the scaling (on
2 cores, 2 workers only share what 1 had).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import nginx_program, upstream_server
from gateway import cpu_seconds, start_gateway, tree_cpu_seconds
from load import chat_body, run_wrk


def plan_text(url: str, upstreams: int, slots: int) -> str:
    """``upstreams`` providers on ``url`` (one alias each), with ``slots`` slots each unless 0 (then each
    its own path on ``url``, which the mock answers the same: one server is one worker, ``IL202``)."""
    if slots:
        queue = "queue: {max_waiting: 1024, max_wait: 30s}"
        providers = "\n".join(
            f"  fake{i}: {{kind: openai, api_key_env: BENCH_KEY, probe: false, workers: "
            f'[{{name: box{i}, url: "{url}/box{i}", max_concurrent: {slots}, {queue}}}]}}'
            for i in range(upstreams)
        )
    else:
        providers = "\n".join(
            f'  fake{i}: {{kind: openai, base_url: "{url}", api_key_env: BENCH_KEY, probe: false}}'
            for i in range(upstreams)
        )
    aliases = "\n".join(
        f"  bench/a{i}: {{description: upstream {i}, chain: [fake{i}/bench-model]}}" for i in range(upstreams)
    )
    return (
        "version: 1\nserver: {default_alias: bench/a0, alias_namespace: bench/}\n"
        f"providers:\n{providers}\naliases:\n{aliases}\n"
    )


def main() -> int:
    cpus = len(os.sched_getaffinity(0))
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[n for n in (1, 2, 4, 8) if n <= max(cpus, 2)],
        help="worker counts, one row each (default: 1, 2, 4, 8 as far as this machine has CPUs)",
    )
    parser.add_argument("--concurrency", type=int, default=16, help="wrk connections (default: 16)")
    parser.add_argument(
        "--threads", type=int, default=max(1, min(4, cpus // 4)), help="wrk threads (default: CPUs / 4)"
    )
    parser.add_argument("--upstreams", type=int, default=6, help="providers and aliases (default: 6)")
    parser.add_argument("--slots", type=int, default=64, help="slots per provider; 0: no slots (default 64)")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup-s", type=float, default=2.0)
    parser.add_argument("--state-url", default=None, help="redis://... : slots in Redis (default: embedded)")
    parser.add_argument("--against", type=Path, default=None, help="another source tree, row by row beside")
    parser.add_argument("--rounds", type=int, default=1, help="times over every row (default: 1)")
    args = parser.parse_args()
    program = nginx_program()
    if program is None or not shutil.which("wrk"):
        print("workers.py needs wrk and nginx on PATH: run bench/peers.sh", file=sys.stderr)
        return 2
    if args.state_url is not None:
        os.environ["INTERLOCK_STATE_URL"] = args.state_url  # `interlock serve` reads it at start
    state = (
        "none (--slots 0)" if not args.slots else args.state_url or "embedded (the supervisor's, unix socket)"
    )
    print(
        f"machine: {cpus} CPUs, {platform.processor() or platform.machine()}, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} (shared: other work may run beside this)"
    )
    print(f"slot state: {state}; {args.upstreams} providers x {args.slots} slots; upstream: one nginx")
    print(
        f"method: wrk -t{args.threads} -c{args.concurrency}, {args.seconds:g} s per row after "
        f"{args.warmup_s:g} s of warm-up; requests rotated over {args.upstreams} aliases"
    )
    bodies = [chat_body(f"bench/a{i}") for i in range(args.upstreams)]
    seconds = max(1, round(args.seconds))
    with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        url, _ = stack.enter_context(upstream_server(program, Path(folder)))
        config = Path(folder) / "bench.yaml"
        config.write_text(plan_text(url, args.upstreams, args.slots))
        trees: list[tuple[str, Path | None]] = [("this", None)]
        if args.against is not None:
            trees.insert(0, (args.against.name, args.against))
        width = max(len(name) for name, _ in trees)
        head = (
            f"{'tree':>{width}} | {'workers':>7} | {'req/s':>8} | {'speed-up':>8} | {'per worker':>10} | "
            f"{'p50':>8} | "
            f"{'p99':>8} | {'CPU µs/request':>14} | {'CPU vs 1st':>10} | {'of which supervisor':>19} | "
            "load average"
        )
        print(head)
        print("-" * len(head))
        firsts: dict[str, tuple[int, float, float]] = {}
        rows = [(workers, tree) for _ in range(args.rounds) for workers in args.workers for tree in trees]
        for workers, (name, source) in rows:
            gateway, gateway_url = start_gateway(config, workers, source)
            target = f"{gateway_url}/v1/chat/completions"
            try:
                time.sleep(0.5)  # every worker accepting
                run_wrk(
                    target,
                    bodies[0],
                    args.concurrency,
                    max(1, round(args.warmup_s)),
                    bodies=bodies,
                    threads=args.threads,
                )
                before, own = tree_cpu_seconds(gateway.pid), cpu_seconds(gateway.pid)
                result = run_wrk(
                    target, bodies[0], args.concurrency, seconds, bodies=bodies, threads=args.threads
                )
                cpu = tree_cpu_seconds(gateway.pid) - before
                supervisor = cpu_seconds(gateway.pid) - own
            finally:
                gateway.terminate()
                gateway.wait(10)
            answered = result.statuses.get(200, 0)
            bad = result.requests - answered + sum(result.errors.values())
            rate = answered / result.seconds
            per_request = cpu / answered * 1e6 if answered else float("nan")
            own_per_request = supervisor / answered * 1e6 if answered and workers > 1 else 0.0  # 1: none
            first = firsts.setdefault(name, (workers, rate, per_request))
            speedup = rate / first[1] if first[1] else float("nan")
            print(
                f"{name:>{width}} | {workers:>7} | {rate:>8.0f} | {speedup:>7.2f}x | "
                f"{speedup * first[0] / workers:>9.2f}x | "
                f"{result.percentile_ms(0.5):>5.2f} ms | {result.percentile_ms(0.99):>5.2f} ms | "
                f"{per_request:>14.0f} | {per_request / first[2]:>9.2f}x | "
                f"{own_per_request:>16.0f} µs | "
                f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}" + (f"   ({bad} failed)" if bad else ""),
                flush=True,
            )
    print(
        "speed-up: req/s over the tree's first row's; per worker: the speed-up per worker added (1.00x: "
        "linear); CPU vs 1st: CPU per request over the tree's first row's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
