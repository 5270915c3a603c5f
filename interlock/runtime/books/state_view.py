"""What the metrics' scrape-time gauges read of the gateway (``StateView``), and what they read of the usage
ledger (``LedgerCounts``, ``SpentTally``: Protocols, so that the metrics stand below the usage ledger,
whose credits guard reads what a request needs, beside the guards that count into the metrics)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from prometheus_client.core import Metric

    from interlock.runtime.books.health import HealthBook
    from interlock.runtime.loaded.plan import RuntimePlan
    from interlock.runtime.state.base import SlotBackend


class LedgerCounts(Protocol):
    """What the usage families read of ``usage.ledger.Ledger``: a Protocol, so that the metrics stand
    below the usage ledger (whose credits guard reads what a request needs, beside the guards that count
    into the metrics)."""

    @property
    def waiting(self) -> int: ...

    @property
    def flushes(self) -> int: ...

    @property
    def failures(self) -> int: ...

    def spent(self, account: tuple[str, str]) -> SpentTally:
        """What the key ``(tenant, key id)`` used in the current window."""
        ...


class SpentTally(Protocol):
    """What the credits gauge reads of ``usage.base.Tally``."""

    @property
    def tokens(self) -> int: ...

    @property
    def cost_micros(self) -> int: ...


@dataclass(slots=True)
class StateView:
    """What the scrape-time gauges read: always the gateway's current plan and live state. The fleet's
    two seats (``gauges``, ``fleet_waiting``) are filled when a plan first has workers
    (``fleet/plug.py``): until then no worker gauge is exposed."""

    plan: Callable[[], RuntimePlan]
    health: HealthBook
    slots: SlotBackend
    audit: Callable[[], Iterable[Metric]] | None = None  # the audit log's (``features/audit``)
    ledger: LedgerCounts | None = None
    fleet_waiting: Callable[[str], int] | None = None  # candidate id -> requests in its fleet line
    gauges: Callable[[], Iterable[Metric]] | None = None  # the workers' telemetry (``telemetry/gauges.py``)
