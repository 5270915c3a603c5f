"""Last, once the worker is chosen: what an Ollama candidate is sent, per its (worker, model) facts.

- ``options.num_ctx``: the effective context of the chosen route, unless the caller set one (checked
  by the needs and the context guard). Without it Ollama uses its own default and truncates silently.
- ``keep_alive``: the plan's, on a placed model's home worker, unless the caller set one
  (``fleet.placement``: Ollama resets a loaded model's timer on every request that names none).
- ``think`` (and ``reasoning_effort``, which the adapter turns into ``think``): kept only where the model
  is known to think; dropped elsewhere, and the response says so (Ollama answers 400 to ``think`` for
  a model without the capability). A caller who *requires* thinking never gets here with such a model
  in enforce mode: the capability guard skipped it.

The caller's body is never changed: a changed copy goes into ``admission.body`` (on top of the context
guard's, when it lowered the output limit). Never skips.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from interlock.runtime.books.facts import FactsTable
from interlock.runtime.books.fit import capabilities_on, effective_context
from interlock.runtime.guards import Admission, InstantGuard, Kit
from interlock.runtime.loaded.tables import Check

THINK_KEYS = ("think", "reasoning_effort")


KeepAlive = Callable[[str, str], int | None]
"""``(worker label, model as /api/ps names it) -> keep_alive seconds``; None: not a home."""


class OllamaOptionsGuard(InstantGuard):
    check = Check.OLLAMA

    def __init__(self, facts: FactsTable, keep_alive: KeepAlive | None = None) -> None:
        self.facts = facts
        self.keep_alive = keep_alive

    def verdict(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        candidate, route, preflight = admission.candidate, admission.route, admission.preflight
        if route is None or preflight is None:  # only an Ollama candidate's chain holds this guard
            return None
        needs = preflight.needs
        if admission.body is not None:  # an earlier guard's copy (a lowered output limit): built on
            body = admission.body
        out: dict[str, Any] | None = None
        if needs.num_ctx is None and "embedding" not in needs.capabilities:
            window, _ = effective_context(route, candidate, self.facts)
            if window is not None:
                out = dict(body)
                options = body.get("options")
                out["options"] = (
                    {**options, "num_ctx": window} if isinstance(options, Mapping) else {"num_ctx": window}
                )
        if self.keep_alive is not None and "keep_alive" not in body:
            pinned = self.keep_alive(route.endpoint.label, candidate.facts_key)
            if pinned is not None:
                out = dict(body) if out is None else out
                out["keep_alive"] = pinned
        if "think" in body or "reasoning_effort" in body:
            caps = capabilities_on(route, candidate, self.facts)
            if caps is None or "thinking" not in caps:
                out = dict(body) if out is None else out
                for key in THINK_KEYS:
                    out.pop(key, None)
                known = "unknown" if caps is None else "not thinking-capable"
                preflight.note(f"think dropped for {candidate.id} ({known})")
        if out is not None:
            admission.body = out
        return None


def guard(kit: Kit) -> OllamaOptionsGuard:
    fleet = kit.fleet
    if fleet is None:
        raise ValueError("the Ollama options guard is the fleet's: built only once a plan has workers")
    return OllamaOptionsGuard(kit.facts, fleet.placement.keep_alive)
