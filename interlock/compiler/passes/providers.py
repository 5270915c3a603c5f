"""Providers: kinds, base URLs, credential variable names; with --require-env, that each is set."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, parse_qsl, urlsplit

from interlock.common.envnames import not_a_credential
from interlock.common.hosts import host_class
from interlock.common.kinds import KINDS, PROVIDER_KINDS, has_workers, listed
from interlock.compiler.context import CompileContext, Provider
from interlock.compiler.diagnostics import CONTROL_CHARS, Span, did_you_mean
from interlock.compiler.loader import SourceDoc
from interlock.compiler.secrets import CREDENTIAL_KEY, looks_like_secret

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
PROVIDER_NAME = re.compile(r"^[^/\s]+$")
_SPACE = re.compile(r"\s")


def providers(ctx: CompileContext) -> None:
    """Each provider is checked on its own; no provider inherits another's credential."""
    for name, provider in ctx.providers.items():
        _provider(ctx, name, provider)
    _shared_credentials(ctx)


def _provider(ctx: CompileContext, name: str, provider: Provider) -> None:
    section, entry = provider.section, provider.entry
    where = f"providers.{name}"
    # A shape problem inside the entry (say, a misspelt `base_ulr`) already has its diagnostic;
    # "missing base_url" on top of it would be a derived one.
    complete = not ctx.broken_under(where)
    if not PROVIDER_NAME.match(name):
        suggestion = re.sub(r"[/\s]+", "-", name).strip("-") or "local"
        ctx.sink.add(
            "IL109",
            entry.key_span,
            f"provider name `{name}` may not be empty or contain `/` or whitespace",
            path=where,
            value=name,
            hint=f"the provider is the text before the first `/` of a chain entry; e.g. `{suggestion}`",
        )
    if section.kind not in PROVIDER_KINDS:
        ctx.sink.add(
            "IL101",
            ctx.span_of(entry, "kind"),
            f"`{where}.kind` is `{section.kind}`; a provider is {listed()}",
            path=f"{where}.kind",
            value=section.kind,
            hint=did_you_mean(section.kind, PROVIDER_KINDS)
            or "; ".join(f"`{k.name}` for {k.what}" for k in KINDS.values()),
        )
    elif KINDS[section.kind].shape == "base_url":
        _base_url(ctx, name, provider, complete)
    else:
        _ollama(ctx, name, provider, complete)
    if (
        section.responses
        and section.kind in PROVIDER_KINDS
        and "responses" not in KINDS[section.kind].also_speaks
    ):
        speakers = [k.name for k in KINDS.values() if "responses" in k.also_speaks]
        ctx.sink.add(
            "IL116",
            ctx.span_of(entry, "responses"),
            f"provider `{name}` is `kind: {section.kind}`, which has no Responses API to declare",
            path=f"{where}.responses",
            value=True,
            hint=f"remove `responses: true`; only {', '.join(f'`kind: {s}`' for s in speakers)} "
            "providers may serve `/responses`",
        )
    _check_credential(ctx, name, provider)


