"""Live Ollama metadata, fetched outside the request path (in each probe round, so also once at start).

Per Ollama worker: ``GET /api/ps`` every round (loaded models and their context change with every load),
``GET /api/tags`` and ``POST /api/show`` per (worker, model of the plan) once their facts are older than
``preflight.metadata_ttl``; a worker that cannot be reached for ``/api/ps`` (refused, or no answer in
time) is asked nothing else that round. Results go into the ``LiveFacts`` as whole new entries; a
failed fetch is counted and logged and leaves the facts unknown (or, for /api/show and /api/tags, as
last seen): unknown never blocks a request. Parsing follows Ollama's wire format: capabilities from
``capabilities``, the model's maximum from ``model_info["<general.architecture>.context_length"]``, the
Modelfile's ``num_ctx`` from ``parameters`` (one ``key value`` per line, keys padded with spaces). Every
number is bounded where it is read here (``interlock.common.bounds``): a window or a size out of bounds
is unknown.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from interlock.common.bounds import MAX_MODEL_BYTES, bounded, window, window_text
from interlock.common.patterns import ollama_name
from interlock.runtime.base.errors import (
    ConnectFailed,
    ConnectTimeout,
    FirstByteTimeout,
    TotalTimeout,
)
from interlock.runtime.books.facts import ModelInfo
from interlock.runtime.fleet.fetcher import Failed, Fetcher
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.upstream.ollama import OllamaAdapter
from interlock.runtime.wire.base import Endpoint

log = logging.getLogger("interlock.metadata")
UNREACHABLE: Any = object()  # a fetch that reached nobody: the worker's other fetches this round are skipped
# At start, 200 refusing workers with 60 models each would otherwise cost 12,000 /api/show attempts
# before the gateway is ready (bench/serve_start.py); a hanging one, three timeouts in a row.
_NO_ANSWER = (ConnectFailed, ConnectTimeout, FirstByteTimeout, TotalTimeout, TimeoutError)


def parse_show(answer: Any, now: float) -> ModelInfo:
    """``POST /api/show``'s answer as a ``ModelInfo``; anything missing or odd is left unknown."""
    if not isinstance(answer, Mapping):
        return ModelInfo(None, None, None, now)
    caps = answer.get("capabilities")
    capabilities = frozenset(c for c in caps if isinstance(c, str)) if isinstance(caps, list) else None
    return ModelInfo(
        capabilities, _max_context(answer.get("model_info")), _num_ctx(answer.get("parameters")), now
    )


def _max_context(info: Any) -> int | None:
    if not isinstance(info, Mapping):
        return None
    arch = info.get("general.architecture")
    value = info.get(f"{arch}.context_length") if isinstance(arch, str) else None
    if value is None:  # no architecture key: any `*.context_length`
        value = next(
            (v for k, v in info.items() if isinstance(k, str) and k.endswith(".context_length")), None
        )
    return window(value)


def _num_ctx(parameters: Any) -> int | None:
    if not isinstance(parameters, str):
        return None
    for line in parameters.splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "num_ctx":
            return window_text(value.strip().strip('"'))
    return None


def parse_ps(answer: Any) -> dict[str, int | None] | None:
    """``GET /api/ps``: loaded model -> context_length (None where an older server does not say)."""
    models = answer.get("models") if isinstance(answer, Mapping) else None
    if not isinstance(models, list):
        return None
    loaded: dict[str, int | None] = {}
    for entry in models:
        name = entry.get("name") or entry.get("model") if isinstance(entry, Mapping) else None
        if isinstance(name, str):
            loaded[ollama_name(name)] = window(entry.get("context_length"))
    return loaded


def parse_tags(answer: Any) -> frozenset[str] | None:
    models = answer.get("models") if isinstance(answer, Mapping) else None
    if not isinstance(models, list):
        return None
    names = (e.get("name") or e.get("model") for e in models if isinstance(e, Mapping))
    return frozenset(ollama_name(n) for n in names if isinstance(n, str))


