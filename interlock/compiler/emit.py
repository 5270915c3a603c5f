"""Checked context -> frozen routing plan (canonical JSON with a content hash)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlock.common.patterns import slot_limit
from interlock.common.vendors import listed_host
from interlock.compiler.context import CompileContext, Worker
from interlock.compiler.homes import FOREVER
from interlock.schema.canonical import content_hash
from interlock.schema.config import RETRY_DEFAULTS, RetrySection, TelemetrySection
from interlock.schema.plan import PLAN_FORMAT_VERSION, SURFACES, PlanPlacement, RoutingPlan


def emit(ctx: CompileContext) -> RoutingPlan:
    """Build the plan from a context whose passes reported no errors."""
    candidates: dict[str, dict[str, Any]] = {}
    for links in ctx.expanded.values():
        for link in links:
            candidates.setdefault(link.candidate, _candidate(ctx, link.candidate))
    models_by_provider: dict[str, set[str]] = {}
    for candidate in candidates.values():
        models_by_provider.setdefault(candidate["provider"], set()).add(candidate["model"])
    workers_by_provider: dict[str, list[str]] = {}
    for worker in ctx.workers.values():  # in declaration order: providers, then each one's workers
        workers_by_provider.setdefault(worker.provider, []).append(worker.name)
    data: dict[str, Any] = {
        "format_version": PLAN_FORMAT_VERSION,
        "content_hash": "",
        "server": {
            "default_alias": ctx.server.default_alias,
            "alias_namespace": ctx.server.alias_namespace,
            "direct_models": ctx.server.direct_models == "allow",
            "resolved_header": ctx.server.resolved_header,
            "max_body_bytes": ctx.server.max_body_bytes,
            "header_timeout_ms": ctx.server.header_timeout,
            "body_timeout_ms": ctx.server.body_timeout,
            "stream_keepalive_ms": ctx.server.stream_keepalive,
            "max_connections": ctx.server.max_connections,
            "max_upstream_body_bytes": ctx.server.max_upstream_body_bytes,
            "max_stream_line_bytes": ctx.server.max_stream_line_bytes,
            "cors": ctx.cors.model_dump(mode="json") if ctx.cors is not None else None,
            "auth": ctx.server.auth,
            # written only when not all four: other plans keep their bytes and hashes
            **({"surfaces": ctx.surfaces} if ctx.surfaces != list(SURFACES) else {}),
        },
        "health": {
            "probe_interval_ms": ctx.health.probe_interval,
            "probe_timeout_ms": ctx.health.probe_timeout,
            "failure_threshold": ctx.health.failure_threshold,
            "open_for_ms": ctx.health.open_for,
            "rate_limit_open_for_ms": ctx.health.rate_limit_open_for,
        },
        "preflight": _preflight(ctx),
        "routing": _routing(ctx),
        "providers": {
            name: _provider(ctx, name, workers_by_provider.get(name, [])) for name in ctx.providers
        },
        "workers": {
            name: _worker(worker, models_by_provider.get(worker.provider, set()))
            for name, worker in ctx.workers.items()
        },
        "candidates": candidates,
        "aliases": {
            name: {
                "name": name,
                "description": alias.section.description,
                "requires": sorted(set(alias.section.requires)),
                "candidates": [link.candidate for link in ctx.expanded[name]],
                "on_saturation": alias.section.on_saturation or ctx.routing.on_saturation,
                "fallback_after_ms": alias.section.fallback_after or ctx.routing.fallback_after,
                **_contract(ctx, name),
                # written only when set: other plans keep their bytes and hashes
                **({"retry": _retry(alias.section.retry)} if alias.section.retry is not None else {}),
                **({"resume": alias.section.resume} if alias.section.resume != "off" else {}),
            }
            for name, alias in ctx.aliases.items()
        },
        "access": ctx.access.model_dump(mode="json"),
        "placement": _placement(ctx),
    }
    if ctx.server.key_env_prefixes:  # written only when set: other plans keep their bytes and hashes
        data["server"]["key_env_prefixes"] = list(ctx.server.key_env_prefixes)
    data["content_hash"] = content_hash(data)
    return RoutingPlan.model_validate(data)


def _contract(ctx: CompileContext, alias: str) -> dict[str, Any]:
    made = ctx.contracts.get(alias)  # the pass always runs before emit; a context built by hand may lack it
    return {"contract": made.model_dump(mode="json")} if made is not None else {}


def _placement(ctx: CompileContext) -> dict[str, Any]:
    placed = ctx.placement
    if placed is None:  # the pass always runs before emit; a context built by hand may lack it
        return PlanPlacement().model_dump(mode="json")
    return {
        "warm": placed.warm,
        "keep_alive_s": placed.keep_alive_s if placed.keep_alive_s is not None else FOREVER,
        "budgets_gib": dict(placed.budgets),
        "models": [
            {
                "candidate": r.candidate,
                "provider": r.provider,
                "model": r.model,
                "position": r.position,
                "aliases": r.aliases,
                "footprint_gib": {w: round(f.total, 3) for w, f in r.footprint.items()},
            }
            for r in placed.ranked
        ],
        "homes": {w: list(models) for w, models in placed.packing.homes.items()},
        "homeless": list(placed.packing.homeless),
    }


def _preflight(ctx: CompileContext) -> dict[str, Any]:
    section = ctx.preflight
    return {
        "mode": section.mode,
        "metadata_ttl_ms": section.metadata_ttl,
        "default_context_tokens": section.default_context_tokens,
        "max_context_tokens": section.max_context_tokens,
        "default_output_tokens": section.default_output_tokens,
        "image_reserve_tokens": section.image_reserve_tokens,
        "margin_percent": section.margin_percent,
        "caller_num_ctx": section.caller_num_ctx == "allow",
        "max_tokens": section.max_tokens,
    }


def _routing(ctx: CompileContext) -> dict[str, Any]:
    section = ctx.routing
    return {
        "weights": section.weights.model_dump(),
        "avoid_vram_percent": section.avoid_vram_percent,
        "speed_smoothing": section.speed_smoothing,
        "on_saturation": section.on_saturation,
        "state_file": section.state_file,
        "sticky": {
            "enabled": section.sticky.enabled,
            "header": section.sticky.header,
            "prefix_bytes": section.sticky.prefix_bytes,
            "max_sessions": section.sticky.max_sessions,
            "idle_ttl_ms": section.sticky.idle_ttl,
        },
        "prefix": {
            "enabled": section.prefix.enabled,
            "miss": section.prefix.miss,
            "evict": section.prefix.evict,
            "spare_prompts": section.prefix.spare_prompts,
            "idle_ttl_ms": section.prefix.idle_ttl,
        },
    }


def _candidate(ctx: CompileContext, candidate: str) -> dict[str, Any]:
    provider, _, model = candidate.partition("/")
    facts = ctx.models.get(candidate)
    capabilities = facts.facts.capabilities if facts else None
    return {
        "id": candidate,
        "provider": provider,
        "model": model,
        "capabilities": None if capabilities is None else sorted(set(capabilities)),
        "context_tokens": facts.facts.context_tokens if facts else None,
        **(
            {"max_output_tokens": facts.facts.max_output_tokens}
            if facts and facts.facts.max_output_tokens
            else {}
        ),
    }


def _provider(ctx: CompileContext, name: str, workers: list[str]) -> dict[str, Any]:
    section = ctx.providers[name].section
    timeouts = ctx.timeouts_of(name)
    out: dict[str, Any] = {
        "name": name,
        "kind": section.kind,
        "base_url": section.base_url.rstrip("/") if section.base_url else None,
        "api_key_env": section.api_key_env,
        "probe": section.probe,
        "responses": section.responses,
        "timeouts": {
            "connect_ms": timeouts["connect"],
            "first_byte_ms": timeouts["first_byte"],
            "idle_ms": timeouts["idle"],
            "total_ms": timeouts["total"],
        },
        "retry": _retry(section.retry, RETRY_DEFAULTS),
        "workers": workers,
    }
    if section.api_key_hosts:  # written only when set: other plans keep their bytes and hashes
        out["api_key_hosts"] = [listed_host(host) for host in section.api_key_hosts]
    if section.recovery_check is not None:  # the same
        out["recovery_check"] = section.recovery_check
    return out


def _retry(section: RetrySection | None, defaults: Mapping[str, int] | None = None) -> dict[str, int]:
    """A `retry` section as the plan holds it: its keys set (``defaults`` filling the rest, when given)."""
    keys = ("count", "backoff", "retry_after_max")
    given = {key: getattr(section, key) if section is not None else None for key in keys}
    if defaults is not None:
        given = {key: defaults[key] if value is None else value for key, value in given.items()}
    names = {"count": "count", "backoff": "backoff_ms", "retry_after_max": "retry_after_max_ms"}
    return {names[key]: value for key, value in given.items() if value is not None}


def _worker(worker: Worker, models: set[str]) -> dict[str, Any]:
    profile = worker.profile
    hardware = profile.hardware.model_dump() if profile else None
    return {
        "name": worker.name,
        "provider": worker.provider,
        "url": worker.url,
        "profile": profile.profile if profile else None,
        "hardware": hardware,
        "max_concurrent": worker.max_concurrent,
        "slots": {
            model: slot_limit(worker.patterns, worker.max_concurrent, model) for model in sorted(models)
        },
        "patterns": [row.model_dump() for row in worker.patterns],
        "default_context_tokens": worker.default_context_tokens,
        "context_limits": worker.context_limits,
        "queue": {"max_waiting": worker.max_waiting, "max_wait_ms": worker.max_wait_ms},
        "telemetry": _telemetry(worker.telemetry),
        "on_saturation": worker.on_saturation,
        **({"server": worker.server} if worker.server else {}),  # absent when unset: see PlanWorker
    }


def _telemetry(section: TelemetrySection | None) -> dict[str, Any] | None:
    if section is None:
        return None
    url = section.url.strip() if section.url is not None else None
    return {
        "gpu": section.gpu,
        "nvidia_smi": section.nvidia_smi,
        "host_memory": section.host_memory,
        "url": url,
    }
