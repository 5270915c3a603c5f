"""The transport border: every row of ``TRANSPORTS`` carries an adapter's request, non-streamed and
streamed (the relay's sink included), to a real loopback upstream, and fails into the same errors; no
adapter imports a framing module; ``send`` takes one ``Request``."""

from __future__ import annotations

import ast
import asyncio
import inspect
import socket
from collections import deque
from pathlib import Path
from typing import Any

import pytest

import interlock.runtime.upstream as upstream_room
from interlock.common.kinds import KINDS
from interlock.runtime.base.errors import ConnectFailed, FirstByteTimeout
from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.net.transport import TRANSPORTS, Request, Transport, opener
from interlock.runtime.upstream.base import adapter_for
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.runtime.upstream.helpers import endpoint

HI = {"model": "my-alias", "messages": [{"role": "user", "content": "hello there"}]}
ANSWER = "Hello from groq-fake, model m1."
FRAMING = {"interlock.runtime.net.http1", "interlock.runtime.net.client", "interlock.runtime.net.connections"}


async def _through(name: str, fake: FakeOpenAI) -> tuple[str, str, str]:
    """One chat, one stream read chunk by chunk and one relayed to a sink, through transport ``name``."""
    transport: Transport = opener(name)()
    try:
        adapter = adapter_for("openai", transport)
        ep = endpoint("openai", fake.base_url, idle_s=5.0)
        answer = await adapter.chat(ep, "m1", HI)
        iterated = []
        async with asyncio.timeout(10):
            stream = await adapter.chat_stream(ep, "m1", HI)
            async for chunk in stream:
                iterated.extend(c["delta"].get("content") or "" for c in chunk["choices"])
            relayed: list[str] = []

            def sink(chunks: deque[dict[str, Any]]) -> bool:
                relayed.extend(c["delta"].get("content") or "" for ch in chunks for c in ch["choices"])
                return False

            async def drain() -> None:
                return None

            stream = await adapter.chat_stream(ep, "m1", HI)
            await stream.relay(sink, drain)
        return answer["choices"][0]["message"]["content"], "".join(iterated), "".join(relayed)
    finally:
        await transport.aclose()


@pytest.mark.parametrize("name", sorted(TRANSPORTS))
def test_each_transport_carries_a_chat_and_a_stream(name: str, openai_fake: FakeOpenAI) -> None:
    chat, iterated, relayed = asyncio.run(_through(name, openai_fake))
    assert (chat, iterated, relayed) == (ANSWER, ANSWER, ANSWER)
    assert [r.path for r in openai_fake.requests] == ["/v1/chat/completions"] * 3
    assert all(r.headers["authorization"] == "Bearer sk-test-7f3a9c2e41d8b6" for r in openai_fake.requests)


async def _failure(name: str, url: str, first_byte_s: float = 5.0) -> BaseException:
    transport: Transport = opener(name)()
    try:
        adapter = adapter_for("openai", transport)
        try:
            await adapter.chat(endpoint("openai", url, first_byte_s=first_byte_s), "m1", HI)
        except Exception as exc:
            return exc
        raise AssertionError("no failure")
    finally:
        await transport.aclose()


@pytest.mark.parametrize("name", sorted(TRANSPORTS))
def test_each_transport_fails_into_the_same_errors(name: str, openai_fake: FakeOpenAI) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    refused = asyncio.run(_failure(name, f"http://127.0.0.1:{port}/v1"))
    assert isinstance(refused, ConnectFailed)
    assert str(refused) == "connection refused or unreachable"
    openai_fake.set_fault(Fault.hang())
    silent = asyncio.run(_failure(name, openai_fake.base_url, first_byte_s=0.3))
    assert isinstance(silent, FirstByteTimeout)
    assert str(silent) == "no answer within 0.3 s"


def test_an_unknown_transport_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^unknown transport 'curl'; expected one of own, httpx$"):
        opener("curl")


def test_send_takes_one_request_object() -> None:
    """``UpstreamClient`` is reached through one request object (issue 41)."""
    parameters = list(inspect.signature(UpstreamClient.send).parameters)
    assert parameters == ["self", "request"]
    assert inspect.signature(UpstreamClient.send).parameters["request"].annotation in (Request, "Request")


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_no_adapter_imports_a_framing_module() -> None:
    """The adapters (every kind's, and the exchange and helpers they call) reach the transport only
    through ``net/transport.py``: none imports ``http1``, the client's pools or the server's framing."""
    adapters = {KINDS[kind].adapter.partition(":")[0] for kind in KINDS}
    room = Path(upstream_room.__file__).parent
    modules = sorted(room.glob("*.py"))
    assert {f"interlock.runtime.upstream.{p.stem}" for p in modules} >= adapters
    offenders = {p.name: sorted(_imports(p) & FRAMING) for p in modules if _imports(p) & FRAMING}
    assert offenders == {}
