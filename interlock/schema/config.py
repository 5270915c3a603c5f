"""The source configuration: what operators write in YAML.

These models check shape and types only (unknown keys, wrong types, bad durations). Everything that
needs more than one value at a time (references, cycles, limits against each other) is a compiler pass.
Defaults that a user may leave out live here, so the JSON Schema documents them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from interlock.common.kinds import PROVIDER_KINDS as PROVIDER_KINDS
from interlock.schema.durations import Duration
from interlock.schema.plan import DEFAULT_MAX_STREAM_LINE_BYTES, DEFAULT_MAX_UPSTREAM_BODY_BYTES, SURFACES
from interlock.schema.plan import RETRY_DEFAULTS as RETRY_DEFAULTS  # the plan's (the runtime reads it)

Capability = Literal["completion", "tools", "vision", "thinking", "embedding", "insert"]
CAPABILITIES: tuple[str, ...] = ("completion", "tools", "vision", "thinking", "embedding", "insert")


NonEmpty = Annotated[str, StringConstraints(min_length=1)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CorsSection(_Section):
    """Opt-in CORS, for browser apps that call the gateway directly."""

    allow_origins: list[str] = Field(
        description="Origins allowed to call, each `scheme://host[:port]` (e.g. `https://app.example.com`), "
        'or `["*"]` for any origin.'
    )
    allow_credentials: bool = Field(
        False, description="Let browsers send cookies or HTTP auth; never together with the origin `*`."
    )
    allow_headers: list[str] = Field(
        default_factory=lambda: ["*"],
        description="Request headers a browser may send; `*`: whichever headers its preflight asks for.",
    )
    max_age: Duration = Field(600_000, description="How long a browser may cache a preflight answer.")


class ServerSection(_Section):
    """How the runtime answers callers."""

    default_alias: str | None = Field(None, description="Alias used when a request has no `model`.")
    alias_namespace: str | None = Field(
        None, description="Prefix such as `mana/`; every model name under it must be a declared alias."
    )
    direct_models: Literal["allow", "deny"] = Field(
        "allow", description="Whether callers may send raw `provider/model` strings."
    )
    resolved_header: NonEmpty = Field(
        "X-Interlock-Resolved", description="Response header naming the candidate that answered."
    )
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1, description="Largest accepted request body.")
    cors: CorsSection | None = Field(None, description="CORS for browser apps; off when absent.")
    header_timeout: Duration = Field(
        10_000,
        ge=1,
        description="Longest a client may take to send a request's headers, counted from connecting "
        "or from the end of the previous answer; the connection is closed after it.",
    )
    body_timeout: Duration = Field(
        30_000,
        ge=1,
        description="Longest pause while a request body is arriving; the connection is closed after it.",
    )
    stream_keepalive: Duration = Field(
        10_000,
        ge=1,
        description="A streamed answer whose first content has not come this long after its walk began "
        "is started anyway: its head is sent and then its format's keepalive, this often, until the first "
        "content (the fallback walk goes on unseen).",
    )
    max_connections: int | None = Field(
        None,
        ge=1,
        description="Open client connections per worker process; past it, the oldest idle one is closed "
        "(or the new one refused with 503 when none is idle). Unset: half the process's open-file limit "
        "(raised to its hard limit at start), less 256.",
    )
    max_upstream_body_bytes: int = Field(
        DEFAULT_MAX_UPSTREAM_BODY_BYTES,
        ge=1,
        description="Largest non-streamed answer read from an upstream.",
    )
    max_stream_line_bytes: int = Field(
        DEFAULT_MAX_STREAM_LINE_BYTES,
        ge=1,
        description="Longest single line (SSE or NDJSON) of an upstream stream.",
    )
    key_env_prefixes: list[str] = Field(
        default_factory=list,
        description="Prefixes (e.g. `CK_`) that mark a caller key's `key_env` as a secret, beside names "
        "ending in `_KEY`, `_TOKEN`, `_SECRET` or `_APIKEY`.",
    )
    surfaces: list[str] = Field(
        default_factory=lambda: [str(name) for name in SURFACES],
        description="The API surfaces the gateway serves, any of `openai` (Chat Completions, Embeddings), "
        "`anthropic` (Messages, count_tokens), `responses` (OpenAI's Responses) and `ollama` (Ollama's "
        "native API and its listing routes: `/api/tags`, `/api/show`, ...); absent: all four. A surface "
        "left out is not routed (404), and its modules are never imported.",
    )
    auth: Literal["off", "optional", "required"] = Field(
        "off",
        description="Caller API keys (`keys`): `off` reads none (anyone may call), `optional` checks a key "
        "when one is sent (a caller without one is anonymous, with no limits), `required` refuses a call "
        "without a valid key (401).",
    )


class HealthSection(_Section):
    """Active probes and circuit breakers."""

    probe_interval: Duration = Field(30_000, description="Time between two probes of a provider or worker.")
    probe_timeout: Duration = Field(3_000, description="A probe slower than this counts as failed.")
    failure_threshold: int = Field(2, description="Consecutive transient failures that open a circuit.")
    open_for: Duration = Field(60_000, description="How long an opened circuit skips its candidate.")
    rate_limit_open_for: Duration = Field(
        15_000, description="How long a 429 without Retry-After skips its candidate."
    )


class TimeoutsSection(_Section):
    """Upstream timeouts. `first_byte`, unless set here, is each provider's kind's: 12s for a hosted API
    at one `base_url` (`openai`, `anthropic`), 60s for servers of the operator's own (`ollama`, any
    provider with `workers`: a cold model load)."""

    connect: Duration = Field(2_000, description="TCP/TLS connect.")
    first_byte: Duration | None = Field(
        None,
        description="From sending the request to the answer's headers (a stream: its first chunk that says "
        "something); unset: each provider's kind's default (12s for a hosted API, 60s for workers).",
    )
    idle: Duration | None = Field(
        None,
        description="Longest silence inside a stream after its first content; unset: by provider kind.",
    )
    total: Duration = Field(600_000, description="The whole upstream exchange, stream included.")


class ProviderTimeouts(_Section):
    """Per-provider overrides of `timeouts`; unset keys keep the defaults."""

    connect: Duration | None = None
    first_byte: Duration | None = None
    idle: Duration | None = None
    total: Duration | None = None


class RetrySection(_Section):
    """Retries of one candidate before the walk moves on to the next: only before any byte reached the
    caller, and only for failures that are safe to repeat. Unset keys keep the defaults (for an alias:
    its providers' own)."""

    count: int | None = Field(
        None, ge=0, le=5, description="Retries after the first attempt (0: none). Default 1."
    )
    backoff: Duration | None = Field(
        None,
        description="The wait before the first retry, doubled for each later one, each 50-100 % of it "
        "(jitter). Default `500ms`.",
    )
    retry_after_max: Duration | None = Field(
        None,
        description="The longest `Retry-After` (or `retry-after-ms`) waited for before a retry of a 429 or "
        "503; a longer one moves on at once. Default `5s`.",
    )


class QueueSection(_Section):
    """The bounded wait when every slot for a model is busy."""

    max_waiting: int = Field(32, ge=0, description="Requests that may wait for a slot; one more gets 429.")
    max_wait: Duration = Field(30_000, description="Longest wait for a slot before answering 429.")


class TelemetrySection(_Section):
    """Where a worker's GPU and memory readings come from; all of it is read outside the request path."""

    gpu: int = Field(0, ge=0, description="The worker's GPU, by index as `nvidia-smi -i` counts them.")
    nvidia_smi: bool = Field(
        False, description="Run `nvidia-smi` (from PATH) on the gateway's host: for a worker on that host."
    )
    host_memory: bool = Field(
        False, description="Read the gateway host's memory (`/proc/meminfo`): for a worker on that host."
    )
    url: str | None = Field(
        None,
        description="A telemetry sidecar on the worker's host (`interlock telemetry-sidecar`); "
        "its values override local ones.",
    )


class WorkerSection(_Section):
    """One Ollama box, or one OpenAI-compatible server (llama.cpp, vLLM, ...). Keys set here override the
    values of its hardware `profile`."""

    name: NonEmpty = Field(description="Unique across all providers, e.g. `box1`.")
    url: str = Field(
        description="The Ollama server, e.g. `http://10.0.0.5:11434`; for `kind: openai`, the server's "
        "base URL, e.g. `http://10.0.0.6:8080/v1`."
    )
    profile: str | None = Field(None, description="A built-in preset name or a path to a profile file.")
    max_concurrent: int | None = Field(None, description="Requests this worker runs at once, all models.")
    model_concurrency: dict[str, int] | None = Field(
        None, description="Per-model slots: exact name, prefix ending in one `*`, or `*` alone."
    )
    default_context_tokens: int | None = None
    context_limits: dict[str, int] | None = None
    queue: QueueSection | None = None
    memory_gib: float | None = Field(
        None,
        gt=0,
        description="Memory models are loaded into (GiB): overrides the profile's `vram_gib` (or, with "
        "`unified_memory`, `system_memory_gib`); what placement packs models into.",
    )
    telemetry: TelemetrySection | None = Field(
        None, description="GPU and memory readings; none are taken unless declared here."
    )
    on_saturation: str | None = Field(
        None,
        description="`fallback` or `queue` for requests sent to this worker when its slots are full; "
        "wins over the alias's.",
    )
    server: str | None = Field(
        None,
        description="`kind: openai` only: the server it is (`llama.cpp`, `vllm` or `sglang`), so its own "
        "load (`/metrics`, llama.cpp's `/slots`) is read each probe round and weighs in worker choice.",
    )


class ProviderSection(_Section):
    """An upstream: Ollama workers, or a base URL (OpenAI-compatible, or Anthropic's Messages API)."""

    kind: str = Field(description="`anthropic`, `ollama` or `openai`.")
    base_url: str | None = Field(None, description="Required for `kind: openai` and `kind: anthropic`.")
    api_key_env: str | None = Field(None, description="Name of the variable holding the credential.")
    api_key_hosts: list[str] | None = Field(
        None,
        description="Hosts besides its vendor's that `api_key_env` may be sent to: a vendor's variable "
        "(`OPENAI_API_KEY`, `HF_TOKEN`, ...) goes only to that vendor's hosts otherwise; once set, every "
        "host the provider calls must be its vendor's or listed.",
    )
    probe: bool = Field(True, description="`false` turns the active probe off (paid tiers).")
    recovery_check: Literal["probe", "request", "off"] | None = Field(
        None,
        description="While a candidate's circuit is open, how it is checked so that recovery is seen "
        "within seconds: `probe` (its endpoint's probe; the default where `probe` is on), `request` (a "
        "1-token chat request to the model: a billed request on a cloud, a slot on a local server), "
        "`off` (the circuit's own half-open trials alone; the default where `probe` is off).",
    )
    responses: bool = Field(
        False,
        description="`kind: openai` only: the upstream also serves the OpenAI Responses API "
        "(`POST {base_url}/responses`); a Responses caller's request goes there as it came.",
    )
    timeouts: ProviderTimeouts | None = None
    retry: RetrySection | None = Field(
        None, description="Retries of its candidates (docs/runtime.md#retries)."
    )
    workers: list[WorkerSection] | None = Field(
        None,
        description="Required for `kind: ollama`; for `kind: openai`, instead of `base_url`: one per server, "
        "each with its own slots and queue.",
    )


class ModelFacts(_Section):
    """Facts about a model that no worker reports."""

    capabilities: list[Capability] | None = None
    context_tokens: int | None = Field(None, ge=1, description="The model's largest context window.")
    max_output_tokens: int | None = Field(
        None, ge=1, description="The most tokens it writes in one answer (an alias's output ceiling)."
    )
    size_gib: float | None = Field(
        None, gt=0, description="Weights in memory (GiB), for the compile-time VRAM fit check."
    )
    kv_bytes_per_token: int | None = Field(
        None, ge=1, description="KV-cache bytes per context token and slot, for the VRAM fit check."
    )


class PreflightSection(_Section):
    """What a request needs against what each candidate can do, checked before any call."""

    mode: str = Field(
        "enforce",
        description="`enforce` skips candidates that cannot serve a request; `observe` only reports; "
        "`off` checks nothing.",
    )
    metadata_ttl: Duration = Field(
        600_000, description="How long live Ollama model metadata (`/api/show`, `/api/tags`) is reused."
    )
    default_context_tokens: int | None = Field(
        None,
        description="Context of an Ollama model when neither the worker nor its metadata says; "
        "unset: unknown (never blocks, no `num_ctx` sent).",
    )
    max_context_tokens: int | None = Field(
        None, description="Gateway-wide cap on the context sent to Ollama and on a caller's `num_ctx`."
    )
    default_output_tokens: int = Field(
        1024, description="Output tokens assumed when a request sets no `max_tokens`."
    )
    image_reserve_tokens: int = Field(2048, description="Context tokens reserved per image part.")
    margin_percent: int = Field(15, description="Safety margin added to the estimate in percent, 0 to 100.")
    caller_num_ctx: Literal["allow", "deny"] = Field(
        "allow", description="Whether a caller may set `options.num_ctx` for Ollama candidates."
    )
    max_tokens: Literal["ceiling", "strict"] = Field(
        "ceiling",
        description="`ceiling`: a request's `max_tokens` (`max_output_tokens`, `num_predict`) is the most "
        "it may get: where its prompt fits and the output does not, the largest that fits is sent "
        "(said in `X-Interlock-Max-Tokens`); `strict`: the whole `max_tokens` must fit.",
    )


class AliasSection(_Section):
    """A class of model: an ordered fallback chain."""

    description: str = ""
    chain: list[str] = Field(description="Candidates in fallback order: `provider/model` or another alias.")
    requires: list[Capability] = Field(default_factory=list)
    on_saturation: str | None = Field(
        None, description="`fallback` or `queue`, overriding `routing.on_saturation` for this alias."
    )
    fallback_after: Duration | None = Field(
        None, description="Overrides `routing.fallback_after` for this alias."
    )
    retry: RetrySection | None = Field(
        None, description="Overrides its candidates' providers' `retry` keys for this alias."
    )
    resume: Literal["off", "same_model"] = Field(
        "off",
        description="`same_model`: a stream cut after its first content goes on from another candidate "
        "of the same model, the answer so far sent as an assistant prefill.",
    )


class RoutingWeights(_Section):
    """How much each fact about a worker counts when choosing among the workers that can serve a model."""

    loaded: float = Field(100.0, description="Bonus when the model is loaded there (`/api/ps`).")
    installed: float = Field(10.0, description="Bonus when the model is installed there (`/api/tags`).")
    free_slots: float = Field(5.0, description="Bonus per free slot for the model (and on the worker).")
    queue: float = Field(20.0, description="Penalty per request waiting in the worker's queue.")
    speed: float = Field(0.2, description="Bonus per learned output token/s of the model on the worker.")
    vram: float = Field(30.0, description="Penalty at full VRAM (scaled by the fraction in use).")
    gpu_util: float = Field(20.0, description="Penalty at 100% GPU utilisation (scaled).")
    avoid_load: float = Field(
        1000.0,
        description="Penalty for loading a model on a worker above `avoid_vram_percent` (a hard penalty).",
    )


class StickySection(_Section):
    """Sticky sessions (KV-cache affinity): repeat turns of a conversation go to the same worker."""

    enabled: bool = Field(False, description="Opt-in.")
    header: str = Field("X-Session-ID", description="Request header naming the session.")
    prefix_bytes: int = Field(
        1024,
        description="Without the header: the session is a hash of the first N bytes of the messages up to "
        "the first user message (the same for every later turn).",
    )
    max_sessions: int = Field(10_000, description="Sessions remembered per process (least recently used go).")
    idle_ttl: Duration = Field(1_800_000, description="A session unused this long is forgotten.")


class PrefixSection(_Section):
    """Prefix affinity: a request goes where its prompt's prefix is cached, valued in prefill seconds at
    the server's learned prompt speed, against the wait there and what its arrival would evict.
    `routing.prefix: on` / `off` is short for `{enabled: ...}`."""

    enabled: bool = Field(True, description="On by default; `off` scores workers on their load alone.")
    miss: float = Field(
        1.0, ge=0, description="Weight of the prefill seconds of the prompt's part not cached on a worker."
    )
    evict: float = Field(
        0.5,
        ge=0,
        description="Weight of the prefill seconds a held prompt (another session's later turns) loses "
        "when this request takes its place in a full cache.",
    )
    spare_prompts: int = Field(
        0,
        ge=0,
        description="Prompts a server keeps beyond one per slot (llama-server's `--cache-ram` keeps "
        "evicted slots' prompts in memory); 0: a slot's cache is replaced by the next prompt it serves.",
    )
    idle_ttl: Duration = Field(
        600_000, description="A held prompt served longer ago than this costs nothing to evict."
    )

    @model_validator(mode="before")
    @classmethod
    def _switch(cls, data: Any) -> Any:
        """`on`/`off` (or true/false) alone: the default weights, enabled or not."""
        if isinstance(data, bool):
            return {"enabled": data}
        if data in ("on", "off"):
            return {"enabled": data == "on"}
        return data


class PlacementSection(_Section):
    """Which models stay loaded where (compiled from workers' memory and models' sizes), and warm-up."""

    warm: bool = Field(
        False,
        description="Opt-in: load each placed model on its worker at start and after the worker restarts "
        "(outside the request path), and keep it loaded (`keep_alive`).",
    )
    keep_alive: str = Field(
        "forever",
        description="`forever`, or a duration (`30m`, `24h`): the `keep_alive` a warm-up load and every "
        "request to a placed model on its home worker send.",
    )


class RoutingSection(_Section):
    """Which worker serves a request, and what happens when its slots are full."""

    weights: RoutingWeights = Field(default_factory=RoutingWeights)
    avoid_vram_percent: float = Field(
        90.0, description="A worker above this VRAM use is not asked to load a model while another can serve."
    )
    speed_smoothing: float = Field(
        0.3, description="Weight of the newest sample in the learned tokens/s average (0 < x <= 1)."
    )
    on_saturation: str = Field(
        "fallback",
        description="When every slot is full: `fallback` skips to the next candidate at once (where the "
        "alias has one); `queue` waits in the worker's bounded queue.",
    )
    fallback_after: Duration | None = Field(
        None,
        description="Under `on_saturation: queue`: queue, but skip to the next candidate when the expected "
        "wait (requests ahead x learned service time / slots) exceeds this.",
    )
    state_file: str | None = Field(
        None, description="Where learned speeds are kept across restarts (`serve --state-dir` overrides)."
    )
    sticky: StickySection = Field(default_factory=StickySection)
    prefix: PrefixSection = Field(default_factory=PrefixSection)
    placement: PlacementSection = Field(default_factory=PlacementSection)


class Limits(_Section):
    """What a tenant or a key may use and how much; unset or `0` means no limit at this level."""

    allowed: list[str] | None = Field(
        None,
        description="Aliases and `provider/model` names this caller may call: exact, `prefix*` or `*` "
        "(the concurrency pattern rules); unset: everything the level above allows.",
    )
    denied: list[str] = Field(
        default_factory=list, description="Names refused even when `allowed` matches them (deny wins)."
    )
    requests_per_minute: int = Field(0, ge=0, description="Requests in any 60 s window; `0`: no limit.")
    tokens_per_minute: int = Field(
        0, ge=0, description="Tokens (prompt + completion, from the answers' usage) per 60 s; `0`: no limit."
    )
    max_concurrent: int = Field(0, ge=0, description="Requests in flight at once; `0`: no limit.")
    credits: float = Field(
        0, ge=0, description="A budget in `credits_unit` (tokens or money); `0`: unlimited (shown as ∞)."
    )
    credits_unit: Literal["tokens", "money"] = Field(
        "tokens", description="`tokens`, or `money` priced with `pricing` (in its `currency`)."
    )


Priority = Literal["interactive", "batch"]


class TenantSection(Limits):
    """A team or customer: the limits and model ACL every one of its keys shares."""

    description: str = ""
    weight: float = Field(
        1.0,
        description="Its share of a full model's slots against the other tenants waiting there (weighted "
        "fair queuing): 2 is twice a weight-1 tenant's share; from 0.01 to 1000.",
    )
    priority: Priority = Field(
        "interactive",
        description="`interactive` (the default) or `batch`: a batch request takes a slot only when no "
        "interactive one waits for it.",
    )


class KeySection(Limits):
    """One caller API key. Its secret is never written here: `key_env` names the variable that holds it,
    or `hash` is what `interlock keys add` printed. A key's own limits apply on top of its tenant's."""

    tenant: NonEmpty = Field(description="The tenant this key belongs to (a name under `tenants`).")
    key_env: str | None = Field(None, description="Name of the variable that holds the key's secret.")
    hash: str | None = Field(
        None, description="`hmac-sha256$<salt>$<digest>` as printed by `interlock keys add`."
    )
    operator: bool = Field(
        False,
        description="May read the whole fleet's state (`/ui`, `/v1/health`, `/v1/metadata`, `/api/ps`); "
        "once one key is an operator, every other key gets 403 there.",
    )
    description: str = ""
    priority: Priority | None = Field(
        None, description="`interactive` or `batch` for this key's requests; unset: its tenant's."
    )
    priority_header: bool = Field(
        False,
        description="May choose per request with `X-Interlock-Priority: interactive|batch` (otherwise the "
        "header is ignored).",
    )


class PriceSection(_Section):
    """A model's price per million tokens, in `pricing.currency`."""

    input: float = Field(ge=0, description="Per million prompt tokens.")
    output: float = Field(ge=0, description="Per million completion tokens.")


class PricingSection(_Section):
    """Prices for credits kept in money."""

    currency: NonEmpty = Field("USD", description="The unit prices are in (shown, never converted).")
    models: dict[str, PriceSection] = Field(
        default_factory=dict,
        description="By `provider/model`: exact, `prefix*` or `*` (the most specific pattern wins).",
    )


class LintSection(_Section):
    """Settings of `interlock lint`."""

    scan_allow: list[str] = Field(
        default_factory=list, description="Globs where hard-coded models may stand."
    )


class SourceFile(_Section):
    """One YAML source file. Every file has this shape; `include` merges files."""

    version: Literal[1] | None = None
    include: list[str] = Field(default_factory=list)
    server: ServerSection | None = None
    providers: dict[str, ProviderSection] | None = None
    models: dict[str, ModelFacts] | None = None
    aliases: dict[str, AliasSection] | None = None
    health: HealthSection | None = None
    timeouts: TimeoutsSection | None = None
    preflight: PreflightSection | None = None
    routing: RoutingSection | None = None
    lint: LintSection | None = None
    tenants: dict[str, TenantSection] | None = None
    keys: dict[str, KeySection] | None = None
    pricing: PricingSection | None = None


class HardwareFacts(_Section):
    """What a hardware profile says about the machine."""

    accelerator: Literal["nvidia", "apple", "amd", "none"]
    gpu: str | None = None
    vram_gib: float | None = Field(None, gt=0)
    unified_memory: bool = False
    system_memory_gib: float | None = Field(None, gt=0)


class ProfileWorkerDefaults(_Section):
    """Worker values a profile presets."""

    max_concurrent: int | None = None
    model_concurrency: dict[str, int] | None = None
    default_context_tokens: int | None = None
    context_limits: dict[str, int] | None = None
    queue: QueueSection | None = None


class ProfileFile(_Section):
    """A hardware preset (`profiles/*.yaml`)."""

    profile: NonEmpty
    description: str = ""
    hardware: HardwareFacts
    worker: ProfileWorkerDefaults
