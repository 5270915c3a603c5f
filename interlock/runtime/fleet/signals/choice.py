"""Worker choice for OpenAI-compatible workers (llama.cpp, vLLM, SGLang servers listed as ``workers``).

Such a server has its model loaded for good (no loads, no eviction), so what sets it apart from its
peers is how soon it can start on a request: the requests already in it, against the requests it runs
at once. Two views of that are combined:

- this gateway's own (``Occupancy``): free slots, requests it runs there, requests waiting for one;
- the server's own (``ServerLoad``, read each probe round when the worker names its ``server``): requests
  running and held back there, from every client (other gateways, direct callers), and KV-cache use.

``busy`` = the larger of the server's running + waiting (as last read) and this gateway's running there
(live: what was sent since the reading counts at once); ``ahead`` = ``busy`` + this gateway's requests
waiting for that worker (or, for a fleet line's waiter, the waiters before it) - requests that start
before this one. With ``capacity`` the requests it runs at once: the server's own slot count where it
says (llama.cpp's ``/slots``); else, when it holds requests back, what it runs now (a vLLM or SGLang
server queues once its batch or KV cache is full, whatever the worker's slot limit says); else the
worker's slot limit:

    expected_s = max(ahead + 1 − capacity, 0) × service_s / capacity   (+ service_s / capacity when the
                 KV cache is at least ``KV_FULL``: the server holds new requests back until one ends)

The points break ties as for Ollama workers (``scoring.PARTS``, weights of ``routing.weights``): ``free``
slots, ``−queue`` × ahead, learned speed, ``−vram`` × the KV-cache fraction (a server's VRAM pressure),
``−gpu_util`` from telemetry; ``loaded`` and ``installed`` are the same for every such worker. Without a
reading (no ``server``, or its last fetch failed) the gateway's own view alone decides.
"""

from __future__ import annotations

from interlock.runtime.fleet.signals.base import ServerLoad
from interlock.runtime.loaded.tables import RoutingWeights

KV_FULL = 0.95  # vLLM preempts, and llama.cpp defers, once the KV cache has no room for another request


def rate_server(
    load: ServerLoad | None,
    occupancy: tuple[int, int, int],
    slot_limit: int,
    service_s: float,
    line_ahead: int | None,
    weights: RoutingWeights,
    speed: float,
    util_fraction: float,
) -> tuple[float, tuple[float, ...]]:
    """(expected seconds until the server starts on the request, the points in ``PARTS`` order).
    ``occupancy``: this gateway's (free slots, requests waiting, requests running) on the worker."""
    free, waiting, running = occupancy
    busy, capacity, kv = running, slot_limit, 0.0
    if load is not None:
        busy = max(load.busy, running)
        capacity = load.slots or ((load.running or 1) if load.waiting else slot_limit)
        kv = load.kv_used or 0.0
    capacity = max(capacity, 1)
    ahead = busy + (waiting if line_ahead is None else line_ahead)
    expected = max(ahead + 1 - capacity, 0) * service_s / capacity
    if kv >= KV_FULL:
        expected += service_s / capacity
    parts = (
        weights.loaded,
        weights.installed,
        weights.free_slots * free,
        -weights.queue * ahead,
        weights.speed * speed,
        -weights.vram * kv,
        -weights.gpu_util * util_fraction,
        0.0,
    )
    return expected, parts
