"""A backend's callers' counters: made by the first call, the same object after (so a feature may ask for
them when a plan with caller limits loads, and a gateway without such a plan never imports them)."""

from __future__ import annotations

import subprocess
import sys

from interlock.runtime.state.memory import MemorySlots


def test_the_counters_are_made_once_and_kept() -> None:
    slots = MemorySlots()
    assert slots.caller_counters() is slots.caller_counters()
    assert MemorySlots().caller_counters() is not slots.caller_counters()


def test_a_backend_imports_the_counters_only_when_asked() -> None:
    program = (
        "import sys\n"
        "from interlock.runtime.state.memory import MemorySlots\n"
        "slots = MemorySlots()\n"
        "before = 'interlock.runtime.state.counters' in sys.modules\n"
        "slots.caller_counters()\n"
        "print(before, 'interlock.runtime.state.counters' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
