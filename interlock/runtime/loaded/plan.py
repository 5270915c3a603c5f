"""Load a frozen routing plan and turn it into the runtime's lookup tables.

Everything the request path needs is computed here, once: each alias is a ready ``Target``, its
resolved ``Candidate`` objects in order, which hold their provider's endpoints (credentials included)
and their slot limit on every worker; response headers and metric labels are built here too. Per request
the runtime only does dictionary lookups. Loading refuses an unknown plan version, a plan that does not
match ``plan.schema.json``, a plan whose content hash does not match its content, and a plan naming a
credential variable that is not set (the message names the variable, never a value). Every response
header name and value the runtime will send (the resolved header, alias and candidate names) is checked
here too: a plan that would write a broken answer is refused at load, never discovered per request.

    PlanError                 the plan cannot be served (message names the file and what is wrong)
    └── CredentialMissing     a credential variable named by the plan is not set
                              (both in base/errors.py, so that what loads a plan's parts may raise them)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from interlock.common.gc_pause import collector_paused
from interlock.common.headers import header_name_problem, header_value_problem
from interlock.common.kinds import KINDS, has_workers
from interlock.common.patterns import ollama_name, untagged
from interlock.runtime.base.asgi import json_object
from interlock.runtime.base.errors import CredentialMissing as CredentialMissing
from interlock.runtime.base.errors import PlanError as PlanError
from interlock.runtime.base.server_settings import ServerSettings
from interlock.runtime.loaded.credentials import credential_problems
from interlock.runtime.loaded.tables import (
    Alias,
    Candidate,
    Check,
    HealthSettings,
    PlacedModel,
    PlacementSettings,
    PrefixSettings,
    PreflightSettings,
    Provider,
    RedactedHeaders,
    RetryPolicy,
    Route,
    RoutingSettings,
    RoutingWeights,
    StickySettings,
    WorkerLimits,
    worker_label,
)
from interlock.runtime.net.fds import max_connections
from interlock.runtime.wire.base import Endpoint
from interlock.schema.canonical import content_hash, has_content_hash
from interlock.schema.plan import PLAN_FORMAT_VERSION, RETRY_DEFAULTS, PlanProvider, PlanRetry, RoutingPlan

if TYPE_CHECKING:  # a plan's caller keys and CORS rules: imported by the plans that have them
    from interlock.runtime.loaded.access import KeyBook
    from interlock.runtime.loaded.cors import CorsPolicy

DEFAULT_RETRY = RetryPolicy(
    RETRY_DEFAULTS["count"], RETRY_DEFAULTS["backoff"] / 1000, RETRY_DEFAULTS["retry_after_max"] / 1000
)  # a plan's provider without `retry` (one compiled before it existed)


@dataclass(frozen=True, slots=True)
class RuntimePlan:
    """The frozen tables built from one plan; swapped as a whole on reload."""

    source: RoutingPlan
    content_hash: str
    server: ServerSettings
    health: HealthSettings
    preflight: PreflightSettings
    routing: RoutingSettings
    providers: Mapping[str, Provider]
    workers: Mapping[str, WorkerLimits]
    candidates: Mapping[str, Candidate]
    aliases: Mapping[str, Alias]
    plan_header: tuple[bytes, bytes]
    secrets: tuple[str, ...]  # credential values, only to scrub them from text we pass on
    cors: CorsPolicy | None = None  # None: CORS off, browsers get no CORS headers
    keys: KeyBook | None = None  # None: `server.auth: off`, no caller key is read
    placement: PlacementSettings = field(default_factory=PlacementSettings)

    def listed_candidate(self, provider: Provider, model: str) -> Candidate | None:
        """The plan's candidate for a raw ``provider/model``, or None; on Ollama `m` and `m:latest` are
        one model, so either spelling finds the one the plan lists (and its slots)."""
        found = self.candidates.get(f"{provider.name}/{model}")
        if found is None and provider.kind == "ollama":
            bare = f"{provider.name}/{untagged(model)}"
            found = self.candidates.get(bare) or self.candidates.get(bare + ":latest")
        return found

    def direct_candidate(self, provider: Provider, model: str) -> Candidate:
        """A raw ``provider/model`` the plan does not list: built on demand (patterns for slots)."""
        return _candidate(
            f"{provider.name}/{model}",
            provider,
            model,
            self.workers,
            None,
            None,
            self.server,
            self.preflight,
            in_plan=False,
        )


def read_plan_file(path: str | Path) -> dict[str, Any]:
    """The plan file's JSON object; ``PlanError`` when unreadable or not a JSON object."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise PlanError(f"{path}: cannot read the plan: {exc.strerror or exc}") from exc
    with collector_paused():  # a big plan is hundreds of thousands of objects, all kept
        return json_object(raw, PlanError, f"{path}: the plan")


