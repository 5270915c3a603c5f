"""The loop shared by probes, telemetry and samples: a failed round never ends it; stop is idempotent."""

from __future__ import annotations

import asyncio
import logging

import pytest

from interlock.runtime.base.periodic import Periodic


class _Flaky(Periodic):
    task_name = "interlock-test"
    log = logging.getLogger("interlock.test_periodic")
    failed = "test round failed"

    def __init__(self) -> None:
        self.rounds = 0
        self.third = asyncio.Event()

    async def round(self) -> None:
        self.rounds += 1
        if self.rounds == 3:
            self.third.set()
        if self.rounds == 1:
            raise RuntimeError("boom")

    def pause_s(self) -> float:
        return 0.0


def test_a_failed_round_is_logged_and_the_loop_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> _Flaky:
        loop = _Flaky()
        loop.start()
        await loop.third.wait()
        await loop.stop()
        await loop.stop()  # idempotent
        return loop

    with caplog.at_level(logging.ERROR, logger="interlock.test_periodic"):
        loop = asyncio.run(run())
    assert loop.rounds >= 3
    assert [r.getMessage() for r in caplog.records] == ["test round failed"]
    assert caplog.records[0].exc_info is not None
