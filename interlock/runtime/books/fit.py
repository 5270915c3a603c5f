"""What a candidate can do on one route: its capabilities and effective context, plan + live facts.

Capabilities: live ``/api/show`` facts of the (worker, model) when known, else the plan's declared
ones, else unknown (None). Effective context of an Ollama route, first known of: the caller's own
``num_ctx``; the context the model is loaded with now (``/api/ps``); the Modelfile's ``num_ctx``; the
worker's ``default_context_tokens``; the plan's ``preflight.default_context_tokens``. It is then capped by
the route's ``context_cap`` (worker limit, gateway cap, declared maximum) and the live maximum
(``model_info.*.context_length``). A cloud route's context is its declared ``context_tokens``. Either is
capped by the window the server says one slot has (llama-server's ``/slots`` ``n_ctx``, read by the signal
fetcher: ``--ctx-size`` split over ``--parallel``). All of it is dictionary lookups: the facts were
gathered by the metadata and signal fetchers, the rest at plan load.
"""

from __future__ import annotations

from interlock.runtime.books.facts import FactsTable
from interlock.runtime.loaded.tables import Alias, Candidate, Route

UPSTREAM_SAID = "upstream said"  # the source of a window an overflow answer named
SLOT_SAID = "server's slot"  # the source of a window the server says one slot has (``slot_windows``)


def capabilities_on(route: Route, candidate: Candidate, facts: FactsTable) -> frozenset[str] | None:
    live = facts.live  # the workers' facts: a route with live facts is a worker's, so the fleet's there
    if route.live_facts and live is not None:
        info = live.model(route.endpoint.label, candidate.facts_key)
        if info is not None and info.capabilities is not None:
            return info.capabilities
    return candidate.capabilities


def limit_on(route: Route, candidate: Candidate, facts: FactsTable) -> int | None:
    """The most context the route may be given (None: no limit known)."""
    cap, live = route.context_cap, facts.live
    if route.live_facts and live is not None:
        info = live.model(route.endpoint.label, candidate.facts_key)
        if info is not None and info.max_context is not None:
            cap = info.max_context if cap is None else min(cap, info.max_context)
    return cap


def effective_context(
    route: Route, candidate: Candidate, facts: FactsTable, num_ctx: int | None = None
) -> tuple[int | None, str]:
    """``(tokens, source)``; tokens None when nothing is known (then nothing is blocked). A window the
    route's upstream named in a context-length error (``FactsTable.windows``) caps whatever else is known."""
    tokens, source = planned_context(route, candidate, facts, num_ctx)
    learned = facts.windows.get((route.endpoint.label, candidate.facts_key))
    if learned is not None and (tokens is None or learned < tokens):
        return learned, UPSTREAM_SAID
    return tokens, source


def planned_context(
    route: Route, candidate: Candidate, facts: FactsTable, num_ctx: int | None
) -> tuple[int | None, str]:
    """``effective_context`` without a window an upstream named (what the guard's trial goes by); a
    window the server says one slot has caps the rest (a declared window of the whole ``--ctx-size``)."""
    tokens, source = _planned(route, candidate, facts, num_ctx)
    said = facts.slot_windows.get(route.endpoint.label) if facts.slot_windows else None
    if said is not None and (tokens is None or said < tokens):
        return said, SLOT_SAID
    return tokens, source


def _planned(
    route: Route, candidate: Candidate, facts: FactsTable, num_ctx: int | None
) -> tuple[int | None, str]:
    live = facts.live
    if not route.live_facts or live is None:
        return route.context_default, "declared"
    label, model = route.endpoint.label, candidate.facts_key
    if num_ctx is not None:
        return num_ctx, "caller"
    tokens = live.loaded_context(label, model)
    source = "loaded"
    if tokens is None:
        info = live.model(label, model)
        tokens = info.modelfile_num_ctx if info is not None else None
        source = "modelfile"
    if tokens is None:
        tokens, source = route.context_default, "default"
    if tokens is None:
        return None, "unknown"
    cap = limit_on(route, candidate, facts)
    if cap is not None and tokens > cap:
        return cap, f"{source}, capped"
    return tokens, source


def guaranteed_window(target: Alias | Candidate, facts: FactsTable) -> int | None:
    """The window an agent can count on through ``target`` whichever candidate answers: the smallest of
    the compiled guaranteed window and each route's effective window now (live metadata where the plan
    knew none, a window an upstream named in an overflow). For the cold routes (``/api/show``,
    ``/v1/aliases``), never the request path."""
    candidates = target.candidates if isinstance(target, Alias) else (target,)
    compiled = target.contract.window_tokens if isinstance(target, Alias) and target.contract else None
    windows = [compiled] if compiled is not None else []
    for candidate in candidates:
        for route in candidate.routes:
            window = effective_context(route, candidate, facts)[0]
            if window is not None:
                windows.append(window)
    return min(windows) if windows else None