def _base_url(ctx: CompileContext, name: str, provider: Provider, complete: bool) -> None:
    section, entry, where = provider.section, provider.entry, f"providers.{name}"
    kind = KINDS[section.kind]
    own_workers = kind.workers_allowed and bool(section.workers)
    if section.base_url is None:
        if complete and not own_workers:
            ctx.sink.add(
                "IL102",
                entry.key_span,
                f"provider `{name}` (kind: {kind.name}) has no `base_url`",
                path=f"{where}.base_url",
                hint=f"add e.g. `base_url: {kind.example_url}`"
                + (" (or `workers:`, one per server, each with its own slots)" * kind.workers_allowed),
            )
    else:
        url_path = (*entry.path, "base_url")
        if check_url(ctx, entry.doc, url_path, section.base_url, f"{where}.base_url", base=True):
            _reach(ctx, entry.doc.span(url_path), f"{where}.base_url", section.base_url, section.api_key_env)
    if section.workers is not None and not kind.workers_allowed:
        ctx.sink.add(
            "IL107",
            ctx.key_span_of(entry, "workers"),
            f"provider `{name}` is `kind: {kind.name}`; only `kind: ollama` and `kind: openai` have workers",
            path=f"{where}.workers",
            hint="move the workers to an `ollama` or `openai` provider, or use `base_url`",
        )
    elif section.workers is not None and section.base_url is not None:
        ctx.sink.add(
            "IL107",
            ctx.key_span_of(entry, "workers"),
            f"provider `{name}` has both `base_url` and `workers`; it sends to one or the other",
            path=f"{where}.workers",
            hint="one server: `base_url` (no slots) or one worker; several: a worker each, "
            "`url` being its base URL (e.g. `http://10.0.0.5:8080/v1`)",
        )
    elif section.workers is not None and not section.workers and complete:
        ctx.sink.add(
            "IL107",
            ctx.span_of(entry, "workers"),
            f"provider `{name}` (kind: {kind.name}) has an empty `workers` list",
            path=f"{where}.workers",
            hint="add `workers: [{name: box1, url: http://127.0.0.1:8080/v1, max_concurrent: 1}]` "
            "or use `base_url`",
        )
    if section.api_key_env is None and complete and kind.key_expected:
        ctx.sink.add(
            "IL108",
            entry.key_span,
            f"provider `{name}` has no `api_key_env`: requests go out without a credential",
            path=f"{where}.api_key_env",
            hint="add `api_key_env: VARIABLE_NAME` unless the endpoint needs no key; "
            "a provider never borrows another provider's credential",
        )


def _ollama(ctx: CompileContext, name: str, provider: Provider, complete: bool) -> None:
    section, entry, where = provider.section, provider.entry, f"providers.{name}"
    if not section.workers and complete:
        ctx.sink.add(
            "IL107",
            ctx.span_of(entry, "workers") if section.workers is not None else entry.key_span,
            f"provider `{name}` (kind: ollama) has no workers",
            path=f"{where}.workers",
            hint="add `workers: [{name: box1, url: http://127.0.0.1:11434}]`",
        )
    if section.base_url is not None:
        ctx.sink.add(
            "IL107",
            ctx.key_span_of(entry, "base_url"),
            f"provider `{name}` is `kind: ollama`; its URLs belong to its workers, not `base_url`",
            path=f"{where}.base_url",
            hint="move the URL to `workers: [{name: ..., url: ...}]`",
        )


def _check_credential(ctx: CompileContext, name: str, provider: Provider) -> None:
    variable = provider.section.api_key_env
    if variable is None:
        return
    where = f"providers.{name}.api_key_env"
    path = (*provider.entry.path, "api_key_env")
    span = provider.entry.doc.span(path)
    if looks_like_secret(variable) or not ENV_NAME.match(variable):
        # Often a pasted key: never echo it, and mask it wherever the line is shown.
        provider.entry.doc.mark_secret(path)
        what = "looks like a credential itself" if looks_like_secret(variable) else "is not a variable name"
        ctx.sink.add(
            "IL104",
            span,
            f"`{where}` {what}; it must name an environment variable "
            "(letters, digits and `_`, not starting with a digit); the value is not shown",
            path=where,
            hint="if this is the key itself, revoke it, put it in a variable and write the variable's name",
        )
        return
    if not credential_variable(ctx, span, where, variable, f"provider `{name}`'s key, sent to its host"):
        return
    if ctx.options.require_env and not ctx.options.environ.get(variable):
        ctx.sink.add(
            "IL105",
            span,
            f"credential variable `{variable}` of provider `{name}` is not set (or empty)",
            path=where,
            value=variable,
            hint=f"export {variable}=... in the deployment environment",
        )


def accepted(variable: str) -> bool:
    """Whether ``variable`` passes the name checks here (IL104, IL111): a later pass looks only at those,
    never repeating their diagnostics."""
    return (
        bool(ENV_NAME.match(variable)) and not looks_like_secret(variable) and not not_a_credential(variable)
    )


