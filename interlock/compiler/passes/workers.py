"""Workers (Ollama's, and OpenAI-compatible servers listed as workers) -> effective values (profile
applied), ordered concurrency pattern tables.

A key the worker sets replaces the profile's value for that key; tables (`model_concurrency`,
`context_limits`) are replaced whole, `queue` is merged key by key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from interlock.common.kinds import SERVER_KINDS, has_workers, listed
from interlock.common.pattern_text import parse_pattern
from interlock.common.patterns import covers, order
from interlock.compiler.context import CompileContext, Provider, Worker
from interlock.compiler.diagnostics import Span
from interlock.compiler.loader import Entry, Path, SourceDoc
from interlock.compiler.passes.providers import check_url
from interlock.compiler.profiles import LoadedProfile, ProfileCache
from interlock.schema.config import ProfileWorkerDefaults, QueueSection, TelemetrySection, WorkerSection
from interlock.schema.plan import PlanPattern


def workers(ctx: CompileContext) -> None:
    """Apply profiles, check names/URLs/limits/patterns; fill ``ctx.workers``."""
    urls: dict[str, tuple[str, Span]] = {}
    cache = ProfileCache()
    for provider in ctx.providers.values():
        if not has_workers(provider.section.kind, provider.section.workers) or (
            provider.section.kind != "ollama" and provider.section.base_url is not None
        ):
            continue
        for index, section in enumerate(provider.section.workers or ()):
            _worker(ctx, provider, provider.source_index(index), section, urls, cache)


@dataclass
class _Origin:
    """Where a worker value came from: the worker itself or its profile file."""

    doc: SourceDoc
    path: Path
    note: str
    prefix: str
    """Dotted key path of the values: the worker's (`providers.x.workers[0]`) or `worker` in a profile."""

    def where(self, *rest: str) -> str:
        return ".".join((self.prefix, *rest))

    def span(self, *rest: str | int) -> Span:
        return self.doc.span((*self.path, *rest))

    def key_span(self, *rest: str | int) -> Span:
        return self.doc.key_span((*self.path, *rest))


@dataclass(frozen=True)
class _Values:
    """A worker's values: the key it sets, else its profile's, each with where it came from."""

    section: WorkerSection
    preset: ProfileWorkerDefaults | None
    own: _Origin
    from_profile: _Origin

    def pick(self, key: str) -> tuple[Any, _Origin]:
        value = getattr(self.section, key)
        if value is not None or self.preset is None:
            return value, self.own
        return getattr(self.preset, key), self.from_profile


def _worker(
    ctx: CompileContext,
    provider: Provider,
    index: int,
    section: WorkerSection,
    urls: dict[str, tuple[str, Span]],
    cache: ProfileCache,
) -> None:
    entry = Entry(section.name, section, provider.entry.doc, (*provider.entry.path, "workers", index))
    where = f"providers.{provider.name}.workers[{index}]"
    own = _Origin(entry.doc, entry.path, "", where)
    _check_unique(ctx, section, own, where)
    _check_url(ctx, entry, section, where, urls)

    loaded: LoadedProfile | None = None
    if section.profile is not None:
        loaded = cache.get(ctx, section.profile, entry.doc.path, own.span("profile"), f"{where}.profile")
    preset = loaded.profile.worker if loaded else None
    from_profile = (
        _Origin(loaded.doc, ("worker",), f" (from profile `{loaded.profile.profile}`)", "worker")
        if loaded
        else own
    )
    values = _Values(section, preset, own, from_profile)
    max_concurrent, mc_origin = _max_concurrent(ctx, values)
    # Compare slot limits with `max_concurrent` only when it is known: not pruned by `shape`, and not
    # a stand-in default for a profile that failed to load (IL208 already says why).
    profile_failed = section.profile is not None and loaded is None and section.max_concurrent is None
    limit_known = (
        max_concurrent is not None and not ctx.is_broken(f"{where}.max_concurrent") and not profile_failed
    )
    table, table_origin = values.pick("model_concurrency")
    patterns = _patterns(
        ctx,
        table or {},
        max_concurrent if limit_known else None,
        table_origin,
        mc_origin if mc_origin is own else table_origin,
        where,
    )
    context_limits, default_context = _context_tokens(ctx, values)
    queue = _queue(section.queue, preset.queue if preset else None)
    ctx.workers.setdefault(
        section.name,
        Worker(
            name=section.name,
            provider=provider.name,
            url=section.url.strip().rstrip("/"),
            profile=loaded.profile if loaded else None,
            max_concurrent=max_concurrent or 1,
            patterns=patterns,
            default_context_tokens=default_context,
            context_limits=context_limits,
            max_waiting=queue.max_waiting,
            max_wait_ms=queue.max_wait,
            entry=entry,
            telemetry=_telemetry(ctx, entry, section, own, where),
            on_saturation=section.on_saturation,
            server=_server(ctx, provider, section, own),
            memory_gib=section.memory_gib,
        ),
    )