def load_plan(data: Mapping[str, Any], env: Mapping[str, str], *, origin: str = "plan") -> RuntimePlan:
    """Validate ``data`` (version, schema, content hash, references, credentials) and build the tables.

    ``env`` is the credential snapshot taken once at start; ``origin`` names the file in messages.
    The cyclic garbage collector is paused meanwhile (``collector_paused``).
    """
    with collector_paused():
        return _load(data, env, origin)


def _load(data: Mapping[str, Any], env: Mapping[str, str], origin: str) -> RuntimePlan:
    version = data.get("format_version")
    if version != PLAN_FORMAT_VERSION:
        raise PlanError(
            f"{origin}: plan format_version {version!r} is not supported (this interlock reads version "
            f"{PLAN_FORMAT_VERSION}); recompile it with this version of `interlock compile`"
        )
    plan = _validated(data, origin)
    if not has_content_hash(data, data["content_hash"]):
        expected = content_hash(dict(data))
        raise PlanError(
            f"{origin}: content_hash {data['content_hash']} does not match the plan's content "
            f"({expected}); the plan was edited after compiling: recompile it"
        )
    _check_references(plan, origin)
    return build_tables(plan, env, origin=origin)


def build_tables(plan: RoutingPlan, env: Mapping[str, str], *, origin: str = "plan") -> RuntimePlan:
    """The lookup tables of an already validated plan; every table in name order, whatever the input's."""
    server = _server_settings(plan)
    _check_headers(plan, origin)
    _check_credentials(plan, origin)
    preflight = _preflight_settings(plan)
    secrets: list[str] = []  # filled as credentials are read: the providers' headers, then the keys
    workers = _worker_limits(plan)
    providers: dict[str, Provider] = {}
    for name, p in sorted(plan.providers.items()):
        headers = _auth_headers(p, env, origin, secrets)
        providers[name] = _provider(p, headers, {w: plan.workers[w].url for w in p.workers}, server)
    candidates: dict[str, Candidate] = {}
    for cid, c in sorted(plan.candidates.items()):
        caps = frozenset(c.capabilities) if c.capabilities is not None else None
        candidates[cid] = _candidate(
            cid,
            providers[c.provider],
            c.model,
            workers,
            caps,
            c.context_tokens,
            server,
            preflight,
            in_plan=True,
        )
    aliases = _aliases(plan, candidates)
    return RuntimePlan(
        source=plan,
        content_hash=plan.content_hash,
        server=server,
        preflight=preflight,
        routing=_routing_settings(plan),
        health=_health_settings(plan),
        providers=providers,
        workers=workers,
        candidates=candidates,
        aliases=aliases,
        plan_header=(b"x-interlock-plan", plan.content_hash.encode()),
        keys=_key_book(plan, env, origin, secrets, aliases),
        secrets=tuple(secrets),
        cors=_cors(plan),
        placement=_placement(plan),
    )


def _server_settings(plan: RoutingPlan) -> ServerSettings:
    s = plan.server
    return ServerSettings(
        default_alias=s.default_alias,
        alias_namespace=s.alias_namespace,
        direct_models=s.direct_models,
        resolved_header=s.resolved_header,
        max_body_bytes=s.max_body_bytes,
        header_timeout_s=s.header_timeout_ms / 1000,
        body_timeout_s=s.body_timeout_ms / 1000,
        max_connections=max_connections(s.max_connections),
        max_upstream_body_bytes=s.max_upstream_body_bytes,
        max_stream_line_bytes=s.max_stream_line_bytes,
        stream_keepalive_s=s.stream_keepalive_ms / 1000,
    )


