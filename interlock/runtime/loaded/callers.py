"""Who is calling, as the core sees it: the ``Caller`` a request carries (``ANONYMOUS`` unless the plan has
keys), where it waits for a slot (``Turn``), a caller's rates (``Budget``, ``Refusal``), and which paths
are behind the caller keys (``OPEN_PATHS``, ``needs_key``) or only an operator's (``OPERATOR_PATHS``).

Why this boundary: a plan without caller keys still routes, bills and queues a request for someone (the
anonymous caller, the common turn), and the route table must know which of its paths a key guards; how
a key is recognised (``KeyBook``, the hashes, the ACLs worked out at load) is ``access.py``'s, imported
only by a plan with keys (``server.auth`` other than ``off``) and by the keys feature
(``features/keys.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from interlock.common.patterns import allows
from interlock.runtime.base.errors import InvalidRequest, ModelNotAllowed, ModelNotFound, shown
from interlock.schema.plan import PlanLimits

if TYPE_CHECKING:
    from interlock.runtime.loaded.tables import Target

Header = tuple[bytes, bytes]

UNKEYED = "-"
"""The tenant and key id the usage ledger writes for a request made without a key (``server.auth`` off
or optional)."""

CALLER = "interlock.caller"
"""The ASGI scope key under which ``features.keys.admitted`` leaves the request's ``Caller`` for the
handlers."""

OPEN_PATHS = frozenset(("/healthz", "/readyz", "/metrics", "/api/version", "/", "/docs"))
"""Answered without a key under any ``auth``: liveness and readiness probes, the Prometheus scrape,
the two Ollama routes clients call to see whether a server is up, and ``/docs`` (the interactive page's
shell: the document it shows, ``/openapi.json``, needs a key like any route); everything else needs a key
under ``required``."""

OPEN_PREFIXES = ("/ui/static/", "/docs/static/")
"""Shipped files only (the status page's and ``/docs``' scripts and styles): no plan data, no state."""

OPERATOR_PATHS = frozenset(("/ui", "/v1/health", "/v1/metadata", "/api/ps"))
"""The routes that show the whole fleet's state: the status page (and its sections, ``/ui/<section>``),
health with every tenant's and key's budget, what the preflight knows of every worker, and what the
workers have loaded. Once a plan declares an operator key, only operator keys are answered there."""

UI_SECTION_ROUTE = "/ui/{section}"  # how a refused ``/ui/<section>`` is named in the audit log


@dataclass(frozen=True, slots=True)
class Budget:
    """One counted party's limits; 0 is no limit."""

    name: str  # "k:<key id>" or "t:<tenant>"
    requests_per_minute: int
    tokens_per_minute: int
    max_concurrent: int


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why ``take`` refused: which budget, which limit, and when to try again."""

    budget: str
    limit: str  # "requests_per_minute" | "tokens_per_minute" | "max_concurrent"
    value: int
    retry_after_s: float


@dataclass(frozen=True, slots=True)
class Turn:
    """Where a request waits when a model's slots are full (``runtime/state/fair.py``): its priority
    class (``batch`` only takes a slot no ``interactive`` waiter can use) and its tenant's fair share."""

    tenant: str = ""
    weight: float = 1.0
    batch: bool = False

    @property
    def rank(self) -> int:
        return 1 if self.batch else 0

    @property
    def label(self) -> str:
        return "batch" if self.batch else "interactive"


COMMON = Turn()
"""Every request's turn while no tenant is configured (anonymous callers): one share, interactive."""

PRIORITY_HEADER = b"x-interlock-priority"
"""What a key with ``priority_header: true`` may send, per request: ``interactive`` or ``batch``."""


