"""The compiled placement's data (``compiler.homes`` computes it; emit and explain read it)."""

from __future__ import annotations

from dataclasses import dataclass

from interlock.common.packing import Packing


@dataclass(frozen=True, slots=True)
class Footprint:
    """What one model takes on one worker at full load (GiB)."""

    weights: float
    kv: float | None  # None: `kv_bytes_per_token` not declared (weights alone are counted)
    slots: int
    context: int | None

    @property
    def total(self) -> float:
        return self.weights + (self.kv or 0.0)


@dataclass(frozen=True, slots=True)
class Ranked:
    """A placed provider's model, with what made its rank."""

    candidate: str
    provider: str
    model: str
    position: int  # earliest 0-based index in any alias's expanded chain
    aliases: int  # how many aliases use it
    footprint: dict[str, Footprint]  # worker -> footprint; empty when its size is not declared


@dataclass(frozen=True, slots=True)
class Placed:
    """The compiled placement: budgets, ranked models, the packing of those with a declared size."""

    budgets: dict[str, float | None]  # every worker of a placed provider; None: memory unknown
    ranked: tuple[Ranked, ...]
    packing: Packing
    warm: bool
    keep_alive_s: int | None  # None: not `forever` nor a positive duration (IL213)

    def homes_of(self, candidate: str) -> list[str]:
        """The workers where ``candidate`` (``provider/model``) stays loaded, in name order."""
        return sorted(w for w, placed in self.packing.homes.items() if candidate in placed)
