"""Per-model concurrency patterns: `name` (exact), `prefix*` (one trailing star) or `*` alone.

Match order is by specificity, not by the order written: exact > longest prefix > `*` > the worker's
`max_concurrent`. ``order`` sorts a table that way; ``matching_row`` and ``slot_limit`` look one model up
in it.
"""

from __future__ import annotations

from interlock.schema.plan import PlanPattern

_RANK = {"exact": 0, "prefix": 1, "any": 2}


def parse_pattern(pattern: str, limit: int) -> PlanPattern | None:
    """The table row for ``pattern``, or None when it is not one of the three shapes."""
    if pattern == "*":
        return PlanPattern(pattern=pattern, match="any", prefix="", limit=limit)
    if not pattern or pattern != pattern.strip() or any(c.isspace() for c in pattern):
        return None
    stars = pattern.count("*")
    if stars == 0:
        return PlanPattern(pattern=pattern, match="exact", prefix=pattern, limit=limit)
    if stars == 1 and pattern.endswith("*"):
        return PlanPattern(pattern=pattern, match="prefix", prefix=pattern[:-1], limit=limit)
    return None


def covers(general: PlanPattern, specific: PlanPattern) -> bool:
    """Whether every model ``specific`` matches is also matched by the different ``general``."""
    if general.pattern == specific.pattern or general.match == "exact":
        return False
    return specific.prefix.startswith(general.prefix)


def order(rows: list[PlanPattern]) -> list[PlanPattern]:
    """exact first, then prefixes longest first, then `*`; ties by pattern text (stable output)."""
    return sorted(rows, key=lambda r: (_RANK[r.match], -len(r.prefix), r.pattern))


def matching_row(patterns: list[PlanPattern], model: str) -> PlanPattern | None:
    """The row that sets ``model``'s slots (exact > longest prefix > `*`), or None when none matches;
    ``patterns`` is already in that order."""
    for row in patterns:
        if row.match == "exact":
            if row.prefix == model:
                return row
        elif row.match == "prefix":
            if model.startswith(row.prefix):
                return row
        else:
            return row
    return None


def slot_limit(patterns: list[PlanPattern], max_concurrent: int, model: str) -> int:
    """The matching row's limit, else the worker's ``max_concurrent``."""
    row = matching_row(patterns, model)
    return max_concurrent if row is None else row.limit
