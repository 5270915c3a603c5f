"""Drive an adapter from a sync test: a fresh ``asyncio.run`` and a fresh ``UpstreamClient`` per call."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from interlock.runtime.base.errors import UpstreamError
from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.upstream.base import Adapter, adapter_for
from interlock.runtime.wire.base import Endpoint

API_KEY = "sk-test-7f3a9c2e41d8b6"


def endpoint(
    kind: str,
    url: str,
    *,
    key: str | None = API_KEY,
    connect_s: float = 2.0,
    first_byte_s: float = 5.0,
    total_s: float = 10.0,
    idle_s: float = 0.0,
    max_body_bytes: int = 32 << 20,
    max_line_bytes: int = 1 << 20,
) -> Endpoint:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    label = "groq" if kind == "openai" else "ollama@gpu0"
    return Endpoint(
        provider=label.split("@")[0],
        kind=kind,
        url=url,
        label=label,
        headers=headers,
        connect_s=connect_s,
        first_byte_s=first_byte_s,
        total_s=total_s,
        idle_s=idle_s,
        max_body_bytes=max_body_bytes,
        max_line_bytes=max_line_bytes,
    )


T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def _with_adapter(kind: str, fn: Any) -> Any:
    async with UpstreamClient.create() as client:
        return await fn(adapter_for(kind, client))


def chat(ep: Endpoint, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
    async def go(adapter: Adapter) -> dict[str, Any]:
        return await adapter.chat(ep, model, body)

    result: dict[str, Any] = run(_with_adapter(ep.kind, go))
    return result


def embed(ep: Endpoint, model: str, body: Mapping[str, Any]) -> dict[str, Any]:
    async def go(adapter: Adapter) -> dict[str, Any]:
        return await adapter.embed(ep, model, body)

    result: dict[str, Any] = run(_with_adapter(ep.kind, go))
    return result


def probe(ep: Endpoint, timeout_s: float = 2.0) -> None:
    async def go(adapter: Adapter) -> None:
        await adapter.probe(ep, timeout_s)

    run(_with_adapter(ep.kind, go))


def stream(
    ep: Endpoint, model: str, body: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], UpstreamError | None]:
    """Every chunk that arrived, and the error that ended the stream (None when it ended well).

    An error raised by ``chat_stream`` itself (before the first chunk) propagates.
    """

    async def go(adapter: Adapter) -> tuple[list[dict[str, Any]], UpstreamError | None]:
        chunks: list[dict[str, Any]] = []
        upstream = await adapter.chat_stream(ep, model, body)
        try:
            async for chunk in upstream:
                chunks.append(chunk)
        except UpstreamError as exc:
            return chunks, exc
        finally:
            await upstream.aclose()
        return chunks, None

    result: tuple[list[dict[str, Any]], UpstreamError | None] = run(_with_adapter(ep.kind, go))
    return result


def text_of(chunks: list[dict[str, Any]]) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
