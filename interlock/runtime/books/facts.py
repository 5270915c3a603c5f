"""What is known of the routes beyond the plan, gathered outside the request path; read by dictionary
lookups. Every plan has the table (the windows an overflow named are any upstream's); its other entries
are the workers', written by the fleet's fetchers (``fleet/plug.py``), and empty without workers.

The metadata fetcher (``runtime.fleet.metadata``, driven by the probe loop) is the only writer: it replaces
whole entries, never mutates one, so a reader always sees a consistent entry. Readers (the preflight
guards, worker scoring, reports) only call the lookup methods. Keys are the worker's endpoint label
(``ollama@box1``) and the model as Ollama names it (``name:tag``, see ``patterns.ollama_name``).

The load table (``load``) holds what OpenAI-compatible servers said of their own load (read by
``fleet.signals``: llama.cpp, vLLM, SGLang), written by the signal fetcher only: a whole ``ServerLoad`` per
worker label, None once a reading failed (unknown, never the last one seen), dropped for workers the
plan no longer reads.
Beside it, ``slot_windows``: the window one request gets where the server says (a llama-server slot's
``n_ctx``: ``--ctx-size`` over ``--parallel``), which ``fit.planned_context`` takes over a larger declared
one, for the context guard and the cold routes alike.

One more writer, for one table: the router lowers a route's *learned window* when its upstream
refuses a prompt as over its context (``lower_window``: OpenAI-compatible servers, Anthropic and Ollama
alike). It only ever goes down, and the context guard takes it as the most that route can hold: it
looks it up in ``windows`` (a read-only view), so a candidate with no live facts runs nothing of this
module per request.

Invariants: an entry present is what the worker last said; an entry absent is *unknown* (never "lacks").
A failed ``/api/ps`` makes the loaded set unknown (``None``) rather than keeping a stale one, since
loaded contexts change with every model load; ``/api/show`` and ``/api/tags`` facts are kept until a
later fetch replaces them (a model's capabilities do not change while it stays installed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class ServerLoad:
    """One reading of a server's own load; None: the server did not say."""

    running: int | None = None  # requests it is working on (all its clients', not only this gateway's)
    waiting: int | None = None  # requests it holds back: queued (vLLM, SGLang) or deferred (llama.cpp)
    slots: int | None = None  # requests it runs at once, where it says (llama.cpp's /slots)
    kv_used: float | None = None  # fraction of its KV cache in use, 0 to 1
    cached_tokens: int | None = None  # tokens held in its KV cache (llama.cpp, SGLang)
    # the window one request gets: a slot's context where the server says (llama.cpp's /slots ``n_ctx``,
    # ``--ctx-size`` split over ``--parallel``)
    window: int | None = None
    at: float = 0.0  # monotonic seconds of the reading
    # a key that changes as the server makes progress on its work (``signals/progress.py``): llama.cpp's
    # busy slots' (task, prompt tokens processed, tokens decoded); vLLM's and SGLang's token counters;
    # not compared: two readings of the same load are equal whatever their progress
    progress: tuple[int, ...] | None = field(default=None, compare=False)

    @property
    def working(self) -> bool:
        """Whether the server says it is working on something now (running or holding requests)."""
        return self.busy > 0

    @property
    def busy(self) -> int:
        """Requests in the server now, running or held back (0 for what it did not say)."""
        return (self.running or 0) + (self.waiting or 0)

    def report(self) -> dict[str, int | float | None]:
        return {
            "running": self.running,
            "waiting": self.waiting,
            "slots": self.slots,
            "kv_used": round(self.kv_used, 4) if self.kv_used is not None else None,
            "cached_tokens": self.cached_tokens,
        }


