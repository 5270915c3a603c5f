"""One rule for every border that reads a JSON object (``asgi.json_object``), worded once."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from interlock.runtime.base.asgi import ClientGone, json_object, read_object
from interlock.runtime.base.errors import BodyTooLarge, InvalidRequest, MalformedResponse
from interlock.runtime.wire import anthropic, ollama, openai_chat, openai_responses
from tests.runtime.upstream.helpers import endpoint


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"a": 1}', None),
        (b"{not json", r"^the body is not valid JSON \(unexpected character.*\)$"),
        (b"", r"^the body is not valid JSON \(.+\)$"),
        (b"[1]", r"^the body must be a JSON object, not an array$"),
        (b"null", r"^the body must be a JSON object, not null$"),
        (b'"a"', r"^the body must be a JSON object, not a string$"),
        (b"1.5", r"^the body must be a JSON object, not a number$"),
    ],
)
def test_a_json_object_or_the_refusal_it_is_given(raw: bytes, message: str | None) -> None:
    if message is None:
        assert json_object(raw, InvalidRequest, "the body") == {"a": 1}
        return
    with pytest.raises(InvalidRequest, match=message) as info:
        json_object(raw, InvalidRequest, "the body")
    assert info.value.__cause__ is None  # the parser's error holds the whole document: not kept


DECODERS: dict[str, tuple[str, Callable[[], Any]]] = {  # kind -> what its unit is called, a fresh decoder
    "openai": ("stream chunk", lambda: openai_chat.SSEDecoder(endpoint("openai", "http://x"))),
    "responses": ("stream event", lambda: openai_responses.EventDecoder("m", endpoint("openai", "http://x"))),
    "anthropic": (
        "stream event",
        lambda: anthropic.EventDecoder("m", endpoint("anthropic", "http://x"), include_usage=False),
    ),
    "ollama": ("stream line", lambda: ollama.NDJSONDecoder("m", False, {})),
}


@pytest.mark.parametrize("kind", DECODERS)
def test_every_upstream_stream_refuses_an_event_that_is_no_json_object_in_the_same_words(kind: str) -> None:
    what, decoder = DECODERS[kind]
    for data, message in (
        (b"[1, 2]", rf"^{what} must be a JSON object, not an array$"),
        (b"{oops", rf"^{what} is not valid JSON \(.+\)$"),
    ):
        feed, out = decoder().feed, deque[dict[str, Any]]()
        if kind != "ollama":  # an SSE event: its data line, then the blank line that ends it
            feed(b"data: " + data, out)
            data = b""
        with pytest.raises(MalformedResponse, match=message):
            feed(data, out)


def body_of(
    *parts: bytes, headers: list[tuple[bytes, bytes]] | None = None, limit: int = 16, ended: bool = True
) -> Any:
    """``read_object`` of a body sent in ``parts`` (the last one says it ends unless not ``ended``:
    the client goes away instead)."""
    last = len(parts) - 1 if ended else len(parts)
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": part, "more_body": i < last} for i, part in enumerate(parts)
    ]
    messages.append({"type": "http.disconnect"})

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    return asyncio.run(read_object({"headers": headers or []}, receive, limit))


def test_the_request_body_is_read_whole_then_read_as_one_json_object() -> None:
    assert body_of(b'{"a": 1}') == {"a": 1}
    assert body_of(b'{"a"', b": ", b"1}") == {"a": 1}
    assert body_of(b"", b'{"a": 1}', b"") == {"a": 1}
    with pytest.raises(InvalidRequest, match=r"^the request body must be a JSON object, not an array$"):
        body_of(b"[1", b"]")
    with pytest.raises(InvalidRequest, match=r"^the request body is not valid JSON \(.+\)$"):
        body_of(b"")
    with pytest.raises(BodyTooLarge, match=r"^the request body is over 16 bytes, the most this gateway"):
        body_of(b'{"a": "0123456789"}')
    with pytest.raises(BodyTooLarge, match=r"^the request body is over 16 bytes, the most this gateway"):
        body_of(b'{"a": "01234', b'56789"}')
    with pytest.raises(
        BodyTooLarge, match=r"^the request body is 17 bytes; this gateway accepts at most 16$"
    ):
        body_of(b"{}", headers=[(b"content-length", b"17")])
    with pytest.raises(ClientGone):  # the client went away before the body's end
        body_of(b'{"a"', b": 1", b"}", ended=False)
