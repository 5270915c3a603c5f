"""The cyclic garbage collector paused while something big and long-lived is built: shared by the compiler
and the runtime, so it belongs to neither."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while something big and long-lived is built (a plan loaded,
    a config compiled), then restore it as it was.

    Loading allocates hundreds of thousands of objects that all survive (validated models, then the
    tables), which is what makes the collector run most often and find nothing: on a 10,000-alias plan
    it was a third of the load's time, more in a process with a larger heap (bench/serve_start.py).
    Nothing is collected late that matters: reference counting frees as usual, and the collector runs
    again as soon as it is back on. It is process-wide, so a reload in a thread pauses it for the
    event loop too, for the length of the load.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
