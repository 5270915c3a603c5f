"""Raw merged sections -> typed sections; unknown keys, wrong types, bad durations, inline credentials."""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from interlock.compiler.context import Alias, CompileContext, Model, Provider
from interlock.compiler.diagnostics import did_you_mean
from interlock.compiler.loader import Entry, Path, SourceDoc, dotted
from interlock.schema.config import (
    AliasSection,
    HealthSection,
    LintSection,
    ModelFacts,
    ProviderSection,
    ServerSection,
    SourceFile,
    TimeoutsSection,
)

SINGLETON_MODELS: dict[str, type[BaseModel]] = {
    "server": ServerSection,
    "health": HealthSection,
    "timeouts": TimeoutsSection,
    "lint": LintSection,
}

CREDENTIAL_KEY = re.compile(
    r"^(api[_-]?key|apikey|key|token|access[_-]?token|secret|client[_-]?secret|password|passwd|"
    r"authorization|auth|bearer|credentials?)$",
    re.IGNORECASE,
)
"""Keys under which someone wrote a credential value instead of naming a variable."""


def shape(ctx: CompileContext) -> None:
    """Check every section against its model; keep the ones that pass, typed."""
    for doc in ctx.sources.docs:
        _top_level(ctx, doc, is_main=doc is ctx.sources.main)
    for section, model in SINGLETON_MODELS.items():
        entry = ctx.sources.singletons.get(section)
        if entry is not None:
            parsed = _validate(ctx, entry, model)
            if parsed is not None:
                setattr(ctx, section, parsed)
    for name, entry in ctx.sources.named["providers"].items():
        _strip_inline_credentials(ctx, entry, entry.value, ())
        provider = _validate(ctx, entry, ProviderSection)
        if isinstance(provider, ProviderSection):
            ctx.providers[name] = Provider(name, provider, entry)
        else:
            ctx.broken.add(f"providers.{name}")
    for name, entry in ctx.sources.named["aliases"].items():
        alias = _validate(ctx, entry, AliasSection)
        if isinstance(alias, AliasSection):
            ctx.aliases[name] = Alias(name, alias, entry)
        else:
            ctx.broken.add(f"aliases.{name}")
    for name, entry in ctx.sources.named["models"].items():
        facts = _validate(ctx, entry, ModelFacts)
        provider_name, _, model_name = name.partition("/")
        if not isinstance(facts, ModelFacts):
            continue
        if not provider_name or not model_name:
            ctx.sink.add(
                "IL303",
                entry.key_span,
                f"model fact key `{name}` is not `provider/model`",
                path=f"models.{name}",
                value=name,
                hint="write the model as it appears in a chain, e.g. `groq/llama-3.3-70b-versatile`",
            )
            continue
        ctx.models[name] = Model(name, provider_name, model_name, facts, entry)


def _top_level(ctx: CompileContext, doc: SourceDoc, *, is_main: bool) -> None:
    if doc.data is None:
        return  # a YAML syntax error, already reported
    if not isinstance(doc.data, dict):
        ctx.sink.add(
            "IL004",
            doc.span(()),
            "a configuration file must be a mapping of sections",
            hint="start with `version: 1` and sections such as `providers:` and `aliases:`",
        )
        doc.data = {}
        return
    known = SourceFile.model_fields
    for key, value in doc.data.items():
        if key not in known:
            ctx.sink.add(
                "IL003",
                doc.key_span((key,)),
                f"unknown section `{key}`",
                path=str(key),
                value=str(key),
                hint=did_you_mean(str(key), known) or f"known sections: {', '.join(known)}",
            )
        elif key in ("providers", "models", "aliases") and value is not None and not isinstance(value, dict):
            ctx.sink.add(
                "IL004",
                doc.span((key,)),
                f"`{key}` must be a mapping of names to definitions",
                path=key,
                value=_type_name(value),
            )
        elif key == "include":
            _check_include(ctx, doc, value)
    if is_main:
        version = doc.data.get("version")
        if version != 1:
            span = doc.span(("version",)) if "version" in doc.data else doc.span(())
            ctx.sink.add(
                "IL009",
                span,
                "the main file must declare `version: 1`"
                if version is None
                else f"unsupported configuration version `{version}`",
                path="version",
                value=None if version is None else str(version),
                hint="this compiler reads `version: 1`",
            )


