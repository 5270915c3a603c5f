"""Which models stay loaded where: one packing rule, shared by the compiler and the runtime.

The compiler packs what the configuration declares (each worker's memory, each model's size) and emits the
result in the plan; the runtime packs again, outside the request path, when it knows more (sizes from
``/api/ps`` and ``/api/tags`` for models nobody declared, and the traffic it has seen), so both must
agree on the rule, and it lives here, in the shared ground, importing nothing.

The rule, deterministic for equal inputs:

1. Models are taken in rank order (most wanted first; the caller ranks them).
2. First every model gets one home: the worker, among those that may hold it, where it fits most tightly
   (best fit: the least memory left over), so a big model further down still finds a worker with room.
3. Then, in rank order again, a model gets a further home on each other worker where it still fits
   (a popular model loaded everywhere it fits saves the loads that worker choice cannot avoid, and
   spreads its traffic over the fleet).

A model that fits no worker in step 2 has no home: every request for it loads it somewhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Want:
    """One model to place: its name and what it takes on each worker that may hold it (GiB)."""

    model: str
    footprint: Mapping[str, float]  # worker -> GiB; a worker absent here cannot hold the model


@dataclass(frozen=True, slots=True)
class Packing:
    """The outcome: each worker's models (in rank order) and the models with no home (in rank order)."""

    homes: Mapping[str, tuple[str, ...]]
    homeless: tuple[str, ...]
    used: Mapping[str, float]  # worker -> GiB its homes take


def pack(budgets: Mapping[str, float], wants: Sequence[Want]) -> Packing:
    """Place ``wants`` (already in rank order) into workers with ``budgets`` GiB each (see the module)."""
    free = dict(budgets)
    homes: dict[str, list[str]] = {worker: [] for worker in budgets}
    homeless: list[str] = []
    for want in wants:
        fits = [w for w, gib in want.footprint.items() if w in free and gib <= free[w]]
        if not fits:
            homeless.append(want.model)
            continue
        best = min(fits, key=lambda w: (free[w] - want.footprint[w], w))  # ties: the first name
        homes[best].append(want.model)
        free[best] -= want.footprint[best]
    for want in wants:
        if want.model in homeless:
            continue
        for worker in sorted(want.footprint):
            if worker in free and want.model not in homes[worker] and want.footprint[worker] <= free[worker]:
                homes[worker].append(want.model)
                free[worker] -= want.footprint[worker]
    order = {want.model: index for index, want in enumerate(wants)}
    return Packing(
        homes={w: tuple(sorted(models, key=order.__getitem__)) for w, models in homes.items()},
        homeless=tuple(homeless),
        used={w: round(budgets[w] - free[w], 3) for w in budgets},
    )
