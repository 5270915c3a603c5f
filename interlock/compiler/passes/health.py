"""Health and timeouts: positive values, probe timeout below interval, timeouts in a sane order."""

from __future__ import annotations

from collections.abc import Callable

from interlock.compiler.context import CompileContext
from interlock.compiler.diagnostics import Span
from interlock.compiler.loader import Entry
from interlock.schema.durations import format_duration

SpanOf = Callable[[str], Span]
TIMEOUT_KEYS = ("connect", "first_byte", "idle", "total")
COLD_LOAD_MS = 30_000
"""Below this, `first_byte` of an Ollama provider rarely covers a cold model load (IL404)."""


def health(ctx: CompileContext) -> None:
    """Reports problems only; the values are already typed by `shape` (pruned ones are skipped)."""
    span = _spans(ctx, ctx.sources.singletons.get("health"))
    h = ctx.health
    for key in ("probe_interval", "probe_timeout", "open_for", "rate_limit_open_for", "failure_threshold"):
        value = getattr(h, key)
        if value < 1:
            shown = str(value) if key == "failure_threshold" else format_duration(value)
            ctx.sink.add(
                "IL402",
                span(key),
                f"`health.{key}` must be positive, not `{shown}`",
                path=f"health.{key}",
                value=shown,
                hint="a count of at least 1" if key == "failure_threshold" else "e.g. `500ms`, `3s`, `1m`",
            )
    usable = not ctx.is_broken("health.probe_interval") and not ctx.is_broken("health.probe_timeout")
    if usable and 0 < h.probe_interval <= h.probe_timeout:
        ctx.sink.add(
            "IL401",
            span("probe_timeout"),
            f"`health.probe_timeout` ({format_duration(h.probe_timeout)}) must be shorter than "
            f"`health.probe_interval` ({format_duration(h.probe_interval)})",
            path="health.probe_timeout",
            value=format_duration(h.probe_timeout),
            hint="otherwise probes overlap; e.g. probe_interval: 30s, probe_timeout: 3s",
        )
    given = {key: value for key in TIMEOUT_KEYS if (value := getattr(ctx.timeouts, key)) is not None}
    tspan = _spans(ctx, ctx.sources.singletons.get("timeouts"))
    _timeouts(ctx, "timeouts", tspan, {"first_byte": 0, **given}, set(given))  # unset: by kind
    for name, provider in ctx.providers.items():
        own = provider.section.timeouts
        if provider.section.kind == "ollama":
            _cold_load(ctx, name, provider.entry, own.first_byte if own else None, ctx.timeouts_of(name))
        if own is None:
            continue
        values = ctx.timeouts_of(name)
        written = {key for key in TIMEOUT_KEYS if getattr(own, key) is not None}

        def pspan(key: str, entry: Entry = provider.entry) -> Span:
            return ctx.span_of(entry, "timeouts", key)

        _timeouts(ctx, f"providers.{name}.timeouts", pspan, values, written)


def _cold_load(ctx: CompileContext, name: str, entry: Entry, own: int | None, values: dict[str, int]) -> None:
    """Loading a model into an Ollama worker takes tens of seconds; a shorter first-byte timeout
    turns every cold start into a failure, and the circuit then marks a healthy worker dead. Only a
    value someone wrote (its own, or `timeouts:`): the kind's default is long enough."""
    value = values["first_byte"]
    if own is None and ctx.timeouts.first_byte is None:
        return
    where = f"providers.{name}.timeouts.first_byte" if own is not None else "timeouts.first_byte"
    if ctx.is_broken(where) or not 0 < value < COLD_LOAD_MS:
        return
    if own is not None:
        span = ctx.span_of(entry, "timeouts", "first_byte")
    else:
        span = _spans(ctx, ctx.sources.singletons.get("timeouts"))("first_byte")
    ctx.sink.add(
        "IL404",
        span,
        f"ollama provider `{name}` waits {format_duration(value)} for the first byte; loading a model "
        f"cold often takes longer",
        path=where,
        value=format_duration(value),
        hint=f"give provider `{name}` its own `timeouts: {{first_byte: 120s}}`",
    )


def _spans(ctx: CompileContext, entry: Entry | None) -> SpanOf:
    def span(key: str) -> Span:
        if entry is None:
            main = ctx.sources.main
            return Span(main.file if main else "<config>")
        return ctx.span_of(entry, key)

    return span


def _timeouts(
    ctx: CompileContext, where: str, span: SpanOf, values: dict[str, int], written: set[str]
) -> None:
    """``written``: the keys set at ``where`` itself; inherited defaults were checked where they stand."""
    for key in sorted(written):
        if values[key] < 1 and not ctx.is_broken(f"{where}.{key}"):
            ctx.sink.add(
                "IL402",
                span(key),
                f"`{where}.{key}` must be positive, not `{format_duration(values[key])}`",
                path=f"{where}.{key}",
                value=format_duration(values[key]),
                hint="e.g. `2s` for connect, `60s` for first_byte, `2m` for idle, `10m` for total",
            )
    total = values["total"]
    for key in ("connect", "first_byte"):
        if not written & {key, "total"} or ctx.is_broken(f"{where}.{key}") or ctx.is_broken(f"{where}.total"):
            continue
        if values[key] > total > 0:
            at = key if key in written else "total"
            ctx.sink.add(
                "IL403",
                span(at),
                f"`{where}.{key}` ({format_duration(values[key])}) is longer than `total` "
                f"({format_duration(total)}), so `total` cuts it short",
                path=f"{where}.{at}",
                value=format_duration(values[at]),
                hint=f"raise `total` above {format_duration(values[key])} or lower `{key}`",
            )