@dataclass(frozen=True, slots=True)
class Caller:
    """One request's caller: ids safe to log, the compiled limits of its key and tenant, and its ACL."""

    key_id: str | None = None
    tenant: str | None = None
    key_limits: PlanLimits | None = None
    tenant_limits: PlanLimits | None = None
    decided: Mapping[str, bool] = field(default_factory=dict)
    """Whether each name the plan declares (aliases, candidates) may be called: worked out at load."""
    budgets: tuple[Budget, ...] = ()
    """The key's and the tenant's rates and concurrency (only levels with a limit): ``counters.py``."""
    targets: Mapping[str, Target] = field(default_factory=dict)
    """Aliases whose chain holds candidates this caller's ``denied`` names: the alias without them."""
    operator: bool = False
    """The key is ``operator: true``: it may read the operator routes (``OPERATOR_PATHS``)."""
    offered: str = ""
    """The aliases this caller may call, as a 404 lists them (worked out at load)."""
    account: tuple[str, str] = (UNKEYED, UNKEYED)
    """The usage ledger's (tenant, key id) of this caller (``usage.base.Account``): worked out at load."""
    credits: bool = False
    """Some level (the key's, its tenant's) has a budget, claimed per request (``usage.credits``)."""
    turn: Turn = COMMON
    """Where its requests wait for a slot (its key's or tenant's priority, its tenant's weight)."""
    turns: tuple[Turn, Turn] | None = None
    """``(interactive, batch)`` when the key may choose per request (``priority_header``); else None."""

    def turn_for(self, headers: Iterable[Header]) -> Turn:
        """This request's turn: ``X-Interlock-Priority`` where the key may send it (read only then),
        else the key's; a value other than ``interactive`` or ``batch`` is ``InvalidRequest`` (400)."""
        turns = self.turns
        if turns is None:
            return self.turn
        for name, value in headers:
            if name == PRIORITY_HEADER:
                chosen = value.strip().lower()
                if chosen == b"interactive":
                    return turns[0]
                if chosen == b"batch":
                    return turns[1]
                raise InvalidRequest(
                    f"`X-Interlock-Priority` is `{shown(value.decode('latin-1'))}`; "
                    "send `interactive` or `batch`",
                    param="X-Interlock-Priority",
                )
        return self.turn

    @property
    def anonymous(self) -> bool:
        return self.key_id is None

    def may_call(self, name: str) -> bool:
        """Whether the ACL of both levels lets ``name`` through (a lookup for declared names)."""
        known = self.decided.get(name)
        if known is not None:
            return known
        return all(allows(level, name) for level in self.levels)

    @property
    def levels(self) -> tuple[PlanLimits, ...]:
        return tuple(x for x in (self.tenant_limits, self.key_limits) if x is not None)

    def check(self, name: str) -> None:
        """``ModelNotAllowed`` unless the caller may call ``name``: worded as ``not_found`` is."""
        if not self.may_call(name):
            raise ModelNotAllowed(self.unknown(name), param="model")

    def not_found(self, name: str) -> ModelNotFound:
        """The 404 a key gets for a name the plan does not know: the same words as for one its ACL
        refuses, listing only what this key may use, so neither confirms what exists."""
        return ModelNotFound(self.unknown(name), param="model")

    def unknown(self, name: str) -> str:
        return (
            f"`{shown(name)}` is not a model key `{self.key_id}` (tenant `{self.tenant}`) may use; its "
            f"aliases: {self.offered or 'none'}; GET /v1/models lists every model it may use"
        )


ANONYMOUS = Caller()


def operator_route(path: str) -> str | None:
    """The operator route ``path`` is (``/ui/<section>`` named as ``UI_SECTION_ROUTE``), or None."""
    if path in OPERATOR_PATHS:
        return path
    if path.startswith("/ui/") and not path.startswith("/ui/static/"):
        return UI_SECTION_ROUTE
    return None


def needs_key(path: str) -> bool:
    """Whether ``path`` is behind the caller keys (see ``OPEN_PATHS``)."""
    return path not in OPEN_PATHS and not path.startswith(OPEN_PREFIXES)


def caller_of(scope: Mapping[str, object]) -> Caller:
    """The caller ``features.keys.admitted`` authenticated for this request (``ANONYMOUS`` under
    ``auth: off``)."""
    found = scope.get(CALLER)
    return found if isinstance(found, Caller) else ANONYMOUS
