"""The gateway's own CPU per request, without sockets: the ASGI app driven in-process.

An instant in-memory adapter stands in for the upstream, and the ASGI ``receive``/``send`` are plain
callables, so what is measured is interlock's hot path alone: body parsing and checks, resolution, the
guards, the router's bookkeeping and metrics, response shaping. The HTTP server (uvicorn) and the
upstream client (aiohttp) are measured by bench/gateway.py and bench/upstream_client.py.

    .venv/bin/python bench/hot_path.py [--requests 20000] [--profile]

"ollama, 3 workers (scored)" is the single-worker Ollama case with three workers to choose from:
the difference is worker scoring (``runtime.fleet.scoring``) and the guards' per-worker checks.
"openai, 3 servers (signals)" is the same for an OpenAI-compatible provider whose three workers name
their server (vLLM, SGLang, llama.cpp), each with a load reading in place as the probe round leaves it
(``runtime.fleet.signals.choice``); compare it with "openai worker (slots)", one such worker.

The lines after the table: worker choice alone (the slot guard: scoring, signals, prefix affinity,
the slot taken and given back) for four OpenAI-compatible servers, fair queuing off and on
(``worker_choice``; ``--only "worker choice"`` runs just that and the first case).

"3 workers, 4 KB shared prefix" sends one four-turn conversation (a 2.9 KB system prompt) to them
again and again: prefix affinity's whole cost (the prompt's block hashes, a lookup per worker, the
index refreshed on every send), always a hit; the line after the table is that alone (``prefix_cost``),
and the next one worker choice alone among four llama.cpp servers with prefix affinity and load
signals (``choice_cost``: the issue-32 budget is 25 µs).

The CORS cases run the same request through a plan with ``server.cors`` on: without an ``Origin``
(an SDK outside a browser) and from a listed origin (the response gains the CORS headers). The last two
run the first case and the stream with the JSON access log on (``--access-log json``; written to a
temporary file): one line per request, flushed. The "auth on" cases run it under ``server.auth:
required``: a key from a variable (``Authorization: Bearer``), a generated key (``x-api-key``, its HMAC
checked), and a key whose tenant has requests/min, tokens/min and concurrency limits (counted in
memory). Then the audit log on (``--audit-log``, a temporary file: one queued event per request, and
the writer task's work, as the loop gets a turn every 16 requests) and OpenTelemetry tracing on
(``--otel``: the SDK with its batch span processor and an exporter that discards, so what is measured is
making the spans, not a network). Tracing off costs the first case nothing: compare it across commits.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from interlock.commands.gateway import build_gateway
from interlock.commands.serve import PlanLoader
from interlock.common.apikeys import hash_key, new_key
from interlock.runtime.app.gateway import Gateway
from interlock.runtime.base.asgi import DISCONNECT, Disconnect
from interlock.runtime.features import Settings
from interlock.runtime.fleet.signals.base import ServerLoad
from interlock.runtime.upstream.base import Adapter
from interlock.runtime.wire.base import ChatStream, Endpoint, Native

CONFIG = """\
version: 1
server: {default_alias: bench/chat, alias_namespace: bench/}
providers:
  local:
    kind: ollama
    workers: [{name: box, url: "http://127.0.0.1:9", max_concurrent: 64, model_concurrency: {"*": 64}}]
  fleet:
    kind: ollama
    workers:
      - {name: f1, url: "http://127.0.0.2:9", max_concurrent: 64, model_concurrency: {"*": 64}}
      - {name: f2, url: "http://127.0.0.3:9", max_concurrent: 64, model_concurrency: {"*": 64}}
      - {name: f3, url: "http://127.0.0.4:9", max_concurrent: 64, model_concurrency: {"*": 64}}
  cloud: {kind: openai, base_url: "http://127.0.0.1:9/v1", api_key_env: BENCH_KEY}
  server:
    kind: openai
    workers: [{name: s0, url: "http://127.0.0.5:9/v1", max_concurrent: 64}]
  servers:
    kind: openai
    workers:
      - {name: s1, url: "http://127.0.0.6:9/v1", max_concurrent: 64, server: vllm}
      - {name: s2, url: "http://127.0.0.7:9/v1", max_concurrent: 64, server: sglang}
      - {name: s3, url: "http://127.0.0.8:9/v1", max_concurrent: 64, server: llama.cpp}
  quad:
    kind: openai
    workers:
      - {name: q1, url: "http://127.0.1.1:9/v1", max_concurrent: 64, server: vllm}
      - {name: q2, url: "http://127.0.1.2:9/v1", max_concurrent: 64, server: sglang}
      - {name: q3, url: "http://127.0.1.3:9/v1", max_concurrent: 64, server: llama.cpp}
      - {name: q4, url: "http://127.0.1.4:9/v1", max_concurrent: 64, server: vllm}