def credential_variable(ctx: CompileContext, span: Span, where: str, variable: str, what: str) -> bool:
    """Whether ``variable`` may hold ``what`` (IL111 reported when it may not)."""
    reason = not_a_credential(variable)
    if reason is None:
        return True
    ctx.sink.add(
        "IL111",
        span,
        f"`{where}` is `{variable}`, which {reason}; it may not hold {what}",
        path=where,
        value=variable,
        hint="name a variable that holds only this key (e.g. `GROQ_API_KEY` for a provider, `TEAM_KEY` "
        "for a caller key) and set it in the deployment",
    )
    return False


def _shared_credentials(ctx: CompileContext) -> None:
    """One variable sent to two providers at different places (host and port, of a base URL or of a
    worker) hands one's key to the other: each provider is compared with the first that sends it."""
    first: dict[str, tuple[str, dict[str, str]]] = {}
    for name, provider in ctx.providers.items():
        variable = provider.section.api_key_env
        places = _places(provider)
        if variable is None or not places:
            continue
        owner, owned = first.setdefault(variable, (name, places))
        stray = [shown for place, shown in places.items() if place not in owned]
        if owner == name or not stray:
            continue
        ctx.sink.add(
            "IL110",
            ctx.span_of(provider.entry, "api_key_env"),
            f"providers `{owner}` ({', '.join(owned.values())}) and `{name}` ({stray[0]}) both send "
            f"`{variable}`; each would receive the other's credential",
            path=f"providers.{name}.api_key_env",
            value=variable,
            hint="give each provider its own variable",
        )


def called_urls(provider: Provider) -> list[str]:
    """The URLs a provider sends its key to that parse as http(s) with a host (IL106 reports the rest):
    its ``base_url`` or its workers' ``url``; none for an unknown kind or both at once (IL101, IL107)."""
    section = provider.section
    kind = KINDS.get(section.kind)
    if kind is None or (section.base_url and section.workers):
        return []
    urls = [section.base_url] if section.base_url and kind.shape == "base_url" else []
    urls += [worker.url for worker in section.workers or [] if has_workers(kind.name, section.workers)]
    return [url for url in urls if _place(url) is not None]


def _places(provider: Provider) -> dict[str, str]:
    """``host:port`` (the port the scheme implies when none is written) -> as written, per URL called."""
    places = (_place(url) for url in called_urls(provider))
    return {place[0]: place[1] for place in places if place is not None}


def _place(url: str) -> tuple[str, str] | None:
    try:
        parts = urlsplit(url.strip())
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    shown = parts.netloc.rpartition("@")[2]
    return f"{parts.hostname.rstrip('.')}:{port}", shown


def _reach(ctx: CompileContext, span: Span, where: str, url: str, key: str | None) -> None:
    """A base URL on this machine, or in plain http off it, is allowed but said (IL114, IL115)."""
    parts = urlsplit(url.strip())
    host = parts.hostname or ""
    sent, plural = (f"`{key}` and every request", True) if key else ("every request", False)
    if host_class(host) == "loopback":
        ctx.sink.add(
            "IL114",
            span,
            f"`{where}` points at this machine (`{host}`): {sent} {'go' if plural else 'goes'} to "
            "whatever listens on that port, with the gateway's own network position",
            path=where,
            value=url,
            hint="use the service's own address if it is a model server; a loopback port often belongs to "
            "a service that trusts local callers",
        )
    elif parts.scheme == "http":
        ctx.sink.add(
            "IL115",
            span,
            f"`{where}` is plain `http://` to `{host}`: {sent} {'cross' if plural else 'crosses'} the "
            "network unencrypted",
            path=where,
            value=url,
            hint=f"use `https://{url.strip()[len('http://') :]}` if the server offers TLS",
        )


