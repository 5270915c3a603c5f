"""Clients leaving mid-stream, many at once: every upstream stream is closed and every slot comes back.

Twenty 5 s streams through one Ollama worker with twenty slots; half the clients read their first chunk and
close the connection, the other half read to the end. The fake counts how each of its streams ended.
"""

from __future__ import annotations

import asyncio

import openai

from tests.e2e.conftest import Fakes
from tests.e2e.harness import Served
from tests.waiting import wait_until

STREAMS = 20
HI = [{"role": "user", "content": "hi"}]


async def _one(sdk: openai.AsyncOpenAI, leave: bool) -> int:
    """Chunks read before the client left (``leave``) or the stream ended."""
    stream = await sdk.chat.completions.create(model="e2e/crowd", messages=HI, stream=True)  # type: ignore[arg-type]
    seen = 0
    try:
        async for _chunk in stream:
            seen += 1
            if leave:
                break
    finally:
        await stream.close()  # unread: httpx drops the connection, as a vanishing client would
    return seen


async def _crowd(url: str) -> list[int]:
    sdk = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="x", max_retries=0)
    try:
        return await asyncio.gather(*(_one(sdk, leave=i % 2 == 0) for i in range(STREAMS)))
    finally:
        await sdk.close()


def test_half_the_clients_vanish_mid_stream(gateway: Served, fakes: Fakes) -> None:
    streams = fakes.crowd.streams
    before_cut, before_finished = streams.cut, streams.finished
    disconnects = gateway.metric("interlock_client_disconnects_total", endpoint="chat")

    seen = asyncio.run(_crowd(gateway.url))

    assert seen[0::2] == [1] * (STREAMS // 2)
    assert all(count > 1 for count in seen[1::2])  # the stayers read the whole answer
    vanished = STREAMS // 2
    wait_until(lambda: streams.cut - before_cut == vanished, 60, "every vanished client's upstream to close")
    wait_until(lambda: streams.open == 0, 60, "no upstream stream left open")
    assert streams.finished - before_finished == STREAMS // 2
    wait_until(
        lambda: gateway.health()["workers"]["crowd1"]["slots_in_use"] == 0, 60, "every slot to come back"
    )
    assert gateway.health()["workers"]["crowd1"]["queue_waiting"] == 0
    assert gateway.metric("interlock_client_disconnects_total", endpoint="chat") == disconnects + STREAMS // 2
