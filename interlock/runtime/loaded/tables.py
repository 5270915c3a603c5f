"""The frozen tables a plan loads into: candidates, routes, targets, workers' limits and the settings the
runtime reads; built once per plan by ``plan.build_tables``, looked up per request, never changed."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from interlock.common.patterns import matching_row
from interlock.runtime.wire.base import Endpoint
from interlock.schema.plan import PlanContract, PlanPattern


class RedactedHeaders(dict[str, str]):
    """Request headers holding a credential: usable as a mapping, but never printed with their values."""

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{name!r}: '[redacted]'" for name in self) + "}"

    __str__ = __repr__


@dataclass(frozen=True, slots=True)
class Route:
    """One place a candidate can be served: an endpoint, and its slot limit there (None: unlimited).

    The static part of the candidate's context there is settled at load: ``context_default`` is what
    applies when live metadata says nothing (Ollama: the worker's, else the plan's default; cloud: the
    declared window), ``context_cap`` the most it may get (worker limit, gateway cap, declared maximum).
    """

    endpoint: Endpoint
    worker: str | None
    slot_limit: int | None
    context_default: int | None = None
    context_cap: int | None = None
    worker_header: tuple[bytes, bytes] | None = None  # X-Interlock-Worker: the worker that answered
    live_facts: bool = False  # an Ollama worker: live metadata (/api/show, /api/ps) applies to it


class Check(enum.IntFlag):
    """What a guard checks, by what must hold of a candidate for the guard to apply to it at all.

    ``Candidate.checks`` holds those that hold of it, settled at plan load (``plan.checks_of``); each
    guard says which it is (``Guard.check``), and the router runs per candidate only the guards its
    checks name, in their order (``guards.compiled``): one tuple indexed by ``checks`` per request.
    """

    EVERY = enum.auto()  # circuits and endpoint health: any candidate
    PREFLIGHT = enum.auto()  # what the request needs against what it can do: unless preflight is off
    WORKERS = enum.auto()  # worker choice and slots: a candidate served by workers
    OLLAMA = enum.auto()  # what an Ollama worker is sent (num_ctx, keep_alive, think): an Ollama candidate


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries of one candidate before the walk moves on (``runtime.retry``): ``count`` after the first
    attempt, the first after ``backoff_s`` (doubled for each later one, with jitter), a ``Retry-After``
    waited for up to ``retry_after_max_s``."""

    count: int = 1
    backoff_s: float = 0.5
    retry_after_max_s: float = 5.0


@dataclass(frozen=True, slots=True)
class Candidate:
    """A concrete ``provider/model`` with everything needed to call it."""

    id: str
    provider: str
    model: str
    kind: str
    routes: tuple[Route, ...]
    capabilities: frozenset[str] | None
    context_tokens: int | None
    facts_key: str  # the model as live metadata names it (Ollama: `name:tag`, `:latest` added)
    in_plan: bool  # False for a raw `provider/model` the plan does not list
    metric_label: str  # bounded: the id when in the plan, else ``provider/*``
    resolved_header: tuple[bytes, bytes]
    # the wire formats whose callers' requests it takes as they came (a same-format relay): its kind's,
    # and ``responses`` for an OpenAI-compatible provider declared to serve the Responses API
    relays: frozenset[str] = frozenset()
    # its upstream answers an error for a prompt over its context (``kinds.ProviderKind.says_overflow``)
    says_overflow: bool = True
    checks: Check = Check.EVERY | Check.PREFLIGHT | Check.WORKERS | Check.OLLAMA  # the guards that can
    # apply to it (settled at plan load; by default every one)
    live_facts: bool = True  # a route of it has live facts (an Ollama worker); False: what the plan
    # declares is all that is known of it, the same on every route (the preflight guards' short way)
    retry: RetryPolicy = RetryPolicy()  # its provider's


@dataclass(frozen=True, slots=True)
class Target:
    """What one request walks: the candidates in order (an alias's chain, or one raw ``provider/model``)."""

    label: str  # the alias name, or the raw provider/model asked for
    metric_label: str  # bounded: the alias name, or ``(direct)`` for a raw model
    candidates: tuple[Candidate, ...]
    header: tuple[bytes, bytes]  # X-Interlock-Alias
    spill: tuple[float | None, ...]  # per candidate, when its worker is full: skip to the next candidate
    # per candidate, where the alias overrides its provider's retries; empty: each candidate's own
    retry: tuple[RetryPolicy, ...]