def _preflight_settings(plan: RoutingPlan) -> PreflightSettings:
    pre = plan.preflight
    return PreflightSettings(
        mode=pre.mode,
        metadata_ttl_s=pre.metadata_ttl_ms / 1000,
        default_context_tokens=pre.default_context_tokens,
        max_context_tokens=pre.max_context_tokens,
        default_output_tokens=pre.default_output_tokens,
        image_reserve_tokens=pre.image_reserve_tokens,
        margin_percent=pre.margin_percent,
        caller_num_ctx=pre.caller_num_ctx,
        max_tokens_ceiling=pre.max_tokens == "ceiling",
    )


def _health_settings(plan: RoutingPlan) -> HealthSettings:
    h = plan.health
    return HealthSettings(
        probe_interval_s=h.probe_interval_ms / 1000,
        probe_timeout_s=h.probe_timeout_ms / 1000,
        failure_threshold=h.failure_threshold,
        open_for_s=h.open_for_ms / 1000,
        rate_limit_open_for_s=h.rate_limit_open_for_ms / 1000,
    )


def _worker_limits(plan: RoutingPlan) -> dict[str, WorkerLimits]:
    return {
        name: WorkerLimits(
            name=name,
            provider=w.provider,
            default_context_tokens=w.default_context_tokens,
            context_limits=dict(w.context_limits),
            max_concurrent=w.max_concurrent,
            slots=dict(w.slots),
            patterns=tuple(w.patterns),
            max_waiting=w.queue.max_waiting,
            max_wait_s=w.queue.max_wait_ms / 1000,
            server=w.server,
        )
        for name, w in sorted(plan.workers.items())
    }


def _aliases(plan: RoutingPlan, candidates: Mapping[str, Candidate]) -> dict[str, Alias]:
    return {
        name: Alias(
            label=name,
            metric_label=name,
            candidates=tuple(candidates[cid] for cid in a.candidates),
            header=(b"x-interlock-alias", name.encode()),
            spill=_spill(len(a.candidates), a.on_saturation, a.fallback_after_ms),
            retry=_alias_retry(a.retry, tuple(candidates[cid] for cid in a.candidates)),
            description=a.description,
            requires=tuple(a.requires),
            contract=a.contract,
            resume=a.resume == "same_model",
        )
        for name, a in sorted(plan.aliases.items())
    }


def _routing_settings(plan: RoutingPlan) -> RoutingSettings:
    r = plan.routing
    return RoutingSettings(
        weights=RoutingWeights(**r.weights.model_dump()),
        avoid_vram_percent=r.avoid_vram_percent,
        speed_smoothing=r.speed_smoothing,
        state_file=r.state_file,
        sticky=StickySettings(
            header=r.sticky.header.lower().encode(),
            prefix_bytes=r.sticky.prefix_bytes,
            max_sessions=r.sticky.max_sessions,
            idle_ttl_s=r.sticky.idle_ttl_ms / 1000,
        )
        if r.sticky.enabled
        else None,
        worker_saturation={n: w.on_saturation for n, w in plan.workers.items() if w.on_saturation},
        prefix=PrefixSettings(
            miss=r.prefix.miss,
            evict=r.prefix.evict,
            spare_prompts=r.prefix.spare_prompts,
            idle_s=r.prefix.idle_ttl_ms / 1000,
        )
        if r.prefix.enabled
        else None,
    )


def _placement(plan: RoutingPlan) -> PlacementSettings:
    section = plan.placement
    return PlacementSettings(
        warm=section.warm,
        keep_alive_s=section.keep_alive_s,
        budgets_gib={w: gib for w, gib in sorted(section.budgets_gib.items()) if gib is not None},
        models=tuple(
            PlacedModel(
                m.candidate,
                m.provider,
                m.model,
                ollama_name(m.model),
                m.position,
                m.aliases,
                dict(m.footprint_gib),
            )
            for m in section.models
        ),
        homes={w: tuple(models) for w, models in sorted(section.homes.items())},
    )


