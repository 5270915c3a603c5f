"""Inline SVG pictures for the status page, drawn on the server: a traffic-share bar, a slot sparkline.

Numbers in, markup out; every text that comes from the plan is escaped. Colours are CSS classes, so the
page's light and dark themes apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

WIDTH = 240
HEIGHT = 40


def share_bar(candidates: Sequence[dict[str, Any]]) -> str:
    """One horizontal bar, a segment per candidate that answered, sized by its share of the answers."""
    parts = []
    x = 0.0
    for c in candidates:
        fraction = c.get("share") or 0.0
        if fraction <= 0:
            continue
        width = fraction * WIDTH
        title = f"{c['id']}: {fraction:.0%} ({c['answers']} answers)"
        parts.append(
            f'<rect class="seg seg{min(c["position"], 5)}" x="{x:.1f}" y="0" width="{width:.1f}" '
            f'height="14"><title>{escape(title)}</title></rect>'
        )
        x += width
    if not parts:
        parts.append(f'<rect class="seg-none" x="0" y="0" width="{WIDTH}" height="14"></rect>')
    label = (
        "; ".join(f"{c['id']} {c['share']:.0%}" for c in candidates if c.get("share"))
        or "no answers in this window"
    )
    return (
        f'<svg class="bar" viewBox="0 0 {WIDTH} 14" width="{WIDTH}" height="14" role="img" '
        f'aria-label="traffic share: {escape(label)}">{"".join(parts)}</svg>'
    )


def occupancy(points: Sequence[tuple[float, int]], limit: int, window_s: float) -> str:
    """Slots in use over the sampled window, as a step line over a band at the worker's limit."""
    span = max(window_s, 1.0)
    top = max(limit, max((v for _, v in points), default=0), 1)

    def xy(offset: float, value: int) -> tuple[float, float]:
        x = WIDTH * (1 - min(-offset, span) / span) if offset < 0 else float(WIDTH)
        y = HEIGHT - 2 - (HEIGHT - 4) * value / top
        return x, y

    path: list[str] = []
    last_y: float | None = None
    for offset, value in points:
        x, y = xy(offset, value)
        if last_y is None:
            path.append(f"M{x:.1f},{y:.1f}")
        else:
            path.append(f"H{x:.1f}V{y:.1f}")
        last_y = y
    if path:
        path.append(f"H{WIDTH}")
    now = points[-1][1] if points else 0
    _, limit_y = xy(0.0, limit)
    label = f"slots in use over the last {span:.0f} s, now {now} of {limit}"
    return (
        f'<svg class="spark" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="{escape(label)}">'
        f'<line class="limit" x1="0" x2="{WIDTH}" y1="{limit_y:.1f}" y2="{limit_y:.1f}"></line>'
        f'<path class="used" d="{"".join(path)}"></path><title>{escape(label)}</title></svg>'
    )
