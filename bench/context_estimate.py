"""How far the preflight's context estimate is from a real server's count: before any answer, and after one.

The requests are the ones real clients sent (Claude Code, Codex, Open WebUI, the OpenAI Agents SDK:
``tests/fixtures/clients/``), parsed by interlock's own surfaces as the gateway parses them; the
server's counts are what a real llama.cpp server (``llama-server``, from the ``xllamacpp`` wheel, with
SmolLM2-135M) answered for each, recorded in ``tests/fixtures/clients/answers/llama_server_counts.json``.
Per request and per way it was sent (the chat request interlock forwards to an ``openai`` provider, and
the client's own format where the server speaks it), this prints:

- ``estimate``: the prompt estimate before any answer (``guards.preflight.needs_of``: text at 3.5 bytes
  a token, tool schemas and JSON at 4);
- ``before``: the estimate over the server's count;
- ``after 1``: the same, once the calibration book (``learned.CountBook``) has learned from one answer
  of that request on that endpoint (the issue's bar: within 15 %);
- ``running``: a book that learned from every row above it first (another client's traffic on the same
  server), before this row's own answer: what a mixed stream of clients sees.

    python bench/context_estimate.py                # the table, from the recorded counts
    python bench/context_estimate.py --record URL   # ask a live llama-server again (slow: real prefill)
    python bench/context_estimate.py --tokenizers   # OpenAI's cl100k/o200k (pip install -e ".[bench]")
    python bench/context_estimate.py --count URL    # count_tokens against a live llama-server

``--count`` is ``count_tokens`` before any answer, per recorded request: ``before`` the estimate (what
``count_tokens`` answered until issue 38), ``after`` the server's own tokenizer asked as ``count_tokens``
asks it (``OpenAIAdapter.count``: ``/apply-template`` then ``/tokenize``), each over the server's count of
the chat request interlock forwards (the recorded ``usage``; the short ones also answered live, to show
the tokenizer's count is the chat request's), and what the two calls cost (the reason the preflight of a
chat request reads the count book instead).

``--record`` sends each request with ``max_tokens: 1`` (no streaming) and rewrites the fixture; start the
server as ``tests/fixtures/clients/answers/README.md`` says.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from interlock.runtime.books.estimate import MESSAGE_OVERHEAD, Needs, needs_of
from interlock.runtime.books.learned import REPORTING_FLOOR, CountBook
from interlock.runtime.loaded.tables import PreflightSettings
from interlock.runtime.request.route_table import rows

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "fixtures" / "clients"
COUNTS = RECORDED / "answers" / "llama_server_counts.json"
SETTINGS = PreflightSettings(
    mode="enforce",
    metadata_ttl_s=600,
    default_context_tokens=None,
    max_context_tokens=None,
    default_output_tokens=0,
    image_reserve_tokens=0,
    margin_percent=0,
    caller_num_ctx=True,
)


def parsed_needs(recording: str) -> tuple[dict[str, Any], Needs]:
    """A recorded request as the gateway reads it: its surface's internal form, and its needs."""
    record = orjson.loads((RECORDED / recording).read_bytes())
    surfaces = {row.path: row.surface for row in rows() if row.metered}
    parsed = surfaces[record["path"]].parse(copy.deepcopy(record["body"]))
    return record, needs_of(parsed.body, "chat", SETTINGS)


def server_count(usage: dict[str, Any]) -> int:
    """The prompt's tokens in any of the three usage shapes (Anthropic's leaves its cache reads out)."""
    if "prompt_tokens" in usage:
        return int(usage["prompt_tokens"])
    read = int(usage.get("cache_read_input_tokens") or 0) + int(usage.get("cache_creation_input_tokens") or 0)
    return int(usage["input_tokens"]) + read


