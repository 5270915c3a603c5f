"""One side of a diff (or the input of codegen): a plan file, a config file, or a config at a git ref.

A file whose content is a JSON object with a ``format_version`` is read as a compiled plan and its
content hash is verified; anything else is compiled. A config that does not compile, a plan that does
not validate and a file that is missing all raise ``InputError`` carrying a report ready to print.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from pydantic import ValidationError

from interlock.compiler import CompileOptions, compile_config
from interlock.compiler.loader import Reader
from interlock.compiler.reading import FileReader, SourceUnreadable
from interlock.compiler.report import render
from interlock.diff.gitref import GitRefError, git_reader
from interlock.schema.canonical import content_hash
from interlock.schema.plan import RoutingPlan


class InputError(Exception):
    """An input that yields no plan; ``str(error)`` says why (compile diagnostics included)."""


@dataclass(frozen=True)
class PlanInput:
    """A plan and how to name where it came from (`config.yaml`, `config.yaml@origin/main`)."""

    label: str
    plan: RoutingPlan


def load_plan(path: str, ref: str | None = None, options: CompileOptions | None = None) -> PlanInput:
    """The plan ``path`` holds or compiles to; with ``ref``, as the file stood at that git ref.

    ``options`` (include roots, the reader's size cap) apply when the file is a config to compile.
    """
    options = options or CompileOptions()
    reader: Reader = options.reader
    label = path
    if ref is not None:
        try:
            git = git_reader(ref, path)
        except GitRefError as exc:
            raise InputError(str(exc)) from exc
        cap = options.reader.max_bytes if isinstance(options.reader, FileReader) else git.max_bytes
        reader, label = dataclasses.replace(git, max_bytes=cap), f"{path}@{ref}"
    try:
        text = reader(path)
    except SourceUnreadable as exc:
        raise InputError(f"{label} {exc.problem}") from exc
    if text is None:
        raise InputError(f"{label}: file does not exist")
    data = _plan_data(text)
    if data is not None:
        return PlanInput(label, _validated(label, data))
    ctx = compile_config(path, dataclasses.replace(options, reader=reader))
    if ctx.plan is None:
        report = render(ctx.sink.items, "text", ctx.sources)
        raise InputError(f"{label} does not compile:\n{report}".rstrip("\n"))
    return PlanInput(label, ctx.plan)


def _plan_data(text: str) -> dict[str, object] | None:
    if not text.lstrip().startswith("{"):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) and "format_version" in data else None


def _validated(label: str, data: dict[str, object]) -> RoutingPlan:
    try:
        plan = RoutingPlan.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise InputError(f"{label} is not a valid routing plan: `{where}`: {first['msg']}") from exc
    if content_hash(data) != plan.content_hash:
        raise InputError(
            f"{label}: the content hash does not match the plan; it was edited after compiling, "
            "so compile it again"
        )
    return plan
