"""What a probe found at a URL (``Found``, ``FoundModel``), the one HTTP client every probe uses, and the
border every answer crosses.

The client sends only to the URL it was given: no proxy from the environment (``trust_env=False``),
no redirect followed (a 3xx is an answer like any other), no credential of any kind.

Whatever a server answers is bounded here, before a probe reads it: an answer takes at most ``timeout_s``
from connecting to its last byte (a server trickling a byte a second does not hold `init` for longer),
holds at most ``MAX_ANSWER_BYTES``, and is JSON nested at most as deep as Python's parser allows. Its
numbers are read through ``interlock.common.bounds`` (``window``, ``slots``), a model's name only when it is
one line of printable text (``model_name``), and any other text a server chose (its version, a note)
only through ``said``, which escapes what a terminal or a YAML comment would act on.
"""

from __future__ import annotations

import asyncio
import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from interlock.common.bounds import MAX_SLOTS, bounded

MAX_ANSWER_BYTES = 4 << 20
"""The largest answer read (4 MiB): Ollama's ``/api/show`` with a long licence is ~100 kB."""

MAX_MODELS = 1000
"""Models read from one server's list; the rest are left out, and a note says so."""

MAX_NAME_CHARS = 256
"""The longest model name kept (Hugging Face ids are under 100 characters)."""

MAX_SAID_CHARS = 120
"""The longest text a server chose (its version, ``build_info``) shown or written, escaped."""


@dataclass(frozen=True, slots=True)
class FoundModel:
    name: str  # as the server names it (what a request's `model` is)
    context_tokens: int | None = None  # the window a request gets there (per slot on llama-server)
    capabilities: tuple[str, ...] | None = None  # None: the server does not say
    loaded: bool = False  # in memory now (Ollama's /api/ps)
    on_gpu: bool | None = None  # Ollama's /api/ps: size_vram > 0; None: not loaded, unknown
    remarks: tuple[tuple[str, str], ...] = ()  # (fact, why) a person should read beside the fact


@dataclass(frozen=True, slots=True)
class Found:
    """One server, as its answers describe it."""

    url: str  # as given, without a trailing slash
    server: str  # what it is, for people: "Ollama 0.12.3", "llama-server", "vLLM", ... (``said``)
    kind: str  # the provider kind that talks to it: ollama, openai, anthropic
    worker_url: str  # the worker `url` (Ollama: the root; OpenAI-compatible: `.../v1`)
    models: tuple[FoundModel, ...] = ()
    slots: int | None = None  # requests it runs at once, when it says (llama-server's slots)
    signals: str | None = None  # a worker's `server:` (llama.cpp, vllm, sglang): its load is read
    needs_key: bool = False  # it refused a request without a key
    profile: str | None = None  # a built-in hardware profile its answers point to
    notes: tuple[str, ...] = field(default=())  # what else a person should know (``said`` where quoted)


class Http:
    """GET and POST under one root URL, answers as JSON (None: no answer in time, too large, or not JSON).

    The requests run on an event loop of this object's own, so that ``timeout_s`` bounds each answer
    as a whole (``asyncio.timeout``), not each read of it as httpx's timeouts do."""

    def __init__(self, root: str, timeout_s: float) -> None:
        self.root = root.rstrip("/")
        self.timeout_s = timeout_s
        self._loop = asyncio.new_event_loop()
        self._client = httpx.AsyncClient(
            timeout=timeout_s,
            trust_env=False,
            follow_redirects=False,
            headers={"accept-encoding": "identity"},  # the bytes counted are the bytes parsed
        )
        self.refused: list[str] = []  # "GET /path: why" for each answer refused at this border
        self.late = False  # an answer took longer than timeout_s: nothing more is asked

    def __enter__(self) -> Http:
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.run_until_complete(self._client.aclose())
        self._loop.close()

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any] | None:
        return self._send("GET", path, None, headers)

    def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any] | None:
        return self._send("POST", path, body, headers)

    def _send(
        self, method: str, path: str, body: Any, headers: dict[str, str] | None
    ) -> tuple[int, Any] | None:
        if self.late:
            return None  # it gave no whole answer in time once: a hung or trickling server is asked once
        try:
            status, content = self._loop.run_until_complete(self._exchange(method, path, body, headers))
        except TimeoutError:
            self.late = True
            self.refused.append(f"{method} {path}: no whole answer within {self.timeout_s:g} s")
            return None
        except _TooLarge:
            self.refused.append(f"{method} {path}: an answer over {MAX_ANSWER_BYTES:,} bytes")
            return None
        except httpx.HTTPError:
            return None
        return status, _json(content)

    async def _exchange(
        self, method: str, path: str, body: Any, headers: dict[str, str] | None
    ) -> tuple[int, bytes]:
        async with asyncio.timeout(self.timeout_s):
            request = self._client.build_request(method, self.root + path, json=body, headers=headers)
            response = await self._client.send(request, stream=True)
            try:
                content = bytearray()
                async for chunk in response.aiter_raw():
                    content += chunk
                    if len(content) > MAX_ANSWER_BYTES:
                        raise _TooLarge
                return response.status_code, bytes(content)
            finally:
                await response.aclose()


class _TooLarge(Exception):
    """An answer past ``MAX_ANSWER_BYTES``."""


def _json(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, an integer of 5,000 digits, nested too deep
        return None


Probe = Callable[[Http, str], Found | None]
"""``probe(http, url)``: what the server at ``url`` is, or None when it does not answer as this kind."""


def ok(answer: tuple[int, Any] | None) -> Any:
    """The JSON body of a 200 answer, else None."""
    return answer[1] if answer is not None and answer[0] == 200 else None


def slots(value: Any) -> int | None:
    """A server's slot count, or None when ``value`` is not one (``interlock.common.bounds.MAX_SLOTS``)."""
    return bounded(value, MAX_SLOTS)


_UNSAFE = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))
"""Unicode categories escaped in a server's text: controls (ESC, CR, NEL), format characters (bidi
overrides, zero-width), surrogates, private-use and unassigned ones, and the line and paragraph
separators that YAML reads as line breaks."""
_TRUNCATED = "..."


def _escaped(char: str) -> str:
    if unicodedata.category(char) not in _UNSAFE:
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def said(text: str, limit: int = MAX_SAID_CHARS) -> str:
    """A server's text as one line of printable characters, at most ``limit`` of them (then ``...``):
    every character a terminal or a YAML reader would act on (ESC sequences, CR, NEL, U+2028, bidi
    overrides) written as its ``\\x..``/``\\u....`` escape. Safe in a YAML comment and on a terminal;
    ``said(said(x)) == said(x)`` for text within the limit."""
    out = "".join(_escaped(c) for c in text[: limit + 1])
    return out if len(out) <= limit else out[: limit - len(_TRUNCATED)] + _TRUNCATED


_NAME = re.compile(r"\S+")


def model_name(value: Any) -> str | None:
    """``value`` when it can be a model's name in a configuration: 1 to ``MAX_NAME_CHARS`` characters,
    no white space (a chain entry has none) and none that ``said`` would escape; else None."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_NAME_CHARS or not _NAME.fullmatch(value):
        return None
    return value if all(unicodedata.category(c) not in _UNSAFE for c in value) else None