def parse_sizes(answer: Any) -> dict[str, int]:
    """Model -> bytes from ``/api/ps`` (``size_vram``, else ``size``) or ``/api/tags`` (``size``, on
    disk: about what a load takes in VRAM); entries without a positive size are left out."""
    models = answer.get("models") if isinstance(answer, Mapping) else None
    sizes: dict[str, int] = {}
    for entry in models if isinstance(models, list) else ():
        if not isinstance(entry, Mapping):
            continue
        name = entry.get("name") or entry.get("model")
        size = _bytes(entry.get("size_vram")) or _bytes(entry.get("size"))
        if isinstance(name, str) and size is not None:
            sizes[ollama_name(name)] = size
    return sizes


def _bytes(value: Any) -> int | None:
    return bounded(value, MAX_MODEL_BYTES)


class MetadataFetcher(Fetcher[OllamaAdapter]):
    """Fills the ``LiveFacts`` from every Ollama worker of the current plan."""

    log = log
    name = "metadata"

    async def refresh(self, plan: RuntimePlan) -> None:
        """One round over every Ollama worker: /api/ps always; /api/tags and /api/show when stale."""
        adapter = self.adapter()
        if adapter is None:
            return
        timeout_s = plan.health.probe_timeout_s
        ttl = plan.preflight.metadata_ttl_s
        models: dict[str, set[str]] = {}
        for candidate in plan.candidates.values():
            if candidate.kind == "ollama":
                models.setdefault(candidate.provider, set()).add(candidate.facts_key)
        jobs = []
        for provider in plan.providers.values():
            if provider.kind != "ollama":
                continue
            for endpoint in provider.endpoints:
                jobs.append(
                    self._worker(adapter, endpoint, sorted(models.get(provider.name, ())), ttl, timeout_s)
                )
        await asyncio.gather(*jobs)

    async def _worker(
        self, adapter: OllamaAdapter, endpoint: Endpoint, models: list[str], ttl: float, timeout_s: float
    ) -> None:
        label = endpoint.label
        now = self.clock()
        loaded = await self._fetch(adapter, endpoint, "/api/ps", None, timeout_s)
        if loaded is UNREACHABLE:  # nothing else would answer either: the next round tries again
            self.facts.put_loaded(label, None, now)
            return
        self.facts.put_loaded(label, parse_ps(loaded) if loaded is not None else None, now)
        self.facts.put_sizes(parse_sizes(loaded))
        worker = self.facts.worker(label)
        if worker.installed_at is None or now - worker.installed_at >= ttl:
            tags = await self._fetch(adapter, endpoint, "/api/tags", None, timeout_s)
            installed = parse_tags(tags)
            if installed is not None:
                self.facts.put_installed(label, installed, now)
                self.facts.put_sizes(parse_sizes(tags), loaded=False)
        stale = [m for m in models if (age := self.facts.model_age(label, m, now)) is None or age >= ttl]
        shown = await asyncio.gather(
            *(self._fetch(adapter, endpoint, "/api/show", m, timeout_s) for m in stale)
        )
        for model, answer in zip(stale, shown, strict=True):
            if answer is not None:
                self.facts.put_model(label, model, parse_show(answer, now))

    async def _fetch(
        self, adapter: OllamaAdapter, endpoint: Endpoint, path: str, model: str | None, timeout_s: float
    ) -> Any:
        """The JSON answer, or None (counted, logged) when the worker could not say, or ``UNREACHABLE``
        when it could not be reached at all (refused, or no answer in time)."""
        call = adapter.metadata(endpoint, path, model, timeout_s)
        answer = await self.fetched(call, endpoint, path, timeout_s, f" {model}" if model else "")
        if isinstance(answer, Failed):
            return UNREACHABLE if isinstance(answer, _NO_ANSWER) else None
        return answer
