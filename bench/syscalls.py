"""System calls per request of `interlock serve --workers N`, every process of it: a count, not a time.

The plan and load are bench/workers.py's (``--upstreams`` OpenAI-compatible providers on one nginx, each
a worker with ``--slots`` slots, wrk rotating over one alias per provider). After the warm-up, ``strace
-c -f`` is attached to the supervisor and its workers for ``--seconds`` of load; each call's count is
divided by the requests answered. Tracing slows the gateway, so counts that depend on how requests
batch (``epoll_pwait``: one per turn of the loop) read lower than they run untraced; the calls made per
request (the slot file's ``fcntl``, the socket's ``read``/``write``) do not depend on it. ``--source
DIR`` runs another source tree (another commit's worktree).

    .venv/bin/python bench/syscalls.py --workers 1 2
    .venv/bin/python bench/syscalls.py --workers 2 --source ../base
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import nginx_program, upstream_server
from gateway import start_gateway
from load import chat_body, run_wrk
from workers import plan_text


def tree(pid: int) -> list[int]:
    """``pid`` and its children's pids, all the way down."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    below = children.read_text().split() if children.exists() else []
    return [pid, *(p for child in below for p in tree(int(child)))]


def counts(summary: str) -> dict[str, tuple[int, int]]:
    """``strace -c``'s table: calls and errors by system call."""
    table: dict[str, tuple[int, int]] = {}
    for line in summary.splitlines():
        fields = line.split()
        if len(fields) in (5, 6) and fields[0][0].isdigit() and fields[-1] != "total":
            table[fields[-1]] = (int(fields[3]), int(fields[4]) if len(fields) == 6 else 0)
    return table


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--slots", type=int, default=64, help="slots per provider; 0: no slots (default 64)")
    parser.add_argument("--upstreams", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--source", type=Path, default=None, help="another source tree to run")
    args = parser.parse_args()
    program = nginx_program()
    if program is None or not shutil.which("wrk") or not shutil.which("strace"):
        print("syscalls.py needs wrk, nginx and strace on PATH", file=sys.stderr)
        return 2
    bodies = [chat_body(f"bench/a{i}") for i in range(args.upstreams)]
    with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        url, _ = stack.enter_context(upstream_server(program, Path(folder)))
        config = Path(folder) / "bench.yaml"
        config.write_text(plan_text(url, args.upstreams, args.slots))
        for workers in args.workers:
            gateway, gateway_url = start_gateway(config, workers, args.source)
            target = f"{gateway_url}/v1/chat/completions"
            summary = Path(folder) / f"strace-{workers}"
            try:
                time.sleep(0.5)  # every worker accepting
                run_wrk(target, bodies[0], args.concurrency, 1, bodies=bodies)
                command = ["strace", "-c", "-f", "-o", str(summary)]
                for pid in tree(gateway.pid):
                    command += ["-p", str(pid)]
                tracer = subprocess.Popen(command, stderr=subprocess.DEVNULL)
                time.sleep(1.0)  # attached to every process
                result = run_wrk(target, bodies[0], args.concurrency, round(args.seconds), bodies=bodies)
                tracer.send_signal(signal.SIGINT)
                tracer.wait(30)
            finally:
                gateway.terminate()
                gateway.wait(10)
            answered = result.statuses.get(200, 0)
            if not answered:
                print(f"workers {workers}: no request answered", file=sys.stderr)
                return 1
            table = counts(summary.read_text())
            total = sum(calls for calls, _ in table.values())
            print(
                f"workers {workers}, slots {args.slots}, tree {args.source or 'this'}: {answered} answered, "
                f"{total / answered:.2f} system calls per request (load {os.getloadavg()[0]:.2f})"
            )
            for name, (calls, errors) in sorted(table.items(), key=lambda item: -item[1][0]):
                if calls / answered >= 0.01:
                    failed = f"   ({errors / answered:.2f} failed)" if errors else ""
                    print(f"  {name:<16} {calls / answered:6.2f}{failed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
