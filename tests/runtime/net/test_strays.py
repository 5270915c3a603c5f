"""A provider caught sending answers nobody asked for stops having its connections reused (issue 39,
item 7). ``Hostile`` (test_one_answer.py) sends a second answer ~30 ms after each of provider a's, on
the kept-alive connection; two callers ask a side by side, nothing waited for. Once the client sees
one unasked-for answer, each of a's connections serves one exchange and is closed for
``STRAY_COOLDOWN_S``, so the race no HTTP/1.1 client can see (the extra answer still on the wire when
the next request is written) is run at most once per connection that was open then: before, 5 of 20
answers carried another request's text. The catch is said (``on_stray``: the gateway's
``interlock_upstream_strays_total`` and ``/v1/health``), and the cool-down ends.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import httpx

from interlock.commands.gateway import build_gateway
from interlock.runtime.books.health import HealthBook
from interlock.runtime.loaded.tables import HealthSettings
from interlock.runtime.net.client import STRAY_COOLDOWN_S, UpstreamClient
from interlock.runtime.upstream.base import Adapter, adapter_for
from interlock.runtime.wire.base import Endpoint
from tests.runtime.conftest import build
from tests.runtime.net.test_one_answer import KEY_A, KEY_B, Hostile, Tally, _ask, _provider


def side_by_side(rounds: int) -> tuple[Tally, Tally, list[tuple[str, float]], UpstreamClient]:
    a, b = Tally(), Tally()
    caught: list[tuple[str, float]] = []

    async def go() -> UpstreamClient:
        server = Hostile("late")
        listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/v1"
        try:
            async with UpstreamClient.create(on_stray=lambda label, s: caught.append((label, s))) as client:
                adapter: Adapter = adapter_for("openai", client)
                pa: Endpoint = _provider(url, "a", KEY_A)
                pb: Endpoint = _provider(url, "b", KEY_B)
                for i in range(rounds):
                    await asyncio.gather(_ask(adapter, pa, f"a{i}.1", a), _ask(adapter, pa, f"a{i}.2", a))
                    await _ask(adapter, pb, f"b{i}", b)
                await server.settled()
                return client
        finally:
            listener.close()

    client = asyncio.run(go())
    return a, b, caught, client


def test_a_provider_caught_sending_stray_answers_costs_at_most_one_per_open_connection() -> None:
    a, b, caught, _ = side_by_side(10)
    assert a.sent == 20
    assert a.wrong <= 2  # at most one per connection open when the first stray answer was seen
    assert a.right + a.failed + a.wrong == 20
    assert b.right == b.sent == 10  # the other provider's connections are its own, reused as ever
    assert caught
    assert {label for label, _ in caught} == {"a"}
    assert all(seconds == STRAY_COOLDOWN_S for _, seconds in caught)


def test_the_catch_is_said_in_health_and_ends() -> None:
    now = [1000.0]
    book = HealthBook(
        HealthSettings(10, 2, 3, 30, 30), clock=lambda: now[0], wall=lambda: 1_800_000_000.0 + now[0]
    )
    assert book.endpoint_report("a")["connection_reuse_off_until"] is None
    book.reuse_off("a", STRAY_COOLDOWN_S)
    assert book.endpoint_report("a")["connection_reuse_off_until"] == "2027-01-15T08:21:40.000Z"
    assert book.endpoint_report("a")["healthy"] is True  # it still answers: only its reuse is off
    now[0] += STRAY_COOLDOWN_S
    assert book.endpoint_report("a")["connection_reuse_off_until"] is None


GATEWAY = """\
version: 1
server: {{default_alias: t/chat, alias_namespace: t/}}
providers:
  cloud: {{kind: openai, base_url: "http://127.0.0.1:{port}/v1", api_key_env: CLOUD_KEY}}
aliases:
  t/chat: {{description: a provider that sends stray answers, chain: [cloud/m]}}
"""


def test_the_gateway_counts_the_catch_and_says_it_in_health(
    plan_data: Callable[[str], dict[str, Any]],
) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    plan = build(plan_data(GATEWAY.format(port=port)), {"CLOUD_KEY": KEY_A})
    gateway = build_gateway(plan, probes=False)
    server = Hostile("late")

    async def scenario() -> tuple[list[str], Any, str]:
        upstream = await asyncio.start_server(server.serve, sock=listener)
        await gateway.startup()
        try:
            transport = httpx.ASGITransport(app=gateway)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
                texts = []
                for n in range(3):
                    body = {"model": "t/chat", "messages": [{"role": "user", "content": f"q{n}"}]}
                    answer = (await http.post("/v1/chat/completions", json=body)).json()
                    texts.append(answer["choices"][0]["message"]["content"])
                    await server.settled()  # the stray answer is on the wire before the next request
                health = (await http.get("/v1/health")).json()
                metrics = (await http.get("/metrics")).text
        finally:
            await gateway.shutdown()
            upstream.close()
        return texts, health, metrics

    texts, health, metrics = asyncio.run(scenario())
    assert texts == ["to q0", "to q1", "to q2"]  # each stray answer was caught before it was read
    (endpoint,) = health["providers"]["cloud"]["endpoints"]
    assert endpoint["connection_reuse_off_until"] is not None
    assert endpoint["healthy"] is True
    assert 'interlock_upstream_strays_total{endpoint="cloud"}' in metrics