def _validated(data: Mapping[str, Any], origin: str) -> RoutingPlan:
    """The plan model of ``data``, or PlanError worded by ``plan.schema.json``.

    ``plan.schema.json`` is generated from ``RoutingPlan`` (``interlock schema``; a test keeps the
    committed file current), so pydantic's strict validation checks the same types, bounds, required
    and forbidden keys (strict: no coercion, a string is never read as a number or a boolean, as in
    JSON Schema) in about 1/100 of the time jsonschema takes: 0.1 s instead of 6-15 s on a 10,000-alias
    plan (bench/serve_start.py). The slower validator runs only on a plan that fails, to word the
    errors by JSON path (``invalid.py``, imported then).
    """
    try:
        return RoutingPlan.model_validate(data, strict=True)
    except ValidationError as exc:
        from interlock.runtime.loaded.invalid import refusal  # a plan that fails: worded, then refused

        raise refusal(data, exc, origin) from None


def _retry(section: PlanRetry, base: RetryPolicy = DEFAULT_RETRY) -> RetryPolicy:
    """``section``'s keys over ``base`` (a provider's over the defaults, an alias's over a provider's)."""
    return RetryPolicy(
        count=base.count if section.count is None else section.count,
        backoff_s=base.backoff_s if section.backoff_ms is None else section.backoff_ms / 1000,
        retry_after_max_s=base.retry_after_max_s
        if section.retry_after_max_ms is None
        else section.retry_after_max_ms / 1000,
    )


def _alias_retry(section: PlanRetry | None, candidates: tuple[Candidate, ...]) -> tuple[RetryPolicy, ...]:
    """Per candidate, the alias's ``retry`` keys over its provider's; empty when the alias sets none."""
    if section is None:
        return ()
    return tuple(_retry(section, candidate.retry) for candidate in candidates)


def _spill(count: int, on_saturation: str, fallback_after_ms: int | None) -> tuple[float | None, ...]:
    """``fallback``: every candidate but the last skips ahead at once when full; ``queue``: none does,
    unless ``fallback_after`` is set: then when the expected wait exceeds it."""
    if on_saturation == "fallback":
        after: float | None = 0.0
    else:
        after = fallback_after_ms / 1000 if fallback_after_ms is not None else None
    return tuple(after if i + 1 < count else None for i in range(count))


def _check_references(plan: RoutingPlan, origin: str) -> None:
    problems: list[str] = []
    for name, alias in plan.aliases.items():
        if not alias.candidates:
            problems.append(f"alias {name} has no candidates")
        problems.extend(
            f"alias {name} names unknown candidate {cid}"
            for cid in alias.candidates
            if cid not in plan.candidates
        )
    for cid, cand in plan.candidates.items():
        if cand.provider not in plan.providers:
            problems.append(f"candidate {cid} names unknown provider {cand.provider}")
    for name, provider in plan.providers.items():
        shape = KINDS[provider.kind].shape
        if shape == "base_url" and not provider.base_url and not has_workers(provider.kind, provider.workers):
            problems.append(f"provider {name} (kind {provider.kind}) has no base_url")
        if shape == "workers" and not provider.workers:
            problems.append(f"provider {name} (kind {provider.kind}) has no workers")
        problems.extend(
            f"provider {name} names unknown worker {w}" for w in provider.workers if w not in plan.workers
        )
    default = plan.server.default_alias
    if default is not None and default not in plan.aliases:
        problems.append(f"server.default_alias {default} is not an alias")
    if plan.access.keys:
        from interlock.runtime.loaded.access import key_problems  # a plan with keys only

        problems.extend(key_problems(plan))
    if problems:
        raise PlanError(f"{origin}: the plan is inconsistent: " + "; ".join(problems))


