"""Name patterns as a config writes them (`name`, `prefix*`, `*`) read into the rows ``patterns.py`` matches
with: the compiler's (per-model concurrency, caller ACLs, prices) and the diff's; a plan holds the rows."""

from __future__ import annotations

from interlock.schema.plan import PlanMatch, PlanPattern


def parse_match(pattern: str) -> PlanMatch | None:
    """The pattern's parts, or None when it is not one of the three shapes."""
    if pattern == "*":
        return PlanMatch(pattern=pattern, match="any", prefix="")
    if not pattern or pattern != pattern.strip() or any(c.isspace() for c in pattern):
        return None
    stars = pattern.count("*")
    if stars == 0:
        return PlanMatch(pattern=pattern, match="exact", prefix=pattern)
    if stars == 1 and pattern.endswith("*"):
        return PlanMatch(pattern=pattern, match="prefix", prefix=pattern[:-1])
    return None


def parse_pattern(pattern: str, limit: int) -> PlanPattern | None:
    """The concurrency table row for ``pattern``, or None when it is not one of the three shapes."""
    parts = parse_match(pattern)
    return None if parts is None else PlanPattern(**parts.model_dump(), limit=limit)
