"""The one factory of a gateway: ``interlock serve`` (each worker process), ``interlock demo`` and the
test rigs make theirs here, so every gateway is composed the same way.

Why here and not in the runtime: a reload's summary is ``interlock diff``'s semantic diff, and the
runtime never imports the diff (it sits above the runtime); this layer may import both.
"""

from __future__ import annotations

from typing import Any

from interlock.runtime.app.gateway import Gateway
from interlock.runtime.loaded.plan import RuntimePlan

MAX_RELOAD_CHANGES = 200  # kept for /v1/health and the status page; the total is always given


def build_gateway(plan: RuntimePlan, **options: Any) -> Gateway:
    """A gateway for ``plan``; ``options`` are ``runtime.parts.build_parts``'s (source, slots, ledger,
    settings, ...)."""
    return Gateway.from_plan(plan, reload_summary=reload_changes, **options)


def reload_changes(old: RuntimePlan, new: RuntimePlan) -> dict[str, Any]:
    """What a reload changed, by ``interlock diff``'s semantic diff (at reload time, never per page):
    the first ``MAX_RELOAD_CHANGES`` changes, most severe first, and how many there were."""
    from interlock.diff import diff_plans

    changes = diff_plans(old.source, new.source)
    return {
        "changes": [change.as_json() for change in changes[:MAX_RELOAD_CHANGES]],
        "changes_total": len(changes),
    }
