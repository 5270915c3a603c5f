"""Raw merged sections -> typed sections; unknown keys, wrong types, bad durations, inline credentials."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from interlock.compiler.context import Alias, ApiKey, CompileContext, Model, Provider, Tenant
from interlock.compiler.diagnostics import did_you_mean
from interlock.compiler.loader import NAMED_SECTIONS, Entry, Path, SourceDoc, dotted
from interlock.compiler.schema_errors import show_value
from interlock.compiler.secrets import CREDENTIAL_KEY, contains_secret, looks_like_secret
from interlock.compiler.validate import REDACTED, Salvaged, salvage
from interlock.schema.config import (
    AliasSection,
    HealthSection,
    KeySection,
    LintSection,
    ModelFacts,
    PreflightSection,
    PricingSection,
    ProviderSection,
    RoutingSection,
    ServerSection,
    SourceFile,
    TenantSection,
    TimeoutsSection,
)

SINGLETON_MODELS: dict[str, type[BaseModel]] = {
    "server": ServerSection,
    "health": HealthSection,
    "timeouts": TimeoutsSection,
    "preflight": PreflightSection,
    "routing": RoutingSection,
    "lint": LintSection,
    "pricing": PricingSection,
}

SERVER_AUTH = ("server", "auth")
AUTH_MODES = ("off", "optional", "required")

NAME_TABLES = frozenset({"model_concurrency", "context_limits"})
"""Mappings whose keys are model names, not schema keys (a model may be called `token`)."""


def shape(ctx: CompileContext) -> None:
    """Check every section against its model; keep what is valid, typed; note what was pruned."""
    for doc in ctx.sources.docs:
        _top_level(ctx, doc, is_main=doc is ctx.sources.main)
        _credentials(ctx, doc, doc.data, ())
    for section, model in SINGLETON_MODELS.items():
        entry = ctx.sources.singletons.get(section)
        if entry is not None:
            result = _validate(ctx, entry, model)
            if result.value is not None:
                setattr(ctx, section, result.value)
    for name, entry in ctx.sources.named["providers"].items():
        result = _validate(ctx, entry, ProviderSection)
        if isinstance(result.value, ProviderSection):
            index = [result.source_index(("workers",), i) for i in range(len(result.value.workers or ()))]
            ctx.providers[name] = Provider(name, result.value, entry, index)
    for name, entry in ctx.sources.named["aliases"].items():
        result = _validate(ctx, entry, AliasSection)
        if isinstance(result.value, AliasSection):
            index = [result.source_index(("chain",), i) for i in range(len(result.value.chain))]
            ctx.aliases[name] = Alias(name, result.value, entry, index)
    for name, entry in ctx.sources.named["models"].items():
        result = _validate(ctx, entry, ModelFacts)
        if isinstance(result.value, ModelFacts):
            _model(ctx, name, entry, result.value)
    for name, entry in ctx.sources.named["tenants"].items():
        result = _validate(ctx, entry, TenantSection)
        if isinstance(result.value, TenantSection):
            ctx.tenants[name] = Tenant(name, result.value, entry)
    for name, entry in ctx.sources.named["keys"].items():
        result = _validate(ctx, entry, KeySection)
        if isinstance(result.value, KeySection):
            ctx.keys[name] = ApiKey(name, result.value, entry)


def _model(ctx: CompileContext, name: str, entry: Entry, facts: ModelFacts) -> None:
    provider_name, _, model_name = name.partition("/")
    if not provider_name or not model_name:
        ctx.sink.add(
            "IL303",
            entry.key_span,
            f"model fact key `{name}` is not `provider/model`",
            path=f"models.{name}",
            value=name,
            hint="write the model as it appears in a chain, e.g. `groq/llama-3.3-70b-versatile`",
        )
        ctx.broken.add(f"models.{name}")
        return
    ctx.models[name] = Model(name, provider_name, model_name, facts, entry)


def _validate(ctx: CompileContext, entry: Entry, model: type[BaseModel]) -> Salvaged:
    base = dotted(entry.path)
    if entry.value is REDACTED or looks_like_secret(entry.value):
        ctx.broken.add(base)  # a credential where a section should be: reported by `_credentials`
        return Salvaged(None)
    raw = {} if entry.value is None and model is not AliasSection else entry.value
    result = salvage(model, raw, entry.doc, entry.path, ctx.sink)
    if result.value is None:
        ctx.broken.add(base)
    for path in result.pruned:
        ctx.broken.add(dotted((*entry.path, *path)))
    return result


def _top_level(ctx: CompileContext, doc: SourceDoc, *, is_main: bool) -> None:
    if doc.data is None:
        return  # a YAML syntax error, already reported
    if not isinstance(doc.data, dict):
        ctx.sink.add(
            "IL004",
            doc.span(()),
            f"a configuration file must be a mapping of sections, not {_kind(doc.data)}",
            # not the text itself: this may be any file (an INI file of credentials); the excerpt of
            # its first line is all that is shown, cut and masked
            value=None if isinstance(doc.data, str) else show_value(doc.data),
            hint="start with `version: 1` and sections such as `providers:` and `aliases:`",
        )
        doc.data = {}
        return
    known = SourceFile.model_fields
    for key, value in doc.data.items():
        if key not in known:
            if isinstance(key, str) and CREDENTIAL_KEY.match(key):
                continue  # reported as an inline credential by `_credentials`
            ctx.sink.add(
                "IL003",
                doc.key_span((key,)),
                f"unknown section `{key}`",
                path=str(key),
                value=str(key),
                hint=did_you_mean(str(key), known) or f"valid sections: {', '.join(known)}",
            )
        elif key in NAMED_SECTIONS and value is not None and not isinstance(value, dict):
            ctx.sink.add(
                "IL004",
                doc.span((key,)),
                f"`{key}` must be a mapping of names to definitions, not {_kind(value)}",
                path=key,
                value=show_value(value),
            )
        elif key == "include":
            _check_include(ctx, doc, value)
    version = doc.data.get("version")
    if version == 1 or (version is None and not is_main):
        return
    span = doc.span(("version",)) if "version" in doc.data else doc.span(())
    ctx.sink.add(
        "IL009",
        span,
        "the main file must declare `version: 1`"
        if version is None
        else f"unsupported configuration version `{show_value(version)}`",
        path="version",
        value=None if version is None else show_value(version),
        hint="this compiler reads `version: 1`",
    )


def _check_include(ctx: CompileContext, doc: SourceDoc, value: Any) -> None:
    if isinstance(value, list):
        for index, item in enumerate(value):
            if not isinstance(item, str):
                ctx.sink.add(
                    "IL004",
                    doc.span(("include", index)),
                    f"`include[{index}]` must be a file path, not `{show_value(item)}`",
                    path=f"include[{index}]",
                    value=show_value(item),
                )
        return
    ctx.sink.add(
        "IL004",
        doc.span(("include",)),
        f"`include` must be a list of file paths, not {_kind(value)}",
        path="include",
        value=show_value(value),
        hint="write `include: [aliases/mana.yaml]`",
    )


_STORE_IT = "store it in an environment variable and name it: `api_key_env: VARIABLE_NAME`"


def _credentials(ctx: CompileContext, doc: SourceDoc, value: Any, at: Path) -> None:
    """Report credential values written inline, mask them in source excerpts, and cut them out."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            if looks_like_secret(item):
                _inline(ctx, doc, (*at, index), "a value that looks like a credential is written inline")
                value[index] = REDACTED
            else:
                _credentials(ctx, doc, item, (*at, index))
        return
    if not isinstance(value, dict):
        return
    names_here = (len(at) == 1 and at[0] in NAMED_SECTIONS) or (bool(at) and at[-1] in NAME_TABLES)
    for key in list(value):
        path = (*at, key)
        if looks_like_secret(key):
            _inline(ctx, doc, path, "a key that looks like a credential is written inline")
            del value[key]
        elif path == SERVER_AUTH and value[key] in AUTH_MODES:
            continue  # `server.auth: required` is a setting, not a credential
        elif not names_here and isinstance(key, str) and CREDENTIAL_KEY.match(key):
            _inline(ctx, doc, path, "a credential is written inline")
            del value[key]
        elif key != "api_key_env" and looks_like_secret(value[key]):
            # `api_key_env` holding a key is reported by the providers pass (IL104).
            _inline(ctx, doc, path, "a value that looks like a credential is written inline")
            value[key] = REDACTED
        elif key == "description" and isinstance(value[key], str) and contains_secret(value[key]):
            # descriptions reach generated code (codegen) and `explain`: nothing key-shaped may ride along
            _inline(
                ctx,
                doc,
                path,
                "a description holds a value that looks like a credential",
                hint="a description is shown to callers and in generated code: describe, do not paste",
            )
            value[key] = REDACTED
        else:
            _credentials(ctx, doc, value[key], path)


def _inline(ctx: CompileContext, doc: SourceDoc, path: Path, what: str, hint: str = _STORE_IT) -> None:
    doc.mark_secret(path)
    ctx.sink.add(
        "IL103",
        doc.key_span(path) if isinstance(path[-1], str) else doc.span(path),
        f"{what} at `{dotted(path)}`; its value is not shown",
        path=dotted(path),
        hint=hint,
    )
    ctx.broken.add(dotted(path))


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else "null" if value is None else "a value"
    )
