"""Which HTTP client should the gateway use upstream? Measure them side by side.

Runs the fake OpenAI upstream in its own process (so it never shares the measured event loop) and
drives POST /v1/chat/completions through each client at 1 and 16 concurrent requests:

- httpx.AsyncClient with its default pool
- httpx with the httpx-aiohttp transport (``pip install -e ".[bench]"``)
- plain aiohttp.ClientSession
- interlock's own OpenAIAdapter (its httptools client underneath, runtime/net/http1.py, plus
  deadlines, orjson and error mapping)

The clients run pinned to one core and the fake to another; clients take turns in interleaved
rounds and the median round is shown. Prints req/s and latency percentiles per client, the ratio to
plain aiohttp, the clients' CPU per request (this process) and the fake's (from /proc): the fake is
not the bottleneck. ``--chunk-delay-s`` makes the fake trickle its stream, one chunk per read, as a
model generating tokens does; ``--words`` sets how many chunks an answer has.

    .venv/bin/python bench/upstream_client.py [--seconds 3] [--stream] [--loop asyncio]
    .venv/bin/python bench/upstream_client.py --chunk-delay-s 0.002 --words 40 --concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import Any

import aiohttp
import httpx
import orjson

from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.upstream.base import adapter_for
from interlock.runtime.wire.base import Endpoint
from interlock.testing.fake_process import FakeProcess

BODY = {"model": "bench", "messages": [{"role": "user", "content": "Say hello."}]}
Call = Callable[[], Awaitable[Any]]


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _httpx_call(client: httpx.AsyncClient, url: str, payload: bytes, stream: bool) -> Any:
    headers = {"Content-Type": "application/json"}
    if not stream:
        response = await client.post(url, content=payload, headers=headers)
        return orjson.loads(response.content)
    async with client.stream("POST", url, content=payload, headers=headers) as response:
        return [line async for line in response.aiter_lines()]


async def _aiohttp_call(session: aiohttp.ClientSession, url: str, payload: bytes, stream: bool) -> Any:
    headers = {"Content-Type": "application/json"}
    async with session.post(url, data=payload, headers=headers) as response:
        if not stream:
            return orjson.loads(await response.read())
        return [line async for line in response.content]


async def _clients(stack: AsyncExitStack, base_url: str, stream: bool) -> dict[str, Call]:
    url = f"{base_url}/chat/completions"
    payload = orjson.dumps({**BODY, "stream": stream})
    clients: dict[str, Call] = {}

    plain = await stack.enter_async_context(httpx.AsyncClient())
    clients["httpx"] = lambda: _httpx_call(plain, url, payload, stream)
    try:
        from httpx_aiohttp import AiohttpTransport
    except ImportError:
        print("httpx-aiohttp not installed (pip install -e '.[bench]'): skipping that column")
    else:
        over = await stack.enter_async_context(httpx.AsyncClient(transport=AiohttpTransport()))
        clients["httpx-aiohttp"] = lambda: _httpx_call(over, url, payload, stream)
    session = await stack.enter_async_context(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
    clients["aiohttp"] = lambda: _aiohttp_call(session, url, payload, stream)

    upstream = await stack.enter_async_context(UpstreamClient.create())
    adapter = adapter_for("openai", upstream)
    ep = Endpoint("bench", "openai", base_url, "bench", {"Authorization": "Bearer sk-bench"}, 5, 30, 60)

    async def adapter_call() -> Any:
        if not stream:
            return await adapter.chat(ep, "bench", BODY)
        chunks = await adapter.chat_stream(ep, "bench", BODY)
        return [chunk async for chunk in chunks]

    clients["interlock adapter"] = adapter_call
    return clients


async def _measure(call: Call, concurrency: int, seconds: float) -> list[float]:
    latencies: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - started)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def _round(call: Call, concurrency: int, seconds: float, fake_pid: int) -> dict[str, Any]:
    cpu_before = _cpu_seconds(fake_pid)
    own_before = time.process_time()
    started = time.perf_counter()
    latencies = await _measure(call, concurrency, seconds)
    elapsed = time.perf_counter() - started
    own_cpu = time.process_time() - own_before
    fake_cpu = _cpu_seconds(fake_pid) - cpu_before
    latencies.sort()
    return {
        "requests": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000,
        "client_cpu_us": own_cpu / len(latencies) * 1e6,
        "fake_cpu_us": fake_cpu / len(latencies) * 1e6,
    }


async def _run(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    fake_args = ["--no-record", "--chunk-delay-s", str(args.chunk_delay_s)]
    if args.words:
        fake_args += ["--reply", " ".join(["word"] * args.words)]
    with FakeProcess("openai", *fake_args) as fake:
        if args.pin and len(os.sched_getaffinity(0)) >= 2:
            cpus = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(fake.pid, {cpus[1]})  # the fake on one core, the clients on another
            os.sched_setaffinity(0, {cpus[0]})
        async with AsyncExitStack() as stack:
            clients = await _clients(stack, fake.base_url, args.stream)
            for concurrency in args.concurrency:
                for call in clients.values():
                    await _measure(call, concurrency, 0.5)  # warm every pool first
                rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in clients}
                for _ in range(args.rounds):  # interleaved, so drift on the machine hits all clients alike
                    for name, call in clients.items():
                        rounds[name].append(await _round(call, concurrency, args.seconds, fake.pid))
                for name, results in rounds.items():
                    results.sort(key=lambda r: r["rps"])
                    rows.append({"client": name, "concurrency": concurrency, **results[len(results) // 2]})
    return rows


def _print(rows: list[dict[str, Any]]) -> None:
    base = {r["concurrency"]: r["rps"] for r in rows if r["client"] == "aiohttp"}
    header = (
        f"{'client':<18} {'conc':>4} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs aiohttp':>10}"
        f" {'client µs/req':>13} {'fake µs/req':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = r["rps"] / base[r["concurrency"]] if r["concurrency"] in base else float("nan")
        print(
            f"{r['client']:<18} {r['concurrency']:>4} {r['rps']:>8.0f} {r['p50_ms']:>8.2f}"
            f" {r['p99_ms']:>8.2f} {ratio:>9.2f}x {r['client_cpu_us']:>13.0f} {r['fake_cpu_us']:>11.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per client, level and round")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median round is shown")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--stream", action="store_true", help="stream the answers (SSE) instead of JSON")
    parser.add_argument(
        "--chunk-delay-s",
        type=float,
        default=0.0,
        help="the fake waits this long between chunks (implies --stream)",
    )
    parser.add_argument("--words", type=int, default=0, help="answer length in words, one chunk each")
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop", help="the clients' loop")
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin fake and clients")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args()
    args.stream = args.stream or args.chunk_delay_s > 0
    runner: Callable[[Any], Any] = asyncio.run
    if args.loop == "uvloop":
        import uvloop

        runner = uvloop.run
    mode = "SSE stream" if args.stream else "JSON"
    if args.chunk_delay_s:
        mode += f", a chunk every {args.chunk_delay_s * 1000:g} ms"
    if args.words:
        mode += f", {args.words}-word answers"
    rounds = f"{args.rounds} rounds of {args.seconds:g} s, median shown"
    print(f"{os.cpu_count()} CPUs, loop={args.loop}, {mode}, {rounds}")
    rows = runner(_run(args))
    _print(rows)
    if args.json:
        with open(args.json, "wb") as f:
            f.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
