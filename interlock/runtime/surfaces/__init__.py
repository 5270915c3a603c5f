"""The surfaces: one table of ``(method, path) -> handler``, built once, looked up per request.

A row whose handler runs the request lifecycle is ``lifecycle.handler(surface)``; a few rows are plain
handlers (Ollama's ``/api/tags``, ``/api/version``, ...). Each row names the surface whose error shape a
wrong method on its path is answered in. Adding a wire format is one module plus its rows here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from interlock.runtime.lifecycle import Handler, Surface, handler
from interlock.runtime.surfaces import anthropic, contract, ollama, openai, responses
from interlock.runtime.surfaces.contract import Doc


@dataclass(frozen=True, slots=True)
class Row:
    method: str
    path: str
    handler: Handler
    surface: Surface  # errors on this path (a wrong method) are worded in its shape
    doc: Doc  # what it takes and answers: its part of the OpenAPI document (``runtime.openapi``)


def rows() -> tuple[Row, ...]:
    chat, embeddings = openai.ChatCompletions(), openai.Embeddings()
    native_chat, generate = ollama.Chat(), ollama.Generate()
    embed, legacy = ollama.Embed(), ollama.LegacyEmbeddings()
    messages, responses_ = anthropic.Messages(), responses.Responses()
    c = contract
    return (
        Row("POST", "/v1/chat/completions", handler(chat), chat, c.CHAT),
        Row("POST", "/v1/embeddings", handler(embeddings), embeddings, c.EMBEDDINGS),
        Row("POST", "/api/chat", handler(native_chat), native_chat, c.NATIVE_CHAT),
        Row("POST", "/api/generate", handler(generate), generate, c.GENERATE),
        Row("POST", "/api/embed", handler(embed), embed, c.EMBED),
        Row("POST", "/api/embeddings", handler(legacy), legacy, c.LEGACY_EMBEDDINGS),
        Row("GET", "/api/tags", ollama.tags, embed, c.TAGS),
        Row("HEAD", "/api/tags", ollama.tags, embed, c.TAGS),
        Row("POST", "/api/show", ollama.show, embed, c.SHOW),
        Row("GET", "/api/ps", ollama.ps, embed, c.PS),
        Row("GET", "/api/version", ollama.version, embed, c.VERSION),
        Row("GET", "/", ollama.root, embed, c.ROOT),
        Row("HEAD", "/", ollama.root, embed, c.ROOT),
        Row("POST", "/v1/responses", handler(responses_), responses_, c.RESPONSES),
        Row("POST", "/v1/messages", handler(messages), messages, c.MESSAGES),
        Row("POST", "/v1/messages/count_tokens", anthropic.count_tokens, messages, c.COUNT_TOKENS),
    )


@dataclass(frozen=True, slots=True)
class RouteTable:
    """The rows as dictionaries: the handler by ``(method, path)``, and per path its methods and surface."""

    handlers: Mapping[tuple[str, str], Handler]
    paths: Mapping[str, tuple[tuple[str, ...], Surface]]


def route_table() -> RouteTable:
    table = rows()
    paths: dict[str, tuple[tuple[str, ...], Surface]] = {}
    for row in table:
        methods, _ = paths.get(row.path, ((), row.surface))
        paths[row.path] = ((*methods, row.method), row.surface)
    return RouteTable({(row.method, row.path): row.handler for row in table}, paths)
