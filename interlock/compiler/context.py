"""The typed state that compiler passes read and fill in, in pass order."""

from __future__ import annotations

import os
from collections.abc import KeysView, Mapping
from dataclasses import dataclass, field

from interlock.common.kinds import DEFAULT_IDLE_MS, KINDS, has_workers
from interlock.compiler.diagnostics import DiagnosticSink, Span
from interlock.compiler.loader import Entry, LoadLimits, Reader, Sources
from interlock.compiler.placed import Placed
from interlock.compiler.reading import read_file
from interlock.schema.config import (
    AliasSection,
    HealthSection,
    KeySection,
    LintSection,
    ModelFacts,
    PreflightSection,
    PricingSection,
    ProfileFile,
    ProviderSection,
    RoutingSection,
    ServerSection,
    TelemetrySection,
    TenantSection,
    TimeoutsSection,
)
from interlock.schema.plan import (
    SURFACES,
    PlanAccess,
    PlanContract,
    PlanCors,
    PlanPattern,
    RoutingPlan,
    SurfaceName,
)

WORKERS_FIRST_BYTE_MS = 60_000
"""A server of the operator's own (Ollama, or a provider's `workers`: llama.cpp, vLLM, ...): a cold
model load takes tens of seconds (IL404), and its prefill of a long prompt is stretched on top once
learned."""


def default_first_byte_ms(kind: str, workers: object) -> int:
    """`timeouts.first_byte` (ms) of a provider that sets none, nor `timeouts:`: its kind's for a hosted
    API at one `base_url`, ``WORKERS_FIRST_BYTE_MS`` for servers of the operator's own."""
    row = KINDS.get(kind)
    if row is None or has_workers(kind, workers):
        return WORKERS_FIRST_BYTE_MS
    return row.first_byte_ms


@dataclass(frozen=True)
class CompileOptions:
    """Knobs of one compile run."""

    require_env: bool = False
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    reader: Reader = read_file
    """Where files come from: the working tree (``FileReader``, with its size cap) or a git revision."""
    include_roots: tuple[str, ...] = ()
    """Folders includes and profile files may come from besides the main file's folder tree."""
    max_values: int = 0
    """Values (anchors expanded) all files together may hold; 0: the loader's ``MAX_VALUES``."""

    @property
    def limits(self) -> LoadLimits:
        return LoadLimits(self.include_roots, self.max_values)


@dataclass
class Provider:
    name: str
    section: ProviderSection
    entry: Entry
    worker_index: list[int] = field(default_factory=list)
    """Source index of each of ``section.workers`` (workers that failed shape checks are left out)."""

    def source_index(self, index: int) -> int:
        return self.worker_index[index] if index < len(self.worker_index) else index


@dataclass
class Alias:
    name: str
    section: AliasSection
    entry: Entry
    chain_index: list[int] = field(default_factory=list)
    """Source index of each of ``section.chain`` (entries that failed shape checks are left out)."""

    def source_index(self, index: int) -> int:
        return self.chain_index[index] if index < len(self.chain_index) else index


@dataclass
class Tenant:
    name: str
    section: TenantSection
    entry: Entry


@dataclass
class ApiKey:
    """A caller key as written (``keys.<id>``): never a secret, only ``key_env`` or ``hash``."""

    id: str
    section: KeySection
    entry: Entry


@dataclass
class Model:
    id: str
    provider: str
    model: str
    facts: ModelFacts
    entry: Entry


@dataclass
class Worker:
    """A worker with its profile applied: every value effective."""

    name: str
    provider: str
    url: str
    profile: ProfileFile | None
    max_concurrent: int
    patterns: list[PlanPattern]
    default_context_tokens: int | None
    context_limits: dict[str, int]
    max_waiting: int
    max_wait_ms: int
    entry: Entry
    telemetry: TelemetrySection | None = None
    on_saturation: str | None = None
    server: str | None = None  # an OpenAI-compatible worker's server (kinds.SERVER_KINDS), checked
    memory_gib: float | None = None
    """Declared on the worker (`memory_gib`); ``memory()`` falls back to the profile's."""

    def memory(self) -> float | None:
        """GiB models load into: declared, else the profile's VRAM (unified: its system memory)."""
        if self.memory_gib is not None:
            return self.memory_gib
        hardware = self.profile.hardware if self.profile else None
        if hardware is None:
            return None
        return hardware.system_memory_gib if hardware.unified_memory else hardware.vram_gib


@dataclass(frozen=True, slots=True)
class Hop:
    """One chain entry on the way to a candidate: entry ``index`` (in the source) of alias ``alias``."""

    alias: str
    index: int
    span: Span

    @property
    def path(self) -> str:
        return f"aliases.{self.alias}.chain[{self.index}]"


@dataclass(frozen=True, slots=True)
class Link:
    """One expanded candidate of an alias: the alias's own chain entry that led to it and, when that
    entry names another alias, that alias's link (one object per level; nesting copies nothing)."""

    candidate: str
    hop: Hop
    inner: Link | None = None

    @property
    def via(self) -> tuple[Hop, ...]:
        """Every chain entry that led to the candidate, outermost first."""
        hops: list[Hop] = []
        link: Link | None = self
        while link is not None:
            hops.append(link.hop)
            link = link.inner
        return tuple(hops)