def _check_include(ctx: CompileContext, doc: SourceDoc, value: Any) -> None:
    if isinstance(value, list):
        bad = [i for i, item in enumerate(value) if not isinstance(item, str)]
        for index in bad:
            ctx.sink.add(
                "IL004",
                doc.span(("include", index)),
                "an include entry must be a file path",
                path=f"include[{index}]",
                value=str(value[index]),
            )
        return
    ctx.sink.add(
        "IL004",
        doc.span(("include",)),
        "`include` must be a list of file paths",
        path="include",
        value=_type_name(value),
        hint="write `include: [aliases/mana.yaml]`",
    )


def _strip_inline_credentials(ctx: CompileContext, entry: Entry, value: Any, rel: Path) -> None:
    """Report and remove credential values written inline, so the model check does not echo them."""
    if isinstance(value, list):
        for index, item in enumerate(value):
            _strip_inline_credentials(ctx, entry, item, (*rel, index))
        return
    if not isinstance(value, dict):
        return
    for key in list(value):
        if isinstance(key, str) and CREDENTIAL_KEY.match(key):
            path = (*entry.path, *rel, key)
            ctx.sink.add(
                "IL103",
                entry.doc.key_span(path),
                f"a credential is written inline under `{key}`; its value is not shown",
                path=dotted(path),
                hint="store it in an environment variable and write `api_key_env: VARIABLE_NAME`",
            )
            del value[key]
        else:
            _strip_inline_credentials(ctx, entry, value[key], (*rel, key))


def _validate(ctx: CompileContext, entry: Entry, model: type[BaseModel]) -> BaseModel | None:
    value = {} if entry.value is None and model is not AliasSection else entry.value
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        for error in exc.errors():
            _report(ctx, entry, model, error)
        return None


def _report(ctx: CompileContext, entry: Entry, model: type[BaseModel], error: Any) -> None:
    loc: Path = tuple(error["loc"])
    path = (*entry.path, *loc)
    where = dotted(path)
    kind = error["type"]
    sensitive = any(isinstance(p, str) and CREDENTIAL_KEY.match(p) for p in loc)
    if kind == "extra_forbidden":
        fields = _fields_at(model, loc[:-1])
        key = str(loc[-1])
        ctx.sink.add(
            "IL003",
            entry.doc.key_span(path),
            f"unknown key `{key}` in `{dotted(path[:-1])}`",
            path=where,
            value=key,
            hint=did_you_mean(key, fields) or (f"valid keys: {', '.join(fields)}" if fields else None),
        )
        return
    if kind == "missing":
        ctx.sink.add(
            "IL004",
            entry.doc.span(path[:-1]),
            f"`{dotted(path[:-1])}` is missing the required key `{loc[-1]}`",
            path=where,
        )
        return
    message = str(error["msg"]).removeprefix("Value error, ")
    shown = None if sensitive else _input_text(error.get("input"))
    if "duration is written" in message:
        ctx.sink.add(
            "IL008",
            entry.doc.span(path),
            f"`{where}`: {message}",
            path=where,
            value=shown,
            hint=_duration_hint(error.get("input")),
        )
        return
    ctx.sink.add("IL004", entry.doc.span(path), f"`{where}`: {message}", path=where, value=shown)


def _duration_hint(value: Any) -> str | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"add a unit: `{value}s` or `{value}ms`"
    return None


def _input_text(value: Any) -> str | None:
    if isinstance(value, dict | list):
        return _type_name(value)
    return None if value is None else str(value)


def _type_name(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _fields_at(model: type[BaseModel], loc: Path) -> list[str]:
    """Field names of the model that sits at ``loc`` inside ``model``."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        field = current.model_fields.get(str(part))
        if field is None:
            return []
        current = _inner_model(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _inner_model(annotation: Any) -> Any:
    """The BaseModel inside ``X | None``, ``list[X]`` or ``dict[str, X]``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, dict):
        for arg in reversed(typing.get_args(annotation)):
            inner = _inner_model(arg)
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return annotation
