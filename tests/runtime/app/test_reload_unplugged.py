"""A reload whose plan cannot be plugged in (a feature's, the fleet's or a surface's module fails to
load) is refused like a plan that does not compile: the old plan keeps serving with all it had (its
surfaces' routes, its features' hooks), the refusal is counted and said in ``/v1/health``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.fleet import plug as fleet_plug
from interlock.runtime.guards import slots as slot_guard
from tests.runtime.conftest import build
from tests.runtime.fleet.test_openai_workers import CONFIG
from tests.runtime.fleet.test_plug import CLOUD


@pytest.mark.parametrize(("module", "name"), [(fleet_plug, "plug"), (slot_guard, "guard")])
def test_a_reload_whose_fleet_cannot_be_plugged_is_refused_and_leaves_the_old_plan_whole(
    plan_data: Callable[[str], dict[str, Any]], monkeypatch: pytest.MonkeyPatch, module: Any, name: str
) -> None:
    """The fleet's ``plug``, or its slot guard's (built when the fleet joins the guard chain)."""
    first = build(plan_data(CLOUD.format(url="http://127.0.0.1:9/v1")))
    text = CONFIG.format(one="http://127.0.0.1:9/v1", two="http://127.0.0.1:19/v1").replace(
        "alias_namespace: t/}", "alias_namespace: t/, surfaces: [openai]}\nrouting: {sticky: {enabled: true}}"
    )  # the reload would narrow the surfaces too, and plug sticky sessions
    second = build(plan_data(text))
    assert second.source.server.surfaces == ["openai"]
    assert second.routing.sticky is not None

    def broken(*args: Any, **parts: Any) -> Any:
        raise RuntimeError("the fleet's module failed")

    monkeypatch.setattr(module, name, broken)
    gateway = build_gateway(first, source=lambda: second, probes=False)
    parts = gateway.parts
    routes, hooks = sorted(parts.routes.handlers), parts.services.current.hooks

    async def scenario() -> bool:
        await gateway.startup()
        try:
            return await gateway.reload()
        finally:
            await gateway.shutdown()

    assert asyncio.run(scenario()) is False
    assert gateway.plan is first
    assert sorted(parts.routes.handlers) == routes  # every surface still routed
    assert parts.services.current.hooks is hooks
    assert parts.live.fleet is None
    last = parts.live.status.last_reload
    assert last is not None
    assert last["result"] == "refused"
    assert "the fleet's module failed" in last["error"]
    assert 'interlock_plan_reloads_total{result="refused"} 1.0' in parts.live.metrics.exposition().decode()
