"""Health and timeouts: positive values, probe timeout below interval, timeouts in a sane order."""

from __future__ import annotations

from interlock.compiler.context import CompileContext
from interlock.compiler.diagnostics import Span
from interlock.compiler.loader import Entry
from interlock.schema.durations import format_duration


def health(ctx: CompileContext) -> None:
    """Reports problems only; the values are already typed by `shape`."""
    entry = ctx.sources.singletons.get("health")
    h = ctx.health
    span = _spans(ctx, entry)
    for key in ("probe_interval", "probe_timeout", "open_for", "rate_limit_open_for", "failure_threshold"):
        value = getattr(h, key)
        if value < 1:
            ctx.sink.add(
                "IL402", span(key), f"`health.{key}` must be positive", path=f"health.{key}", value=str(value)
            )
    if 0 < h.probe_interval <= h.probe_timeout:
        ctx.sink.add(
            "IL401",
            span("probe_timeout"),
            f"`health.probe_timeout` ({format_duration(h.probe_timeout)}) must be shorter than "
            f"`health.probe_interval` ({format_duration(h.probe_interval)})",
            path="health.probe_timeout",
            hint="probes would overlap; e.g. probe_interval: 30s, probe_timeout: 3s",
        )
    defaults = ctx.sources.singletons.get("timeouts")
    _timeouts(
        ctx,
        "timeouts",
        _spans(ctx, defaults),
        ctx.timeouts.connect,
        ctx.timeouts.first_byte,
        ctx.timeouts.total,
    )
    for name, provider in ctx.providers.items():
        own = provider.section.timeouts
        if own is None:
            continue
        where = f"providers.{name}.timeouts"

        def pspan(key: str, entry: Entry = provider.entry) -> Span:
            return ctx.span_of(entry, "timeouts", key)

        _timeouts(
            ctx,
            where,
            pspan,
            ctx.timeouts.connect if own.connect is None else own.connect,
            ctx.timeouts.first_byte if own.first_byte is None else own.first_byte,
            ctx.timeouts.total if own.total is None else own.total,
        )


def _spans(ctx: CompileContext, entry: Entry | None):  # type: ignore[no-untyped-def]
    def span(key: str) -> Span:
        if entry is None:
            main = ctx.sources.main
            return Span(main.file if main else "<config>")
        return ctx.span_of(entry, key)

    return span


def _timeouts(ctx: CompileContext, where: str, span, connect: int, first_byte: int, total: int) -> None:  # type: ignore[no-untyped-def]
    values = {"connect": connect, "first_byte": first_byte, "total": total}
    for key, value in values.items():
        if value < 1:
            ctx.sink.add(
                "IL402",
                span(key),
                f"`{where}.{key}` must be positive",
                path=f"{where}.{key}",
                value=format_duration(value),
            )
    for key in ("connect", "first_byte"):
        if values[key] > total > 0:
            ctx.sink.add(
                "IL403",
                span(key),
                f"`{where}.{key}` ({format_duration(values[key])}) is longer than `total` "
                f"({format_duration(total)}), so `total` cuts it short",
                path=f"{where}.{key}",
            )
