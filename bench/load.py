"""A small HTTP load generator: N concurrent clients (aiohttp, keep-alive) POSTing one JSON body.

Reusable from other benchmarks (``await run_load(...)``, or ``run_wrk(...)``) or on its own:

    .venv/bin/python bench/load.py --url http://127.0.0.1:8080/v1/chat/completions \\
        --model mana/fast-text --concurrency 1 16 --seconds 5 [--stream] [--wrk]

Each client sends its next request as soon as the previous answer is read completely (closed loop).
Reports requests per second, latency percentiles and status counts; a warm-up period is not counted.

The aiohttp client costs several hundred µs of CPU per request itself; on a machine with few cores it
competes with what it measures. ``--wrk`` drives the same load with wrk (C, one thread; ``apt-get
install wrk``), which costs far less.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
import orjson


@dataclass
class LoadResult:
    concurrency: int
    seconds: float
    latencies: list[float] = field(default_factory=list)
    statuses: Counter[int] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)

    @property
    def requests(self) -> int:
        return len(self.latencies)

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    def percentile_ms(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

    def line(self) -> str:
        return (
            f"c={self.concurrency:<3} {self.rps:9.1f} req/s   p50 {self.percentile_ms(0.5):7.2f} ms   "
            f"p90 {self.percentile_ms(0.9):7.2f} ms   p99 {self.percentile_ms(0.99):7.2f} ms   "
            f"statuses {dict(self.statuses)}" + (f"   errors {dict(self.errors)}" if self.errors else "")
        )


def chat_body(model: str, *, stream: bool = False) -> bytes:
    return orjson.dumps(
        {"model": model, "messages": [{"role": "user", "content": "Say hello."}], "stream": stream}
    )


async def run_load(
    url: str, body: bytes, concurrency: int, seconds: float, *, warmup_s: float = 0.5
) -> LoadResult:
    """Drive ``url`` with ``concurrency`` closed-loop clients for ``seconds`` (after ``warmup_s``)."""
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    result = LoadResult(concurrency, seconds)
    async with aiohttp.ClientSession(connector=connector) as session:
        started = time.perf_counter()
        measure_from = started + warmup_s
        stop_at = measure_from + seconds

        async def client() -> None:
            while True:
                sent = time.perf_counter()
                if sent >= stop_at:
                    return
                try:
                    async with session.post(url, data=body, headers=headers) as response:
                        await response.read()
                        status = response.status
                except aiohttp.ClientError as exc:
                    if sent >= measure_from:
                        result.errors[type(exc).__name__] += 1
                    continue
                done = time.perf_counter()
                if sent >= measure_from and done <= stop_at:
                    result.latencies.append(done - sent)
                    result.statuses[status] += 1

        await asyncio.gather(*(client() for _ in range(concurrency)))
    return result


def run_wrk(url: str, body: bytes, concurrency: int, seconds: float) -> LoadResult:
    """The same closed-loop load with wrk; latencies are its percentile summary (p50/p90/p99 only)."""
    import re
    import subprocess
    import tempfile

    script = (
        'wrk.method = "POST"\n'
        f"wrk.body = [[{body.decode()}]]\n"
        'wrk.headers["Content-Type"] = "application/json"\n'
        'wrk.headers["Authorization"] = "Bearer bench"\n'
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as handle:
        handle.write(script)
        handle.flush()
        command = ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds:g}s", "-s", handle.name, "--latency", url]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    counted = re.search(r"(\d+) requests in", out)
    assert counted is not None, out
    total = int(counted.group(1))
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    result = LoadResult(concurrency, seconds)
    bad = int(non_2xx.group(1)) if non_2xx else 0
    result.statuses[200] = total - bad
    if bad:
        result.statuses[0] = bad  # wrk does not say which status
    socket_errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if socket_errors:  # e.g. answers slower than wrk's 2 s timeout: not in the count, so say so
        for kind, count in zip(("connect", "read", "write", "timeout"), socket_errors.groups(), strict=True):
            if int(count):
                result.errors[f"wrk {kind}"] += int(count)
    marks = {}
    for q in (50, 90, 99):
        found = re.search(rf"\s{q}%\s+([\d.]+\w+)", out)
        assert found is not None, out
        marks[q] = _wrk_seconds(found.group(1))
    # a stand-in distribution with the same percentiles, so LoadResult's summary works unchanged
    low, mid = total * 60 // 100, total * 35 // 100  # p50 falls in the first part, p90 in the second
    result.latencies = [marks[50]] * low + [marks[90]] * mid + [marks[99]] * (total - low - mid)
    return result


def _wrk_seconds(text: str) -> float:
    for unit, factor in (("us", 1e-6), ("ms", 1e-3), ("s", 1.0), ("m", 60.0)):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * factor
    raise ValueError(f"unknown wrk duration {text!r}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default="bench")
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--wrk", action="store_true", help="drive the load with wrk instead of aiohttp")
    args = parser.parse_args()
    body = chat_body(args.model, stream=args.stream)
    for concurrency in args.concurrency:
        if args.wrk:
            result = run_wrk(args.url, body, concurrency, args.seconds)
        else:
            result = asyncio.run(run_load(args.url, body, concurrency, args.seconds))
        print(result.line(), flush=True)


if __name__ == "__main__":
    main()
