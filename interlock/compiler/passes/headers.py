"""Names and headers -> rejected when they cannot be sent on the wire (control characters, a header name
that is not an HTTP token).

Every name in a plan ends up in an HTTP exchange: an alias or candidate in the resolved-model header and
in bodies, a worker or provider name in logs and metrics labels, `server.resolved_header` as a header
name. A CR or LF in any of them compiled, and the gateway then failed every matching request; so the
compiler refuses them here, with the position, and the runtime never builds a header it did not check.
(URLs are checked where all URL rules live, by the providers pass: IL106.)
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from interlock.common.headers import MAX_NAME_CHARS, header_name_problem
from interlock.compiler.context import CompileContext
from interlock.compiler.diagnostics import CONTROL_CHARS, Span

_PROVIDER_NAME_CHECKED = re.compile(r"[/\s]")
"""What IL109 already reports about a provider name (whitespace includes CR and LF; an empty name too);
IL303 reports a chain entry with whitespace."""


def headers(ctx: CompileContext) -> None:
    """Report every name that cannot be a header value, and a resolved header that cannot be its name."""
    for what, name, span, path in _names(ctx):
        problem = name_problem(name)
        if problem is None:
            continue
        shown = name if len(name) <= 100 else name[:99] + "…"
        ctx.sink.add(
            "IL013",
            span,
            f"{what} `{shown}` {problem}; it cannot be sent in an HTTP header",
            path=path if len(path) <= 200 else path[:199] + "…",
            value=shown,
            hint=f"names are plain text on one line, at most {MAX_NAME_CHARS} characters: no line breaks, "
            "tabs or other control characters, no spaces at either end",
        )
    server = ctx.sources.singletons.get("server")
    if server is not None:
        _resolved_header(ctx, ctx.span_of(server, "resolved_header"), ctx.server.resolved_header)


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be sent as a header value (None when it can)."""
    if not name:
        return "is empty"
    found = CONTROL_CHARS.search(name)
    if found is not None:
        return f"holds the control character U+{ord(found.group()):04X}"
    if name != name.strip():
        return "starts or ends with whitespace (receivers strip it)"
    if len(name) > MAX_NAME_CHARS:
        return f"is {len(name)} characters long, more than {MAX_NAME_CHARS}"
    return None


def _resolved_header(ctx: CompileContext, span: Span, header: str) -> None:
    problem = header_name_problem(header)
    if problem is None:
        return
    if problem == "is not a valid HTTP header name":
        hint = "a header name is letters, digits and `!#$%&'*+-.^_`|~`, e.g. `X-Interlock-Resolved`"
    else:
        hint = "choose a name of your own, e.g. `X-Interlock-Resolved`"
    ctx.sink.add(
        "IL013",
        span,
        f"`server.resolved_header` is `{header}`, which {problem}",
        path="server.resolved_header",
        value=header,
        hint=hint,
    )


def _names(ctx: CompileContext) -> Iterator[tuple[str, str, Span, str]]:
    """(what, name, where, key path) of every name the plan would carry."""
    for name, entry in ctx.sources.named["aliases"].items():
        yield "alias name", name, entry.key_span, f"aliases.{name}"
    for name, entry in ctx.sources.named["models"].items():
        yield "model name", name, entry.key_span, f"models.{name}"
    for name, entry in ctx.sources.named["providers"].items():
        if name and not _PROVIDER_NAME_CHECKED.search(name):
            yield "provider name", name, entry.key_span, f"providers.{name}"
    for name, alias in ctx.aliases.items():
        for index, candidate in enumerate(alias.section.chain):
            if _PROVIDER_NAME_CHECKED.search(candidate.replace("/", "")):
                continue
            at = alias.source_index(index)
            path = f"aliases.{name}.chain[{at}]"
            yield "chain entry", candidate, ctx.span_of(alias.entry, "chain", at), path
    for provider in ctx.providers.values():
        for index, worker in enumerate(provider.section.workers or ()):
            at = provider.source_index(index)
            path = f"providers.{provider.name}.workers[{at}].name"
            yield "worker name", worker.name, ctx.span_of(provider.entry, "workers", at, "name"), path
    server = ctx.sources.singletons.get("server")
    if server is not None:
        for key in ("default_alias", "alias_namespace"):
            value = getattr(ctx.server, key)
            if value is not None:
                yield f"`server.{key}`", value, ctx.span_of(server, key), f"server.{key}"
