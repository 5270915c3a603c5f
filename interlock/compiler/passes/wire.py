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

from interlock.compiler.context import CompileContext
from interlock.compiler.diagnostics import CONTROL_CHARS, Span

HTTP_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
"""RFC 9110 `token`: what a header field name may be."""
_PROVIDER_NAME_CHECKED = re.compile(r"[/\s]")
"""What IL109 already reports about a provider name (whitespace includes CR and LF); IL303 reports a
chain entry with whitespace."""


def wire(ctx: CompileContext) -> None:
    """Report every name that holds a control character, and a resolved header that is not a token."""
    for what, name, span, path in _names(ctx):
        found = CONTROL_CHARS.search(name)
        if found is None:
            continue
        ctx.sink.add(
            "IL013",
            span,
            f"{what} `{name}` holds the control character U+{ord(found.group()):04X}; "
            "it cannot be sent in an HTTP header",
            path=path,
            value=name,
            hint="names are plain text on one line: remove line breaks, tabs and other control characters",
        )
    server = ctx.sources.singletons.get("server")
    header = ctx.server.resolved_header
    if server is not None and not HTTP_TOKEN.match(header):
        ctx.sink.add(
            "IL013",
            ctx.span_of(server, "resolved_header"),
            f"`server.resolved_header` is `{header}`, which is not a valid HTTP header name",
            path="server.resolved_header",
            value=header,
            hint="a header name is letters, digits and `!#$%&'*+-.^_`|~`, e.g. `X-Interlock-Resolved`",
        )


def _names(ctx: CompileContext) -> Iterator[tuple[str, str, Span, str]]:
    """(what, name, where, key path) of every name the plan would carry."""
    for name, entry in ctx.sources.named["aliases"].items():
        yield "alias name", name, entry.key_span, f"aliases.{name}"
    for name, entry in ctx.sources.named["models"].items():
        yield "model name", name, entry.key_span, f"models.{name}"
    for name, entry in ctx.sources.named["providers"].items():
        if not _PROVIDER_NAME_CHECKED.search(name):
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
