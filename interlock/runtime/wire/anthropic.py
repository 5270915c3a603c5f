"""Anthropic Messages rules shared by its surface and its upstream adapter: image sources <-> URLs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def source_url(source: Any) -> str | None:
    """The URL of an image block's ``source`` (a ``data:`` URL for base64 data), or None when it is
    neither a base64 nor a url source."""
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "base64":
        return f"data:{source.get('media_type', 'image/png')};base64,{source.get('data', '')}"
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return str(source["url"])
    return None


def url_source(url: str) -> dict[str, Any]:
    """The image block ``source`` for ``url``: base64 for a ``data:`` URL, else a url source."""
    if url.startswith("data:"):
        head, _, data = url.partition(",")
        media = head[5:].split(";")[0] or "image/png"
        return {"type": "base64", "media_type": media, "data": data}
    return {"type": "url", "url": url}
