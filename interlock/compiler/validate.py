"""Raw YAML data -> a typed section, salvaging what is valid so later passes can still check it.

Pydantic rejects a whole model for one bad field. A compiler that stopped there would hide every other
problem of the entry (an unknown key would hide a misspelt `kind`). So each problem is reported once,
the offending part is pruned (a bad field falls back to its default; a list item that cannot be
repaired is dropped) and validation runs again. The pruned paths are returned so that later passes stay
quiet about what they can no longer see, instead of reporting a derived error.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from interlock.compiler.diagnostics import DiagnosticSink
from interlock.compiler.loader import Path, SourceDoc
from interlock.compiler.schema_errors import report_error


class _Redacted:
    """Stands where the shape pass removed a credential-like value; pruned before validation."""

    def __repr__(self) -> str:
        return "<redacted>"

    def __deepcopy__(self, memo: dict[int, Any]) -> _Redacted:
        return self


REDACTED = _Redacted()

_MAX_ROUNDS = 16
"""Each round prunes what the last one rejected; the bound only guards against a prune that cannot land."""


@dataclass
class Salvaged:
    """A typed value (None when nothing usable was left) and what was cut away to get it."""

    value: BaseModel | None
    pruned: list[Path] = field(default_factory=list)
    positions: dict[Path, list[int]] = field(default_factory=dict)
    """For each list that lost items: typed index -> index in the source."""
    _pruned_set: set[Path] = field(default_factory=set, repr=False)
    """``pruned`` as a set: a file with 100,000 unknown keys is pruned in linear time, not quadratic."""

    def source_index(self, list_path: Path, index: int) -> int:
        kept = self.positions.get(list_path)
        return index if kept is None else kept[index]


def salvage(model: type[BaseModel], raw: Any, doc: SourceDoc, base: Path, sink: DiagnosticSink) -> Salvaged:
    """Validate ``raw`` (found at ``base`` in ``doc``); report every problem; keep what is valid."""
    result = Salvaged(None)
    try:
        result.value = model.model_validate(raw)
        return result  # the common case: nothing to report, nothing to copy
    except ValidationError:
        pass
    data = copy.deepcopy(raw)
    for path in sorted(_redacted_paths(data, ()), key=_deepest_last_index_first):
        _prune(data, path, result)
    reported = False
    for _ in range(_MAX_ROUNDS):
        try:
            result.value = model.model_validate(data)
            return result
        except ValidationError as exc:
            errors = exc.errors()
        if not reported:  # later rounds see only what pruning caused (say, a required key cut): derived
            for error in errors:
                report_error(sink, doc, base, model, error)
            reported = True
        targets = {_target(error) for error in errors}
        if () in targets:
            return result
        for target in sorted(targets, key=_deepest_last_index_first):
            _prune(data, target, result)
    return result


def _target(error: Any) -> Path:
    """What to cut for ``error``: the bad value itself, or the object that misses a required key."""
    loc: Path = tuple(error["loc"])
    if (loc and loc[-1] == "[key]") or error["type"] == "missing":
        return loc[:-1]
    return loc


def _deepest_last_index_first(path: Path) -> tuple[int, tuple[int, ...]]:
    # Remove later list items first so that earlier indexes stay valid within one round.
    return (-len(path), tuple(-p if isinstance(p, int) else 0 for p in path))


def _prune(data: Any, path: Path, result: Salvaged) -> None:
    parent: Any = data
    for part in path[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return
    last = path[-1]
    original = _original(path, result)
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list) and isinstance(last, int) and 0 <= last < len(parent):
        kept = result.positions.setdefault(path[:-1], list(range(len(parent))))
        del parent[last]
        del kept[last]
    else:
        return
    if original not in result._pruned_set:
        result._pruned_set.add(original)
        result.pruned.append(original)


def _original(path: Path, result: Salvaged) -> Path:
    out: list[str | int] = []
    for index, part in enumerate(path):
        if isinstance(part, int):
            kept = result.positions.get(path[:index])
            if kept is not None and part < len(kept):
                part = kept[part]
        out.append(part)
    return tuple(out)


def _redacted_paths(value: Any, at: Path) -> list[Path]:
    if value is REDACTED:
        return [at]
    found: list[Path] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(_redacted_paths(item, (*at, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_redacted_paths(item, (*at, index)))
    return found
