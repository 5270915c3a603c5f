"""server.surfaces -> the API surfaces the plan serves, each known, in ``SURFACES`` order.

A gateway serves every surface unless ``server.surfaces`` names some: a surface left out is not in its
route table (its paths answer 404) and its modules (the surface, its wire format, its plain handlers)
are never imported. A name the gateway does not have would silently serve nothing under it, so it is an
error that lists the names there are (IL515); an empty list would serve no API at all (IL516).
"""

from __future__ import annotations

from interlock.compiler.context import CompileContext
from interlock.schema.plan import SURFACES


def surfaces(ctx: CompileContext) -> None:
    """Check ``server.surfaces`` and keep the surfaces it names for the plan (``ctx.surfaces``)."""
    entry = ctx.sources.singletons.get("server")
    written = ctx.server.surfaces
    if entry is None or ctx.broken_under("server.surfaces") or written == list(SURFACES):
        return
    if not written:
        ctx.sink.add(
            "IL516",
            ctx.span_of(entry, "surfaces"),
            "`server.surfaces` is empty, so the gateway would serve no API",
            path="server.surfaces",
            value="[]",
            hint=f"name the surfaces to serve ({', '.join(SURFACES)}), or remove the key to serve all four",
        )
        return
    unknown = [(index, name) for index, name in enumerate(written) if name not in SURFACES]
    for index, name in unknown:
        ctx.sink.add(
            "IL515",
            ctx.span_of(entry, "surfaces", index),
            f"`{name}` in `server.surfaces` is not a surface this gateway has",
            path=f"server.surfaces[{index}]",
            value=name,
            hint=f"the surfaces are {', '.join(SURFACES)}",
        )
    if not unknown:
        ctx.surfaces = [name for name in SURFACES if name in written]
