"""A semantic change between two routing plans, the kinds there are, and how each is classified.

Every kind has one fixed classification, so a reviewer (and ``--fail-on``) can rely on the table in
``KINDS`` alone; the README documents it row by row.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel


class Classification(enum.Enum):
    """How much a change matters to the callers of the gateway, most severe first."""

    CREDENTIALS = "credentials"  # a secret goes to another host, or another variable is read as one
    BREAKING = "breaking"  # a caller that worked before may now fail
    ROUTING = "routing"  # which model or upstream answers, or in which order, changes
    CAPACITY = "capacity"  # slots, queues, timeouts, health and circuit settings
    COSMETIC = "cosmetic"  # descriptions

    @property
    def rank(self) -> int:
        return list(Classification).index(self)


class Section(enum.Enum):
    """Parts of the plan, in the order a reviewer reads them."""

    CREDENTIALS = "credentials"
    ALIASES = "aliases"
    SERVER = "server"
    PROVIDERS = "providers"
    WORKERS = "workers"
    HEALTH = "health"
    PREFLIGHT = "preflight"
    ROUTING = "routing"
    MODELS = "models"
    ACCESS = "access"

    @property
    def rank(self) -> int:
        return list(Section).index(self)


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind of change: its section, fixed classification and a short label for tables."""

    name: str
    section: Section
    classification: Classification
    label: str


def _kinds(*rows: tuple[str, Section, Classification, str]) -> dict[str, Kind]:
    return {name: Kind(name, section, cls, label) for name, section, cls, label in rows}


_K, _B, _R, _C, _X = (
    Classification.CREDENTIALS,
    Classification.BREAKING,
    Classification.ROUTING,
    Classification.CAPACITY,
    Classification.COSMETIC,
)
_Q, _A, _S, _P, _W, _H, _F, _G, _M, _Y = (
    Section.CREDENTIALS,
    Section.ALIASES,
    Section.SERVER,
    Section.PROVIDERS,
    Section.WORKERS,
    Section.HEALTH,
    Section.PREFLIGHT,
    Section.ROUTING,
    Section.MODELS,
    Section.ACCESS,
)

KINDS: dict[str, Kind] = _kinds(
    ("credential-sent", _Q, _K, "sent to a new host"),
    ("key-host-allowed", _Q, _K, "may leave its vendor's hosts"),
    ("key-variable-added", _Q, _K, "new key variable"),
    ("key-prefixes-changed", _Q, _K, "key variable prefixes"),
    ("key-secret-source-changed", _Q, _K, "key's secret source"),
    ("alias-added", _A, _R, "alias added"),
    ("alias-removed", _A, _B, "alias removed"),
    ("first-choice-changed", _A, _R, "answers first with"),
    ("candidate-added", _A, _R, "candidate added"),
    ("candidate-removed", _A, _R, "candidate removed"),
    ("chain-reordered", _A, _R, "chain reordered"),
    ("requires-dropped", _A, _B, "capability no longer guaranteed"),
    ("requires-added", _A, _R, "capability now guaranteed"),
    ("description-changed", _A, _X, "description"),
    ("agent-window-dropped", _A, _B, "guaranteed window dropped"),
    ("agent-window-raised", _A, _R, "guaranteed window raised"),
    ("output-ceiling-dropped", _A, _B, "output ceiling dropped"),
    ("output-ceiling-raised", _A, _R, "output ceiling raised"),
    ("reasoning-changed", _A, _R, "reasoning contracts"),
    ("saturation-policy-changed", _A, _R, "when slots are full"),
    ("alias-retry-changed", _A, _C, "retries"),
    ("alias-resume-changed", _A, _R, "cut streams resumed"),
    ("default-alias-changed", _S, _B, "default alias"),
    ("alias-namespace-changed", _S, _B, "alias namespace"),
    ("direct-models-denied", _S, _B, "direct `provider/model` calls"),
    ("direct-models-allowed", _S, _R, "direct `provider/model` calls"),
    ("resolved-header-changed", _S, _B, "resolved-model header"),
    ("max-body-changed", _S, _C, "largest request body"),
    ("cors-origins-removed", _S, _B, "CORS origins removed"),
    ("cors-origins-added", _S, _R, "CORS origins added"),
    ("cors-credentials-denied", _S, _B, "CORS credentials"),
    ("cors-credentials-allowed", _S, _R, "CORS credentials"),
    ("cors-headers-removed", _S, _B, "CORS request headers removed"),
    ("cors-headers-added", _S, _R, "CORS request headers added"),
    ("cors-max-age-changed", _S, _C, "CORS preflight cache"),
    ("surfaces-removed", _S, _B, "API surfaces no longer served"),
    ("surfaces-added", _S, _R, "API surfaces served"),
    ("server-limit-changed", _S, _C, "connection or upstream limit"),
    ("provider-added", _P, _R, "provider added"),
    ("provider-removed", _P, _R, "provider removed"),
    ("provider-kind-changed", _P, _R, "kind"),
    ("base-url-changed", _P, _R, "base URL"),
    ("credential-changed", _P, _R, "credential variable"),
    ("key-host-withdrawn", _P, _R, "key host withdrawn"),
    ("probe-changed", _P, _C, "active probe"),
    ("recovery-check-changed", _P, _C, "recovery check"),
    ("responses-changed", _P, _R, "Responses API"),
    ("timeout-changed", _P, _C, "timeout"),
    ("retry-changed", _P, _C, "retries"),
    ("worker-order-changed", _P, _R, "worker order"),
    ("worker-added", _W, _C, "worker added"),
    ("worker-removed", _W, _C, "worker removed"),
    ("worker-moved", _W, _R, "provider"),
    ("worker-url-changed", _W, _R, "URL"),
    ("profile-changed", _W, _C, "hardware profile"),
    ("hardware-changed", _W, _C, "hardware"),
    ("max-concurrent-changed", _W, _C, "max_concurrent"),
    ("slots-changed", _W, _C, "slots"),
    ("patterns-changed", _W, _C, "concurrency patterns"),
    ("context-limit-changed", _W, _C, "context limit"),
    ("queue-changed", _W, _C, "queue"),
    ("telemetry-changed", _W, _C, "telemetry"),
    ("worker-saturation-changed", _W, _R, "when slots are full"),
    ("worker-server-changed", _W, _R, "server load signals"),
    ("health-changed", _H, _C, "health"),
    ("alerts-changed", _H, _X, "Prometheus alerts"),
    ("preflight-mode-changed", _F, _R, "preflight mode"),
    ("preflight-changed", _F, _C, "preflight setting"),
    ("routing-changed", _G, _R, "worker choice"),
    ("placement-changed", _G, _C, "models kept loaded"),
    ("capabilities-changed", _M, _R, "capabilities"),
    ("context-tokens-changed", _M, _C, "context window"),
    ("max-output-changed", _M, _C, "most output tokens"),
    ("auth-tightened", _Y, _B, "caller keys required"),
    ("auth-loosened", _Y, _R, "caller keys relaxed"),
    ("caller-added", _Y, _R, "tenant or key added"),
    ("caller-removed", _Y, _B, "tenant or key removed"),
    ("acl-tightened", _Y, _B, "may call less"),
    ("acl-loosened", _Y, _R, "may call more"),
    ("key-secret-changed", _Y, _B, "key secret"),
    ("key-tenant-changed", _Y, _R, "key's tenant"),
    ("operator-granted", _Y, _R, "operator granted"),
    ("operator-revoked", _Y, _B, "operator routes refused"),
    ("caller-limit-changed", _Y, _C, "rate, concurrency or credits"),
    ("caller-queue-changed", _Y, _C, "fair-queuing weight or priority"),
    ("caller-description-changed", _Y, _X, "description"),
    ("price-changed", _Y, _C, "price"),
)

