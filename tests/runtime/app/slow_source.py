"""A plan source whose reading waits for the test to let it finish (it runs in a reload's child
process, so it lives in a module the child can import)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.runtime.loaded.plan import RuntimePlan, load_plan


@dataclass(frozen=True)
class SlowSource:
    """``read`` writes its process id to ``folder/started``, then waits for ``folder/release``."""

    data: Mapping[str, Any]
    env: Mapping[str, str]
    folder: Path

    def read(self) -> dict[str, Any]:
        (self.folder / "started").write_text(str(os.getpid()))
        while not (self.folder / "release").exists():
            time.sleep(0.01)
        return dict(self.data)

    def load(self, data: dict[str, Any]) -> RuntimePlan:
        return load_plan(data, self.env)

    def __call__(self) -> RuntimePlan:
        return self.load(self.read())


@dataclass(frozen=True)
class BigRead:
    """A ``read`` whose answer is far larger than a pipe's buffer (64 KiB on Linux)."""

    entries: int

    def __call__(self) -> dict[str, Any]:
        return {f"alias-{i:06d}": {"description": "x" * 200} for i in range(self.entries)}
