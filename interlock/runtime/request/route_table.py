"""The route table: one table of ``(method, path) -> handler``, built when a plan loads, looked up per
request.

A row whose handler runs the request lifecycle is made by ``served`` (``lifecycle.handler(surface)``:
counted in ``interlock_requests_total`` under the surface's operation and logged); a few rows are plain
handlers (Ollama's ``/api/tags``, ``/api/version``, ... in ``listing``; ``count_tokens``), neither counted
nor logged, whose surface only gives the error shape. Each row names the surface whose error shape a wrong
method (or a refused key) on its path is answered in. The rows are written per API surface (``ROWS``) as
import paths, like the guard chain (``guards.GUARDS``): a plan serves the surfaces its ``server.surfaces``
names (all four unless it says), and only their modules are imported, when it loads (``route_table``; a
reload that changes them rebuilds the table in place: ``RouteTable.serve``). Adding a wire format is one
module plus its rows here. It composes the surfaces and the lifecycle, so it stands above both (the
surfaces never import the lifecycle's handler).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from interlock.runtime.loaded.callers import needs_key
from interlock.runtime.request.lifecycle import Handler, handler
from interlock.runtime.surfaces.base import Surface
from interlock.schema.plan import SURFACES, SurfaceName

_S, _R = "interlock.runtime.surfaces.", "interlock.runtime.request."
OPENAI, OLLAMA, ANTHROPIC, RESPONSES = _S + "openai:", _S + "ollama:", _S + "anthropic:", _S + "responses:"
LISTING = _R + "listing:"


@dataclass(frozen=True, slots=True)
class Spec:
    """One row as written: its surface (``module:Class``: the lifecycle's, or only its error shape for a
    plain handler), the name of its ``Doc`` in ``surfaces/contract.py`` and, for a plain handler, its
    ``module:function`` (empty: the row runs the lifecycle)."""

    method: str
    path: str
    surface: str
    doc: str
    plain: str = ""


ROWS: Mapping[SurfaceName, tuple[Spec, ...]] = {  # in the order the OpenAPI document lists them
    "openai": (
        Spec("POST", "/v1/chat/completions", OPENAI + "ChatCompletions", "CHAT"),
        Spec("POST", "/v1/embeddings", OPENAI + "Embeddings", "EMBEDDINGS"),
    ),
    "ollama": (
        Spec("POST", "/api/chat", OLLAMA + "Chat", "NATIVE_CHAT"),
        Spec("POST", "/api/generate", OLLAMA + "Generate", "GENERATE"),
        Spec("POST", "/api/embed", OLLAMA + "Embed", "EMBED"),
        Spec("POST", "/api/embeddings", OLLAMA + "LegacyEmbeddings", "LEGACY_EMBEDDINGS"),
        Spec("GET", "/api/tags", OLLAMA + "Embed", "TAGS", LISTING + "tags"),
        Spec("HEAD", "/api/tags", OLLAMA + "Embed", "TAGS", LISTING + "tags"),
        Spec("POST", "/api/show", OLLAMA + "Embed", "SHOW", LISTING + "show"),
        Spec("GET", "/api/ps", OLLAMA + "Embed", "PS", LISTING + "ps"),
        Spec("GET", "/api/version", OLLAMA + "Embed", "VERSION", LISTING + "version"),
        Spec("GET", "/", OLLAMA + "Embed", "ROOT", LISTING + "root"),
        Spec("HEAD", "/", OLLAMA + "Embed", "ROOT", LISTING + "root"),
    ),
    "responses": (Spec("POST", "/v1/responses", RESPONSES + "Responses", "RESPONSES"),),
    "anthropic": (
        Spec("POST", "/v1/messages", ANTHROPIC + "Messages", "MESSAGES"),
        Spec(
            "POST",
            "/v1/messages/count_tokens",
            ANTHROPIC + "Messages",
            "COUNT_TOKENS",
            _R + "count_tokens:count_tokens",
        ),
    ),
}
"""Each surface's rows (``server.surfaces``: a plan serves those it names)."""


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


def _named(where: str) -> Any:
    """What ``module:name`` names (the module imported now, at plan load)."""
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)


def rows(surfaces: Iterable[str] = SURFACES) -> tuple[Row, ...]:
    """The rows of ``surfaces``, in ``ROWS`` order; each surface class made once."""
    wanted = frozenset(surfaces)
    made: dict[str, Surface] = {}
    out: list[Row] = []
    for name, specs in ROWS.items():
        if name not in wanted:
            continue
        for spec in specs:
            surface = made.get(spec.surface)
            if surface is None:
                surface = made[spec.surface] = _named(spec.surface)()
            if spec.plain:
                out.append(Row(spec.method, spec.path, _named(spec.plain), surface, spec.doc))
            else:
                out.append(served(spec.method, spec.path, surface, spec.doc))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RouteTable:
    """The rows as dictionaries: the handler by ``(method, path)``, and per path its methods and surface;
    the gateway holds these very objects, so ``serve`` changes them in place."""

    handlers: dict[tuple[str, str], Handler]
    paths: dict[str, tuple[tuple[str, ...], Surface]]
    metered: set[str]  # the paths whose answers are counted and logged (the lifecycle's)
    surfaces: list[str]  # the surfaces served

    def serve(self, surfaces: Iterable[str]) -> None:
        """The rows of ``surfaces`` in place of the table's (at plan load; nothing when they are the
        same). Synchronous: no request runs between the old rows and the new."""
        wanted = [name for name in SURFACES if name in frozenset(surfaces)]
        if wanted == self.surfaces:
            return
        table = rows(wanted)
        paths: dict[str, tuple[tuple[str, ...], Surface]] = {}
        for row in table:
            methods, _ = paths.get(row.path, ((), row.surface))
            paths[row.path] = ((*methods, row.method), row.surface)
        self.handlers.clear()
        self.handlers.update({(row.method, row.path): row.handler for row in table})
        self.paths.clear()
        self.paths.update(paths)
        self.metered.clear()
        self.metered.update(row.path for row in table if row.metered)
        self.surfaces[:] = wanted


def route_table(surfaces: Iterable[str] = SURFACES) -> RouteTable:
    """The table of ``surfaces`` (a plan's ``server.surfaces``)."""
    table = RouteTable({}, {}, set(), [])
    table.serve(surfaces)
    return table
