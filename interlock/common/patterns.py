"""Name patterns: `name` (exact), `prefix*` (one trailing star) or `*` alone.

One rule for every table of them: per-model concurrency, caller ACLs and prices (read from a config's
text by ``pattern_text.py``, the compiler's and the diff's). Match order is by specificity, not by the
order written: exact > longest prefix > `*` > the worker's `max_concurrent`. ``order`` sorts a table
that way; ``matching_row`` and ``slot_limit`` look one model up in it; ``matches`` says whether one
pattern covers a name.

One name rule too: Ollama runs `m` as `m:latest`, so the two spellings are one model everywhere a name
is compared (an exact pattern, a price, a slot limit, an ACL): ``untagged`` is the form they compare in,
``ollama_name`` the form Ollama reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from interlock.schema.plan import PlanLimits, PlanMatch, PlanPattern

_RANK = {"exact": 0, "prefix": 1, "any": 2}

Row = TypeVar("Row", bound=PlanMatch)


LATEST = ":latest"


def untagged(name: str) -> str:
    """``name`` without a trailing ``:latest``: `m` and `m:latest` compare equal in this form."""
    return name[: -len(LATEST)] if name.endswith(LATEST) else name


def ollama_name(model: str) -> str:
    """A model as Ollama reports it in /api/ps and /api/tags: ``name:tag``, ``:latest`` when untagged."""
    return model if ":" in model else f"{model}{LATEST}"


def matches(row: PlanMatch, name: str) -> bool:
    """Whether ``row`` covers ``name`` (an exact row `m` covers `m:latest`, and the reverse; a prefix
    covers an untagged `m` when it covers `m:latest`: `m:*` is every tag of `m`, the implicit one too)."""
    if row.match == "exact":
        return row.prefix == name or untagged(row.prefix) == untagged(name)
    prefix = row.prefix  # `*` has the empty prefix
    if name.startswith(prefix):
        return True
    return (
        len(prefix) > len(name) and ":" not in name.rpartition("/")[2] and (name + LATEST).startswith(prefix)
    )


def covers(general: PlanPattern, specific: PlanPattern) -> bool:
    """Whether every model ``specific`` matches is also matched by the different ``general``."""
    if general.pattern == specific.pattern or general.match == "exact":
        return False
    return specific.prefix.startswith(general.prefix)


def order(rows: list[Row]) -> list[Row]:
    """exact first, then prefixes longest first, then `*`; ties by pattern text (stable output)."""
    return sorted(rows, key=lambda r: (_RANK[r.match], -len(r.prefix), r.pattern))


def matching_row(patterns: Sequence[Row], model: str) -> Row | None:
    """The most specific row matching ``model`` (exact > longest prefix > `*`), or None when none
    matches; ``patterns`` is already in that order."""
    for row in patterns:
        if matches(row, model):
            return row
    return None


def slot_limit(patterns: list[PlanPattern], max_concurrent: int, model: str) -> int:
    """The matching row's limit, else the worker's ``max_concurrent``."""
    row = matching_row(patterns, model)
    return max_concurrent if row is None else row.limit


def allows(limits: PlanLimits, name: str) -> bool:
    """Whether one level's ACL (a tenant's or a key's) lets ``name`` through: some ``allowed`` (unset:
    all) and no ``denied`` matches it (deny wins)."""
    if limits.allowed is not None and not any(matches(row, name) for row in limits.allowed):
        return False
    return not any(matches(row, name) for row in limits.denied)
