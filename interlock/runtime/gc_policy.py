"""The cyclic garbage collector's settings in a serving process.

Why: with many open streams the gateway allocates a few GC-tracked objects per relayed chunk (the
decoded chunk's dicts, a future per upstream read). Most die young by reference counting, but those
that wait across a read (a stream's futures and buffers) outlive a young collection at Python's
default threshold (every 700 allocations), are promoted, and soon trigger full collections that
traverse every live object, the modules and the plan's tables included. At 1,000 streams that was
about a fifth of the gateway's CPU (bench/streams.py, docs/benchmarks.md). So, before serving:

- collect the young generations, then freeze what exists (modules, the plan's tables), so later
  collections never traverse it. Not a full collection first: on a 10,000-alias plan that took 0.2 s
  of the start (bench/serve_start.py), and a full collection at that point found no garbage; whatever
  cyclic garbage the oldest generation still held at start is kept, once;
- collect the young generation every ``THRESHOLDS[0]`` allocations, so a stream's short waits end
  before a collection sees them.

A reload unfreezes (``thaw``): the plan it replaces can then be collected like any other garbage.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

THRESHOLDS = (50_000, 20, 10)  # young collections, and how many of each before an older one


def settle() -> None:
    """Before serving: collect the young generations, freeze what is left, raise the thresholds."""
    gc.collect(1)
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


def thaw() -> None:
    """After a reload: what was frozen (the replaced plan among it) can be collected again."""
    gc.unfreeze()


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