@dataclass(frozen=True, slots=True)
class Alias(Target):
    """An alias is its own target (built once, here); ``label`` is its name."""

    description: str
    requires: tuple[str, ...]
    contract: PlanContract | None = None  # the agent contract as compiled (None: an older plan)
    # `resume: same_model`: a cut stream goes on from a replica (runtime/request/resume.py)
    resume: bool = False


@dataclass(frozen=True, slots=True)
class WorkerLimits:
    """A worker's concurrency: total slots, the pattern table for models the plan does not list, queue."""

    name: str
    provider: str
    default_context_tokens: int | None
    context_limits: Mapping[str, int]
    max_concurrent: int
    slots: Mapping[str, int]
    patterns: tuple[PlanPattern, ...]
    max_waiting: int
    max_wait_s: float
    server: str | None = None  # an OpenAI-compatible worker's server, whose load is read (fleet.signals)

    def slot_limit(self, model: str) -> int:
        """The compiled table first; the ordered patterns only for models it does not list."""
        limit = self.slots.get(model)
        if limit is not None:
            return limit
        row = matching_row(self.patterns, model)
        return self.max_concurrent if row is None else row.limit


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    kind: str
    probe: bool
    endpoints: tuple[Endpoint, ...]
    workers: tuple[str | None, ...]  # parallel to endpoints: the worker name, None for openai
    relays: frozenset[str] = frozenset()  # the wire formats it relays as they came (``Candidate.relays``)
    recovery_check: str = "probe"  # how an open circuit is checked (``books/recovery.py::CHECKS``, or off)
    retry: RetryPolicy = RetryPolicy()  # its candidates' retries (``Candidate.retry``)


@dataclass(frozen=True, slots=True)
class HealthSettings:
    probe_interval_s: float
    probe_timeout_s: float
    failure_threshold: int
    open_for_s: float
    rate_limit_open_for_s: float


@dataclass(frozen=True, slots=True)
class PreflightSettings:
    mode: str  # "enforce" | "observe" | "off"
    metadata_ttl_s: float
    default_context_tokens: int | None
    max_context_tokens: int | None
    default_output_tokens: int
    image_reserve_tokens: int
    margin_percent: int
    caller_num_ctx: bool
    max_tokens_ceiling: bool = True  # `preflight.max_tokens: ceiling` (False: `strict`)


@dataclass(frozen=True, slots=True)
class RoutingWeights:
    loaded: float
    installed: float
    free_slots: float
    queue: float
    speed: float
    vram: float
    gpu_util: float
    avoid_load: float


@dataclass(frozen=True, slots=True)
class StickySettings:
    header: bytes  # lower-case, as ASGI gives request header names
    prefix_bytes: int
    max_sessions: int
    idle_ttl_s: float


@dataclass(frozen=True, slots=True)
class PrefixSettings:
    """Prefix affinity (``routing.prefix``): the weights of the cost rule in ``runtime.fleet.scoring``."""

    miss: float  # x the prefill seconds of the prompt's part not cached on the worker
    evict: float  # x the prefill seconds of the held prompt serving this one there would evict
    spare_prompts: int  # prompts a server keeps beyond its slots (llama-server's --cache-ram)
    idle_s: float  # a held prompt served longer ago than this costs nothing to evict


@dataclass(frozen=True, slots=True)
class RoutingSettings:
    """Worker scoring (``runtime.fleet.scoring``), where learned speeds are kept, sticky sessions (None:
    off)."""

    weights: RoutingWeights
    avoid_vram_percent: float
    speed_smoothing: float
    state_file: str | None
    sticky: StickySettings | None
    worker_saturation: Mapping[str, str]  # a worker's own on_saturation, where it sets one
    prefix: PrefixSettings | None = None  # None: prefix affinity off


@dataclass(frozen=True, slots=True)
class PlacedModel:
    """A model placement may keep loaded, in the plan's rank order (``runtime.fleet.placement``)."""

    candidate: str
    provider: str
    model: str  # as chains write it: what a load request names
    facts_key: str  # as Ollama's /api/ps names it
    position: int  # earliest index in any alias's chain
    aliases: int  # aliases that use it
    footprint_gib: Mapping[str, float]  # worker -> declared weights + KV cache; empty: not declared


@dataclass(frozen=True, slots=True)
class PlacementSettings:
    """The compiled placement: memory budgets, ranked models, homes; and whether to warm them."""

    warm: bool = False
    keep_alive_s: int = -1
    budgets_gib: Mapping[str, float] = field(default_factory=dict)  # workers whose memory is known
    models: tuple[PlacedModel, ...] = ()
    homes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # worker -> candidate ids


def worker_label(provider: str, worker: str) -> str:
    """The endpoint label of one Ollama worker (health state, reports and metrics are keyed by it)."""
    return f"{provider}@{worker}"
