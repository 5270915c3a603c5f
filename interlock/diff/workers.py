"""Workers: added or removed, URL, profile, limits, effective slots per model, queue, telemetry, server."""

from __future__ import annotations

from typing import Any

from interlock.diff.change import Change, changed_fields, show
from interlock.schema.plan import PlanWorker, RoutingPlan


def workers(base: RoutingPlan, head: RoutingPlan) -> list[Change]:
    """Compare every worker of ``base`` with the one of the same name in ``head``."""
    out: list[Change] = []
    for name in sorted(base.workers.keys() | head.workers.keys()):
        old, new = base.workers.get(name), head.workers.get(name)
        if old is None and new is not None:
            summary = (
                f"new worker `{name}` of `{new.provider}` at {new.url}, max_concurrent {new.max_concurrent}"
            )
            out.append(Change("worker-added", name, None, new.url, summary))
        elif new is None and old is not None:
            summary = f"worker `{name}` of `{old.provider}` at {old.url} is removed"
            out.append(Change("worker-removed", name, old.url, None, summary))
        elif old is not None and new is not None:
            out.extend(_worker(name, old, new))
    return out


def _worker(name: str, old: PlanWorker, new: PlanWorker) -> list[Change]:
    out: list[Change] = []
    if old.provider != new.provider:
        summary = f"worker `{name}` now serves provider `{new.provider}` (was `{old.provider}`)"
        out.append(Change("worker-moved", name, old.provider, new.provider, summary))
    if old.url != new.url:
        summary = f"worker `{name}` is now at {new.url} (was {old.url})"
        out.append(Change("worker-url-changed", name, old.url, new.url, summary))
    if old.profile != new.profile:
        summary = f"worker `{name}` hardware profile: {show(old.profile, None)} → {show(new.profile, None)}"
        out.append(Change("profile-changed", name, old.profile, new.profile, summary))
    if old.profile == new.profile:  # a new profile brings new hardware: that row says enough
        out.extend(_hardware(name, old, new))
    if old.max_concurrent != new.max_concurrent:
        summary = f"worker `{name}` runs {new.max_concurrent} request(s) at once (was {old.max_concurrent})"
        out.append(Change("max-concurrent-changed", name, old.max_concurrent, new.max_concurrent, summary))
    for model in sorted(old.slots.keys() | new.slots.keys()):
        before, after = old.slots.get(model), new.slots.get(model)
        if before != after:
            summary = f"`{model}` on worker `{name}`: {show(before, None)} → {show(after, None)} slot(s)"
            out.append(Change("slots-changed", name, before, after, summary, field=model, unit="slots"))
    old_patterns, new_patterns = _patterns(old), _patterns(new)
    if old_patterns != new_patterns:
        summary = (
            f"worker `{name}` concurrency patterns: {show(old_patterns, None)} → {show(new_patterns, None)}"
        )
        out.append(Change("patterns-changed", name, old_patterns, new_patterns, summary))
    out.extend(_context(name, old, new))
    for setting, before, after, unit in changed_fields(old.queue, new.queue):
        summary = f"worker `{name}` queue `{setting}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("queue-changed", name, before, after, summary, field=setting, unit=unit))
    out.extend(_telemetry(name, old, new))
    if old.on_saturation != new.on_saturation:
        summary = (
            f"worker `{name}` when its slots are full: {old.on_saturation or 'as the alias says'} → "
            f"{new.on_saturation or 'as the alias says'}"
        )
        out.append(Change("worker-saturation-changed", name, old.on_saturation, new.on_saturation, summary))
    if old.server != new.server:
        summary = f"worker `{name}` load signals: {old.server or 'none read'} → {new.server or 'none read'}"
        out.append(Change("worker-server-changed", name, old.server, new.server, summary))
    return out


def _telemetry(name: str, old: PlanWorker, new: PlanWorker) -> list[Change]:
    """Telemetry declared, dropped, or one of its settings changed."""
    if old.telemetry == new.telemetry:
        return []
    if old.telemetry is None or new.telemetry is None:
        before = _sources(old) if old.telemetry else None
        after = _sources(new) if new.telemetry else None
        summary = f"worker `{name}` telemetry: {_sources(old)} → {_sources(new)}"
        return [Change("telemetry-changed", name, before, after, summary)]
    out = []
    for setting, before, after, unit in changed_fields(old.telemetry, new.telemetry):
        summary = f"worker `{name}` telemetry `{setting}`: {show(before, unit)} → {show(after, unit)}"
        out.append(Change("telemetry-changed", name, before, after, summary, field=setting, unit=unit))
    return out


def _hardware(name: str, old: PlanWorker, new: PlanWorker) -> list[Change]:
    """The profile file itself changed: one change per hardware fact."""
    before = old.hardware.model_dump() if old.hardware else {}
    after = new.hardware.model_dump() if new.hardware else {}
    out = []
    for key in sorted(before.keys() | after.keys()):
        if before.get(key) != after.get(key):
            shown = f"{show(before.get(key), None)} → {show(after.get(key), None)}"
            summary = f"worker `{name}` hardware `{key}`: {shown}"
            out.append(Change("hardware-changed", name, before.get(key), after.get(key), summary, field=key))
    return out


def _sources(worker: PlanWorker) -> str:
    """``GPU 0 from nvidia-smi, host memory, sidecar <url>``, or ``none``."""
    t = worker.telemetry
    if t is None:
        return "none"
    parts = [f"nvidia-smi GPU {t.gpu}"] if t.nvidia_smi else []
    parts += ["host memory"] if t.host_memory else []
    parts += [f"sidecar {t.url} (GPU {t.gpu})"] if t.url else []
    return ", ".join(parts) or "nothing enabled"


def _patterns(worker: PlanWorker) -> dict[str, Any]:
    return {row.pattern: row.limit for row in worker.patterns}


def _context(name: str, old: PlanWorker, new: PlanWorker) -> list[Change]:
    out: list[Change] = []
    pairs: list[tuple[str, int | None, int | None]] = [
        ("default", old.default_context_tokens, new.default_context_tokens)
    ]
    for model in sorted(old.context_limits.keys() | new.context_limits.keys()):
        pairs.append((model, old.context_limits.get(model), new.context_limits.get(model)))
    for key, before, after in pairs:
        if before != after:
            shown = f"{show(before, None)} → {show(after, None)}"
            what = "default context limit" if key == "default" else f"context limit for `{key}`"
            summary = f"worker `{name}` {what}: {shown} tokens"
            out.append(Change("context-limit-changed", name, before, after, summary, field=key))
    return out