class Progress(Protocol):
    """Whether each server makes progress, from its load readings (``fleet/signals/progress.py``'s
    ``ProgressBook``: the fleet's, set when a plan first has workers)."""

    def read(self, label: str, load: ServerLoad | None) -> None: ...

    def keep(self, labels: frozenset[str]) -> None: ...


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What ``POST /api/show`` said about one model on one worker."""

    capabilities: frozenset[str] | None  # None: the worker did not say (older Ollama)
    max_context: int | None  # model_info.<architecture>.context_length: the model's maximum
    modelfile_num_ctx: int | None  # `num_ctx` from the Modelfile's `parameters`, when set
    fetched_at: float  # monotonic seconds


@dataclass(frozen=True, slots=True)
class WorkerFacts:
    """What ``GET /api/tags`` and ``GET /api/ps`` said about one worker; None: not known."""

    installed: frozenset[str] | None
    installed_at: float | None
    loaded: Mapping[str, int | None] | None  # model -> context_length it is loaded with (None: unsaid)
    loaded_at: float | None


_NO_WORKER = WorkerFacts(None, None, None, None)
MAX_SIZES = 4096


class FactsTable:
    """The read-only view others query; the fetcher writes through ``put_*``."""

    def __init__(self, progress: Progress | None = None) -> None:
        # whether each OpenAI-compatible server makes progress, from the same readings (``put_load``):
        # the fleet's (``fleet/plug.py``), None until a plan has workers (no server reads its load)
        self.progress = progress
        self._models: dict[tuple[str, str], ModelInfo] = {}
        self._workers: dict[str, WorkerFacts] = {}
        self._sizes: dict[str, tuple[int, bool]] = {}  # model -> (bytes, from /api/ps); bounded by MAX_SIZES
        self._holders: dict[str, frozenset[str]] = {}  # model -> workers whose /api/ps lists it
        self._windows: dict[tuple[str, str], int] = {}  # (label, model) -> context an overflow named
        # the learned windows, read-only and live: ``windows.get((label, model))`` is the context the
        # route's upstream said it has, in a context-length error (absent: never said); a reader on the
        # request path looks it up here (a dictionary lookup, no call), ``lower_window`` writes it
        self.windows: Mapping[tuple[str, str], int] = MappingProxyType(self._windows)
        self._loads: dict[str, ServerLoad] = {}  # label -> an OpenAI-compatible server's own load
        self._slot_windows: dict[str, int] = {}
        # the window one request gets on each server that says (label -> a slot's context: llama.cpp's
        # /slots ``n_ctx``), read-only and live; written from the same readings (``put_load``), kept when a
        # reading fails (a window changes only with a restart, and the next reading says so), gone when a
        # reading says no window
        self.slot_windows: Mapping[str, int] = MappingProxyType(self._slot_windows)

    # -- lookups (request path, scoring, reports) ---------------------------------------------------

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

    def lower_window(self, label: str, model: str, tokens: int) -> None:
        """An upstream refused a prompt as over its context of ``tokens`` (the router only)."""
        known = self._windows.get((label, model))
        if known is None or tokens < known:
            if known is None and len(self._windows) >= MAX_SIZES:
                del self._windows[next(iter(self._windows))]
            self._windows[(label, model)] = tokens

    def answered(self, label: str, model: str, prompt_tokens: int) -> None:
        """An answer to a prompt of ``prompt_tokens`` (the server's count) there: a window learned
        below that was wrong, or the server's window grew (a restart with a larger ``--ctx-size``), and
        is forgotten (``learned.Learned.observe``, at a request's end)."""
        known = self._windows.get((label, model))
        if known is not None and prompt_tokens > known:
            del self._windows[(label, model)]

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

    # -- writes (the metadata fetcher only) ---------------------------------------------------------

    def put_load(self, label: str, load: ServerLoad | None) -> None:
        """The signal fetcher's reading of one server (None: it failed, so the load is unknown)."""
        if self.progress is not None:
            self.progress.read(label, load)
        if load is None:
            self._loads.pop(label, None)
        else:
            self._loads[label] = load
            if load.window is not None:
                self._slot_windows[label] = load.window
            else:  # it answered without a slot's window (/slots off after a restart): the cap goes too
                self._slot_windows.pop(label, None)

    def keep_loads(self, labels: frozenset[str]) -> None:
        """Forget the loads of servers no longer read (a reload removed them, or their `server`)."""
        for label in [label for label in self._loads if label not in labels]:
            del self._loads[label]
        for label in [label for label in self._slot_windows if label not in labels]:
            del self._slot_windows[label]
        if self.progress is not None:
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
