"""The surfaces: one table of ``(method, path) -> handler``, built once, looked up per request.

A row whose handler runs the request lifecycle is ``lifecycle.handler(surface)``; a few rows are plain
handlers (Ollama's ``/api/tags``, ``/api/version``, ...). Each row names the surface whose error shape a
wrong method on its path is answered in. Adding a wire format is one module plus its rows here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from interlock.runtime.lifecycle import Handler, Surface, handler
from interlock.runtime.surfaces import anthropic, ollama, openai, responses


@dataclass(frozen=True, slots=True)
class Row:
    method: str
    path: str
    handler: Handler
    surface: Surface  # errors on this path (a wrong method) are worded in its shape


def rows() -> tuple[Row, ...]:
    chat, embeddings = openai.ChatCompletions(), openai.Embeddings()
    native_chat, generate = ollama.Chat(), ollama.Generate()
    embed, legacy = ollama.Embed(), ollama.LegacyEmbeddings()
    messages, responses_ = anthropic.Messages(), responses.Responses()
    return (
        Row("POST", "/v1/chat/completions", handler(chat), chat),
        Row("POST", "/v1/embeddings", handler(embeddings), embeddings),
        Row("POST", "/api/chat", handler(native_chat), native_chat),
        Row("POST", "/api/generate", handler(generate), generate),
        Row("POST", "/api/embed", handler(embed), embed),
        Row("POST", "/api/embeddings", handler(legacy), legacy),
        Row("GET", "/api/tags", ollama.tags, embed),
        Row("HEAD", "/api/tags", ollama.tags, embed),
        Row("POST", "/api/show", ollama.show, embed),
        Row("GET", "/api/ps", ollama.ps, embed),
        Row("GET", "/api/version", ollama.version, embed),
        Row("GET", "/", ollama.root, embed),
        Row("HEAD", "/", ollama.root, embed),
        Row("POST", "/v1/responses", handler(responses_), responses_),
        Row("POST", "/v1/messages", handler(messages), messages),
        Row("POST", "/v1/messages/count_tokens", anthropic.count_tokens, messages),
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
