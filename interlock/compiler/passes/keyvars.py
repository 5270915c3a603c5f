"""Key variables: a caller key's ``key_env`` -> accepted only when named (and, with --require-env, valued)
as a secret.

An allow rule, not a deny list: a shell exports variables no list knows (``_`` is the path of the last
command, and served from a shell, it became an operator key), so the name must say "secret" (``*_KEY``,
``*_TOKEN``, ``*_SECRET``, ``*_APIKEY``, or a prefix the operator declares in ``server.key_env_prefixes``),
and may not be a model vendor's credential. With ``--require-env`` the value is checked as the runtime
checks it at plan load (``apikeys.weak_secret``). Keys whose variable the access pass refused (IL816,
IL111) are left alone.
"""

from __future__ import annotations

from interlock.common.apikeys import MIN_KEY_CHARS, SECRET_SUFFIXES, bad_prefix, secret_like, weak_secret
from interlock.common.vendors import vendor_of
from interlock.compiler.context import ApiKey, CompileContext
from interlock.compiler.passes.providers import accepted


def keyvars(ctx: CompileContext) -> None:
    """The declared prefixes first (a bad one admits nothing), then each key's variable."""
    prefixes = _prefixes(ctx)
    sent = {p.section.api_key_env for p in ctx.providers.values()}
    for key in ctx.keys.values():
        variable = key.section.key_env
        if variable is None or key.section.hash is not None or not accepted(variable) or variable in sent:
            continue
        if _not_a_vendors(ctx, key, variable) and _named(ctx, key, variable, prefixes):
            _valued(ctx, key, variable)


def _prefixes(ctx: CompileContext) -> tuple[str, ...]:
    server = ctx.sources.singletons.get("server")
    good: list[str] = []
    for index, prefix in enumerate(ctx.server.key_env_prefixes):
        reason = bad_prefix(prefix)
        if reason is None:
            good.append(prefix)
            continue
        where = f"server.key_env_prefixes[{index}]"
        assert server is not None  # a prefix is written there
        ctx.sink.add(
            "IL823",
            ctx.span_of(server, "key_env_prefixes", index),
            f"`{where}` is {f'`{prefix}`' if prefix else 'empty'}, which {reason}",
            path=where,
            value=prefix,
            hint="a prefix of your own for caller keys only, e.g. `CK_` (then `key_env: CK_TEAM`)",
        )
    return tuple(good)


def _not_a_vendors(ctx: CompileContext, key: ApiKey, variable: str) -> bool:
    """A vendor's key as a caller's secret lets in whoever holds the vendor's key (IL111)."""
    vendor = vendor_of(variable)
    if vendor is None:
        return True
    where = f"keys.{key.id}.key_env"
    ctx.sink.add(
        "IL111",
        ctx.span_of(key.entry, "key_env"),
        f"`{where}` is `{variable}`, {vendor.name}'s key; a caller's secret may not be a model vendor's "
        "credential",
        path=where,
        value=variable,
        hint=f"give key `{key.id}` a variable of its own, e.g. `{key.id.upper().replace('-', '_')}_KEY` "
        "(`interlock keys add` makes a secret)",
    )
    return False


def _named(ctx: CompileContext, key: ApiKey, variable: str, prefixes: tuple[str, ...]) -> bool:
    if secret_like(variable, prefixes):
        return True
    where = f"keys.{key.id}.key_env"
    names = ", ".join(f"`*{suffix}`" for suffix in SECRET_SUFFIXES)
    declared = ", ".join(f"`{p}*`" for p in prefixes)
    ctx.sink.add(
        "IL821",
        ctx.span_of(key.entry, "key_env"),
        f"`{where}` is `{variable}`, which is not named as a secret ({names}"
        + (f" or {declared}" if declared else "")
        + "); a caller key is read only from a variable that says it holds one",
        path=where,
        value=variable,
        hint=f"rename the variable, e.g. `{variable.upper()}_KEY`, or declare your own prefix in "
        "`server.key_env_prefixes`",
    )
    return False


def _valued(ctx: CompileContext, key: ApiKey, variable: str) -> None:
    """With ``--require-env``, what the runtime refuses at plan load (IL105 reports an unset variable)."""
    environ = ctx.options.environ
    if not ctx.options.require_env or not environ.get(variable):
        return
    reason = weak_secret(variable, environ)
    if reason is None:
        return
    where = f"keys.{key.id}.key_env"
    ctx.sink.add(
        "IL822",
        ctx.span_of(key.entry, "key_env"),
        f"the value of `{variable}` ({where}) {reason}; the value is not shown",
        path=where,
        value=variable,
        hint=f"set `{variable}` to a random secret of {MIN_KEY_CHARS} characters or more "
        "(`interlock keys add` makes one, or `openssl rand -base64 32`)",
    )