def table() -> int:
    answers = orjson.loads(COUNTS.read_bytes())["answers"]
    print(f"server: {orjson.loads(COUNTS.read_bytes())['server']}")
    columns = f"{'estimate':>8} {'server':>7} {'before':>7} {'after 1':>8} {'running':>8}"
    print(f"{'request':58} {'sent as':22} {columns}")
    running = CountBook()
    worst_after = 0.0
    for answer in answers:
        _, needs = parsed_needs(answer["recording"])
        text, schema = needs.prompt_tokens - needs.schema_tokens, needs.schema_tokens
        counted = server_count(answer["usage"])
        label = answer["sent"]  # one endpoint per way of sending: the chat form, and each native format
        one = CountBook()
        one.learn(label, "m", text, schema, counted)
        after = one.prompt(label, "m", text, schema, REPORTING_FLOOR)
        seen = running.prompt(label, "m", text, schema, REPORTING_FLOOR)
        running.learn(label, "m", text, schema, counted)
        worst_after = max(worst_after, abs(after / counted - 1))
        print(
            f"{answer['recording'].removesuffix('.json'):58} {answer['sent']:22} {needs.prompt_tokens:8d} "
            f"{counted:7d} {needs.prompt_tokens / counted:7.2f} {after / counted:8.2f} {seen / counted:8.2f}"
        )
    print(f"after one answer: at most {worst_after:.1%} from the server's count (the bar: 15 %)")
    for answer in answers:  # what the first-byte deadline learns: the server's own prompt timings
        timings = answer.get("timings") or {}
        if timings.get("prompt_n", 0) >= 1000:
            print(
                f"prefill {answer['recording'].removesuffix('.json')}: {timings['prompt_n']} tokens in "
                f"{timings['prompt_ms'] / 1000:.1f} s ({timings['prompt_per_second']:.1f} tokens/s), "
                f"{timings.get('cache_n', 0)} from the cache"
            )
    return 0 if worst_after <= 0.15 else 1


def record(url: str) -> int:
    """Ask a live llama-server for its count of every recorded request; rewrite the fixture."""
    import httpx

    from interlock.runtime.wire.openai_chat import upstream_request as _payload

    data = orjson.loads(COUNTS.read_bytes())
    answers = []
    names = sorted(p.name for p in RECORDED.glob("*.json"))
    surfaces = {row.path: row.surface for row in rows() if row.metered}
    with httpx.Client(timeout=1800) as client:
        for name in names:
            rec = orjson.loads((RECORDED / name).read_bytes())
            parsed = surfaces[rec["path"]].parse(copy.deepcopy(rec["body"]))
            chat = _payload(parsed.body, "model")
            chat.update(stream=False, max_tokens=1)
            for key in ("stream_options", "max_completion_tokens"):
                chat.pop(key, None)
            sends: list[tuple[str, dict[str, Any]]] = [("/v1/chat/completions", chat)]
            if rec["path"] in ("/v1/messages", "/v1/responses"):
                native = {**rec["body"], "model": "model", "stream": False}
                native["max_tokens" if rec["path"] == "/v1/messages" else "max_output_tokens"] = 1
                sends.append((rec["path"], native))
            for path, payload in sends:
                started = time.perf_counter()
                response = client.post(url.rstrip("/") + path, json=payload)
                response.raise_for_status()
                answer = response.json()
                answers.append(
                    {
                        "recording": name,
                        "sent": path,
                        "seconds": round(time.perf_counter() - started, 2),
                        "usage": answer.get("usage"),
                        "timings": answer.get("timings"),
                    }
                )
                print(orjson.dumps(answers[-1]).decode(), flush=True)
    data["answers"] = sorted(answers, key=lambda a: (a["recording"], a["sent"]))
    COUNTS.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    return 0