class BrokenPaths:
    """Dotted key paths that failed shape checks, kept so that "is this or anything above/below it
    broken?" costs a few set lookups rather than a scan of every broken path (a config with thousands
    of errors would otherwise make each later check linear in them)."""

    def __init__(self) -> None:
        self._paths: set[str] = set()
        self._above: set[str] = set()  # every proper ancestor of a broken path

    def add(self, path: str) -> None:
        self._paths.add(path)
        self._above.update(_ancestors(path))

    def at_or_above(self, path: str) -> bool:
        """Whether ``path`` or an ancestor of it is broken."""
        if not self._paths:
            return False  # a clean configuration: the common case
        return path in self._paths or any(a in self._paths for a in _ancestors(path))

    def at_or_below(self, path: str) -> bool:
        """Whether ``path``, an ancestor or a descendant of it is broken."""
        return path in self._above or self.at_or_above(path)


def _ancestors(path: str) -> list[str]:
    """``aliases.a.chain[2]`` -> ``aliases``, ``aliases.a``, ``aliases.a.chain``."""
    return [path[:i] for i, char in enumerate(path) if char in ".[" and i > 0]


@dataclass
class CompileContext:
    """Everything a pass may read or write. Passes run in the order of ``passes.PASSES``."""

    sources: Sources
    sink: DiagnosticSink
    options: CompileOptions
    # filled by `shape`
    server: ServerSection = field(default_factory=ServerSection)
    health: HealthSection = field(default_factory=HealthSection)
    timeouts: TimeoutsSection = field(default_factory=TimeoutsSection)
    preflight: PreflightSection = field(default_factory=PreflightSection)
    routing: RoutingSection = field(default_factory=RoutingSection)
    lint: LintSection = field(default_factory=LintSection)
    pricing: PricingSection | None = None
    tenants: dict[str, Tenant] = field(default_factory=dict)
    keys: dict[str, ApiKey] = field(default_factory=dict)
    providers: dict[str, Provider] = field(default_factory=dict)
    aliases: dict[str, Alias] = field(default_factory=dict)
    models: dict[str, Model] = field(default_factory=dict)
    broken: BrokenPaths = field(default_factory=BrokenPaths)
    """Dotted paths (`providers.x`, `health.probe_timeout`, `aliases.y.chain[2]`) that failed shape checks
    and were pruned: later passes stay quiet about them instead of reporting a second, derived error."""
    # filled by `workers`
    workers: dict[str, Worker] = field(default_factory=dict)
    # filled by `cors`
    cors: PlanCors | None = None
    # filled by `surfaces`
    surfaces: list[SurfaceName] = field(default_factory=lambda: list(SURFACES))
    # filled by `aliases`
    expanded: dict[str, list[Link]] = field(default_factory=dict)
    # filled by `contract`
    contracts: dict[str, PlanContract] = field(default_factory=dict)
    # filled by `access`
    access: PlanAccess = field(default_factory=PlanAccess)
    # filled by `placement`
    placement: Placed | None = None
    # filled by `emit`
    plan: RoutingPlan | None = None

    def span_of(self, entry: Entry, *rest: str | int) -> Span:
        return entry.doc.span((*entry.path, *rest))

    def key_span_of(self, entry: Entry, *rest: str | int) -> Span:
        return entry.doc.key_span((*entry.path, *rest))

    def provider_of(self, candidate: str) -> str:
        return candidate.split("/", 1)[0]

    def is_broken(self, path: str) -> bool:
        """Whether ``path`` or anything above it failed shape checks."""
        return self.broken.at_or_above(path)

    def broken_under(self, path: str) -> bool:
        """Whether ``path``, anything above it or anything inside it failed shape checks."""
        return self.broken.at_or_below(path)

    def timeouts_of(self, provider: str) -> dict[str, int]:
        """``connect``/``first_byte``/``idle``/``total`` (ms) of ``provider``: its own where set, else
        `timeouts`, else its kind's default (``first_byte``: ``default_first_byte_ms``; ``idle``)."""
        section = self.providers[provider].section
        own = section.timeouts
        values: dict[str, int] = {}
        for key in TimeoutsSection.model_fields:
            value = None if own is None else getattr(own, key)
            if value is None:
                value = getattr(self.timeouts, key)
            if value is None and key == "first_byte":  # said nowhere: its kind's
                value = default_first_byte_ms(section.kind, section.workers)
            if value is None:  # `idle`, unset in both: the kind's
                kind = KINDS.get(section.kind)
                value = kind.idle_ms if kind is not None else DEFAULT_IDLE_MS
            values[key] = value
        return values

    def declared_providers(self) -> KeysView[str]:
        """Every provider name written in the sources, including ones that failed shape checks."""
        return self.sources.named["providers"].keys()