def check_url(
    ctx: CompileContext,
    doc: SourceDoc,
    path: tuple[str | int, ...],
    url: str,
    where: str,
    *,
    base: bool = False,
) -> bool:
    """An absolute http(s) URL with a host, and no credentials in it (user-info or query); a ``base`` URL
    (paths are appended to it) also without `?` or `#`; False when it is not (and the diagnostic is
    reported). A cloud metadata or link-local host is allowed but said (IL113)."""
    span: Span = doc.span(path)
    if not _printable(ctx, span, where, url):
        return False
    parts: SplitResult | None
    try:
        parts = urlsplit(url.strip())
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        parts, port_ok = None, False
    if parts is not None and _holds_credential(parts):
        doc.mark_secret(path)
        ctx.sink.add(
            "IL103",
            span,
            f"`{where}` carries a credential in the URL; the value is not shown",
            path=where,
            hint="remove `user:password@` or `?key=...` and name a variable in `api_key_env`",
        )
        return False
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        ctx.sink.add(
            "IL106",
            span,
            f"`{where}` is not an absolute http(s) URL: `{url}`",
            path=where,
            value=url,
            hint=_absolute_hint(url, parts),
        )
        return False
    if base and not _base_url_ends_at_path(ctx, span, where, url):
        return False
    _say_metadata_host(ctx, span, where, url, parts.hostname)
    return True


def _printable(ctx: CompileContext, span: Span, where: str, url: str) -> bool:
    """IL106 when the URL holds a control character or a space (False: reported)."""
    control = CONTROL_CHARS.search(url.strip())
    if control is not None:  # `urlsplit` drops CR, LF and tab without a word; the request would carry them
        ctx.sink.add(
            "IL106",
            span,
            f"`{where}` holds the control character U+{ord(control.group()):04X}: `{url}`",
            path=where,
            value=url,
            hint="a URL is one line of printable text: remove line breaks, tabs and other control characters",
        )
        return False
    space = _SPACE.search(url.strip())
    if space is not None:  # `urlsplit` keeps it; the request line would be split at it
        ctx.sink.add(
            "IL106",
            span,
            f"`{where}` holds a space (U+{ord(space.group()):04X}) at character {space.start() + 1}: `{url}`",
            path=where,
            value=url,
            hint="a URL has no spaces: remove it, or write it as `%20` where the server expects one",
        )
        return False
    return True


def _holds_credential(parts: SplitResult) -> bool:
    """User-info, or a query key named like a credential (``key``, ``token``, ...)."""
    query_keys = [k for k, _ in parse_qsl(parts.query)]
    return bool(parts.username or parts.password or any(CREDENTIAL_KEY.match(k) for k in query_keys))


def _absolute_hint(url: str, parts: SplitResult | None) -> str:
    """What to write instead of a URL that is not an absolute http(s) one."""
    if "://" not in url:
        return f"write the scheme: `http://{url}` or `https://{url}`"
    if parts is not None and parts.scheme not in ("http", "https"):
        return f"the scheme is `{parts.scheme}`; use http:// or https://"
    return "write `http(s)://host[:port][/path]`"


def _base_url_ends_at_path(ctx: CompileContext, span: Span, where: str, url: str) -> bool:
    """IL112 when a base URL holds `?` or `#` (request paths appended after it would be lost)."""
    if "?" not in url and "#" not in url:
        return True
    mark = "?" if "?" in url else "#"
    ctx.sink.add(
        "IL112",
        span,
        f"`{where}` holds `{mark}`: `{url}`; request paths are appended to a base URL, and after "
        f"`{mark}` they would be {'a query' if mark == '?' else 'a fragment, never sent'}",
        path=where,
        value=url,
        hint=f"write the URL up to the path only: `{url.strip().split(mark, 1)[0].split('?', 1)[0]}`",
    )
    return False


def _say_metadata_host(ctx: CompileContext, span: Span, where: str, url: str, hostname: str) -> None:
    """IL113 (a warning) when the host is a cloud's metadata service or link-local."""
    found = host_class(hostname)
    if found not in ("metadata", "link-local"):
        return
    what, there = (
        ("a cloud's instance-metadata service", "to the address where the cloud serves")
        if found == "metadata"
        else ("a link-local address", "into the link-local range where clouds serve")
    )
    ctx.sink.add(
        "IL113",
        span,
        f"`{where}` points at {what} (`{hostname}`): the gateway would send requests (and any "
        f"key) {there} the machine's own credentials",
        path=where,
        value=url,
        hint="a model server is never at 169.254.0.0/16, a cloud's agent address or `metadata.*`; "
        "check the address",
    )
