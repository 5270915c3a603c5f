"""Providers: kinds, base URLs, credential variable names; with --require-env, that each is set."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from interlock.compiler.context import CompileContext
from interlock.compiler.diagnostics import Span, did_you_mean
from interlock.schema.config import PROVIDER_KINDS

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def providers(ctx: CompileContext) -> None:
    """Each provider is checked on its own; no provider inherits another's credential."""
    for name, provider in ctx.providers.items():
        section, entry = provider.section, provider.entry
        where = f"providers.{name}"
        if "/" in name or not name:
            ctx.sink.add(
                "IL303",
                entry.key_span,
                f"provider name `{name}` may not contain `/`",
                path=where,
                value=name,
                hint="the provider is the text before the first `/` of a chain entry",
            )
        if section.kind not in PROVIDER_KINDS:
            ctx.sink.add(
                "IL101",
                ctx.span_of(entry, "kind"),
                f"unknown provider kind `{section.kind}`",
                path=f"{where}.kind",
                value=section.kind,
                hint=did_you_mean(section.kind, PROVIDER_KINDS) or "use `ollama` or `openai`",
            )
            continue
        if section.kind == "openai":
            if section.base_url is None:
                ctx.sink.add(
                    "IL102",
                    entry.key_span,
                    f"provider `{name}` (kind: openai) has no `base_url`",
                    path=f"{where}.base_url",
                    hint="add e.g. `base_url: https://api.groq.com/openai/v1`",
                )
            else:
                check_url(ctx, section.base_url, ctx.span_of(entry, "base_url"), f"{where}.base_url")
            if section.workers is not None:
                ctx.sink.add(
                    "IL107",
                    ctx.key_span_of(entry, "workers"),
                    f"provider `{name}` is `kind: openai`; only `kind: ollama` has workers",
                    path=f"{where}.workers",
                    hint="move the workers to an `ollama` provider, or use `base_url`",
                )
            if section.api_key_env is None:
                ctx.sink.add(
                    "IL108",
                    entry.key_span,
                    f"provider `{name}` has no `api_key_env`: requests go out without a credential",
                    path=where,
                    hint="add `api_key_env: VARIABLE_NAME` unless the endpoint needs no key",
                )
        else:
            if not section.workers:
                ctx.sink.add(
                    "IL107",
                    entry.key_span,
                    f"provider `{name}` (kind: ollama) has no workers",
                    path=f"{where}.workers",
                    hint="add `workers: [{name: box1, url: http://127.0.0.1:11434}]`",
                )
            if section.base_url is not None:
                ctx.sink.add(
                    "IL107",
                    ctx.key_span_of(entry, "base_url"),
                    f"provider `{name}` is `kind: ollama`; its URLs belong to its workers",
                    path=f"{where}.base_url",
                    hint="move the URL to `workers: [{name: ..., url: ...}]`",
                )
        _check_credential(ctx, name, provider.section.api_key_env, ctx.span_of(entry, "api_key_env"))


def _check_credential(ctx: CompileContext, name: str, variable: str | None, span: Span) -> None:
    if variable is None:
        return
    where = f"providers.{name}.api_key_env"
    if not ENV_NAME.match(variable):
        # Often a pasted key: never echo it.
        ctx.sink.add(
            "IL104",
            span,
            "`api_key_env` must name an environment variable (letters, digits, `_`); the value is not shown",
            path=where,
            hint="if this is the key itself, move it into a variable and write that variable's name",
        )
        return
    if ctx.options.require_env and not ctx.options.environ.get(variable):
        ctx.sink.add(
            "IL105",
            span,
            f"credential variable `{variable}` of provider `{name}` is not set",
            path=where,
            value=variable,
            hint=f"export {variable}=... in the deployment environment",
        )


def check_url(ctx: CompileContext, url: str, span: Span, where: str) -> None:
    """An absolute http(s) URL with a host and no credentials in it."""
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        parts, port_ok = None, False
    if parts is not None and (parts.username or parts.password):
        ctx.sink.add(
            "IL103",
            span,
            f"`{where}` carries credentials in the URL; the value is not shown",
            path=where,
            hint="remove `user:password@` and use `api_key_env`",
        )
        return
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        hint = (
            "write the scheme, e.g. `http://" + url + "`" if "://" not in url else "use http:// or https://"
        )
        ctx.sink.add("IL106", span, f"`{where}` is not an http(s) URL", path=where, value=url, hint=hint)
