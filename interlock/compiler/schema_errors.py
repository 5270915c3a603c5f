"""One pydantic validation error -> one diagnostic: the place, the key path, the value and what is valid.

The wording lives apart from ``validate.salvage`` (which decides what to prune and when to stop) so that
each can be read on its own. A value under a credential-like key is never shown.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel

from interlock.compiler.diagnostics import DiagnosticSink, did_you_mean
from interlock.compiler.loader import Path, SourceDoc, dotted
from interlock.compiler.secrets import CREDENTIAL_KEY

_SENSITIVE_FIELDS = frozenset({"api_key_env"})
_RANGE_CODES = {"context_tokens": "IL209", "max_concurrent": "IL203"}
_EXPECTED = {
    "string_type": "a string",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "`true` or `false`",
    "bool_parsing": "`true` or `false`",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
    "string_too_short": "a non-empty string",
}
"""What a value must be, by pydantic error type (the types whose wording needs no context)."""


def report_error(
    sink: DiagnosticSink, doc: SourceDoc, base: Path, model: type[BaseModel], error: Any
) -> None:
    """Add the diagnostic for one pydantic ``error`` of ``model`` (its value is at ``base`` in ``doc``)."""
    loc: Path = tuple(error["loc"])
    if loc and loc[-1] == "[key]":
        loc = loc[:-1]
        path = (*base, *loc)
        sink.add(
            "IL004",
            doc.key_span(path),
            f"`{dotted(path[:-1])}`: the key `{loc[-1]}` must be a string",
            path=dotted(path),
            value=str(loc[-1]),
            hint='quote it: `"' + str(loc[-1]) + '": ...`',
        )
        return
    path = (*base, *loc)
    where = dotted(path)
    kind = error["type"]
    if kind == "extra_forbidden":
        fields = fields_at(model, loc[:-1])
        key = str(loc[-1])
        sink.add(
            "IL003",
            doc.key_span(path),
            f"unknown key `{key}` in `{dotted(path[:-1]) or 'the file'}`",
            path=where,
            value=key,
            hint=did_you_mean(key, fields) or (f"valid keys: {', '.join(fields)}" if fields else None),
        )
        return
    if kind == "missing":
        sink.add(
            "IL004",
            doc.span(path[:-1]),
            f"`{dotted(path[:-1])}` is missing the required key `{loc[-1]}`",
            path=where,
            hint=_field_hint(model, loc),
        )
        return
    sensitive = any(isinstance(p, str) and (CREDENTIAL_KEY.match(p) or p in _SENSITIVE_FIELDS) for p in loc)
    raw = error.get("input")
    shown = None if sensitive else show_value(raw)
    text = str(error["msg"]).removeprefix("Value error, ")
    if "duration is written" in text:
        sink.add(
            "IL008",
            doc.span(path),
            f"`{where}` is not a duration" + (f": `{shown}`" if shown is not None else ""),
            path=where,
            value=shown,
            hint=_duration_hint(raw),
        )
        return
    expected, hint = _expected(kind, error, raw)
    hint = hint or _field_hint(model, loc)
    code = "IL004"
    if kind in ("greater_than_equal", "greater_than") and isinstance(loc[-1], str):
        code = _RANGE_CODES.get(loc[-1], "IL004")
    sink.add(
        code,
        doc.span(path),
        f"`{where}` must be {expected or text}" + (f", not `{shown}`" if shown is not None else ""),
        path=where,
        value=shown,
        hint=hint,
    )


def _expected(kind: str, error: Any, raw: Any) -> tuple[str | None, str | None]:
    ctx = error.get("ctx") or {}
    if kind in _EXPECTED:
        return _EXPECTED[kind], None
    if kind == "literal_error":
        choices = [
            c.strip().strip("'") for c in str(ctx.get("expected", "")).replace(" or ", ", ").split(",")
        ]
        choices = [c for c in choices if c]
        hint = did_you_mean(str(raw), choices) if isinstance(raw, str) else None
        return "one of " + ", ".join(f"`{c}`" for c in choices), hint
    if kind == "greater_than_equal":
        return f"at least {ctx.get('ge')}", None
    if kind == "greater_than":
        return f"greater than {ctx.get('gt')}", None
    return None, None


def show_value(value: Any) -> str | None:
    """How a bad value is named in a message: scalars as written, containers by their kind."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


def _duration_hint(value: Any) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"add a unit: `{value}s` or `{value}ms`"
    return "write a number and a unit: `500ms`, `3s`, `10m` or `1h`"


def _field_hint(model: type[BaseModel], loc: Path) -> str | None:
    owner = model_at(model, loc[:-1])
    if owner is None:
        return None
    info = owner.model_fields.get(str(loc[-1]))
    return f"`{loc[-1]}`: {info.description}" if info and info.description else None


def fields_at(model: type[BaseModel], loc: Path) -> list[str]:
    """Field names of the model that sits at ``loc`` inside ``model``."""
    owner = model_at(model, loc)
    return list(owner.model_fields) if owner is not None else []


def model_at(model: type[BaseModel], loc: Path) -> type[BaseModel] | None:
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = current.model_fields.get(str(part))
        if info is None:
            return None
        current = _inner_model(info.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return current
    return None


def _inner_model(annotation: Any) -> Any:
    """The BaseModel inside ``X | None``, ``list[X]`` or ``dict[str, X]``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list, dict):
        for arg in reversed(typing.get_args(annotation)):
            inner = _inner_model(arg)
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return annotation
