"""A reload reads (compiles) the new plan in a child process and swaps it in atomically; requests are
answered all the while (issue 7, item 10). The slow loader is released by the test, not by a clock."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from interlock.commands.gateway import build_gateway
from interlock.runtime.app.gateway import Gateway
from interlock.runtime.app.reading import StagedSource
from interlock.runtime.base.errors import ConnectFailed
from tests.runtime.app.slow_source import SlowSource
from tests.runtime.conftest import build
from tests.runtime.loaded.test_plan import rehash
from tests.waiting import until

ENV = {"CLOUD_KEY": "sk-cloud-secret"}


async def no_adapters(_metrics: Any) -> tuple[dict[str, Any], Callable[[], Any]]:
    async def close() -> None:
        return None

    return {}, close


def asking(check: Callable[[], bool], answered: list[int], http: httpx.AsyncClient) -> Callable[[], Any]:
    """``check``, asking the gateway for /healthz each time it is not yet true (each answer counted)."""

    async def checked() -> bool:
        if check():
            return True
        answered.append((await http.get("/healthz")).status_code)
        return False

    return checked


def test_a_slow_reload_reads_in_a_child_process_while_requests_are_answered(
    tmp_path: Path, plan_data: Callable[..., dict[str, Any]]
) -> None:
    first = build(plan_data())
    data = plan_data()
    data["aliases"]["t/chat"]["description"] = "the new plan"
    new = rehash(data)
    source = SlowSource(new, ENV, tmp_path)
    assert isinstance(source, StagedSource)

    async def scenario() -> None:
        gateway = build_gateway(first, source=source, probes=False, open_adapters=no_adapters)
        answered: list[int] = []
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway), base_url="http://t") as http:
            reload = asyncio.create_task(gateway.reload())
            await until(asking(lambda: (tmp_path / "started").exists(), answered, http), "the child")
            await until(asking(lambda: len(answered) >= 20, answered, http), "20 answers")
            assert gateway.plan is first  # still serving the old plan while the new one is read
            (tmp_path / "release").touch()
            assert await reload is True
        assert set(answered) == {200}
        assert gateway.plan.content_hash == new["content_hash"]
        assert gateway.plan.aliases["t/chat"].description == "the new plan"

    asyncio.run(scenario())
    assert int((tmp_path / "started").read_text()) != os.getpid()  # it was read in another process


def test_a_reload_that_reads_past_its_deadline_is_refused_and_its_process_stopped(
    tmp_path: Path, plan_data: Callable[..., dict[str, Any]]
) -> None:
    first = build(plan_data())
    source = SlowSource(plan_data(), ENV, tmp_path)  # never released

    async def scenario() -> Gateway:
        gateway = build_gateway(
            first, source=source, probes=False, open_adapters=no_adapters, reload_timeout_s=0.5
        )
        assert await gateway.reload() is False
        return gateway

    gateway = asyncio.run(scenario())
    assert gateway.plan is first
    assert gateway.parts.live.last_reload is not None
    assert (
        gateway.parts.live.last_reload["error"]
        == "reading the new plan took longer than 0.5 s; it was stopped"
    )
    if (tmp_path / "started").exists():
        pid = int((tmp_path / "started").read_text())
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            pass
        else:
            raise AssertionError(f"the reading process {pid} is still running")


def test_stopping_the_gateway_during_a_reload_stops_the_reading_process(
    tmp_path: Path, plan_data: Callable[..., dict[str, Any]]
) -> None:
    first = build(plan_data())
    source = SlowSource(plan_data(), ENV, tmp_path)  # never released

    async def scenario() -> None:
        gateway = build_gateway(first, source=source, probes=False, open_adapters=no_adapters)
        await gateway.startup()
        gateway.request_reload()
        await until(lambda: (tmp_path / "started").exists(), "the child to start reading")
        await gateway.shutdown()  # cancels the reload; asyncio.run then lets it finish its cleanup

    asyncio.run(scenario())
    pid = int((tmp_path / "started").read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return
    raise AssertionError(f"the reading process {pid} is still running")


def test_a_plan_larger_than_the_pipe_buffer_comes_through_under_uvloop() -> None:
    """uvloop's reader leaves the pipe non-blocking: a big plan arrives in pieces (BlockingIOError once)."""
    import uvloop

    from interlock.runtime.app.reading import read_in_child
    from tests.runtime.app.slow_source import BigRead

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        data = runner.run(read_in_child(BigRead(20_000), timeout_s=60))
    assert len(data) == 20_000
    assert data["alias-019999"] == {"description": "x" * 200}


def test_a_reload_that_turns_a_providers_probe_off_forgets_what_its_probe_said(
    plan_data: Callable[..., dict[str, Any]],
) -> None:
    """An endpoint down by its last probe would stay down for good: no probe runs to bring it back."""
    data = plan_data()
    data["providers"]["cloud"]["probe"] = True
    first = build(rehash(data))
    data["providers"]["cloud"]["probe"] = False
    second = build(rehash(data))
    label = first.providers["cloud"].endpoints[0].label

    async def scenario() -> None:
        gateway = build_gateway(first, probes=False, open_adapters=no_adapters)
        gateway.parts.live.health.record_probe(label, ConnectFailed("refused"))
        assert not gateway.parts.live.health.endpoint_usable(label)
        gateway.apply(first)  # still probed: what the probe said holds
        assert not gateway.parts.live.health.endpoint_usable(label)
        gateway.apply(second)
        assert gateway.parts.live.health.endpoint_usable(label)
        assert gateway.parts.live.health.endpoint(label).last_probe_error is None

    asyncio.run(scenario())