def _check_unique(ctx: CompileContext, section: WorkerSection, own: _Origin, where: str) -> None:
    """IL201: a worker name is unique across providers."""
    first = ctx.workers.get(section.name)
    if first is not None:
        ctx.sink.add(
            "IL201",
            own.span("name"),
            f"worker name `{section.name}` is used twice",
            path=f"{where}.name",
            value=section.name,
            hint=f"first used at {ctx.span_of(first.entry, 'name')}; names are unique across providers",
        )


def _max_concurrent(ctx: CompileContext, values: _Values) -> tuple[int | None, _Origin]:
    """The worker's ``max_concurrent`` (1 when unset; None when below 1: IL203) and where it came from."""
    max_concurrent, origin = values.pick("max_concurrent")
    if max_concurrent is None:
        return 1, origin
    if max_concurrent < 1:
        ctx.sink.add(
            "IL203",
            origin.span("max_concurrent"),
            f"`{origin.where('max_concurrent')}` must be at least 1, not `{max_concurrent}`{origin.note}",
            path=origin.where("max_concurrent"),
            value=str(max_concurrent),
            hint="the number of requests this worker runs at once, all models together",
        )
        return None, origin
    return max_concurrent, origin


def _context_tokens(ctx: CompileContext, values: _Values) -> tuple[dict[str, int], int | None]:
    """The worker's ``context_limits`` and ``default_context_tokens``, each checked positive."""
    context_limits, cl_origin = values.pick("context_limits")
    for model, tokens in (context_limits or {}).items():
        _positive_tokens(ctx, tokens, cl_origin, ("context_limits", model))
    default_context, dc_origin = values.pick("default_context_tokens")
    if default_context is not None:
        _positive_tokens(ctx, default_context, dc_origin, ("default_context_tokens",))
    return dict(context_limits or {}), default_context


def _telemetry(
    ctx: CompileContext, entry: Entry, section: WorkerSection, own: _Origin, where: str
) -> TelemetrySection | None:
    """The worker's telemetry section, None where its URL failed the check; IL210 when it reads nothing."""
    telemetry = section.telemetry
    if telemetry is not None and telemetry.url is not None:
        url_path = (*entry.path, "telemetry", "url")
        if not check_url(ctx, entry.doc, url_path, telemetry.url, f"{where}.telemetry.url"):
            telemetry = None  # reported; a plan never carries a URL that failed the check
    if telemetry is not None and not (telemetry.nvidia_smi or telemetry.host_memory or telemetry.url):
        ctx.sink.add(
            "IL210",
            own.span("telemetry"),
            f"`{where}.telemetry` enables no source: nothing will be read for worker `{section.name}`",
            path=f"{where}.telemetry",
            hint="set `nvidia_smi: true` or `host_memory: true` (a worker on the gateway's host), "
            "or `url` (a telemetry sidecar on the worker's host); or remove `telemetry`",
        )
    return telemetry


def _server(ctx: CompileContext, provider: Provider, section: WorkerSection, own: _Origin) -> str | None:
    """The worker's declared server kind, when it is one an OpenAI-compatible worker may name."""
    server = section.server
    if server is None:
        return None
    if provider.section.kind != "openai":
        ctx.sink.add(
            "IL217",
            own.span("server"),
            f"`{own.where('server')}` is `{server}`, but `{provider.name}` is a `kind: "
            f"{provider.section.kind}` provider, whose load is read from its own API",
            path=own.where("server"),
            value=server,
            hint="remove `server`; it names the server behind a `kind: openai` worker",
        )
        return None
    if server not in SERVER_KINDS:
        ctx.sink.add(
            "IL216",
            own.span("server"),
            f"`{own.where('server')}` is `{server}`, not a server whose load interlock reads",
            path=own.where("server"),
            value=server,
            hint=f"use {listed(SERVER_KINDS)}, or remove `server` (then only the gateway's own slot "
            "counts weigh in worker choice)",
        )
        return None
    return server


