"""The stream's keepalive (request/keepalive.py): an early head goes out only while the walk is still
silent; content that comes as the interval ends keeps the answer's own head."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from interlock.runtime.base.asgi import Header, Message
from interlock.runtime.request.keepalive import Keepalive
from interlock.runtime.wire.base import StreamRender
from interlock.runtime.wire.openai_chat import ChunkEvents


def test_content_that_comes_as_the_interval_ends_keeps_the_answer_s_own_head(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The timer fired and its task is made but has not run when the first content comes: ``stop``
    says no head went out, and none does (it sent the gateway's early head, and the answer lost the
    header naming who answered)."""
    sent: list[Message] = []
    heads: list[int] = []
    due = Keepalive._due

    async def send(message: Message) -> None:
        sent.append(message)

    def head() -> tuple[StreamRender, list[Header]]:
        heads.append(1)
        return ChunkEvents("c", usage=False), []

    async def walk() -> bool:
        fired = asyncio.Event()

        def timer(self: Keepalive) -> None:  # the walk's turn comes before the keepalive task's
            fired.set()
            due(self)

        monkeypatch.setattr(Keepalive, "_due", timer)
        keepalive = Keepalive(send, 0.0, head)
        await fired.wait()
        started = await keepalive.stop()
        await asyncio.sleep(0)
        return started

    assert asyncio.run(walk()) is False
    assert sent == []
    assert heads == []


def test_a_silent_walk_gets_the_head_and_a_keepalive_then_stops() -> None:
    sent: list[Any] = []
    beat = asyncio.Event()

    async def send(message: Message) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            beat.set()

    async def walk() -> bool:
        keepalive = Keepalive(send, 0.0, lambda: (ChunkEvents("c", usage=False), []))
        await beat.wait()
        return await keepalive.stop()

    assert asyncio.run(walk()) is True
    assert sent[0] == {"type": "http.response.start", "status": 200, "headers": []}
    assert sent[1]["body"] == b": keepalive\n\n"
