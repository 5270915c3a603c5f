"""The own client keeps each provider's request line built once (``UpstreamClient._heads``), and never a
credential in that long-lived cache: the encoded headers (``Endpoint.lines``, which hold the upstream's
API key) are joined to the line per request, so a rotated key is sent at once and the old one is not
kept as a dictionary key for the process's life."""

from __future__ import annotations

import asyncio

from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.upstream.base import adapter_for
from interlock.testing.fake_openai import FakeOpenAI
from tests.runtime.upstream.helpers import endpoint

HI = {"model": "m1", "messages": [{"role": "user", "content": "hello there"}]}
OLD, NEW = "sk-old-5b1e9d37c2a84f", "sk-new-0c6f2a18e97d35"


async def _two_keys(fake: FakeOpenAI) -> list[tuple[object, bytes]]:
    """One chat with the old key, then the provider's key rotated (the plan reloaded with the new one)
    and one chat more; what the client's cache of heads holds after."""
    client = UpstreamClient.create()
    accepted = fake.api_key
    try:
        adapter = adapter_for("openai", client)
        fake.api_key = OLD
        await adapter.chat(endpoint("openai", fake.base_url, key=OLD), "m1", HI)
        fake.api_key = NEW
        await adapter.chat(endpoint("openai", fake.base_url, key=NEW), "m1", HI)
        return [(key, line) for key, (_, line) in client._heads.items()]
    finally:
        fake.api_key = accepted
        await client.aclose()


def test_the_head_cache_keeps_no_key_and_each_request_sends_its_own(openai_fake: FakeOpenAI) -> None:
    kept = asyncio.run(_two_keys(openai_fake))
    assert [r.headers["authorization"] for r in openai_fake.requests] == [f"Bearer {OLD}", f"Bearer {NEW}"]
    assert len(kept) == 1  # one provider, one path: one line, whatever its key
    for key, line in kept:
        for secret in (OLD, NEW):
            assert secret not in repr(key)
            assert secret.encode() not in line
