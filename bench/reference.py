"""An offline reference for bench/fleet.py that knows the whole schedule: on-demand loads under the real
VRAM limits, with a clairvoyant eviction rule (Belady's: evict the idle model needed furthest in the
future), computed from the schedule alone, no boxes.

It replaces "first loads only" (every model loaded once and then resident everywhere, VRAM ignored),
which no policy on 24 GiB boxes can approach once the models do not all fit. This one keeps every
limit the boxes have: ``VRAM_GIB`` per box (models' sizes as ``MODELS`` gives them), ``PARALLEL``
slots per model per box, a load taking the model's load time (the box's GPU still serving the
requests on it, as the simulator's boxes do), processor sharing with the batching gain, each model's
requests started in arrival order. What it knows that no online policy does: when each model is next
needed, and the exact work left of every running request. Its rules:

- a request starts on the box with the model ready and a slot free for it (fewest computing first);
- else it waits for the model's next slot or a load under way, unless a load elsewhere would be ready
  before the earliest slot frees (exact, from the work left): then that load starts;
- a load goes to the box whose eviction hurts least: room to spare first, else the box whose idle
  models to evict (none with a request running there; those held on another box first, then the one
  needed furthest in the future) are needed latest; a model in use on every box is never evicted.

It is a reference, not a proven bound: a clairvoyant rule that is greedy in time. What it shows is
what knowing the future buys under the same limits; a policy's distance to it is the cost of not
knowing it. Loads and evictions are counted as the boxes count them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Spec:
    """One model as the reference sees it (simulated seconds)."""

    size_gib: float
    load_s: float
    tokens_per_s: float  # output


@dataclass(frozen=True, slots=True)
class Reference:
    ttft_s: list[float]  # per request, in schedule order
    loads: int
    evictions: int


def clairvoyant(
    jobs: Sequence[object],
    workers: int,
    specs: dict[str, Spec],
    preload: Sequence[str],
    *,
    vram_gib: float,
    parallel: int,
    prompt_tokens_per_s: float,
    answer_cap: int,
    gain: float,
    cache: bool = True,
) -> Reference:
    """TTFTs, loads and evictions of the clairvoyant dispatcher on ``workers`` boxes (see the module).
    ``jobs``: bench/fleet.py's ``Job``s (``at_s``, ``model``, ``prompt_words``, ``cached_words``,
    ``answer_tokens``); with ``cache``, a perfect prefix cache (``cached_words`` not processed)."""
    n = len(jobs)
    at = [float(j.at_s) for j in jobs]  # type: ignore[attr-defined]
    model = [str(j.model) for j in jobs]  # type: ignore[attr-defined]
    prompt = [
        (j.prompt_words - (j.cached_words if cache else 0)) / prompt_tokens_per_s  # type: ignore[attr-defined]
        for j in jobs
    ]
    first_work = [prompt[i] + 1 / specs[model[i]].tokens_per_s for i in range(n)]
    work = [
        prompt[i] + min(jobs[i].answer_tokens, answer_cap) / specs[model[i]].tokens_per_s  # type: ignore[attr-defined]
        for i in range(n)
    ]
    arrivals: dict[str, list[float]] = {}
    for i in sorted(range(n), key=at.__getitem__):
        arrivals.setdefault(model[i], []).append(at[i])
    resident: list[dict[str, float]] = [{m: 0.0 for m in preload} for _ in range(workers)]  # model -> ready
    boxes: list[list[int]] = [[] for _ in range(workers)]
    done = [0.0] * n
    ttft = [math.nan] * n
    waiting: list[int] = []
    order = sorted(range(n), key=at.__getitem__)
    now, next_job, loads, evictions = 0.0, 0, 0, 0

    def rate(i: int, k: int) -> float:
        return 1 / k if math.isnan(ttft[i]) else k**gain / k

    def next_use(m: str) -> float:
        times = arrivals.get(m, [])
        k = bisect.bisect_right(times, now)
        return times[k] if k < len(times) else math.inf

    def running(b: int, m: str) -> int:
        return sum(1 for i in boxes[b] if model[i] == m)

    def slot_frees(m: str) -> float:
        """When a slot of ``m`` frees soonest on a box where it is ready (exact at today's sharing)."""
        best = math.inf
        for b in range(workers):
            if resident[b].get(m, math.inf) > now:
                continue
            k = len(boxes[b])
            for i in boxes[b]:
                if model[i] == m:
                    best = min(best, now + (work[i] - done[i]) / rate(i, k))
        return best

    def elsewhere(x: str, b: int) -> bool:
        return any(x in resident[o] for o in range(workers) if o != b)

    def place(m: str) -> int | None:
        """The box a load of ``m`` goes to, its evictions made; None when no box can make room."""
        nonlocal evictions
        best: tuple[tuple[float, int, int], int, list[str]] | None = None
        for b in range(workers):
            if m in resident[b]:
                continue
            need = sum(specs[x].size_gib for x in resident[b]) + specs[m].size_gib - vram_gib
            victims: list[str] = []
            if need > 1e-9:
                idle = [x for x in resident[b] if running(b, x) == 0 and resident[b][x] <= now]
                idle.sort(key=lambda x: (not elsewhere(x, b), -next_use(x)))
                for x in idle:
                    if need <= 1e-9:
                        break
                    victims.append(x)
                    need -= specs[x].size_gib
                if need > 1e-9:
                    continue
            harm = min((math.inf if elsewhere(x, b) else next_use(x) for x in victims), default=math.inf)
            key = (-harm, len(victims), len(boxes[b]))
            if best is None or key < best[0]:
                best = (key, b, victims)
        if best is None:
            return None
        _, box, victims = best
        for x in victims:
            del resident[box][x]
            evictions += 1
        return box

    def start() -> None:
        nonlocal loads
        for i in list(waiting):
            m = model[i]
            ready = [
                b for b in range(workers) if resident[b].get(m, math.inf) <= now and running(b, m) < parallel
            ]
            if ready:
                box = min(ready, key=lambda b: (len(boxes[b]), b))
                boxes[box].append(i)
                waiting.remove(i)
                continue
            loading = [resident[b][m] for b in range(workers) if resident[b].get(m, -1.0) > now]
            soonest = min([slot_frees(m), *loading])
            if soonest <= now + specs[m].load_s:
                continue  # a slot or a load under way is as soon as a new load
            box = place(m)
            if box is not None:
                resident[box][m] = now + specs[m].load_s
                loads += 1

    while next_job < n or any(boxes) or waiting:
        step = at[order[next_job]] - now if next_job < n else math.inf
        for b in range(workers):
            for ready_at in resident[b].values():
                if ready_at > now + 1e-12:
                    step = min(step, ready_at - now)
            k = len(boxes[b])
            for i in boxes[b]:
                left = (first_work[i] - done[i]) if math.isnan(ttft[i]) else (work[i] - done[i])
                step = min(step, max(left, 0.0) / rate(i, k))
        if step == math.inf:  # nothing can move: a request no box can ever load (too large)
            break
        for b in range(workers):
            k = len(boxes[b])
            for i, r in [(i, rate(i, k)) for i in boxes[b]]:
                done[i] += step * r
        now += step
        for b in range(workers):
            for i in list(boxes[b]):
                if math.isnan(ttft[i]) and done[i] >= first_work[i] - 1e-9:
                    ttft[i] = now - at[i]
                if done[i] >= work[i] - 1e-9:
                    boxes[b].remove(i)
        while next_job < n and at[order[next_job]] <= now + 1e-12:
            waiting.append(order[next_job])
            next_job += 1
        start()
    return Reference(ttft, loads, evictions)
