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

THRESHOLDS = (50_000, 20, 10)  # young collections, and how many of each before an older one


def settle() -> None:
    """Before serving: collect the young generations, freeze what is left, raise the thresholds."""
    gc.collect(1)
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


def thaw() -> None:
    """After a reload: what was frozen (the replaced plan among it) can be collected again."""
    gc.unfreeze()
