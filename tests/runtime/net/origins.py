"""Origins for tests that drive the own client straight (``send(Request(origin, ...))``): the plan's own
``Endpoint``, which is what the gateway hands a transport."""

from __future__ import annotations

from collections.abc import Mapping

from interlock.runtime.wire.base import Endpoint


def origin(
    url: str,
    headers: Mapping[str, str] | None = None,
    *,
    connect_s: float = 5.0,
    pool: str = "",
    kind: str = "ollama",
) -> Endpoint:
    """``url`` as a provider's base URL; ``kind`` ollama sends no ``Idempotency-Key`` (openai does)."""
    return Endpoint(
        provider=pool or "test",
        kind=kind,
        url=url,
        label=pool,
        headers=dict(headers or {}),
        connect_s=connect_s,
        first_byte_s=60.0,
        total_s=60.0,
    )
