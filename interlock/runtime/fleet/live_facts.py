"""Live facts about the workers, gathered outside the request path; read by dictionary lookups.

The fleet's part of what is known beyond the plan (the core's is ``books/facts.py``, the windows an
upstream named; this table seats itself there as ``FactsTable.live``, for ``fit``). The metadata fetcher
(``fleet.metadata``, driven by the probe loop) writes the Ollama workers' facts: it replaces whole
entries, never mutates one, so a reader always sees a consistent entry. Readers (the preflight guards,
through ``fit``, worker scoring, reports) only call the lookup methods. Keys are the worker's endpoint
label (``ollama@box1``) and the model as Ollama names it (``name:tag``, see ``patterns.ollama_name``).

The load table (``load``) holds what OpenAI-compatible servers said of their own load (``fleet.signals``:
llama.cpp, vLLM, SGLang), written by the signal fetcher only: a whole ``ServerLoad`` per worker label, None
once a reading failed (unknown, never the last one seen), dropped for workers the plan no longer reads.
The same readings say the window one request gets where the server says (a llama-server slot's ``n_ctx``),
written into the core's ``FactsTable.slot_windows``: kept when a reading fails (a window changes only with
a restart, and the next reading says so), gone when a reading says no window; and whether each server
makes progress (``progress``, ``signals/progress.py``).

Invariants: an entry present is what the worker last said; an entry absent is *unknown* (never "lacks").
A failed ``/api/ps`` makes the loaded set unknown (``None``) rather than keeping a stale one, since
loaded contexts change with every model load; ``/api/show`` and ``/api/tags`` facts are kept until a
later fetch replaces them (a model's capabilities do not change while it stays installed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from interlock.runtime.books.facts import MAX_SIZES, FactsTable, ModelInfo
from interlock.runtime.fleet.signals.base import ServerLoad
from interlock.runtime.fleet.signals.progress import ProgressBook


@dataclass(frozen=True, slots=True)
class WorkerFacts:
    """What ``GET /api/tags`` and ``GET /api/ps`` said about one worker; None: not known."""

    installed: frozenset[str] | None
    installed_at: float | None
    loaded: Mapping[str, int | None] | None  # model -> context_length it is loaded with (None: unsaid)
    loaded_at: float | None


_NO_WORKER = WorkerFacts(None, None, None, None)


class LiveFacts:
    """The read-only view others query; the fetchers write through ``put_*``. ``table``: the core's
    facts table, where it seats itself (a new one when none is given: a test's)."""

    def __init__(self, table: FactsTable | None = None, progress: ProgressBook | None = None) -> None:
        self.table = table if table is not None else FactsTable()
        self.table.live = self
        # whether each OpenAI-compatible server makes progress, from the same readings (``put_load``)
        self.progress = progress if progress is not None else ProgressBook()
        self._models: dict[tuple[str, str], ModelInfo] = {}
        self._workers: dict[str, WorkerFacts] = {}
        self._sizes: dict[str, tuple[int, bool]] = {}  # model -> (bytes, from /api/ps); bounded by MAX_SIZES
        self._holders: dict[str, frozenset[str]] = {}  # model -> workers whose /api/ps lists it
        self._loads: dict[str, ServerLoad] = {}  # label -> an OpenAI-compatible server's own load

    # -- lookups (the preflight through fit, scoring, reports) --------------------------------------

    def model(self, label: str, model: str) -> ModelInfo | None:
        return self._models.get((label, model))

    def worker(self, label: str) -> WorkerFacts:
        return self._workers.get(label, _NO_WORKER)

    def holders(self, model: str) -> frozenset[str]:
        """The workers whose last ``/api/ps`` listed ``model`` (kept up to date by ``put_loaded``)."""
        return self._holders.get(model, frozenset())

    def size(self, model: str) -> int | None:
        """Bytes ``model`` takes when loaded (as a worker's ``/api/ps`` last said, else its size on disk
        from ``/api/tags``); None when no worker said."""
        known = self._sizes.get(model)
        return known[0] if known is not None else None

    def loaded_context(self, label: str, model: str) -> int | None:
        """The context ``model`` is loaded with on the worker now; None when not loaded or not known."""
        facts = self._workers.get(label)
        loaded = facts.loaded if facts is not None else None
        return loaded.get(model) if loaded is not None else None

    def load(self, label: str) -> ServerLoad | None:
        """What the server behind ``label`` last said of its load; None: not read, or not known."""
        return self._loads.get(label)

    def loads(self) -> dict[str, dict[str, int | float | None]]:
        """Every server load known, JSON-ready, by worker label (for /v1/health and people)."""
        return {label: load.report() for label, load in sorted(self._loads.items())}

    def snapshot(self) -> dict[str, Any]:
        """Everything known, JSON-ready, per worker label (for /v1/health and people)."""
        out: dict[str, Any] = {}
        for label, facts in sorted(self._workers.items()):
            out[label] = {
                "installed": sorted(facts.installed) if facts.installed is not None else None,
                "loaded": dict(sorted(facts.loaded.items())) if facts.loaded is not None else None,
                "models": {},
            }
        for (label, model), info in sorted(self._models.items()):
            entry = out.setdefault(label, {"installed": None, "loaded": None, "models": {}})
            entry["models"][model] = {
                "capabilities": sorted(info.capabilities) if info.capabilities is not None else None,
                "max_context": info.max_context,
                "modelfile_num_ctx": info.modelfile_num_ctx,
            }
        return out

    # -- writes (the metadata and signal fetchers only) ----------------------------------------------

    def put_load(self, label: str, load: ServerLoad | None) -> None:
        """The signal fetcher's reading of one server (None: it failed, so the load is unknown)."""
        self.progress.read(label, load)
        if load is None:
            self._loads.pop(label, None)
        else:  # a reading without a slot's window (/slots off after a restart): the cap goes too
            self._loads[label] = load
            self.table.put_slot_window(label, load.window)

    def keep_loads(self, labels: frozenset[str]) -> None:
        """Forget the loads of servers no longer read (a reload removed them, or their `server`)."""
        for label in [label for label in self._loads if label not in labels]:
            del self._loads[label]
        self.table.keep_slot_windows(labels)
        self.progress.keep(labels)

    def put_model(self, label: str, model: str, info: ModelInfo) -> None:
        self._models[(label, model)] = info

    def put_loaded(self, label: str, loaded: Mapping[str, int | None] | None, at: float) -> None:
        old = self.worker(label)
        frozen = MappingProxyType(dict(loaded)) if loaded is not None else None
        self._workers[label] = WorkerFacts(old.installed, old.installed_at, frozen, at)
        holders: dict[str, set[str]] = {}
        for name, facts in self._workers.items():
            for model in facts.loaded or ():
                holders.setdefault(model, set()).add(name)
        self._holders = {model: frozenset(names) for model, names in holders.items()}

    def put_installed(self, label: str, installed: frozenset[str], at: float) -> None:
        old = self.worker(label)
        self._workers[label] = WorkerFacts(installed, at, old.loaded, old.loaded_at)

    def put_sizes(self, sizes: Mapping[str, int], loaded: bool = True) -> None:
        """Model sizes from ``/api/ps`` (``loaded``) or ``/api/tags``; a loaded size is not replaced by
        a size on disk."""
        for model, size in sizes.items():
            known = self._sizes.get(model)
            if loaded or known is None or not known[1]:
                self._sizes[model] = (size, loaded)
        while len(self._sizes) > MAX_SIZES:
            del self._sizes[next(iter(self._sizes))]

    def model_age(self, label: str, model: str, now: float) -> float | None:
        info = self._models.get((label, model))
        return None if info is None else now - info.fetched_at