def _check_url(
    ctx: CompileContext, entry: Entry, section: WorkerSection, where: str, urls: dict[str, tuple[str, Span]]
) -> None:
    if not check_url(ctx, entry.doc, (*entry.path, "url"), section.url, f"{where}.url", base=True):
        return  # a bad URL: comparing it with others would only add noise
    span = ctx.span_of(entry, "url")
    key = _url_key(section.url)
    if key in urls:
        other, other_span = urls[key]
        ctx.sink.add(
            "IL202",
            span,
            f"worker URL `{section.url}` is also the URL of worker `{other}`",
            path=f"{where}.url",
            value=section.url,
            hint=f"see {other_span}; one Ollama server is one worker (raise its `max_concurrent` instead)",
        )
    else:
        urls[key] = (section.name, span)


def _url_key(url: str) -> str:
    parts = urlsplit(url.strip())
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{(parts.hostname or '').lower()}:{port}{parts.path.rstrip('/')}"


def _queue(own: QueueSection | None, preset: QueueSection | None) -> QueueSection:
    values: dict[str, Any] = {}
    for layer in (preset, own):
        if layer is not None:
            values.update({key: getattr(layer, key) for key in layer.model_fields_set})
    return QueueSection.model_construct(**{**QueueSection().model_dump(), **values})


def _positive_tokens(ctx: CompileContext, tokens: int, origin: _Origin, rel: tuple[str, ...]) -> None:
    where = origin.where(*rel)
    if tokens < 1:
        ctx.sink.add(
            "IL209",
            origin.span(*rel),
            f"`{where}` must be at least 1 token, not `{tokens}`{origin.note}",
            path=where,
            value=str(tokens),
        )


def _patterns(
    ctx: CompileContext,
    table: dict[str, int],
    max_concurrent: int | None,
    origin: _Origin,
    limit_origin: _Origin,
    where: str,
) -> list[PlanPattern]:
    rows: list[PlanPattern] = []
    too_big: list[str] = []
    for pattern, limit in table.items():
        place = origin.key_span("model_concurrency", pattern)
        path = origin.where("model_concurrency", pattern)
        row = parse_pattern(pattern, max(limit, 1))
        if row is None:
            ctx.sink.add(
                "IL204",
                place,
                f"concurrency pattern `{pattern}` is not an exact name, a prefix ending in one `*`, "
                f"or `*` alone{origin.note}",
                path=path,
                value=pattern,
                hint=_pattern_hint(pattern),
            )
            continue
        if limit < 1:
            ctx.sink.add(
                "IL205",
                origin.span("model_concurrency", pattern),
                f"slot limit of `{pattern}` must be at least 1, not `{limit}`{origin.note}",
                path=path,
                value=str(limit),
                hint="to keep a model off this worker, leave it out of the aliases' chains for this provider",
            )
            continue
        if max_concurrent is not None and limit > max_concurrent and origin is not limit_origin:
            too_big.append(f"`{pattern}`: {limit}")
            continue
        if max_concurrent is not None and limit > max_concurrent:
            ctx.sink.add(
                "IL206",
                origin.span("model_concurrency", pattern),
                f"slot limit {limit} of `{pattern}`{origin.note} exceeds the worker's "
                f"max_concurrent {max_concurrent}",
                path=path,
                value=str(limit),
                hint=f"lower it to {max_concurrent} or raise `max_concurrent`",
            )
            continue
        shadow = next((earlier for earlier in rows if covers(earlier, row)), None)
        if shadow is not None:
            ctx.sink.add(
                "IL207",
                place,
                f"pattern `{pattern}`{origin.note} is listed after the more general `{shadow.pattern}`",
                path=path,
                value=pattern,
                hint="the most specific pattern wins whatever the order, but readers expect the order "
                "to say so: list specific patterns first",
            )
        rows.append(row)
    if too_big:
        # The worker lowered `max_concurrent` below its profile's table: one diagnostic, at the worker.
        ctx.sink.add(
            "IL206",
            limit_origin.span("max_concurrent"),
            f"`{where}.max_concurrent` is {max_concurrent}, below slot limits{origin.note}: "
            + ", ".join(too_big),
            path=f"{where}.max_concurrent",
            value=str(max_concurrent),
            hint="raise `max_concurrent`, or give the worker its own `model_concurrency` table",
        )
    return order(rows)


def _pattern_hint(pattern: str) -> str:
    stripped = pattern.strip()
    if stripped != pattern:
        return f"remove the surrounding spaces: `{stripped}`"
    if "*" in pattern and not pattern.endswith("*"):
        return f"a `*` may only end a prefix: `{pattern.split('*', 1)[0]}*`"
    if pattern.count("*") > 1:
        return f"use one trailing `*`: `{pattern.replace('*', '')}*`"
    return "use an exact name like `qwen3:8b`, a prefix like `gemma4:*`, or `*`"