def tokenizers() -> int:
    """The estimate beside OpenAI's encodings, on this repository's own texts."""
    try:
        import bpe_openai  # type: ignore[import-not-found]
    except ImportError:
        print('bpe-openai is not installed: pip install -e ".[bench]"', file=sys.stderr)
        return 2
    texts = {
        "docs page (Markdown)": (ROOT / "docs" / "runtime.md").read_text(),
        "source file (Python)": (ROOT / "interlock/runtime/request/router.py").read_text(),
        "JSON payload": (ROOT / "schema" / "plan.schema.json").read_text(),
    }
    print(f"{'text':26} {'estimate':>8} {'cl100k':>7} {'ratio':>6} {'o200k':>7} {'ratio':>6}")
    for name, text in texts.items():
        estimate = needs_of({"messages": [{"role": "user", "content": text}]}, "chat", SETTINGS).prompt_tokens
        row = f"{name:26} {estimate:8d}"
        for encoding in ("cl100k_base", "o200k_base"):
            real = MESSAGE_OVERHEAD + len(bpe_openai.get_encoding(encoding).encode(text))
            row += f" {real:7d} {estimate / real:6.2f}"
        print(row)
    return 0


def count(url: str) -> int:
    """count_tokens before (the estimate) and after (the server's tokenizer) against the server's count."""
    import asyncio

    return asyncio.run(_count(url))


async def _count(url: str) -> int:
    import httpx

    from interlock.runtime.net.client import UpstreamClient
    from interlock.runtime.upstream.base import adapter_for
    from interlock.runtime.wire.base import Endpoint

    client = UpstreamClient.create()
    adapter = adapter_for("openai", client)  # every surface served: its tokenizers counted
    endpoint = Endpoint("llama", "openai", url.rstrip("/") + "/v1", "llama", {}, 5, 600, 600)
    answers = [a for a in orjson.loads(COUNTS.read_bytes())["answers"] if a["sent"] == "/v1/chat/completions"]
    print(f"{'request':58} {'server':>7} {'before':>7} {'ratio':>6} {'after':>7} {'ratio':>6} {'ms':>6}")
    worst_before = worst_after = 0.0
    costs = []
    try:
        async with httpx.AsyncClient(timeout=600) as http:
            for answer in answers:
                record, needs = parsed_needs(answer["recording"])
                surfaces = {row.path: row.surface for row in rows() if row.metered}
                internal = surfaces[record["path"]].parse(copy.deepcopy(record["body"])).body
                before = needs.prompt_tokens + needs.images * SETTINGS.image_reserve_tokens
                started = time.perf_counter()
                after = await adapter.count(endpoint, "model", internal, None, 60)
                costs.append((time.perf_counter() - started) * 1000)
                server = server_count(answer["usage"])
                if server < 200:  # short: answered live too (the recorded count may be another build's)
                    chat = dict(internal, model="model", max_tokens=1, stream=False)
                    live = (await http.post(url.rstrip("/") + "/v1/chat/completions", json=chat)).json()
                    server = live["usage"]["prompt_tokens"]
                if after is None:
                    print(f"{answer['recording']}: the server did not count it", file=sys.stderr)
                    return 2
                worst_before = max(worst_before, abs(before / server - 1))
                worst_after = max(worst_after, abs(after / server - 1))
                print(
                    f"{answer['recording'].removesuffix('.json'):58} {server:7d} {before:7d} "
                    f"{before / server:6.2f} {after:7d} {after / server:6.2f} {costs[-1]:6.1f}"
                )
    finally:
        await client.aclose()
    costs.sort()
    print(
        f"count_tokens before any answer: at most {worst_before:.1%} from the server's count before, "
        f"{worst_after:.1%} after (the bar: 15 %); the server's two calls: median "
        f"{costs[len(costs) // 2]:.1f} "
        f"ms, max {costs[-1]:.1f} ms"
    )
    return 0 if worst_after <= 0.15 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", metavar="URL", help="a live llama-server to ask again")
    parser.add_argument("--tokenizers", action="store_true", help="against OpenAI's encodings instead")
    parser.add_argument("--count", metavar="URL", help="count_tokens against a live llama-server")
    args = parser.parse_args()
    if args.count:
        return count(args.count)
    if args.record:
        return record(args.record)
    if args.tokenizers:
        return tokenizers()
    return table()


if __name__ == "__main__":
    sys.exit(main())
