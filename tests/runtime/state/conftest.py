"""The supervisor's slot server on a socket in the test's folder, for the embedded and slot-file tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.runtime.state.embedded import SlotServer


@pytest.fixture
def server(tmp_path: Path) -> Iterator[SlotServer]:
    slots = SlotServer(str(tmp_path / "slots.sock"))
    slots.start()
    try:
        yield slots
    finally:
        slots.stop()