Value = Any
"""A JSON value: what a plan holds at the changed place (None when absent on that side)."""

UNITS = ("ms", "chain", "list", "bool", "slots")


@dataclass(frozen=True, slots=True)
class Change:
    """One semantic difference between the base plan and the head plan."""

    kind: str
    subject: str  # the alias, provider, worker, setting or model the change is about
    before: Value
    after: Value
    summary: str  # one sentence in plain words
    field: str | None = None  # the setting within the subject, e.g. `timeouts.connect_ms`
    unit: str | None = None  # how to show before/after: see ``UNITS``

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown change kind `{self.kind}`")
        if self.unit is not None and self.unit not in UNITS:
            raise ValueError(f"unknown unit `{self.unit}`")

    @property
    def section(self) -> Section:
        return KINDS[self.kind].section

    @property
    def classification(self) -> Classification:
        return KINDS[self.kind].classification

    @property
    def label(self) -> str:
        return KINDS[self.kind].label

    def sort_key(self) -> tuple[int, int, str, int, str]:
        kind_rank = list(KINDS).index(self.kind)
        return (self.classification.rank, self.section.rank, self.subject, kind_rank, self.field or "")

    def as_json(self) -> dict[str, Value]:
        return {
            "section": self.section.value,
            "subject": self.subject,
            "kind": self.kind,
            "field": self.field,
            "classification": self.classification.value,
            "before": self.before,
            "after": self.after,
            "unit": self.unit,
            "summary": self.summary,
        }


def changed_fields(old: BaseModel, new: BaseModel) -> Iterator[tuple[str, Value, Value, str | None]]:
    """``(setting, before, after, unit)`` for each field of two plan models that differs; a ``*_ms``
    field is named without the suffix and has the unit ``ms``."""
    for key in type(old).model_fields:
        before, after = getattr(old, key), getattr(new, key)
        if before != after:
            yield key.removesuffix("_ms"), before, after, "ms" if key.endswith("_ms") else None


def show(value: Value, unit: str | None) -> str:
    """``value`` for people: durations as `30s`, chains as `a → b`, absence as `none`."""
    if value is None:
        return "none"
    if unit == "ms" and isinstance(value, int):
        return duration(value)
    if unit == "chain" and isinstance(value, list):
        return " → ".join(map(str, value))
    if unit == "list" and isinstance(value, list):
        return ", ".join(map(str, value)) if value else "none"
    if unit == "bool" or isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{key}={val}" for key, val in value.items()) if value else "none"
    return str(value)


def named(value: Value) -> str:
    """A name in a sentence: `` `x` ``, or `none` when absent."""
    return "none" if value is None else f"`{value}`"


def duration(ms: int) -> str:
    """The shortest exact spelling of ``ms`` in the configuration's duration syntax."""
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
