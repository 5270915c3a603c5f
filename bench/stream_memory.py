"""What an open stream holds in the gateway, by allocation site: the RSS question of bench/streams.py.

The gateway runs in this process (as `interlock serve` serves it: uvicorn, uvloop, the guarded
protocol) under ``tracemalloc``, in front of the Ollama fake (its own process, trickling a chunk every
``--delay-s``). N clients open a stream each and read it; once every one has had its first bytes, the
traced memory less the baseline (taken after a warm-up), over N, is the memory per open stream, and
the allocation sites that grew most are printed. ``--surface native`` (an Ollama client: the
same-format relay) against ``--surface openai`` (an OpenAI client: translated) shows what the relay
adds.

    .venv/bin/python bench/stream_memory.py --surface native --n 200
    .venv/bin/python bench/stream_memory.py --surface openai --n 200

tracemalloc counts Python's allocations only (not the allocator's arenas, not C buffers of uvloop), and
slows the gateway several times: read the sizes, not the speed.

What it found (Dec 2026, N=200): about 40 KiB traced per open stream either way; the relay holds
0.8 KiB more than the translated path: the last line read stays referenced between reads as its
parsed dict (``wire/ollama.py`` ``orjson.loads``), its bytes and the ``RelayedChunk`` (with its chunk
dict), where the translated path holds its smaller chunk dict. So the relay's own objects explain about
1 KiB of a rise like 20.5 -> 29.6 KiB RSS per stream, not the rest. The tree before and after the wire
modules' move traced the same (40.06 and 40.23 KiB per stream) while bench/streams.py read its RSS per
stream 3-4 KiB higher after, in three runs, translated streams too: memory tracemalloc does not see
(the allocator's arenas, C buffers), not found here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import tracemalloc
from pathlib import Path

import orjson
import uvloop

from interlock.commands.gateway import build_gateway
from interlock.compiler import compile_config
from interlock.runtime.loaded.plan import load_plan
from interlock.schema.canonical import canonical_json
from interlock.testing.fake_process import FakeProcess
from interlock.testing.in_process import serving

MODEL = "bench-model"
CONFIG = """\
version: 1
server: {{default_alias: bench/ollama, alias_namespace: bench/}}
timeouts: {{connect: 5s, first_byte: 60s, total: 3600s}}
providers:
  box:
    kind: ollama
    probe: false
    workers:
      - {{name: box1, url: "{url}", max_concurrent: {slots}, model_concurrency: {{"*": {slots}}}}}
aliases:
  bench/ollama: {{description: Ollama fake, chain: [box/{model}]}}
"""
PATHS = {"native": "/api/chat", "openai": "/v1/chat/completions"}


async def _stream(port: int, path: str, first: list[int], stop: asyncio.Event) -> None:
    """One stream: the request, the head and a first byte of the body, then open until ``stop``."""
    body = orjson.dumps(
        {"model": "bench/ollama", "messages": [{"role": "user", "content": "Say hello."}], "stream": True}
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = f"POST {path} HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\n"
    writer.write(head.encode() + b"content-length: %d\r\n\r\n%b" % (len(body), body))
    await reader.readuntil(b"\r\n\r\n")
    await reader.read(1)
    first.append(1)
    await stop.wait()
    writer.close()


async def run(args: argparse.Namespace, url: str) -> None:
    folder = Path(tempfile.mkdtemp())
    (folder / "interlock.yaml").write_text(CONFIG.format(url=url, model=MODEL, slots=args.n + 20))
    ctx = compile_config(str(folder / "interlock.yaml"))
    assert ctx.plan is not None
    plan = load_plan(json.loads(canonical_json(ctx.plan.model_dump(mode="json"))), {})
    gateway = build_gateway(plan, probes=False)
    path = PATHS[args.surface]
    async with serving(gateway) as port:
        for _ in range(2):  # warm-up: imports, caches, the connection pool
            stop = asyncio.Event()
            first: list[int] = []
            tasks = [asyncio.create_task(_stream(port, path, first, stop)) for _ in range(20)]
            while len(first) < 20:  # noqa: ASYNC110 - counting first bytes
                await asyncio.sleep(0.05)
            stop.set()
            await asyncio.gather(*tasks)
        await asyncio.sleep(0.5)
        tracemalloc.start(args.depth)
        baseline = tracemalloc.take_snapshot()
        stop = asyncio.Event()
        first = []
        tasks = [asyncio.create_task(_stream(port, path, first, stop)) for _ in range(args.n)]
        while len(first) < args.n:  # noqa: ASYNC110 - counting first bytes
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        snapshot = tracemalloc.take_snapshot()
        stop.set()
        await asyncio.gather(*tasks)
        tracemalloc.stop()
    grown = snapshot.compare_to(baseline, "lineno" if args.depth == 1 else "traceback")
    total = sum(stat.size_diff for stat in grown)
    print(
        f"machine: {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}; surface {args.surface}; "
        f"N={args.n}: {total / args.n / 1024:.2f} KiB traced per open stream (the test client's share "
        "included: it runs in this process too)"
    )
    for stat in grown[: args.top]:
        frames = stat.traceback.format()[-2 * args.depth :] if args.depth > 1 else [str(stat.traceback)]
        print(
            f"  {stat.size_diff / args.n:9.0f} B/stream  {stat.count_diff / args.n:6.1f} blocks  {frames[-1]}"
        )
        for line in frames[:-1]:
            print(f"{'':36}{line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--surface", choices=sorted(PATHS), default="native")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--depth", type=int, default=1, help="frames per allocation site")
    parser.add_argument("--delay-s", type=float, default=0.5, help="between two chunks of the fake")
    args = parser.parse_args()
    words = " ".join(["tok"] * 100)
    fake_args = ["--no-record", "--reply", words, "--chunks", "100", "--chunk-delay-s", f"{args.delay_s:g}"]
    with FakeProcess("ollama", *fake_args, "--model", f"{MODEL}=completion") as fake:
        uvloop.run(run(args, fake.base_url))


if __name__ == "__main__":
    main()