aliases:
  bench/chat: {description: bench, chain: [cloud/fast, local/llama3.2:3b]}
  bench/local: {description: bench, chain: [local/llama3.2:3b, cloud/fast]}
  bench/fleet: {description: bench, chain: [fleet/llama3.2:3b, cloud/fast]}
  bench/server: {description: bench, chain: [server/m, cloud/fast]}
  bench/servers: {description: bench, chain: [servers/m, cloud/fast]}
  bench/quad: {description: bench, chain: [quad/m, cloud/fast], on_saturation: queue}
"""
ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "fast",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "Hello there."}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
}


class _Chunks(ChatStream):
    """One chunk per ``read``, as a stream that trickles gives them."""

    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self.chunks = chunks
        self._next = 0

    async def read(self) -> list[dict[str, Any]]:
        if self._next == len(self.chunks):
            return []
        self._next += 1
        return [dict(self.chunks[self._next - 1])]

    async def _items(self) -> AsyncIterator[dict[str, Any]]:
        for chunk in self.chunks:
            yield dict(chunk)

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self._items()

    async def aclose(self) -> None:
        return None


class InstantAdapter(Adapter):
    """Answers at once, from memory."""

    async def chat(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> dict[str, Any]:
        return dict(ANSWER)

    async def chat_stream(
        self, endpoint: Endpoint, model: str, body: Mapping[str, Any], native: Native | None = None
    ) -> ChatStream:
        return _Chunks([{"object": "chat.completion.chunk", "choices": [{"delta": {"content": "x"}}]}] * 5)

    async def embed(self, endpoint: Endpoint, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return {"object": "list", "data": []}

    async def probe(self, endpoint: Endpoint, timeout_s: float) -> None:
        return None


class _Discard:
    """A span exporter that drops what it is given (the cost measured is making spans, not sending)."""

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def discarding(gateway: Gateway) -> Gateway:
    """``--otel`` as ``interlock serve`` builds it (its row plugged in; a batch processor), exporting
    nowhere."""
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    tracing: Any = getattr(gateway.parts.services.router.attempt, "__self__", None)  # the row's tracer
    tracing.provider.add_span_processor(BatchSpanProcessor(_Discard()))  # type: ignore[arg-type]
    return gateway


async def drive(
    gateway: Gateway,
    body: bytes,
    requests: int,
    extra: tuple[tuple[bytes, bytes], ...] = (),
    turn_every: int = 0,
) -> float:
    """Seconds of CPU per request through ``gateway``'s ASGI callable; ``turn_every`` N requests, the
    event loop gets a turn (for background work the case includes, such as the audit log's writer).
    Each request's scope holds a ``Disconnect``, as under ``interlock serve`` (its connections offer
    one), so the disconnect watch is a callback, not a task per request."""
    scope: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": "/v1/chat/completions",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *extra,
        ],
    }
    disconnected = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if not getattr(receive, "sent", False):
            receive.sent = True  # type: ignore[attr-defined]
            return {"type": "http.request", "body": body, "more_body": False}
        await disconnected.wait()
        return {"type": "http.disconnect"}

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    started = time.process_time()
    for n in range(requests):
        receive.sent = False  # type: ignore[attr-defined]
        scope["extensions"] = {DISCONNECT: Disconnect()}  # as `interlock serve` offers one per request
        await gateway(scope, receive, send)
        if turn_every and n % turn_every == 0:
            await asyncio.sleep(0)
    spent = time.process_time() - started
    assert set(statuses) == {200}, set(statuses)
    return spent / requests


CORS = "  cors: {allow_origins: [https://app.example.com, http://localhost:5173]}\n"
GENERATED = new_key("gen")
AUTH = f"""\
tenants:
  team: {{allowed: ["bench/*"]}}
  capped: {{requests_per_minute: 100000000, tokens_per_minute: 1000000000, max_concurrent: 64}}
