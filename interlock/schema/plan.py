"""The routing plan: the compiler's output and the runtime's only input.

Everything here is precomputed: expanded chains, effective timeouts, per-model slot tables. The runtime
loads it, validates it and builds lookup tables once; it never derives routing facts per request.
Durations are whole milliseconds (`*_ms`). Credentials appear only as variable *names*.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from interlock.common.kinds import DEFAULT_IDLE_MS, KindName

PLAN_FORMAT_VERSION = 1
DEFAULT_MAX_UPSTREAM_BODY_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_STREAM_LINE_BYTES = 1024 * 1024
SurfaceName = Literal["openai", "anthropic", "responses", "ollama"]
SURFACES: tuple[SurfaceName, ...] = ("openai", "anthropic", "responses", "ollama")
"""The API surfaces a gateway can serve (``server.surfaces``), in their order in a plan: OpenAI's Chat
Completions and Embeddings, Anthropic's Messages (and ``count_tokens``), OpenAI's Responses, Ollama's
native API (its chat, generate and embeddings, and its listing routes: ``/api/tags``, ``/api/show``...)."""
RETRY_DEFAULTS = {"count": 1, "backoff": 500, "retry_after_max": 5_000}
"""A candidate's retries when neither its provider nor the alias says (docs/runtime.md#retries): one
retry, half a second's backoff (doubled for each later one, with jitter), a `Retry-After` up to 5 s
waited for. Measured: `bench/failover.py` (docs/benchmarks.md#the-failover-drill-benchfailoverpy)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Trimmed(_Frozen):
    """A section whose keys in ``UNSET`` are written only when not that value: keys added after plans were
    first written, so that plans without them keep their bytes and content hashes."""

    UNSET: ClassVar[Mapping[str, Any]] = {}

    @model_serializer(mode="wrap")
    def _drop_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        unset = self.UNSET
        return {key: value for key, value in data.items() if key not in unset or value != unset[key]}


class PlanCors(_Frozen):
    allow_origins: list[str] = Field(description='Normalized `scheme://host[:port]`, sorted; `["*"]`: any.')
    allow_credentials: bool
    allow_headers: list[str] = Field(description='Lowercase, sorted; `["*"]`: what a preflight asks for.')
    max_age_ms: int = Field(ge=0)


class PlanServer(_Trimmed):
    UNSET = {"key_env_prefixes": [], "surfaces": list(SURFACES)}

    default_alias: str | None
    alias_namespace: str | None
    direct_models: bool
    resolved_header: str
    max_body_bytes: int
    # Added after format_version 1 first shipped: the defaults keep older plan files loadable.
    cors: PlanCors | None = Field(None, description="CORS for browser apps; null: off.")
    header_timeout_ms: int = Field(10_000, ge=1)
    body_timeout_ms: int = Field(30_000, ge=1)
    stream_keepalive_ms: int = Field(10_000, ge=1)
    max_connections: int | None = Field(
        None, ge=1, description="Null: derived from the open-file limit when the plan loads."
    )
    max_upstream_body_bytes: int = Field(DEFAULT_MAX_UPSTREAM_BODY_BYTES, ge=1)
    max_stream_line_bytes: int = Field(DEFAULT_MAX_STREAM_LINE_BYTES, ge=1)
    auth: Literal["off", "optional", "required"] = Field(
        "off", description="Caller keys: `off` reads none, `optional` checks one when sent, `required`."
    )
    key_env_prefixes: list[str] = Field(
        default_factory=list,
        description="Declared prefixes of caller key variables (`server.key_env_prefixes`).",
    )
    surfaces: list[SurfaceName] = Field(
        default_factory=lambda: list(SURFACES),
        min_length=1,
        description="The API surfaces served (`server.surfaces`), in `SURFACES` order; absent: all four.",
    )


class PlanHealth(_Frozen):
    probe_interval_ms: int = Field(ge=1)
    probe_timeout_ms: int = Field(ge=1)
    failure_threshold: int = Field(ge=1)
    open_for_ms: int = Field(ge=1)
    rate_limit_open_for_ms: int = Field(ge=1)


class PlanPreflight(_Frozen):
    """Capability and context checks before a candidate is called (see docs/runtime.md)."""

    mode: Literal["enforce", "observe", "off"]
    metadata_ttl_ms: int = Field(ge=1)
    default_context_tokens: int | None = Field(description="Ollama context when nothing else is known.")
    max_context_tokens: int | None = Field(description="Gateway-wide cap on an Ollama context.")
    default_output_tokens: int = Field(ge=0)
    image_reserve_tokens: int = Field(ge=0)
    margin_percent: int = Field(ge=0, le=100)
    caller_num_ctx: bool = Field(description="Whether a caller's `options.num_ctx` is accepted.")
    max_tokens: Literal["ceiling", "strict"] = Field(
        "ceiling", description="`ceiling`: an output limit is lowered to fit; `strict`: it must fit."
    )


class PlanTimeouts(_Frozen):
    connect_ms: int = Field(ge=1)
    first_byte_ms: int = Field(ge=1)
    idle_ms: int = Field(  # a default: a plan written before it was read as the kinds' own default
        DEFAULT_IDLE_MS, ge=1, description="Longest silence inside a stream after its first content."
    )
    total_ms: int = Field(ge=1)


class PlanRetry(_Trimmed):
    """Retries of one candidate before the walk moves on (effective: the provider's keys over the
    defaults; an alias's `retry` holds only the keys it overrides)."""

    UNSET = {"count": None, "backoff_ms": None, "retry_after_max_ms": None}

    count: int | None = Field(None, ge=0, le=5)
    backoff_ms: int | None = Field(None, ge=0)
    retry_after_max_ms: int | None = Field(None, ge=0)


class PlanProvider(_Trimmed):
    UNSET = {"api_key_hosts": [], "recovery_check": None}

    name: str
    kind: KindName
    base_url: str | None = Field(
        description="The base URL (OpenAI-compatible or Anthropic); null for Ollama."
    )
    api_key_env: str | None = Field(description="Name of the credential variable, never its value.")
    api_key_hosts: list[str] = Field(
        default_factory=list,
        description="Hosts besides its vendor's that `api_key_env` may be sent to; set: the only others.",
    )
    probe: bool
    responses: bool = Field(
        False, description="The upstream also serves the OpenAI Responses API (a Responses caller's relay)."
    )
    recovery_check: Literal["probe", "request", "off"] | None = Field(
        None, description="How an open circuit is checked; null: `probe` where `probe` is on, else `off`."
    )
    timeouts: PlanTimeouts
    retry: PlanRetry = Field(
        default_factory=PlanRetry, description="Effective: every key set (the defaults where unsaid)."
    )
    workers: list[str] = Field(description="Names of this provider's workers, in declaration order.")


class PlanQueue(_Frozen):
    max_waiting: int = Field(ge=0)
    max_wait_ms: int = Field(ge=0)


class PlanMatch(_Frozen):
    """A name pattern: `name` (exact), `prefix*` (one trailing star) or `*` alone."""

    pattern: str
    match: Literal["exact", "prefix", "any"]
    prefix: str = Field(description="For `prefix`: the text before `*`; for `exact`: the name; else ``.")


class PlanPattern(PlanMatch):
    """One row of a worker's concurrency pattern table, in match order."""

    limit: int = Field(ge=1)


class PlanHardware(_Frozen):
    accelerator: str
    gpu: str | None
    vram_gib: float | None
    unified_memory: bool
    system_memory_gib: float | None


class PlanTelemetry(_Frozen):
    """Where the runtime reads a worker's GPU and memory (outside the request path)."""

    gpu: int = Field(ge=0)
    nvidia_smi: bool
    host_memory: bool
    url: str | None = Field(description="A telemetry sidecar's URL; its values override local ones.")


class PlanWorker(_Trimmed):
    UNSET = {"server": None}

    name: str
    provider: str
    url: str
    profile: str | None
    hardware: PlanHardware | None
    max_concurrent: int = Field(ge=1)
    slots: dict[str, int] = Field(description="Effective slot limit for every model the plan references.")
    patterns: list[PlanPattern] = Field(description="Ordered: exact > longest prefix > `*`.")
    default_context_tokens: int | None
    context_limits: dict[str, int]
    queue: PlanQueue
    telemetry: PlanTelemetry | None = Field(None, description="Null: no readings are taken.")
    on_saturation: Literal["fallback", "queue"] | None = Field(
        None, description="Wins over the alias's for requests sent to this worker; null: the alias's."
    )
    server: Literal["llama.cpp", "sglang", "vllm"] | None = Field(
        None, description="An OpenAI-compatible worker's server, whose load is read; absent: none read."
    )


class PlanCandidate(_Trimmed):
    """A concrete `provider/model` and what is known about it."""

    UNSET = {"max_output_tokens": None}

    id: str
    provider: str
    model: str
    capabilities: list[str] | None = Field(description="Known capabilities; null when unknown.")
    context_tokens: int | None
    max_output_tokens: int | None = Field(
        None, description="The most tokens it writes in one answer, as declared; null: not declared."
    )


Reasoning = Literal["none", "anthropic-signed", "reasoning_content", "encrypted", "unknown"]


class PlanReasoning(_Frozen):
    """What a candidate's answers carry of its reasoning, which the next turn of a session sends back."""

    candidate: str
    contract: Reasoning = Field(
        description="`none` (it does not think); `anthropic-signed` (thinking blocks with a signature "
        "only its issuer accepts); `reasoning_content` (plain text any model takes); `encrypted` "
        "(Responses reasoning items only its issuer can read); `unknown` (no capabilities declared)."
    )
    issuer: str | None = Field(
        None, description="For a signed or encrypted contract: the host whose signature or key it is."
    )


class PlanContract(_Frozen):
    """What an agent can count on through an alias whichever candidate answers (docs/clients.md)."""

    window_tokens: int | None = Field(
        description="The guaranteed window: the smallest effective window of the chain, per slot, as "
        "declared; null: no candidate's window is known before run time."
    )
    largest_window_tokens: int | None = Field(description="The largest declared window of the chain.")
    unknown_windows: list[str] = Field(
        default_factory=list, description="Candidates whose window is known only at run time (Ollama)."
    )
    output_tokens: int | None = Field(
        description="The output ceiling: the smallest declared `max_output_tokens` of the chain; null: "
        "none declared (the gateway lowers a limit that does not fit the window)."
    )
    prefill_ms: int = Field(
        ge=1,
        description="The first-byte allowance every candidate gives a prompt (its `first_byte`), before "
        "the prompt speed learned from answers stretches it: what a full-window prompt's prefill must fit.",
    )
    reasoning: list[PlanReasoning] = Field(description="Each candidate's reasoning contract, in chain order.")


class PlanAlias(_Trimmed):
    UNSET = {"retry": None, "contract": None, "resume": "off"}

    name: str
    description: str
    requires: list[str]
    candidates: list[str] = Field(description="Expanded chain: candidate ids in fallback order.")
    on_saturation: Literal["fallback", "queue"] = Field(
        "fallback", description="Effective: `routing.on_saturation` unless the alias overrides it."
    )
    fallback_after_ms: int | None = Field(
        None, ge=1, description="Effective: under `queue`, spill when the expected wait exceeds it."
    )
    retry: PlanRetry | None = Field(
        None, description="The `retry` keys it overrides for its candidates; written only when set."
    )
    contract: PlanContract | None = Field(
        None, description="The agent contract, compiled; absent in plans compiled before it existed."
    )
    resume: Literal["off", "same_model"] = Field(
        "off", description="A cut stream resumed on a replica of its model; written only when not off."
    )


class PlanRoutingWeights(_Frozen):
    loaded: float = 100.0
    installed: float = 10.0
    free_slots: float = 5.0
    queue: float = 20.0
    speed: float = 0.2
    vram: float = 30.0
    gpu_util: float = 20.0
    avoid_load: float = 1000.0


class PlanSticky(_Frozen):
    enabled: bool = False
    header: str = "X-Session-ID"
    prefix_bytes: int = Field(1024, ge=1)
    max_sessions: int = Field(10_000, ge=1)
    idle_ttl_ms: int = Field(1_800_000, ge=1)


class PlanPrefix(_Frozen):
    enabled: bool = True
    miss: float = Field(1.0, ge=0)
    evict: float = Field(0.5, ge=0)
    spare_prompts: int = Field(0, ge=0)
    idle_ttl_ms: int = Field(600_000, ge=1)


class PlanRouting(_Frozen):
    """Worker scoring weights and the saturation policy (see docs/runtime.md, "Choosing a worker")."""

    weights: PlanRoutingWeights = Field(default_factory=PlanRoutingWeights)
    avoid_vram_percent: float = 90.0
    speed_smoothing: float = 0.3
    on_saturation: Literal["fallback", "queue"] = "fallback"
    state_file: str | None = Field(None, description="Learned speeds are kept here; null: not kept.")
    sticky: PlanSticky = Field(default_factory=PlanSticky)
    prefix: PlanPrefix = Field(default_factory=PlanPrefix)


class PlanPlacedModel(_Frozen):
    """One model of a placed provider, in rank order, with what it takes on each worker."""

    candidate: str
    provider: str
    model: str
    position: int = Field(ge=0, description="Earliest 0-based index in any alias's expanded chain.")
    aliases: int = Field(ge=1, description="How many aliases use it.")
    footprint_gib: dict[str, float] = Field(
        description="Worker -> weights + KV cache at full slots; empty when its size is not declared."
    )


class PlanPlacement(_Frozen):
    """Which models stay loaded where (see docs/runtime.md, "Placement and warm-up")."""

    warm: bool = Field(False, description="Load placed models at start and after a worker restarts.")
    keep_alive_s: int = Field(
        -1, description="Ollama's `keep_alive` (seconds) for a warm-up load and a home's requests; -1: never."
    )
    budgets_gib: dict[str, float | None] = Field(
        default_factory=dict, description="Worker -> memory placement may fill; null: unknown."
    )
    models: list[PlanPlacedModel] = Field(default_factory=list, description="Most wanted first.")
    homes: dict[str, list[str]] = Field(
        default_factory=dict, description="Worker -> candidate ids that stay loaded there, in rank order."
    )
    homeless: list[str] = Field(default_factory=list, description="Sized candidates with no home.")


class PlanLimits(_Frozen):
    """A tenant's or a key's ACL and budgets; `0` is no limit at this level."""

    allowed: list[PlanMatch] | None = Field(description="Null: whatever the level above allows.")
    denied: list[PlanMatch] = Field(description="Refused even where `allowed` matches (deny wins).")
    requests_per_minute: int = Field(0, ge=0)
    tokens_per_minute: int = Field(0, ge=0)
    max_concurrent: int = Field(0, ge=0)
    credits: float = Field(0, ge=0, description="A budget in `credits_unit`; 0: unlimited.")
    credits_unit: Literal["tokens", "money"] = "tokens"


class PlanTenant(_Frozen):
    name: str
    description: str
    limits: PlanLimits
    weight: float = Field(1.0, gt=0, description="Its share of a full model's slots (fair queuing).")
    priority: Literal["interactive", "batch"] = "interactive"


class PlanKey(_Frozen):
    """A caller key: its id (safe to log), its tenant, and how to recognise its secret (never the secret)."""

    id: str
    tenant: str
    description: str
    key_env: str | None = Field(description="Name of the variable holding the secret, never its value.")
    hash: str | None = Field(description="`hmac-sha256$<salt>$<digest>`; null with `key_env`.")
    operator: bool = Field(
        False, description="May read the fleet's state (the operator routes); see docs/access.md."
    )
    limits: PlanLimits
    priority: Literal["interactive", "batch"] | None = Field(None, description="Null: its tenant's.")
    priority_header: bool = Field(False, description="May choose per request (`X-Interlock-Priority`).")


class PlanPrice(_Frozen):
    input: float = Field(ge=0, description="Per million prompt tokens.")
    output: float = Field(ge=0, description="Per million completion tokens.")


class PlanAccess(_Frozen):
    """Who may call (tenants and keys) and what tokens cost (see docs/access.md)."""

    tenants: dict[str, PlanTenant] = Field(default_factory=dict)
    keys: dict[str, PlanKey] = Field(default_factory=dict)
    currency: str = "USD"
    prices: dict[str, PlanPrice] = Field(
        default_factory=dict, description="Per candidate id, the `pricing` pattern that matched it applied."
    )


class RoutingPlan(_Frozen):
    """A frozen routing plan (canonical JSON on disk)."""

    format_version: Literal[1]
    content_hash: str = Field(pattern=r"^sha256:[0-9a-f]{64}$")
    server: PlanServer
    health: PlanHealth
    preflight: PlanPreflight
    routing: PlanRouting = Field(default_factory=PlanRouting)
    providers: dict[str, PlanProvider]
    workers: dict[str, PlanWorker]
    candidates: dict[str, PlanCandidate]
    aliases: dict[str, PlanAlias]
    access: PlanAccess = Field(default_factory=PlanAccess)
    placement: PlanPlacement = Field(default_factory=PlanPlacement)
