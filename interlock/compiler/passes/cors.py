"""server.cors -> normalized origins and headers; `*` with credentials and malformed entries rejected.

Browsers compare the ``Origin`` header byte for byte: ``scheme://host[:port]``, lowercase, without a path,
a trailing ``/`` or a default port. An origin written any other way would never match, so it is an error
that says how to write it, never silently rewritten into something else. The runtime then only looks
the caller's ``Origin`` up in the normalized list.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from interlock.common.headers import HTTP_TOKEN
from interlock.compiler.context import CompileContext
from interlock.schema.config import CorsSection
from interlock.schema.plan import PlanCors

ANY = "*"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def cors(ctx: CompileContext) -> None:
    """Check ``server.cors`` and keep its normalized form for the plan (``ctx.cors``)."""
    section = ctx.server.cors
    entry = ctx.sources.singletons.get("server")
    if section is None or entry is None or ctx.broken_under("server.cors"):
        return
    origins = _origins(ctx, section)
    headers = _headers(ctx, section)
    if origins is None or headers is None:
        return
    if origins == [ANY] and section.allow_credentials:
        ctx.sink.add(
            "IL801",
            ctx.span_of(entry, "cors", "allow_credentials"),
            "`server.cors.allow_credentials` is true while `allow_origins` is `*`; browsers refuse "
            "credentialed answers that allow any origin",
            path="server.cors.allow_credentials",
            value="true",
            hint="list the origins that may send credentials (e.g. `https://app.example.com`), or drop "
            "`allow_credentials`",
        )
        return
    ctx.cors = PlanCors(
        allow_origins=origins,
        allow_credentials=section.allow_credentials,
        allow_headers=headers,
        max_age_ms=section.max_age,
    )


def _origins(ctx: CompileContext, section: CorsSection) -> list[str] | None:
    """The normalized, sorted origins; None when any is malformed (each one reported)."""
    entry = ctx.sources.singletons["server"]
    written = section.allow_origins
    if not written:
        ctx.sink.add(
            "IL802",
            ctx.span_of(entry, "cors", "allow_origins"),
            "`server.cors.allow_origins` is empty, so no browser origin would be allowed",
            path="server.cors.allow_origins",
            value="[]",
            hint="list origins such as `https://app.example.com`, or remove `server.cors` to turn CORS off",
        )
        return None
    if ANY in written and len(written) > 1:
        index = written.index(ANY)
        ctx.sink.add(
            "IL802",
            ctx.span_of(entry, "cors", "allow_origins", index),
            "`*` in `server.cors.allow_origins` allows every origin, so the others listed beside it mean "
            "nothing",
            path=f"server.cors.allow_origins[{index}]",
            value=ANY,
            hint="keep either `*` alone or only the listed origins",
        )
        return None
    if written == [ANY]:
        return [ANY]
    normalized: set[str] = set()
    ok = True
    for index, origin in enumerate(written):
        result, hint = normalize_origin(origin)
        if result is not None:
            normalized.add(result)
            continue
        ok = False
        ctx.sink.add(
            "IL802",
            ctx.span_of(entry, "cors", "allow_origins", index),
            f"`{origin}` in `server.cors.allow_origins` is not an origin (`scheme://host[:port]`)",
            path=f"server.cors.allow_origins[{index}]",
            value=origin,
            hint=hint,
        )
    return sorted(normalized) if ok else None


def normalize_origin(origin: str) -> tuple[str | None, str]:
    """``(origin as browsers send it, "")``, or ``(None, hint)`` saying how to write it."""
    example = "e.g. `https://app.example.com` or `http://localhost:5173`"
    if origin.strip().lower() == "null":
        return None, "the `null` origin (sandboxed frames, local files) cannot be allowed safely"
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None, example
    scheme, host = parts.scheme.lower(), parts.hostname
    if scheme not in _DEFAULT_PORTS or not host:
        return None, f"an origin is `http://` or `https://` and a host, {example}"
    if "*" in host:
        return None, f"wildcards are not supported: list each origin, {example}"
    if parts.username is not None or parts.password is not None:
        return None, "an origin holds no user name or password"
    if ":" in host:
        host = f"[{host}]"
    fixed = f"{scheme}://{host}" + (f":{port}" if port is not None and port != _DEFAULT_PORTS[scheme] else "")
    if parts.path or parts.query or parts.fragment:
        return None, f"an origin has no path, query or trailing `/`: write `{fixed}`"
    return fixed, ""


def _headers(ctx: CompileContext, section: CorsSection) -> list[str] | None:
    """The lowercase, sorted header names, or ``["*"]``; None when any is not a header name."""
    entry = ctx.sources.singletons["server"]
    written = section.allow_headers
    if written == [ANY]:
        return [ANY]
    ok = True
    for index, name in enumerate(written):
        if name != ANY and HTTP_TOKEN.fullmatch(name):
            continue
        ok = False
        hint = (
            "keep either `*` alone (whatever a preflight asks for) or only named headers"
            if name == ANY
            else "a header name such as `authorization` or `x-request-id`"
        )
        ctx.sink.add(
            "IL803",
            ctx.span_of(entry, "cors", "allow_headers", index),
            f"`{name}` in `server.cors.allow_headers` is not a header name"
            + (" (`*` stands alone)" if name == ANY else ""),
            path=f"server.cors.allow_headers[{index}]",
            value=name,
            hint=hint,
        )
    return sorted({name.lower() for name in written}) if ok else None