keys:
  env: {{tenant: team, key_env: BENCH_CALLER_KEY}}
  gen: {{tenant: team, hash: "{hash_key(GENERATED)}"}}
  capped: {{tenant: capped, key_env: BENCH_CAPPED_KEY}}
"""
ENV = {
    "BENCH_KEY": "sk-bench",
    "BENCH_CALLER_KEY": "caller-secret-7f3a",
    "BENCH_CAPPED_KEY": "capped-secret-2b9e",
}


def prefix_cost(raw: bytes, requests: int) -> str:
    """Prefix affinity's own CPU per request for three workers, alone (the gateway's figures above
    vary by more than it on a busy machine): the prompt's blocks from a freshly parsed body, three
    workers' hits, one send recorded. The least of five runs."""
    from interlock.runtime.fleet.prefix import PrefixIndex, prompt_prefix

    index, labels, runs = PrefixIndex(), ("fleet@f1", "fleet@f2", "fleet@f3"), []
    for _ in range(5):
        bodies = [orjson.loads(raw) for _ in range(requests)]  # new strings: no hash cached
        started = time.process_time()
        for body in bodies:
            prefix = prompt_prefix(body)
            assert prefix is not None
            for label in labels:
                index.saved_s(label, "llama3.2:3b", prefix)
            index.served(labels[1], "llama3.2:3b", prefix, hit=True)
        runs.append((time.process_time() - started) / requests)
    return f"{'prefix affinity alone':28} {min(runs) * 1e6:6.1f} µs CPU per request (the case above's prompt)"


CHOICE = """\
version: 1
providers:
  llama:
    kind: openai
    probe: false
    workers:
      - {name: s1, url: "http://127.0.0.1:9/v1", server: llama.cpp, max_concurrent: 2}
      - {name: s2, url: "http://127.0.0.2:9/v1", server: llama.cpp, max_concurrent: 2}
      - {name: s3, url: "http://127.0.0.3:9/v1", server: llama.cpp, max_concurrent: 2}
      - {name: s4, url: "http://127.0.0.4:9/v1", server: llama.cpp, max_concurrent: 2}
aliases:
  bench/agents: {chain: [llama/smollm2]}
"""