def _check_headers(plan: RoutingPlan, origin: str) -> None:
    """Every header name and value the runtime will send is checked here, once: a plan that would
    make the gateway write a broken answer is refused at load, never discovered per request."""
    problems: list[str] = []
    name = plan.server.resolved_header
    problem = header_name_problem(name)
    if problem == "is not a valid HTTP header name":
        problems.append(
            f"server.resolved_header {name!a} {problem} (letters, digits and !#$%&'*+-.^_`|~ only)"
        )
    elif problem is not None:
        problems.append(f"server.resolved_header {name[:100]!a} {problem}; choose another name")
    for kind, names in (("alias", plan.aliases), ("candidate", plan.candidates), ("worker", plan.workers)):
        for value in names:
            reason = header_value_problem(value)
            if reason is not None:
                shown = value if len(value) <= 100 else value[:99] + "…"
                problems.append(f"{kind} {shown!a} cannot be sent in a response header: {reason}")
    if problems:
        raise PlanError(f"{origin}: the plan would send broken response headers: " + "; ".join(problems))


def _check_credentials(plan: RoutingPlan, origin: str) -> None:
    """No variable that is not a credential is sent upstream or taken as a caller's secret, no vendor's
    key goes off its vendor's hosts (``credentials``: the compiler's checks again, for a plan written by
    hand)."""
    problems = credential_problems(plan)
    if problems:
        wrong = "; ".join(problems)
        raise PlanError(f"{origin}: the plan reads credentials from the wrong variables: {wrong}")


def _key_book(
    plan: RoutingPlan, env: Mapping[str, str], origin: str, secrets: list[str], aliases: Mapping[str, Alias]
) -> KeyBook | None:
    """The caller keys under ``auth: optional|required`` (``access.py``: imported by such a plan only)."""
    if plan.server.auth == "off":
        return None
    from interlock.runtime.loaded.access import key_book

    return key_book(plan, env, origin, secrets, aliases)


def _cors(plan: RoutingPlan) -> CorsPolicy | None:
    """The plan's CORS rules, None when it has none (``cors.py``: imported by a plan with CORS only)."""
    if not plan.server.cors:
        return None
    from interlock.runtime.loaded.cors import CorsPolicy

    return CorsPolicy(plan.server.cors, plan.server.resolved_header)


def _auth_headers(
    p: PlanProvider, env: Mapping[str, str], origin: str, secrets: list[str]
) -> RedactedHeaders:
    """Only this provider's own variable: a provider without one never gets another provider's key.
    The kind says how the key is sent (``Authorization: Bearer``, ``x-api-key``) and what goes with it."""
    kind = KINDS[p.kind]
    if p.api_key_env is None:
        return RedactedHeaders(kind.fixed_headers)
    value = env.get(p.api_key_env, "")
    if not value:
        raise CredentialMissing(
            f"{origin}: provider {p.name} needs the credential variable {p.api_key_env}, which is not set",
            variable=p.api_key_env,
        )
    if header_value_problem(value) is not None:
        raise PlanError(
            f"{origin}: provider {p.name}: the credential in {p.api_key_env} cannot be sent in an "
            f"{next(iter(kind.auth('-')))} header (control characters, or whitespace at either end)"
        )
    secrets.append(value)
    return RedactedHeaders({**kind.fixed_headers, **kind.auth(value)})


def _provider(
    p: PlanProvider, headers: Mapping[str, str], urls: Mapping[str, str], server: ServerSettings
) -> Provider:
    t = p.timeouts
    relays = frozenset({p.kind, *(("responses",) if p.responses else ())})
    check = p.recovery_check or ("probe" if p.probe else "off")
    timing: dict[str, Any] = {
        "connect_s": t.connect_ms / 1000,
        "first_byte_s": t.first_byte_ms / 1000,
        "total_s": t.total_ms / 1000,
        "idle_s": t.idle_ms / 1000,
        "max_body_bytes": server.max_upstream_body_bytes,
        "max_line_bytes": server.max_stream_line_bytes,
    }
    if not has_workers(p.kind, p.workers):
        assert p.base_url is not None  # checked in _check_references
        endpoint = Endpoint(
            provider=p.name, kind=p.kind, url=p.base_url.rstrip("/"), label=p.name, headers=headers, **timing
        )
        return Provider(
            name=p.name,
            kind=p.kind,
            probe=p.probe,
            endpoints=(endpoint,),
            workers=(None,),
            relays=relays,
            recovery_check=check,
            retry=_retry(p.retry),
        )
    return Provider(
        name=p.name,
        kind=p.kind,
        probe=p.probe,
        relays=relays,
        recovery_check=check,
        retry=_retry(p.retry),
        endpoints=tuple(
            Endpoint(
                provider=p.name,
                kind=p.kind,
                url=urls[w].rstrip("/"),
                label=worker_label(p.name, w),
                headers=headers,
                **timing,
            )
            for w in p.workers
        ),
        workers=tuple(p.workers),
    )


