"""The route table: one table of ``(method, path) -> handler``, built once, looked up per request.

A row whose handler runs the request lifecycle is made by ``served`` (``lifecycle.handler(surface)``:
counted in ``interlock_requests_total`` under the surface's operation and logged); a few rows are plain
handlers (Ollama's ``/api/tags``, ``/api/version``, ... in ``listing``; ``count_tokens``), neither counted
nor logged, whose surface only gives the error shape. Each row names the surface whose error shape a wrong
method (or a refused key) on its path is answered in. Adding a wire format is one module plus its rows
here. It composes the surfaces and the lifecycle, so it stands above both (the surfaces never import the
lifecycle's handler).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from interlock.runtime.loaded.callers import needs_key
from interlock.runtime.request import listing
from interlock.runtime.request.count_tokens import count_tokens
from interlock.runtime.request.lifecycle import Handler, handler
from interlock.runtime.surfaces import anthropic, ollama, openai, responses
from interlock.runtime.surfaces.base import Surface


@dataclass(frozen=True, slots=True)
class Row:
    method: str
    path: str
    handler: Handler
    surface: Surface  # errors on this path (a wrong method) are worded in its shape
    doc: str  # what it takes and answers: the name of its ``Doc`` in ``surfaces/contract.py``, read only
    # to build the OpenAPI document (``runtime.ops.openapi``), never by the gateway's start
    metered: bool = False  # the handler runs the lifecycle: its answers are counted and logged


def served(method: str, path: str, surface: Surface, doc: str) -> Row:
    """A row whose handler runs the request lifecycle for ``surface``; its path is behind the caller
    keys (``callers.needs_key``), which the lifecycle takes as settled: it authenticates every request
    whenever the plan has keys."""
    if not needs_key(path):
        raise ValueError(f"{path}: a lifecycle route must be behind the caller keys (callers.OPEN_PATHS)")
    return Row(method, path, handler(surface), surface, doc, metered=True)


def rows() -> tuple[Row, ...]:
    chat, embeddings = openai.ChatCompletions(), openai.Embeddings()
    native_chat, generate = ollama.Chat(), ollama.Generate()
    embed, legacy = ollama.Embed(), ollama.LegacyEmbeddings()
    messages, responses_ = anthropic.Messages(), responses.Responses()
    return (
        served("POST", "/v1/chat/completions", chat, "CHAT"),
        served("POST", "/v1/embeddings", embeddings, "EMBEDDINGS"),
        served("POST", "/api/chat", native_chat, "NATIVE_CHAT"),
        served("POST", "/api/generate", generate, "GENERATE"),
        served("POST", "/api/embed", embed, "EMBED"),
        served("POST", "/api/embeddings", legacy, "LEGACY_EMBEDDINGS"),
        Row("GET", "/api/tags", listing.tags, embed, "TAGS"),
        Row("HEAD", "/api/tags", listing.tags, embed, "TAGS"),
        Row("POST", "/api/show", listing.show, embed, "SHOW"),
        Row("GET", "/api/ps", listing.ps, embed, "PS"),
        Row("GET", "/api/version", listing.version, embed, "VERSION"),
        Row("GET", "/", listing.root, embed, "ROOT"),
        Row("HEAD", "/", listing.root, embed, "ROOT"),
        served("POST", "/v1/responses", responses_, "RESPONSES"),
        served("POST", "/v1/messages", messages, "MESSAGES"),
        Row("POST", "/v1/messages/count_tokens", count_tokens, messages, "COUNT_TOKENS"),
    )


@dataclass(frozen=True, slots=True)
class RouteTable:
    """The rows as dictionaries: the handler by ``(method, path)``, and per path its methods and surface."""

    handlers: Mapping[tuple[str, str], Handler]
    paths: Mapping[str, tuple[tuple[str, ...], Surface]]
    metered: frozenset[str]  # the paths whose answers are counted and logged (the lifecycle's)


def route_table() -> RouteTable:
    table = rows()
    paths: dict[str, tuple[tuple[str, ...], Surface]] = {}
    for row in table:
        methods, _ = paths.get(row.path, ((), row.surface))
        paths[row.path] = ((*methods, row.method), row.surface)
    handlers = {(row.method, row.path): row.handler for row in table}
    return RouteTable(handlers, paths, frozenset(row.path for row in table if row.metered))