def choice_cost(raw: bytes, requests: int) -> str:
    """Worker choice alone among 4 llama.cpp servers with prefix affinity and load signals on: the
    prompt's blocks from a freshly parsed body, the four workers' costs (wait from the server's
    reading, cached and evicted prefill at the learned prompt speed), the send noted in each one's
    modelled cache (2 slots). Sessions rotate over 8 system prompts, so hits, misses and evictions all
    occur. The least of five runs."""
    from interlock.runtime.fleet.live_facts import LiveFacts
    from interlock.runtime.fleet.prefix import prompt_prefix
    from interlock.runtime.fleet.scoring import Scorer, backend_occupancy
    from interlock.runtime.fleet.speeds import SpeedBook
    from interlock.runtime.state.memory import MemorySlots
    from interlock.runtime.telemetry.collector import TelemetryBook

    plan = load(CHOICE)
    facts, slots = LiveFacts(), MemorySlots()
    slots.configure(plan.workers)
    scorer = Scorer(facts, TelemetryBook(), SpeedBook(), backend_occupancy(slots, lambda: plan.workers))
    candidate = plan.candidates["llama/smollm2"]
    for n, route in enumerate(candidate.routes):
        label = route.endpoint.label
        facts.put_load(label, ServerLoad(running=n % 3, waiting=0, slots=2, at=time.monotonic()))
        scorer.prefixes.prefill.record(label, "smollm2", 93.0)
        scorer.speeds.record(label, "smollm2", 20, 10**9, service_ns=5 * 10**9)
    base = orjson.loads(raw)
    variants = []
    for n in range(8):
        body = dict(base)
        body["messages"] = [{"role": "system", "content": f"Agent {n}. " + base["messages"][0]["content"]}]
        body["messages"] += base["messages"][1:]
        variants.append(orjson.dumps(body))
    routes, settings, runs = candidate.routes, plan.routing, []
    for _ in range(5):
        bodies = [orjson.loads(variants[i % 8]) for i in range(requests)]  # new strings: no hash cached
        started = time.process_time()
        for body in bodies:
            prefix = prompt_prefix(body)
            best = scorer.order(candidate, routes, settings, prefix=prefix)[0]
            scorer.sent(candidate, best, prefix)
        runs.append((time.process_time() - started) / requests)
    return f"{'worker choice, 4 servers':28} {min(runs) * 1e6:6.1f} µs CPU per request (prefix + signals)"


async def worker_choice(gateway: Gateway, raw: bytes, requests: int) -> str:
    """The slot guard alone (worker choice and slot admission) for four OpenAI-compatible servers with
    load signals, prefix affinity on a 4 KB shared prefix, fair queuing off (every request one share:
    no tenant) and on (a tenant's turn, weight 3, and a batch one): the least of five runs, each on
    freshly parsed bodies. Nobody waits here, which is the common case fair queuing must not slow."""
    from interlock.runtime.books.estimate import needs_of
    from interlock.runtime.guards import Admission
    from interlock.runtime.guards.preflight import Preflight
    from interlock.runtime.guards.slots import SlotGuard
    from interlock.runtime.loaded.callers import ANONYMOUS, COMMON, Turn
    from interlock.runtime.request.resolve import resolve

    plan = gateway.plan
    target = resolve(plan, "bench/quad", ANONYMOUS)
    candidate = target.candidates[0]
    guard = next(g for g in gateway.parts.services.router.chain(candidate) if isinstance(g, SlotGuard))
    needs = needs_of(orjson.loads(raw), "chat", plan.preflight)
    variants = {
        "fair queuing off": COMMON,
        "fair queuing on": Turn("team", 3.0),
        "fair queuing on, batch": Turn("team", 3.0, batch=True),
    }
    runs: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(5):  # the variants interleaved, so a busy machine's drift hits each alike
        for name, turn in variants.items():
            bodies = [orjson.loads(raw) for _ in range(requests)]
            started = time.process_time()
            for body in bodies:
                preflight = Preflight(needs, plan.preflight.mode)
                preflight.turn = turn
                admission = Admission(
                    candidate, candidate.routes, preflight, spill=target.spill[0], has_next=True
                )
                try:  # as the router holds it: the slot given back in a ``finally``
                    assert await guard.admit(admission, body) is None
                finally:
                    await admission.release()
            runs[name].append((time.process_time() - started) / requests)
    off = min(runs["fair queuing off"])
    lines = [
        f"{'4 servers: ' + name:36} {min(times) * 1e6:6.1f} µs CPU per worker choice"
        f"  {min(times) / off:4.2f}x off"
        for name, times in runs.items()
    ]
    return "\n".join(lines)


def load(config_text: str) -> Any:
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "bench.yaml"
        config.write_text(config_text)
        return PlanLoader(str(config), ENV)()


