"""A reload that brings the first workers while the gateway starts (a SIGHUP is handled from the moment
the event loop runs, before the lifespan has finished): the fleet it plugs reads its speeds file exactly
once, starts its loops, and writes the file at stop, wherever in the lifespan the reload lands.

The order of events is driven, not timed: the reload is a lifespan step of its own, put in after the step
it must follow (``Lifespan.steps``), or lands while the upstream client opens (an opener that waits on
the test)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.app.gateway import Gateway
from interlock.runtime.app.parts import open_default_adapters
from interlock.runtime.base.lifespan import Step
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.fleet import plug as fleet_plug
from interlock.runtime.fleet.speeds import SpeedBook, read_state
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.upstream.base import Adapter
from tests.runtime.conftest import build
from tests.runtime.fleet.test_openai_workers import CONFIG
from tests.runtime.fleet.test_plug import CLOUD

DEAD = "http://127.0.0.1:9/v1"  # nothing answers: the probe and signal rounds fail, and are logged
FLEET_LOOPS = {"interlock-telemetry", "interlock-warmup"}


def _speeds_file(path: Path, **speeds: float) -> None:
    """A speeds file as the gateway writes it (one ``SpeedBook``, dumped), tokens/s per worker label."""
    book = SpeedBook()
    for label, tokens_per_s in speeds.items():
        book.record(label.replace("_", "@"), "small", int(tokens_per_s), 1_000_000_000)
    path.write_bytes(orjson.dumps(book.dump()))


def _speeds_in(path: Path) -> dict[str, float]:
    return {row["worker"]: row["tokens_per_s"] for row in orjson.loads(path.read_bytes())["speeds"]}


def _reload_after(gateway: Gateway, step: str, plan: RuntimePlan) -> None:
    """The reload lands right after ``step`` has started (before the next step starts)."""

    async def reload() -> None:
        gateway.parts.reloads.apply(plan)

    lifespan = gateway.parts.lifespan
    steps = list(lifespan.steps)
    at = [s.name for s in steps].index(step) + 1
    lifespan.steps = (*steps[:at], Step("a reload lands", reload), *steps[at:])


@pytest.mark.parametrize("after", ["upstream client", "learned speeds", "background loops", "status"])
def test_a_fleet_plugged_while_the_gateway_starts_reads_its_speeds_once_and_writes_them_at_stop(
    after: str,
    tmp_path: Path,
    plan_data: Callable[[str], dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[Path] = []

    def counted(book: SpeedBook, path: Path) -> None:
        reads.append(path)
        read_state(book, path)  # (the module's own, which plug.py imported)

    monkeypatch.setattr(fleet_plug, "read_state", counted)
    _speeds_file(tmp_path / "speeds.json", llama_llama1=42.0)
    first = build(plan_data(CLOUD.format(url=DEAD)))
    workers = build(plan_data(CONFIG.format(one=DEAD, two="http://127.0.0.1:8/v1")))
    gateway = build_gateway(first, probes=True, state_dir=str(tmp_path))
    _reload_after(gateway, after, workers)

    async def scenario() -> tuple[set[str], set[str]]:
        await gateway.startup()
        try:
            fleet = gateway.parts.live.fleet
            assert fleet is not None  # plugged by the reload
            fleet.speeds.record("llama@llama2", "small", 100, 1_000_000_000)  # learned while serving
            running = {task.get_name() for task in asyncio.all_tasks()}
        finally:
            await gateway.shutdown()  # at once: a read the plug began is not waited for here
        return running, {task.get_name() for task in asyncio.all_tasks()}

    running, after_stop = asyncio.run(scenario())
    assert reads == [tmp_path / "speeds.json"]  # read exactly once
    assert _speeds_in(tmp_path / "speeds.json") == {"llama@llama1": 42.0, "llama@llama2": 100.0}
    assert running >= FLEET_LOOPS  # the fleet's loops started...
    assert not FLEET_LOOPS & after_stop  # ...and stopped


def test_a_reload_while_the_upstream_client_opens_gets_the_adapters_of_its_kinds(
    plan_data: Callable[[str], dict[str, Any]],
) -> None:
    first = build(plan_data(CLOUD.format(url=DEAD)))
    ollama = build(plan_data())  # the runtime tests' plan: an Ollama worker among its providers
    opening = asyncio.Event()
    gateway: Gateway | None = None

    async def open_adapters(
        metrics: Metrics,
    ) -> tuple[Mapping[str, Adapter], Callable[[], Awaitable[None]]]:
        assert gateway is not None
        gateway.parts.reloads.apply(ollama)  # lands while the client opens (the first plan's kinds)
        opening.set()
        return await open_default_adapters(metrics)

    gateway = build_gateway(first, probes=False, open_adapters=open_adapters)

    async def scenario() -> set[str]:
        await gateway.startup()
        try:
            assert opening.is_set()
            return set(gateway.parts.services.router.adapters)
        finally:
            await gateway.shutdown()

    assert "ollama" in asyncio.run(scenario())  # the plan served names it: its adapter is there
