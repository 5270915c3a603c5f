"""Routing settings: no negative weight, VRAM limit and speed smoothing in range, known policies; an
alias that resumes cut streams has a replica to resume on."""

from __future__ import annotations

from collections.abc import Callable

from interlock.common.headers import HTTP_TOKEN, RESERVED_HEADERS
from interlock.common.kinds import KINDS
from interlock.compiler.context import CompileContext
from interlock.compiler.diagnostics import Span, did_you_mean

POLICIES = ("fallback", "queue")


# (field of `routing`, code, largest value, hint): each must be above 0 and at most its largest value
_RANGES: tuple[tuple[str, str, int, str], ...] = (
    (
        "avoid_vram_percent",
        "IL902",
        100,
        "a VRAM use in percent above which no new model is loaded while another worker can serve, e.g. 90",
    ),
    ("speed_smoothing", "IL903", 1, "the weight of the newest sample in the learned speed, e.g. 0.3"),
)


def routing(ctx: CompileContext) -> None:
    """Check `routing:` and every alias's `on_saturation`."""
    entry = ctx.sources.singletons.get("routing")

    def span(*key: str) -> Span:
        if entry is None:
            main = ctx.sources.main
            return Span(main.file if main else "<config>")
        return ctx.span_of(entry, *key)

    _weights(ctx, span)
    _ranges(ctx, span)
    _fallback_after(ctx, span)
    _sticky(ctx, span)
    _policies(ctx, span)


def _weights(ctx: CompileContext, span: Callable[..., Span]) -> None:
    """IL901: no weight is negative."""
    for key, value in ctx.routing.weights.model_dump().items():
        path = f"routing.weights.{key}"
        if value < 0 and not ctx.is_broken(path):
            ctx.sink.add(
                "IL901",
                span("weights", key),
                f"`{path}` must not be negative, not `{value:g}`",
                path=path,
                value=value,
                hint="a weight of 0 (ignore this fact) or more; a penalty is already subtracted",
            )


def _ranges(ctx: CompileContext, span: Callable[..., Span]) -> None:
    """Each field of ``_RANGES`` above 0 and at most its largest value (its own code)."""
    for field, code, most, hint in _RANGES:
        value = getattr(ctx.routing, field)
        path = f"routing.{field}"
        if not 0 < value <= most and not ctx.is_broken(path):
            ctx.sink.add(
                code,
                span(field),
                f"`{path}` must be above 0 and at most {most}, not `{value:g}`",
                path=path,
                value=value,
                hint=hint,
            )


def _fallback_after(ctx: CompileContext, span: Callable[..., Span]) -> None:
    """IL907: `fallback_after` (routing's and each alias's) is a positive duration."""
    for path, after, where in (
        ("routing.fallback_after", ctx.routing.fallback_after, span("fallback_after")),
        *(
            (f"aliases.{n}.fallback_after", a.section.fallback_after, ctx.span_of(a.entry, "fallback_after"))
            for n, a in ctx.aliases.items()
            if a.section.fallback_after is not None
        ),
    ):
        if after is not None and after < 1 and not ctx.is_broken(path):
            ctx.sink.add(
                "IL907",
                where,
                f"`{path}` must be a positive duration, not `{after}ms`",
                path=path,
                value=after,
                hint="the longest expected wait before spilling to the next candidate, e.g. 2s",
            )


def _sticky(ctx: CompileContext, span: Callable[..., Span]) -> None:
    """Sticky sessions: its sizes at least 1 (IL905), its header one a session can be named by (IL906)."""
    sticky = ctx.routing.sticky
    for key in ("prefix_bytes", "max_sessions", "idle_ttl"):
        value = getattr(sticky, key)
        path = f"routing.sticky.{key}"
        if value < 1 and not ctx.is_broken(path):
            ctx.sink.add(
                "IL905",
                span("sticky", key),
                f"`{path}` must be at least 1, not `{value}`",
                path=path,
                value=value,
                hint="e.g. prefix_bytes: 1024, max_sessions: 10000, idle_ttl: 30m",
            )
    header = sticky.header
    if (not HTTP_TOKEN.fullmatch(header) or header.lower() in RESERVED_HEADERS) and not ctx.is_broken(
        "routing.sticky.header"
    ):
        ctx.sink.add(
            "IL906",
            span("sticky", "header"),
            f"`routing.sticky.header` {header!a} is not a request header a session can be named by",
            path="routing.sticky.header",
            value=header,
            hint="an HTTP header name of letters, digits and -, e.g. X-Session-ID",
        )


def _policies(ctx: CompileContext, span: Callable[..., Span]) -> None:
    """`on_saturation` (routing's, each worker's, each alias's) is a known policy; an alias that resumes
    has a replica to resume on."""
    if ctx.routing.on_saturation not in POLICIES and not ctx.is_broken("routing.on_saturation"):
        _bad_policy(ctx, span("on_saturation"), "routing.on_saturation", ctx.routing.on_saturation)
    for worker in ctx.workers.values():
        policy = worker.on_saturation
        path = f"providers.{worker.provider}.workers[{worker.entry.path[-1]}].on_saturation"
        if policy is not None and policy not in POLICIES and not ctx.is_broken(path):
            _bad_policy(ctx, ctx.span_of(worker.entry, "on_saturation"), path, policy)
    for name, alias in ctx.aliases.items():
        policy = alias.section.on_saturation
        path = f"aliases.{name}.on_saturation"
        if policy is not None and policy not in POLICIES and not ctx.is_broken(path):
            _bad_policy(ctx, ctx.span_of(alias.entry, "on_saturation"), path, policy)
        if alias.section.resume == "same_model":
            _replica(ctx, name)


def _replica(ctx: CompileContext, name: str) -> None:
    """`resume: same_model` resumes only on a second candidate of a model, of a kind that continues an
    assistant prefill (runtime/request/resume.py): a chain without one never resumes (IL218)."""
    models: dict[str, int] = {}
    for link in ctx.expanded.get(name, []):
        provider, _, model = link.candidate.partition("/")
        declared = ctx.providers.get(provider)
        kind = KINDS.get(declared.section.kind) if declared is not None else None
        if kind is not None and kind.assistant_prefill:
            models[model] = models.get(model, 0) + 1
    if any(count > 1 for count in models.values()):
        return
    alias = ctx.aliases[name]
    ctx.sink.add(
        "IL218",
        ctx.span_of(alias.entry, "resume"),
        f"alias `{name}` resumes cut streams on a replica of the same model, but its chain holds no "
        "model twice: a cut stream ends with the error event",
        path=f"aliases.{name}.resume",
        value="same_model",
        hint="add the same model on another provider or server to the chain (`second/<model>`), "
        "or drop `resume`",
    )


def _bad_policy(ctx: CompileContext, span: Span, path: str, value: str) -> None:
    ctx.sink.add(
        "IL904",
        span,
        f"`{path}` must be one of {', '.join(POLICIES)}, not `{value}`",
        path=path,
        value=value,
        hint=did_you_mean(value, POLICIES)
        or "`fallback` skips to the next candidate when slots are full, `queue` waits",
    )
