"""What is known of a route beyond the plan, gathered outside the request path; read by dictionary lookups.

Every plan has this table, for one writer every plan has: the router lowers a route's *learned window*
when its upstream refuses a prompt as over its context (``lower_window``: OpenAI-compatible servers,
Anthropic and Ollama alike). It only ever goes down, and the context guard takes it as the most that
route can hold: it looks it up in ``windows`` (a read-only view), so a candidate with no live facts runs
nothing of this module per request. An answer to a larger prompt there forgets it (``answered``).

The rest is the workers' (the fleet's: ``fleet/live_facts.py``, seated here when a plan first has
workers): ``slot_windows``, the window one request gets where the server says (a llama-server slot's
``n_ctx``: ``--ctx-size`` over ``--parallel``), which ``fit.planned_context`` takes over a larger declared
one; and ``live``, the Ollama workers' ``/api/show`` and ``/api/ps`` facts (``model``,
``loaded_context``), which ``fit`` reads for a route with live facts. Without workers both are empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

MAX_SIZES = 4096  # entries kept of a table a caller's names can grow (oldest dropped first)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What ``POST /api/show`` said about one model on one worker."""

    capabilities: frozenset[str] | None  # None: the worker did not say (older Ollama)
    max_context: int | None  # model_info.<architecture>.context_length: the model's maximum
    modelfile_num_ctx: int | None  # `num_ctx` from the Modelfile's `parameters`, when set
    fetched_at: float  # monotonic seconds


class Live(Protocol):
    """The workers' live facts as ``fit`` reads them (``fleet/live_facts.py::LiveFacts``)."""

    def model(self, label: str, model: str) -> ModelInfo | None: ...

    def loaded_context(self, label: str, model: str) -> int | None: ...


class FactsTable:
    """The read-only view others query; the router writes learned windows, the fleet the rest."""

    def __init__(self) -> None:
        self._windows: dict[tuple[str, str], int] = {}  # (label, model) -> context an overflow named
        # the learned windows, read-only and live: ``windows.get((label, model))`` is the context the
        # route's upstream said it has, in a context-length error (absent: never said); a reader on the
        # request path looks it up here (a dictionary lookup, no call), ``lower_window`` writes it
        self.windows: Mapping[tuple[str, str], int] = MappingProxyType(self._windows)
        self._slot_windows: dict[str, int] = {}
        # the window one request gets on each server that says (label -> a slot's context: llama.cpp's
        # /slots ``n_ctx``), read-only and live; written by the fleet's load readings
        self.slot_windows: Mapping[str, int] = MappingProxyType(self._slot_windows)
        self.live: Live | None = None  # the workers' live facts (the fleet's), None without workers

    def model(self, label: str, model: str) -> ModelInfo | None:
        """What the worker behind ``label`` said of ``model`` (``/api/show``); None: not known."""
        live = self.live
        return live.model(label, model) if live is not None else None

    def loaded_context(self, label: str, model: str) -> int | None:
        """The context ``model`` is loaded with on the worker now; None when not loaded or not known."""
        live = self.live
        return live.loaded_context(label, model) if live is not None else None

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

    def put_slot_window(self, label: str, window: int | None) -> None:
        """A server's reading said the window one request gets there (None: it said none, so the cap
        goes too); the fleet's signal readings only."""
        if window is not None:
            self._slot_windows[label] = window
        else:
            self._slot_windows.pop(label, None)

    def keep_slot_windows(self, labels: frozenset[str]) -> None:
        """Forget the windows of servers no longer read."""
        for label in [label for label in self._slot_windows if label not in labels]:
            del self._slot_windows[label]
