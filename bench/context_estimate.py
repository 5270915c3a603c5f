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

from interlock.runtime.guards.preflight import MESSAGE_OVERHEAD, Needs, needs_of
from interlock.runtime.learned import REPORTING_FLOOR, CountBook
from interlock.runtime.route_table import rows
from interlock.runtime.tables import PreflightSettings

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

    from interlock.runtime.upstream.openai import _payload

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
        "source file (Python)": (ROOT / "interlock/runtime/router.py").read_text(),
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", metavar="URL", help="a live llama-server to ask again")
    parser.add_argument("--tokenizers", action="store_true", help="against OpenAI's encodings instead")
    args = parser.parse_args()
    if args.record:
        return record(args.record)
    if args.tokenizers:
        return tokenizers()
    return table()


if __name__ == "__main__":
    sys.exit(main())