def _candidate(
    cid: str,
    provider: Provider,
    model: str,
    workers: Mapping[str, WorkerLimits],
    capabilities: frozenset[str] | None,
    context_tokens: int | None,
    server: ServerSettings,
    preflight: PreflightSettings,
    *,
    in_plan: bool,
) -> Candidate:
    routes = tuple(
        Route(
            endpoint=endpoint,
            worker=worker,
            slot_limit=workers[worker].slot_limit(model) if worker is not None else None,
            context_default=_context_default(workers, worker, context_tokens, preflight, provider.kind),
            context_cap=_context_cap(workers, worker, model, context_tokens, preflight, provider.kind),
            worker_header=(b"x-interlock-worker", worker.encode()) if worker is not None else None,
            live_facts=worker is not None and KINDS[provider.kind].live_facts,
        )
        for endpoint, worker in zip(provider.endpoints, provider.workers, strict=True)
    )
    return Candidate(
        id=cid,
        provider=provider.name,
        model=model,
        kind=provider.kind,
        routes=routes,
        capabilities=capabilities,
        context_tokens=context_tokens,
        facts_key=ollama_name(model) if provider.kind == "ollama" else model,
        in_plan=in_plan,
        metric_label=cid if in_plan else f"{provider.name}/*",
        resolved_header=(server.resolved_header.lower().encode(), cid.encode()),
        relays=provider.relays,
        says_overflow=KINDS[provider.kind].says_overflow,
        checks=checks_of(provider.kind, routes, preflight),
        live_facts=any(route.live_facts for route in routes),
        retry=provider.retry,
    )


def checks_of(kind: str, routes: tuple[Route, ...], preflight: PreflightSettings) -> Check:
    """The guards that can apply to a candidate (``tables.Check``): each one that can do anything for it.

    The preflight's, unless it is off (both guards would return at once); worker choice and slots only
    for a candidate served by workers (a ``base_url`` has one route, no worker, no slot limit: the
    guard would take it as it is); what an Ollama worker is sent only for an Ollama candidate.
    """
    checks = Check.EVERY
    if preflight.mode != "off":
        checks |= Check.PREFLIGHT
    if any(route.worker is not None for route in routes):
        checks |= Check.WORKERS
    if kind == "ollama":
        checks |= Check.OLLAMA
    return checks


def _context_default(
    workers: Mapping[str, WorkerLimits],
    worker: str | None,
    declared: int | None,
    preflight: PreflightSettings,
    kind: str,
) -> int | None:
    """Without live metadata: a cloud model's declared window; an Ollama worker's default, else the plan's;
    an OpenAI-compatible worker's declared window, else its own default (what its server was started with)."""
    if worker is None:
        return declared
    own = workers[worker].default_context_tokens
    if not KINDS[kind].live_facts:
        return declared if declared is not None else own
    return own if own is not None else preflight.default_context_tokens


def _context_cap(
    workers: Mapping[str, WorkerLimits],
    worker: str | None,
    model: str,
    declared: int | None,
    preflight: PreflightSettings,
    kind: str,
) -> int | None:
    """The most context an Ollama (worker, model) may get: worker limit, gateway cap, declared maximum
    (an OpenAI-compatible worker: its limit and the declared maximum; the gateway sets no num_ctx there)."""
    if worker is None:
        return declared
    limits = workers[worker].context_limits
    gateway_cap = preflight.max_context_tokens if KINDS[kind].live_facts else None
    caps = [limits.get(model), gateway_cap, declared]
    known = [cap for cap in caps if cap is not None]
    return min(known) if known else None