async def main(requests: int, profile: bool, only: list[str] | None = None) -> None:
    plan = load(CONFIG)
    cors_plan = load(
        CONFIG.replace(
            "server: {default_alias: bench/chat, alias_namespace: bench/}\n",
            "server:\n  default_alias: bench/chat\n  alias_namespace: bench/\n" + CORS,
        )
    )

    async def instant(_metrics: Any) -> tuple[Mapping[str, Adapter], Any]:
        async def close() -> None:
            return None

        return {"openai": InstantAdapter(), "ollama": InstantAdapter()}, close

    auth_plan = load(
        CONFIG.replace(
            "server: {default_alias: bench/chat, alias_namespace: bench/}\n",
            "server: {default_alias: bench/chat, alias_namespace: bench/, auth: required}\n",
        )
        + AUTH
    )
    gateway = build_gateway(plan, open_adapters=instant, probes=False)
    await gateway.startup()
    for label, reading in (  # as a probe round leaves them
        ("servers@s1", ServerLoad(running=3, waiting=1, kv_used=0.4)),
        ("servers@s2", ServerLoad(running=1, waiting=0, kv_used=0.2, cached_tokens=900)),
        ("servers@s3", ServerLoad(running=1, waiting=2, slots=4, kv_used=0.5)),
        ("quad@q1", ServerLoad(running=3, waiting=1, kv_used=0.4)),
        ("quad@q2", ServerLoad(running=1, waiting=0, kv_used=0.2, cached_tokens=900)),
        ("quad@q3", ServerLoad(running=1, waiting=2, slots=4, kv_used=0.5)),
        ("quad@q4", ServerLoad(running=2, waiting=0, kv_used=0.3)),
    ):
        gateway.parts.live.fleet.facts.put_load(label, dataclasses.replace(reading, at=time.monotonic()))
    with_auth = build_gateway(auth_plan, open_adapters=instant, probes=False)
    await with_auth.startup()
    with_cors = build_gateway(cors_plan, open_adapters=instant, probes=False)
    await with_cors.startup()
    log_file = tempfile.TemporaryFile()  # noqa: SIM115 (closed below)
    logged = build_gateway(plan, open_adapters=instant, probes=False, access_log=log_file)
    await logged.startup()
    audit_file = tempfile.NamedTemporaryFile(suffix=".jsonl")  # noqa: SIM115 (closed below)
    audited = build_gateway(
        plan, open_adapters=instant, probes=False, settings=Settings(audit_log=audit_file.name)
    )
    audit: Any = getattr(audited.parts.services.current.hooks.action, "__self__", None)  # the row's log
    await audited.startup()
    otel = Settings(otel=True, environ={"OTEL_TRACES_EXPORTER": "none"})
    traced = discarding(build_gateway(plan, open_adapters=instant, probes=False, settings=otel))
    await traced.startup()
    assert with_cors.plan.cors is not None
    chat = orjson.dumps({"model": "bench/chat", "messages": [{"role": "user", "content": "hi"}]})
    origin = ((b"origin", b"http://localhost:5173"),)
    cases: dict[str, tuple[Gateway, bytes, tuple[tuple[bytes, bytes], ...]]] = {
        "openai candidate": (gateway, chat, ()),
        "ollama candidate (slots)": (
            gateway,
            orjson.dumps({"model": "bench/local", "messages": [{"role": "user", "content": "hi"}]}),
            (),
        ),
        "ollama, 3 workers (scored)": (
            gateway,
            orjson.dumps({"model": "bench/fleet", "messages": [{"role": "user", "content": "hi"}]}),
            (),
        ),
        "openai worker (slots)": (
            gateway,
            orjson.dumps({"model": "bench/server", "messages": [{"role": "user", "content": "hi"}]}),
            (),
        ),
        "openai, 3 servers (signals)": (
            gateway,
            orjson.dumps({"model": "bench/servers", "messages": [{"role": "user", "content": "hi"}]}),
            (),
        ),
        "ollama, 4 KB prompt + tools": (
            gateway,
            orjson.dumps(
                {
                    "model": "bench/local",
                    "messages": [
                        {"role": "system", "content": "You are a careful assistant. " * 20},
                        {"role": "user", "content": "Summarise the following notes please. " * 90},
                    ],
                    "tools": [
                        {
                            "type": "function",
                            "function": {
                                "name": "lookup",
                                "description": "Look a term up",
                                "parameters": {"type": "object", "properties": {"term": {"type": "string"}}},
                            },
                        }
                    ],
                }
            ),
            (),
        ),
        "3 workers, 4 KB shared prefix": (
            gateway,
            orjson.dumps(
                {
                    "model": "bench/fleet",
                    "messages": [
                        {"role": "system", "content": "You are a careful assistant. " * 100},
                        {"role": "user", "content": "Summarise the following notes please. " * 20},
                        {"role": "assistant", "content": "Here is the summary you asked for. " * 10},
                        {"role": "user", "content": "Now shorter, please."},
                    ],
                }
            ),
            (),
        ),
        "stream, 5 chunks": (
            gateway,
            orjson.dumps(
                {"model": "bench/chat", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            ),
            (),
        ),
        "CORS on, no Origin": (with_cors, chat, ()),
        "CORS on, listed Origin": (with_cors, chat, origin),
        "auth on, key from a variable": (
            with_auth,
            chat,
            ((b"authorization", b"Bearer caller-secret-7f3a"),),
        ),
        "auth on, generated key": (with_auth, chat, ((b"x-api-key", GENERATED.encode()),)),
        "auth on, tenant rate limits": (with_auth, chat, ((b"authorization", b"Bearer capped-secret-2b9e"),)),
        "JSON access log on": (logged, chat, ()),
        "stream, JSON access log on": (
            logged,
            orjson.dumps(
                {"model": "bench/chat", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            ),
            (),
        ),
        "audit log on": (audited, chat, ()),
        "tracing on (--otel)": (traced, chat, ()),
        "stream, tracing on": (
            traced,
            orjson.dumps(
                {"model": "bench/chat", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            ),
            (),
        ),
    }
    baseline = 0.0
    for name, (target, body, extra) in cases.items():
        if only and name != "openai candidate" and not any(part in name for part in only):
            continue
        turn = 16 if target is audited else 0  # the writer task runs between requests, as it would
        await drive(target, body, 500, extra, turn)  # warm up
        if profile:  # cProfile (the standard library's): its call counts per request are exact
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
            per = await drive(target, body, requests, extra, turn)
            profiler.disable()
            stats = pstats.Stats(profiler)
            calls = stats.total_calls  # type: ignore[attr-defined]
            print(f"{name}: {calls / requests:.0f} function calls per request")
            stats.sort_stats("tottime").print_stats(30)
        else:
            per = await drive(target, body, requests, extra, turn)
        baseline = baseline or per
        print(
            f"{name:28} {per * 1e6:6.1f} µs CPU per request (interlock's own code, no sockets)"
            f"  {per / baseline:4.2f}x openai candidate"
        )
    if not only or any(part in "3 workers, 4 KB shared prefix" for part in only):
        print(prefix_cost(cases["3 workers, 4 KB shared prefix"][1], requests))
        print(choice_cost(cases["3 workers, 4 KB shared prefix"][1], requests))
    if not only or any(part in "worker choice, fair queuing" for part in only):
        shared = orjson.loads(cases["3 workers, 4 KB shared prefix"][1])
        print(await worker_choice(gateway, orjson.dumps({**shared, "model": "bench/quad"}), requests))
    await gateway.shutdown()
    await with_cors.shutdown()
    await with_auth.shutdown()
    await logged.shutdown()
    log_file.close()
    assert audit.written > 0 or only  # (its case skipped by --only)
    await audited.shutdown()
    audit_file.close()
    await traced.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument(
        "--profile", action="store_true", help="print a cProfile profile per case (with its own cost)"
    )
    parser.add_argument(
        "--only", action="append", help="run only the cases whose name has this (and the first case)"
    )
    args = parser.parse_args()
    import uvloop

    uvloop.run(main(args.requests, args.profile, args.only))
    sys.exit(0)
