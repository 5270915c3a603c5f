"""What a probe found at a URL (``Found``, ``FoundModel``) and the one HTTP client every probe uses.

The client sends only to the URL it was given: no proxy from the environment (``trust_env=False``),
no redirect followed (a 3xx is an answer like any other), no credential of any kind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass(frozen=True, slots=True)
class FoundModel:
    name: str  # as the server names it (what a request's `model` is)
    context_tokens: int | None = None  # the window a request gets there (per slot on llama-server)
    capabilities: tuple[str, ...] | None = None  # None: the server does not say
    loaded: bool = False  # in memory now (Ollama's /api/ps)
    on_gpu: bool | None = None  # Ollama's /api/ps: size_vram > 0; None: not loaded, unknown


@dataclass(frozen=True, slots=True)
class Found:
    """One server, as its answers describe it."""

    url: str  # as given, without a trailing slash
    server: str  # what it is, for people: "Ollama 0.12.3", "llama-server", "vLLM", ...
    kind: str  # the provider kind that talks to it: ollama, openai, anthropic
    worker_url: str  # the worker `url` (Ollama: the root; OpenAI-compatible: `.../v1`)
    models: tuple[FoundModel, ...] = ()
    slots: int | None = None  # requests it runs at once, when it says (llama-server's slots)
    signals: str | None = None  # a worker's `server:` (llama.cpp, vllm, sglang): its load is read
    needs_key: bool = False  # it refused a request without a key
    profile: str | None = None  # a built-in hardware profile its answers point to
    notes: tuple[str, ...] = field(default=())  # what else a person should know


class Http:
    """GET and POST under one root URL, answers as JSON (None: no answer, or not JSON)."""

    def __init__(self, root: str, timeout_s: float) -> None:
        self.root = root.rstrip("/")
        self._client = httpx.Client(timeout=timeout_s, trust_env=False, follow_redirects=False)

    def __enter__(self) -> Http:
        return self

    def __exit__(self, *exc: object) -> None:
        self._client.close()

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, Any] | None:
        return self._send("GET", path, None, headers)

    def post(self, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any] | None:
        return self._send("POST", path, body, headers)

    def _send(
        self, method: str, path: str, body: Any, headers: dict[str, str] | None
    ) -> tuple[int, Any] | None:
        try:
            response = self._client.request(method, self.root + path, json=body, headers=headers)
        except httpx.HTTPError:
            return None
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None


Probe = Callable[[Http, str], Found | None]
"""``probe(http, url)``: what the server at ``url`` is, or None when it does not answer as this kind."""


def ok(answer: tuple[int, Any] | None) -> Any:
    """The JSON body of a 200 answer, else None."""
    return answer[1] if answer is not None and answer[0] == 200 else None
