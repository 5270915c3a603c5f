"""The collector's settings in a serving process: frozen after loading, thawed by a reload."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.base import gc_policy
from tests.runtime.conftest import build
from tests.runtime.loaded.test_plan import rehash


@pytest.fixture
def restored_gc() -> Iterator[None]:
    """Whatever a test does to the collector is undone after it (the rest of the suite runs here)."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_gc")
def test_settle_freezes_what_is_loaded_and_raises_the_young_threshold() -> None:
    loaded = {"plan": ["tables"]}  # a tracked object alive before serving

    def collectable() -> bool:  # in one of the collector's generations (identity, not equality)
        return any(x is loaded for x in gc.get_objects())

    assert collectable()
    gc_policy.settle()
    assert gc.get_threshold() == gc_policy.THRESHOLDS
    assert gc.get_freeze_count() > 0
    assert not collectable()  # frozen: no collection traverses it
    gc_policy.thaw()
    assert gc.get_freeze_count() == 0
    assert collectable()


@pytest.mark.usefixtures("restored_gc")
def test_a_reload_thaws_what_was_frozen_so_the_replaced_plan_can_be_collected(
    plan_data: Callable[..., dict[str, Any]],
) -> None:
    first = build(plan_data())
    gateway = build_gateway(first, probes=False)
    gc_policy.settle()
    assert gc.get_freeze_count() > 0
    data = plan_data()
    data["aliases"]["t/chat"]["description"] = "the new plan"
    gateway.apply(build(rehash(data)))
    assert gc.get_freeze_count() == 0
