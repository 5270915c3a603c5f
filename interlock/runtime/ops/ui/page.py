"""Renders the status page with jinja2; imported on the first ``/ui`` request, never by the live.

The environment (templates shipped in this package, autoescaping on, undefined names an error) is built
once per process and cached on first use; a render is the view's sections through one template each.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import TYPE_CHECKING, Any

import jinja2

from interlock.runtime.base.clock import iso_utc
from interlock.runtime.ops.ui import svg
from interlock.runtime.ops.ui.view import SECTIONS, moment, span

if TYPE_CHECKING:
    from interlock.runtime.request.services import LiveState


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("interlock.runtime.ops.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(ago=ago, size=size, number=number, percent=percent, short_hash=short_hash)
    env.globals.update(share_bar=svg.share_bar, occupancy=svg.occupancy)
    return env


@functools.cache
def static(name: str) -> bytes:
    """A shipped static file (only the names in ``STATIC``)."""
    return resources.files("interlock.runtime.ops.ui").joinpath("static", name).read_bytes()


async def render_page(live: LiveState) -> str:
    at = await moment(live)
    data = {name: section(at) for name, section in SECTIONS.items()}
    template = environment().get_template("page.html.j2")
    return template.render(sections=list(SECTIONS), rendered_at=iso_utc(at.now), **data)


async def render_section(live: LiveState, name: str) -> str | None:
    """One section's fragment (for ``/ui/<name>``), or None when there is no such section."""
    section = SECTIONS.get(name)
    if section is None:
        return None
    at = await moment(live)
    return environment().get_template(f"{name}.html.j2").render(**{name: section(at)})


# -- filters -------------------------------------------------------------------------------------------


def ago(moment: dict[str, Any] | None) -> str:
    """``12 s ago``, ``in 40 s``, ``3 min ago``; an em dash for never."""
    if moment is None:
        return "—"
    age = float(moment["age_s"])
    return f"in {span(age)}" if age < 0 else f"{span(age)} ago"


def size(value: int | None) -> str:
    """Bytes in binary units: ``23.5 GiB``."""
    if value is None:
        return "—"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024:
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} TiB"


def number(value: float | None, unit: str = "", digits: int = 0) -> str:
    if value is None:
        return "—"
    text = f"{value:,.{digits}f}"
    return f"{text} {unit}" if unit else text


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def short_hash(value: str | None) -> str:
    if not value:
        return "—"
    return value.split(":", 1)[-1][:12]
