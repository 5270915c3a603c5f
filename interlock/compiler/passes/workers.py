"""Ollama workers -> effective values (profile applied), ordered concurrency pattern tables."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

from pydantic import ValidationError

from interlock.compiler.context import CompileContext, Provider, Worker
from interlock.compiler.diagnostics import DiagnosticSink, Span, did_you_mean
from interlock.compiler.loader import Entry, Reader, parse_document
from interlock.compiler.passes.providers import check_url
from interlock.resources import builtin_profiles
from interlock.schema.config import ProfileFile, QueueSection, WorkerSection
from interlock.schema.plan import PlanPattern


def workers(ctx: CompileContext) -> None:
    """Apply profiles, check names/URLs/limits/patterns; fill ``ctx.workers``."""
    urls: dict[str, tuple[str, Span]] = {}
    profiles: dict[str, ProfileFile | None] = {}
    for provider in ctx.providers.values():
        if provider.section.kind != "ollama":
            continue
        for index, section in enumerate(provider.section.workers or ()):
            _worker(ctx, provider, index, section, urls, profiles)


def _worker(
    ctx: CompileContext,
    provider: Provider,
    index: int,
    section: WorkerSection,
    urls: dict[str, tuple[str, Span]],
    profiles: dict[str, ProfileFile | None],
) -> None:
    entry = Entry(section.name, section, provider.entry.doc, (*provider.entry.path, "workers", index))
    where = f"providers.{provider.name}.workers[{index}]"

    def span(*rest: str | int) -> Span:
        return ctx.span_of(entry, *rest)

    first = ctx.workers.get(section.name)
    if first is not None:
        ctx.sink.add(
            "IL201",
            span("name"),
            f"worker name `{section.name}` is used twice",
            path=f"{where}.name",
            value=section.name,
            hint=f"first used at {ctx.span_of(first.entry, 'name')}",
        )
    check_url(ctx, section.url, span("url"), f"{where}.url")
    url_key = section.url.rstrip("/").lower()
    if url_key in urls:
        other, other_span = urls[url_key]
        ctx.sink.add(
            "IL202",
            span("url"),
            f"worker URL `{section.url}` is also the URL of worker `{other}`",
            path=f"{where}.url",
            value=section.url,
            hint=f"see {other_span}; one box is one worker",
        )
    else:
        urls[url_key] = (section.name, span("url"))

    profile = None
    if section.profile is not None:
        if section.profile not in profiles:
            profiles[section.profile] = _load_profile(ctx, section.profile, entry.doc.path, span("profile"))
        profile = profiles[section.profile]
    preset = profile.worker if profile else None

    def pick(key: str) -> Any:
        value = getattr(section, key)
        return value if value is not None or preset is None else getattr(preset, key)

    max_concurrent = pick("max_concurrent")
    if max_concurrent is None:
        max_concurrent = 1
    elif max_concurrent < 1:
        ctx.sink.add(
            "IL203",
            span("max_concurrent"),
            f"`{where}.max_concurrent` must be at least 1",
            path=f"{where}.max_concurrent",
            value=str(max_concurrent),
        )
        max_concurrent = 1
    concurrency: dict[str, int] = pick("model_concurrency") or {}
    key_of = "model_concurrency" if section.model_concurrency is not None else "profile"
    patterns = _patterns(ctx.sink, concurrency, max_concurrent, span, key_of, where)
    context_limits: dict[str, int] = pick("context_limits") or {}
    default_context = pick("default_context_tokens")
    for model, tokens in context_limits.items():
        _positive_tokens(ctx, tokens, span("context_limits", model), f"{where}.context_limits.{model}")
    if default_context is not None:
        _positive_tokens(
            ctx, default_context, span("default_context_tokens"), f"{where}.default_context_tokens"
        )
    queue: QueueSection = pick("queue") or QueueSection()
    ctx.workers.setdefault(
        section.name,
        Worker(
            name=section.name,
            provider=provider.name,
            url=section.url.rstrip("/"),
            profile=profile,
            max_concurrent=max_concurrent,
            patterns=patterns,
            default_context_tokens=default_context,
            context_limits=dict(context_limits),
            max_waiting=queue.max_waiting,
            max_wait_ms=queue.max_wait,
            entry=entry,
            index=index,
        ),
    )


def _positive_tokens(ctx: CompileContext, tokens: int, span: Span, where: str) -> None:
    if tokens < 1:
        ctx.sink.add("IL209", span, f"`{where}` must be at least 1", path=where, value=str(tokens))


def _patterns(
    sink: DiagnosticSink,
    concurrency: dict[str, int],
    max_concurrent: int,
    span: Any,
    key_of: str,
    where: str,
) -> list[PlanPattern]:
    rows: list[PlanPattern] = []
    for pattern, limit in concurrency.items():
        place = span(key_of, pattern) if key_of == "model_concurrency" else span("profile")
        path = f"{where}.model_concurrency.{pattern}"
        row = _parse_pattern(pattern, limit)
        if row is None:
            sink.add(
                "IL204",
                place,
                f"concurrency pattern `{pattern}` is not an exact name, a prefix ending in one `*`, or `*`",
                path=path,
                value=pattern,
                hint="use `qwen3:8b`, `gemma4:*` or `*`",
            )
            continue
        if limit < 1:
            sink.add(
                "IL205", place, f"slot limit of `{pattern}` must be at least 1", path=path, value=str(limit)
            )
            continue
        if limit > max_concurrent:
            sink.add(
                "IL206",
                place,
                f"slot limit {limit} of `{pattern}` exceeds the worker's max_concurrent {max_concurrent}",
                path=path,
                value=str(limit),
                hint=f"lower it to {max_concurrent} or raise `max_concurrent`",
            )
            continue
        for earlier in rows:
            if _covers(earlier, row):
                sink.add(
                    "IL207",
                    place,
                    f"pattern `{pattern}` is listed after the more general `{earlier.pattern}`",
                    path=path,
                    value=pattern,
                    hint="the most specific pattern wins regardless of order; list specific ones first",
                )
                break
        rows.append(row)
    order = {"exact": 0, "prefix": 1, "any": 2}
    return sorted(rows, key=lambda r: (order[r.match], -len(r.prefix), r.pattern))


def _parse_pattern(pattern: str, limit: int) -> PlanPattern | None:
    if pattern == "*":
        return PlanPattern(pattern=pattern, match="any", prefix="", limit=max(limit, 1))
    stars = pattern.count("*")
    if not pattern.strip() or pattern != pattern.strip():
        return None
    if stars == 0:
        return PlanPattern(pattern=pattern, match="exact", prefix=pattern, limit=max(limit, 1))
    if stars == 1 and pattern.endswith("*"):
        return PlanPattern(pattern=pattern, match="prefix", prefix=pattern[:-1], limit=max(limit, 1))
    return None


def _covers(general: PlanPattern, specific: PlanPattern) -> bool:
    """Whether every model ``specific`` matches is also matched by ``general`` (and they differ)."""
    if general.pattern == specific.pattern or general.match == "exact":
        return False
    return specific.prefix.startswith(general.prefix)


def _load_profile(ctx: CompileContext, name: str, config_path: str, span: Span) -> ProfileFile | None:
    presets = builtin_profiles()
    reader: Reader
    if name in presets:
        path, reader = presets[name].as_posix(), _read_local
    elif name.endswith((".yaml", ".yml")) or "/" in name:
        path = (PurePosixPath(config_path).parent / name).as_posix()
        reader = ctx.options.reader
    else:
        ctx.sink.add(
            "IL208",
            span,
            f"unknown hardware profile `{name}`",
            value=name,
            hint=did_you_mean(name, presets) or f"built-in profiles: {', '.join(presets)}; or give a path",
        )
        return None
    text = reader(path)
    if text is None:
        ctx.sink.add("IL208", span, f"hardware profile file `{name}` does not exist", value=name)
        return None
    doc = parse_document(path, text, ctx.sink)
    ctx.sources.aux.append(doc)
    try:
        return ProfileFile.model_validate(doc.data)
    except ValidationError as exc:
        for error in exc.errors():
            loc = tuple(error["loc"])
            ctx.sink.add(
                "IL004",
                doc.span(loc),
                f"profile `{name}`: `{'.'.join(map(str, loc))}`: {error['msg']}",
                value=name,
            )
        return None


def _read_local(path: str) -> str | None:
    with open(path, encoding="utf-8") as handle:
        return handle.read()
