"""SIGHUP reload of a big plan while `interlock serve` answers a steady load: how long do requests stall?

Generates bench/serve_start.py's configuration (10,000 aliases, 200 workers; cloud providers at a fake
OpenAI, workers at loopback addresses that refuse), starts `interlock serve` on it (the configuration,
compiled again at each reload, or ``--plan``: its compiled plan file), drives ``--clients`` closed-loop
keep-alive clients (non-streaming chat through one alias), sends SIGHUP after ``--before-s`` seconds,
and waits until ``/v1/health`` reports the reload. It prints request latency before the reload and
during it (from the signal until the reload is reported, plus ``--after-s``): p50, p99 and the largest,
the largest being the worst stall a request saw.

``--interlock-src DIR`` runs `interlock serve` from another source tree, for a before/after comparison:

    git archive 740aa3e | tar -x -C /tmp/before      # the reload loaded in a thread of the gateway
    .venv/bin/python bench/reload_load.py --interlock-src /tmp/before
    .venv/bin/python bench/reload_load.py               # this tree: compiled in a child process

Only compare runs from one sitting on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_bench import generate
from serve_start import ENV, point_at_loopback

from interlock.testing.fake_process import FakeProcess


@dataclass
class Sample:
    sent: float
    seconds: float
    status: int


@dataclass
class Reload:
    signalled: float = 0.0
    reported: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # when (relative to SIGHUP) and what


def percentile_ms(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def drive(url: str, pid: int, args: argparse.Namespace, change: Callable[[], None]) -> Reload:
    """Load until the reload shows: the first answer whose ``X-Interlock-Plan`` names the new plan."""
    body = orjson.dumps({"model": "gen/a1", "messages": [{"role": "user", "content": "hi"}]})
    headers = {"Content-Type": "application/json"}
    result = Reload()
    stop = asyncio.Event()
    plans: set[str] = set()
    reloaded = asyncio.Event()
    connector = aiohttp.TCPConnector(limit=args.clients)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client() -> None:
            while not stop.is_set():
                sent = time.perf_counter()
                try:
                    async with session.post(f"{url}/v1/chat/completions", data=body, headers=headers) as r:
                        await r.read()
                        status, plan = r.status, r.headers.get("x-interlock-plan", "")
                except aiohttp.ClientError as exc:
                    result.errors.append(f"{time.perf_counter() - result.signalled:+.2f} s: {exc!r}")
                    status, plan = 0, ""
                done = time.perf_counter()
                result.samples.append(Sample(sent, done - sent, status))
                if plan and plan not in plans:
                    plans.add(plan)
                    if len(plans) == 2 and not reloaded.is_set():
                        result.reported = done
                        reloaded.set()

        clients = [asyncio.create_task(client()) for _ in range(args.clients)]
        await asyncio.sleep(args.before_s)
        change()
        result.signalled = time.perf_counter()
        os.kill(pid, signal.SIGHUP)
        try:
            await asyncio.wait_for(reloaded.wait(), 300)
        except TimeoutError:
            print("  no answer from a new plan within 300 s: the reload failed", flush=True)
            result.reported = time.perf_counter()
        await asyncio.sleep(args.after_s)
        stop.set()
        await asyncio.gather(*clients)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--aliases", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--before-s", type=float, default=3.0)
    parser.add_argument("--after-s", type=float, default=1.0)
    parser.add_argument("--plan", action="store_true", help="serve the compiled plan file, not the YAML")
    parser.add_argument("--interlock-src", type=Path, default=None, help="run serve from this tree")
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}", flush=True)
    env = {**os.environ, **ENV}
    if args.interlock_src is not None:
        env["PYTHONPATH"] = str(args.interlock_src.resolve())
    with FakeProcess("openai", "--no-record") as fake, tempfile.TemporaryDirectory() as folder:
        served = generate(Path(folder), args.aliases, args.workers)
        point_at_loopback(served, fake.base_url)
        aliases = served.parent / "aliases.yaml"
        changed = aliases.read_text().replace(
            "aliases:\n", "aliases:\n  gen/reloaded: {description: new, chain: [gen/a1]}\n", 1
        )

        def change() -> None:  # the reload must load a different plan, so its answers say so
            aliases.write_text(changed)

        if args.plan:
            plan = Path(folder) / "plan.json"
            compile_to = [sys.executable, "-m", "interlock", "compile", str(served), "-o"]
            subprocess.run([*compile_to, str(plan) + ".new"], check=True, capture_output=True, env=env)
            aliases.write_text(changed)
            subprocess.run([*compile_to, str(plan) + ".changed"], check=True, capture_output=True, env=env)
            os.replace(str(plan) + ".new", plan)

            def change() -> None:  # the changed plan, compiled already, takes the served one's place
                os.replace(str(plan) + ".changed", plan)

            served = plan
        command = [sys.executable, "-m", "interlock", "serve", str(served), "--port", "0"]
        proc = subprocess.Popen(
            [*command, "--log-level", "info"],
            stdout=subprocess.PIPE,
            stderr=(Path(folder) / "serve.log").open("wb"),
            env=env,
        )
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline().decode()
            if not line.startswith("interlock serving "):
                raise SystemExit(f"interlock serve did not start: {line!r}")
            url = line.split()[2]
            from interlock.runtime.app.server import wait_ready

            if not wait_ready(url, 120, alive=lambda: proc.poll() is None):
                raise SystemExit("interlock serve never became ready")
            source = args.interlock_src or "this tree"
            print(f"serving {served.name} ({args.aliases} aliases) from {source}; {args.clients} clients")
            result = asyncio.run(drive(url, proc.pid, args, change))
        finally:
            proc.terminate()
            proc.wait(10)
            reloads = [x for x in (Path(folder) / "serve.log").read_text().splitlines() if "reload" in x]
            print("  the gateway's log: " + (" | ".join(reloads[-3:]) or "no reload logged"), flush=True)
    window_end = result.reported + args.after_s
    before = [s.seconds for s in result.samples if s.sent + s.seconds < result.signalled]
    during = [
        s.seconds for s in result.samples if s.sent + s.seconds >= result.signalled and s.sent <= window_end
    ]
    statuses = sorted({s.status for s in result.samples})
    for error in result.errors[:5]:
        print(f"  client error at {error}")
    print(
        f"  new plan answering {result.reported - result.signalled:.2f} s after SIGHUP; statuses {statuses}"
    )
    for label, values in (("before the reload", before), ("during the reload", during)):
        print(
            f"  {label:<18} {len(values):6d} requests   p50 {percentile_ms(values, 0.5):7.2f} ms   "
            f"p99 {percentile_ms(values, 0.99):8.2f} ms   largest {max(values, default=0) * 1000:8.2f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()
