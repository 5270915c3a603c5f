"""The real gaps inside a local server's stream: what an idle (inter-chunk) timeout must not trip on.

Starts the real ``llama-server`` (``bash .ci/llama.sh``; tests/inference/llama.py) with ``--parallel``
slots and sends it more concurrent streamed requests than it has slots, mixing short chats, long prompts
(a new prompt's prefill in one slot pauses the tokens of every other slot: the "slot swap") and tool
calls (a long call being generated), for ``--rounds`` rounds. For every stream it records the gaps
between upstream reads after the first one that carried content, and prints the largest gap per kind of
request, with the first-byte times beside them::

    python bench/stream_gaps.py --parallel 2 --clients 6 --rounds 3

The figures chose the idle timeouts per provider kind (docs/configuration.md, ``interlock/common/kinds.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.inference.llama import ALIAS, LlamaServer, model_path

LONG = " ".join(
    f"Line {i}: the quick brown fox jumps over the lazy dog near the river bank." for i in range(90)
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write a file to disk",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    }
]


def request(kind: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": ALIAS, "stream": True, "max_tokens": 160}
    if kind == "chat":
        body["messages"] = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
    elif kind == "long_prompt":
        body["messages"] = [{"role": "user", "content": f"{LONG}\n\nSummarise the text above."}]
    else:
        body["messages"] = [
            {
                "role": "user",
                "content": "Write a Python file hello.py that prints hello 20 times, using the tool.",
            }
        ]
        body["tools"] = TOOLS
    return body


async def one(client: httpx.AsyncClient, url: str, kind: str) -> dict[str, Any]:
    sent = time.monotonic()
    first: float | None = None
    last = sent
    gaps: list[float] = []
    async with client.stream("POST", f"{url}/v1/chat/completions", json=request(kind)) as answer:
        async for raw in answer.aiter_raw():
            now = time.monotonic()
            if first is None:
                if b'"content":"' in raw or b'"arguments":"' in raw or b"tool_calls" in raw:
                    first = now
            else:
                gaps.append(now - last)
            last = now
    return {"kind": kind, "first_byte_s": (first or last) - sent, "gaps": gaps}


async def run(url: str, clients: int, rounds: int) -> list[dict[str, Any]]:
    kinds = ["chat", "long_prompt", "tool_call"]
    results: list[dict[str, Any]] = []
    async with httpx.AsyncClient(timeout=600) as client:
        for _ in range(rounds):
            batch = [one(client, url, kinds[i % len(kinds)]) for i in range(clients)]
            results.extend(await asyncio.gather(*batch))
    return results


def report(results: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in sorted({r["kind"] for r in results}):
        mine = [r for r in results if r["kind"] == kind]
        gaps = sorted(g for r in mine for g in r["gaps"])
        out[kind] = {
            "streams": len(mine),
            "reads": len(gaps),
            "gap_max_s": round(gaps[-1], 3) if gaps else None,
            "gap_p99_s": round(gaps[int(len(gaps) * 0.99)], 3) if gaps else None,
            "gap_median_s": round(statistics.median(gaps), 4) if gaps else None,
            "first_byte_max_s": round(max(r["first_byte_s"] for r in mine), 2),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parallel", type=int, default=2, help="the server's slots")
    parser.add_argument("--clients", type=int, default=6, help="concurrent streams a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ctx", type=int, default=2048, help="tokens per slot")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "llama.log"
        with LlamaServer(
            model_path(), log, n_ctx=args.ctx, parallel=args.parallel, threads=args.threads
        ) as server:
            started = time.monotonic()
            results = asyncio.run(run(server.url, args.clients, args.rounds))
            took = time.monotonic() - started
    print(json.dumps({"args": vars(args), "seconds": round(took, 1), "by_kind": report(results)}, indent=2))


if __name__ == "__main__":
    main()
