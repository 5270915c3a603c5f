"""Worker-choice policies on a simulated GPU fleet: model loads, evictions and time to first token.

Replays one deterministic mixed workload (several models of different popularity, bursts on one model,
short and long prompts, short and long answers) against 2-4 simulated GPU boxes
(``interlock.testing.fake_fleet.FakeGpuBox``: a VRAM budget, model loads, LRU eviction, per-model
parallelism, paced tokens, one GPU shared by the requests computing on it) through the worker-choice
policies that Olla and nginx offer:

- first-available: the first worker (in declaration order) below its concurrency limit;
- round-robin: the next worker in turn;
- least-connections: the worker with the fewest requests in flight (ties: declaration order);
- prefix-only: the worker this proxy sent the longest run of the prompt's leading blocks to, as
  SGLang's cache-aware router and llm-d's prefix scorer route (``prefix_only_policy``).

The policies see only what a proxy sees (its own requests in flight, the prompts it sent), never the
boxes' state. Every policy starts from fresh boxes with the same models preloaded, and replays the
same schedule. The boxes batch (``BATCHING_GAIN``, cited there; ``--batching-gain``) and, for the
``prefix`` workload, keep a prefix cache (``PREFIX_CACHE_TOKENS``; ``--prefix-cache``); the table's
``cached`` column is the share of prompt tokens the boxes found in it.

The last row, ``interlock (adaptive)``, replays the same schedule through a real ``interlock serve``
process in front of fresh boxes: worker choice by expected seconds to start (``runtime.fleet.scoring``) from
what the gateway gathers outside the request path (``/api/ps``, ``/api/tags`` and the boxes' telemetry
documents every probe round, learned service and load times from finished answers), requests that
cannot start at once waiting in the fleet line (``runtime.fleet``), each box declared with
``max_concurrent: 4`` (the cap first-available honours; round-robin and least-connections send without
one; ``--max-concurrent`` changes interlock's) and per-model slots equal to the boxes' parallelism. Its
TTFT is measured at the client, on the gateway's first SSE chunk (OpenAI format), so it includes the
gateway's own overhead. No alias has a cloud candidate: every row is local only (spills: 0).

Above the table, four references computed from the schedule alone (``bounds``): the floor (each
request's prompt and first token with the GPU to itself), a relaxed oracle (no loads, no GPU sharing),
an ideal dispatcher that never loads on GPUs shared as the boxes share them (``never_loading``), and
``clairvoyant (Belady)`` (bench/reference.py): on-demand loads under the boxes' real VRAM limits,
knowing the whole schedule (the idle model needed furthest in the future is evicted; a load starts
only when it is ready before the model's next slot frees); the table is followed by each policy's
distance to it (p50, p95, loads). It replaced "first loads only" (one load per model, then resident
everywhere, VRAM ignored), which no policy on these boxes could approach. These four assume a perfect
prefix cache
on every box (``Job.cached_words``: what an earlier request sent is not processed again; 0 but for the
``prefix`` workload), whose fifth reference, ``never-loading, no cache``, is the same dispatcher
without one.

    .venv/bin/python bench/fleet.py [--workload heavy|moderate|interactive|prefix] [--workers 3]
                                    [--requests 300] [--seed 11] [--scale 0.25] [--batching-gain 0.4]
                                    [--prefix-cache TOKENS] [--json FILE]

``--workload`` picks a ``Shape`` (``WORKLOADS``): ``heavy`` keeps the GPUs 63% busy with no load at
all; ``moderate`` is half its arrival rate (same seed: the same models, bursts, prompts and answers),
32%; ``interactive`` is chat traffic (a twentieth of the prompts long instead of a quarter, surges of
3-6 requests at half the chance instead of bursts of 6-14) at the rate that makes it about as busy as
``moderate``: 30%. ``prefix`` (``SESSION_WORKLOADS``: a ``Sessions``) is llm-d's kind of workload: 48
system prompts of 1,500-3,000 words (more than one box's prefix cache holds, less than three), sessions
of 2-6 turns on one preloaded model, 68% busy without a cache, 83% of its prompt words sent before.
The line above the table prints that utilisation (``busy``), so a reader sees what
is achievable, and the machine's load average at the start and at the end (the interlock row has a
Python gateway process between client and boxes, so a busy machine weighs on it).

``--scale`` shrinks time: a 2 s model load becomes 500 ms at 0.25, and token rates grow by 1/scale, so
every figure is in simulated milliseconds times the scale. Compare figures of the same run only. At
0.05 the gateway's own CPU (relaying a token every 0.45 ms per stream) weighs on its row on a small
machine; 0.25 is the default. On a machine whose load average is far above its cores, the replay falls
behind its own clock (every step's sleep ends late) and queues build that the schedule does not have:
use ``--scale 1`` there.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/reference.py, run or loaded from a file
from reference import Reference, Spec, clairvoyant

from interlock.runtime.fleet.prefix import PrefixIndex, prompt_prefix
from interlock.testing.fake_fleet import GIB, FakeGpuBox, SimModel, sim_model
from interlock.testing.replies import Reply

# name, VRAM GiB, real load s, real output tokens/s, popularity weight
MODELS: tuple[tuple[str, float, float, float, float], ...] = (
    ("qwen3:8b", 6.5, 2.0, 110.0, 40.0),
    ("llama3.1:8b", 6.0, 1.8, 120.0, 20.0),
    ("gemma3:12b", 9.5, 2.6, 70.0, 15.0),
    ("mistral:7b", 5.0, 1.5, 130.0, 10.0),
    ("qwen2.5-coder:14b", 10.5, 3.0, 60.0, 10.0),
    ("phi4:14b", 10.0, 2.8, 65.0, 5.0),
)
VRAM_GIB = 24.0  # an RTX 4090 per box
MAX_CONCURRENT = 4  # per worker, as a proxy would be configured
PARALLEL = 2  # per model on a box (OLLAMA_NUM_PARALLEL)
PRELOAD = ("qwen3:8b", "llama3.1:8b")  # what each box holds when a run starts
PRELOAD_FIRST = PRELOAD[0]
# Decoding together is cheaper than alone: n requests generating at once make n ** BATCHING_GAIN times
# one alone's tokens/s between them (``FakeGpuBox(batching_gain=...)``; prompts gain nothing). From
# llama.cpp's batched-bench README (LLaMA 7B F16, PP 128, TG 128, GPU): S_TG 41.6 t/s at B=1, 50.9 at
# 2, 74.4 at 4, 139.4 at 8, 242.2 at 16, i.e. exponents 0.29, 0.42, 0.58, 0.64; 0.4 fits B = 2-4, where
# these boxes run (2 per model). vLLM's continuous batching gains more at large B (its throughput
# benchmarks); `--batching-gain` changes it, 0 is the processor sharing of the first version.
BATCHING_GAIN = 0.4
# A box's prefix cache per loaded model, in tokens (``FakeGpuBox(prefix_cache_tokens=...)``): what is
# left of 24 GiB beside an 8B model for KV cache at about 128 KiB a token (fp16), rounded down.
PREFIX_CACHE_TOKENS = 60_000
REPLY = Reply(text=" ".join(f"t{i}" for i in range(400)))


@dataclass(frozen=True, slots=True)
class Job:
    at_s: float  # simulated seconds after the start (scaled when replayed)
    model: str
    prompt_words: int
    answer_tokens: int
    # the prefix workload's conversation so far, (role, text) each (None: one user message of
    # `prompt_words` words), and how many of its words an earlier request already sent (a shared system
    # prompt, the session's earlier turns): what a perfect prefix cache would not process again
    messages: tuple[tuple[str, str], ...] | None = None
    cached_words: int = 0

    def body_messages(self) -> list[dict[str, str]]:
        if self.messages is None:
            return [{"role": "user", "content": " ".join(["w"] * self.prompt_words)}]
        return [{"role": role, "content": text} for role, text in self.messages]


@dataclass(slots=True)
class Outcome:
    ttft_s: float | None
    error: str | None
    worker: int
    spilled: bool = False  # answered by a candidate other than the local one (a cloud spill-over)


@dataclass
class Result:
    policy: str
    requests: int
    errors: int
    loads: int
    evictions: int
    spills: int = 0
    ttft_s: dict[str, float] = field(default_factory=dict)
    per_worker: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    cached_share: float = 0.0  # prompt tokens the boxes found in their prefix cache / prompt tokens


@dataclass(frozen=True, slots=True)
class Shape:
    """How a workload draws its requests (``workload``)."""

    rate: float  # arrivals per simulated second between bursts (bursts come at the same share of arrivals)
    burst_chance: float = 0.06  # the share of draws that are a burst of one model instead of one request
    burst_size: tuple[int, int] = (6, 14)
    long_prompts: float = 0.25  # the share of prompts of 1,500-4,000 words (else 10-200)
    long_answers: float = 0.3  # the share of answers of 150-400 tokens (else 10-60)


WORKLOADS: dict[str, Shape] = {
    "heavy": Shape(1.0),  # the GPUs 63% busy with no load at all (the workload shipped first)
    "moderate": Shape(0.5),  # 32% busy with no load: a typical shared office fleet (chosen from `busy`)
    # chat traffic: few long prompts, small surges; the rate for about moderate's utilisation (30%)
    "interactive": Shape(0.8, burst_chance=0.03, burst_size=(3, 6), long_prompts=0.05),
}


def workload(seed: int, requests: int, shape: Shape) -> list[Job]:
    """A deterministic schedule: Poisson arrivals by popularity (``shape.rate`` per simulated second
    between bursts), plus bursts of one model. The same seed and shape but for the rate give the same
    models, bursts, prompts and answers at every rate: only the gaps between arrivals stretch."""
    rng = random.Random(seed)
    names = [m[0] for m in MODELS]
    weights = [m[4] for m in MODELS]
    jobs: list[Job] = []
    t = 0.0
    while len(jobs) < requests:
        if (
            rng.random() < shape.burst_chance
        ):  # a burst: one model, many requests at once (a batch job, a chat surge)
            model = rng.choice(names)
            for _ in range(rng.randint(*shape.burst_size)):
                jobs.append(_job(rng, t + rng.uniform(0, 0.2), model, shape))
        else:
            jobs.append(_job(rng, t, rng.choices(names, weights)[0], shape))
        t += rng.expovariate(1.0) / shape.rate  # gaps drawn at rate 1, then stretched: same draws at any rate
    return sorted(jobs[:requests], key=lambda j: j.at_s)


def schedule(name: str, seed: int, requests: int, rate: float | None = None) -> list[Job]:
    """The jobs of workload ``name`` (``WORKLOADS`` or ``SESSION_WORKLOADS``), at ``rate`` if given."""
    if name in SESSION_WORKLOADS:
        sessions_shape = SESSION_WORKLOADS[name]
        if rate is not None:
            sessions_shape = replace(sessions_shape, rate=rate)
        return sessions(seed, requests, sessions_shape)
    shape = WORKLOADS[name]
    if rate is not None:
        shape = replace(shape, rate=rate)
    return workload(seed, requests, shape)


def _job(rng: random.Random, at_s: float, model: str, shape: Shape) -> Job:
    long_prompt = rng.random() < shape.long_prompts
    long_answer = rng.random() < shape.long_answers
    return Job(
        at_s=at_s,
        model=model,
        prompt_words=rng.randint(1500, 4000) if long_prompt else rng.randint(10, 200),
        answer_tokens=rng.randint(150, 400) if long_answer else rng.randint(10, 60),
    )


@dataclass(frozen=True, slots=True)
class Sessions:
    """A prefix-heavy workload like llm-d's (its "prefix cache aware" benchmark: many sessions sharing
    a few long system prompts, multi-turn): sessions start at ``rate`` per simulated second, each with
    one of ``system_prompts`` system prompts (``system_words`` long) and ``turns`` turns of
    ``user_words``, answered in ``answer_tokens``; a turn follows the previous one's arrival by an
    exponential think time (mean ``think_s``). One model, preloaded everywhere, so loads play no part."""

    rate: float = 0.4
    system_prompts: int = 48  # 108k tokens in all: more than one box's cache holds, less than three
    system_words: tuple[int, int] = (1500, 3000)
    turns: tuple[int, int] = (2, 6)
    user_words: tuple[int, int] = (20, 120)
    answer_tokens: tuple[int, int] = (20, 120)
    think_s: float = 10.0
    model: str = PRELOAD_FIRST


SESSION_WORKLOADS: dict[str, Sessions] = {"prefix": Sessions()}


def sessions(seed: int, requests: int, shape: Sessions) -> list[Job]:
    """A deterministic schedule of ``requests`` turns of sessions (see ``Sessions``). Words are four
    characters with their space (interlock's estimate: 4 characters a token; the boxes count words)."""
    rng = random.Random(seed)
    systems = [
        f"sys{k} " + " ".join(["abc"] * rng.randint(*shape.system_words)) for k in range(shape.system_prompts)
    ]
    jobs: list[Job] = []
    seen: set[tuple[tuple[str, str], ...]] = set()  # every prompt prefix sent (by message)
    t, session = 0.0, 0
    while len(jobs) < requests * 2:  # enough turns; the first `requests` by arrival are kept
        at = t
        history: list[tuple[str, str]] = [("system", rng.choice(systems))]
        for turn in range(rng.randint(*shape.turns)):
            words = rng.randint(*shape.user_words)
            history.append(("user", f"u{session}t{turn} " + " ".join(["xyz"] * words)))
            answer = rng.randint(*shape.answer_tokens)
            jobs.append(_session_job(at, shape.model, tuple(history), answer))
            history.append(("assistant", " ".join(f"t{i}" for i in range(answer))))
            at += rng.expovariate(1.0 / shape.think_s)
        session += 1
        t += rng.expovariate(1.0) / shape.rate
    kept = sorted(jobs, key=lambda j: j.at_s)[:requests]
    out = []
    for job in kept:  # the words an earlier request sent already (by arrival): a perfect cache's share
        assert job.messages is not None
        cached = 0
        for k in range(len(job.messages), 0, -1):
            if job.messages[:k] in seen:
                cached = sum(len(text.split()) for _, text in job.messages[:k])
                break
        for k in range(1, len(job.messages) + 1):
            seen.add(job.messages[:k])
        out.append(replace(job, cached_words=cached))
    return out


def _session_job(at_s: float, model: str, messages: tuple[tuple[str, str], ...], answer: int) -> Job:
    words = sum(len(text.split()) for _, text in messages)
    return Job(at_s=at_s, model=model, prompt_words=words, answer_tokens=answer, messages=messages)


def sim_models(scale: float) -> list[SimModel]:
    return [
        sim_model(
            name,
            vram,
            load_s=load * scale,
            tokens_per_s=tps / scale,
            prompt_tokens_per_s=PROMPT_TOKENS_PER_S / scale,
            parallel=PARALLEL,
        )
        for name, vram, load, tps, _ in MODELS
    ]


# ----- what no policy can beat: computed from the schedule, no boxes -----

PROMPT_TOKENS_PER_S = 3000.0  # real seconds, every model (as `sim_models` builds them)
ANSWER_CAP = 400  # tokens in REPLY: no answer is longer


@dataclass(frozen=True, slots=True)
class Bound:
    """Each reference's TTFTs (simulated seconds, one per request, in schedule order)."""

    floor_s: list[float]  # each request's prompt and first token with the GPU to itself
    oracle_s: list[float]  # the relaxed oracle (see `bounds`)
    shared_s: list[float]  # the never-loading dispatcher on shared GPUs (see `never_loading`)
    reference_s: list[float]  # the clairvoyant reference under the real VRAM limits (bench/reference.py)
    reference_loads: int
    reference_evictions: int
    uncached_s: list[float] = field(default_factory=list)  # never-loading without a prefix cache

    def rows(self) -> tuple[tuple[str, list[float]], ...]:
        rows = (
            ("floor", self.floor_s),
            ("relaxed oracle", self.oracle_s),
            ("never-loading, shared", self.shared_s),
            (REFERENCE, self.reference_s),
        )
        return (*rows, ("never-loading, no cache", self.uncached_s)) if self.uncached_s else rows


def bounds(jobs: Sequence[Job], workers: int, gain: float = BATCHING_GAIN) -> Bound:
    """TTFT percentiles (simulated seconds) that bound every policy on these boxes, from the schedule.

    - floor: a request's first token needs its prompt processed and one token made, at the model's
      full speed (the GPU to itself); nothing a policy does makes that shorter.
    - relaxed oracle: every model resident on every box from the start (no load, no eviction, VRAM
      ignored), no GPU sharing (every request at full speed, however many run), and each model's
      requests started in arrival order on the first of the fleet's ``workers x PARALLEL`` slots for
      it that frees (Ollama's per-model parallelism is the one limit kept). Every relaxation only
      helps, so a policy on the simulator does no better than this schedule unless it reorders
      requests (FIFO per model is what every policy here does)."""
    speeds = {m[0]: m[3] for m in MODELS}
    floor: list[float] = []
    oracle: list[float] = []
    free_at: dict[str, list[float]] = {m[0]: [0.0] * (workers * PARALLEL) for m in MODELS}
    for job in sorted(jobs, key=lambda j: j.at_s):
        first = _prompt_s(job) + 1 / speeds[job.model]
        service = _prompt_s(job) + min(job.answer_tokens, ANSWER_CAP) / speeds[job.model]
        slots = free_at[job.model]
        slot = min(range(len(slots)), key=slots.__getitem__)
        start = max(job.at_s, slots[slot])
        slots[slot] = start + service
        floor.append(first)
        oracle.append(start - job.at_s + first)
    ref = reference(jobs, workers, gain)
    return Bound(
        floor,
        oracle,
        never_loading(jobs, workers, gain=gain),
        ref.ttft_s,
        ref.loads,
        ref.evictions,
        never_loading(jobs, workers, gain=gain, cache=False) if any(j.cached_words for j in jobs) else [],
    )


REFERENCE = "clairvoyant (Belady)"


def reference(jobs: Sequence[Job], workers: int, gain: float = BATCHING_GAIN) -> Reference:
    """The offline reference that knows the whole schedule, under the boxes' VRAM (bench/reference.py)."""
    specs = {name: Spec(vram, load, tps) for name, vram, load, tps, _ in MODELS}
    return clairvoyant(
        jobs,
        workers,
        specs,
        PRELOAD,
        vram_gib=VRAM_GIB,
        parallel=PARALLEL,
        prompt_tokens_per_s=PROMPT_TOKENS_PER_S,
        answer_cap=ANSWER_CAP,
        gain=gain,
    )


def _prompt_s(job: Job, cache: bool = True) -> float:
    """The prompt's solo seconds; with ``cache``, less what a perfect prefix cache holds already."""
    return (job.prompt_words - (job.cached_words if cache else 0)) / PROMPT_TOKENS_PER_S


def busy(jobs: Sequence[Job], workers: int) -> float:
    """The GPUs' utilisation with no load at all: every request's prompt and answer at full speed
    (GPU-seconds) over the schedule's span on ``workers`` GPUs."""
    speeds = {m[0]: m[3] for m in MODELS}
    work = sum(_prompt_s(j, cache=False) + min(j.answer_tokens, ANSWER_CAP) / speeds[j.model] for j in jobs)
    span = max(j.at_s for j in jobs) - min(j.at_s for j in jobs)
    return work / (span * workers) if span > 0 else math.inf


def never_loading(
    jobs: Sequence[Job],
    workers: int,
    *,
    first_loads: bool = False,
    gain: float = BATCHING_GAIN,
    cache: bool = True,
) -> list[float]:
    """TTFTs (simulated s) of an ideal dispatcher on boxes that share their GPU as the simulator does,
    but never load: every model resident on every box (VRAM ignored), ``PARALLEL`` slots per model
    per box, each model's requests in arrival order, each started as soon as a slot for it is free,
    on the box with the fewest requests computing. Exact processor sharing (event to event): with n
    requests on a box each advances at 1/n of its full speed.

    ``first_loads``: the same dispatcher, but a model that is not preloaded is loaded on demand once,
    when its first request arrives, and is then resident on every box (one load, as if it were copied
    everywhere at once); its requests wait for that load. What a dispatcher that loads only on demand
    (every policy here) cannot avoid, with every other limit still relaxed.

    A request decoding (after its first token) advances at n ** ``gain`` / n, as the boxes batch
    (``BATCHING_GAIN``). With ``cache`` every box holds every prefix sent before (``Job.cached_words``
    are not processed: a perfect prefix cache everywhere); without, every prompt is processed whole."""
    speeds = {m[0]: m[3] for m in MODELS}
    loads = {m[0]: m[2] for m in MODELS}
    ready_at: dict[str, float] = {}  # model -> when its first load ends (not preloaded only)
    if first_loads:
        for job in sorted(jobs, key=lambda j: j.at_s):
            if job.model not in PRELOAD and job.model not in ready_at:
                ready_at[job.model] = job.at_s + loads[job.model]
    order = sorted(range(len(jobs)), key=lambda i: jobs[i].at_s)
    first_work = [_prompt_s(jobs[i], cache) + 1 / speeds[jobs[i].model] for i in range(len(jobs))]
    work = [
        _prompt_s(jobs[i], cache) + min(jobs[i].answer_tokens, ANSWER_CAP) / speeds[jobs[i].model]
        for i in range(len(jobs))
    ]
    done = [0.0] * len(jobs)  # work done so far
    ttft = [math.nan] * len(jobs)
    boxes: list[list[int]] = [[] for _ in range(workers)]  # requests computing per box
    waiting: dict[str, list[int]] = {m[0]: [] for m in MODELS}
    now, next_job = 0.0, 0

    def start() -> None:
        for model, line in waiting.items():
            if ready_at.get(model, 0.0) > now + 1e-12:
                continue
            while line:
                open_boxes = [
                    b for b in range(workers) if sum(jobs[i].model == model for i in boxes[b]) < PARALLEL
                ]
                if not open_boxes:
                    break
                box = min(open_boxes, key=lambda b: (len(boxes[b]), b))
                boxes[box].append(line.pop(0))

    def rate(i: int, n: int) -> float:  # work per second of request i among n computing
        return 1 / n if math.isnan(ttft[i]) else n**gain / n

    while next_job < len(order) or any(boxes) or any(waiting.values()):
        # the next event: an arrival, a first token, or a request finishing
        step = jobs[order[next_job]].at_s - now if next_job < len(order) else math.inf
        for model, at in ready_at.items():  # a first load ending with requests waiting for it
            if at > now + 1e-12 and waiting[model]:
                step = min(step, at - now)
        for running in boxes:
            for i in running:
                left = (first_work[i] - done[i]) if math.isnan(ttft[i]) else (work[i] - done[i])
                step = min(step, max(left, 0.0) / rate(i, len(running)))
        for running in boxes:
            rates = [rate(i, len(running)) for i in running]
            for i, r in zip(running, rates, strict=True):
                done[i] += step * r
        now += step
        for running in boxes:
            for i in list(running):
                if math.isnan(ttft[i]) and done[i] >= first_work[i] - 1e-9:
                    ttft[i] = now - jobs[i].at_s
                if done[i] >= work[i] - 1e-9:
                    running.remove(i)
        while next_job < len(order) and jobs[order[next_job]].at_s <= now + 1e-12:
            waiting[jobs[order[next_job]].model].append(order[next_job])
            next_job += 1
        start()
    return ttft


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {p: _percentile(ordered, q) for p, q in PERCENTILES}


# ----- the policies: what a proxy without model awareness can do -----

Policy = Callable[[Sequence[int], Job], int]
"""Given the requests in flight per worker and the request, the index of the worker to use."""


def first_available(in_flight: Sequence[int], job: Job) -> int:
    return next((i for i, n in enumerate(in_flight) if n < MAX_CONCURRENT), 0)


def round_robin_policy() -> Policy:
    turn = itertools.count()
    return lambda in_flight, job: next(turn) % len(in_flight)


def least_connections(in_flight: Sequence[int], job: Job) -> int:
    return min(range(len(in_flight)), key=lambda i: (in_flight[i], i))


def prefix_only_policy() -> Policy:
    """Route on prefix-cache hits alone, as SGLang's cache-aware router and llm-d's prefix scorer do
    when nothing else weighs: the worker this proxy sent the longest run of the prompt's leading blocks
    to (interlock's own ``PrefixIndex`` and blocks, one index per proxy), ties and misses to the fewest
    requests in flight. Queues, loads and speeds are not looked at."""
    index = PrefixIndex()

    def choose(in_flight: Sequence[int], job: Job) -> int:
        prefix = prompt_prefix({"messages": job.body_messages()})
        if prefix is None:
            return least_connections(in_flight, job)
        matched = [index.matched(f"w{i}", job.model, prefix) for i in range(len(in_flight))]
        best = min(range(len(in_flight)), key=lambda i: (-matched[i], in_flight[i], i))
        index.served(f"w{best}", job.model, prefix)
        return best

    return choose


POLICIES: dict[str, Callable[[], Policy]] = {
    "first-available": lambda: first_available,
    "round-robin": round_robin_policy,
    "least-connections": lambda: least_connections,
    "prefix-only": prefix_only_policy,
}
INTERLOCK = "interlock (adaptive)"


@dataclass(frozen=True, slots=True)
class Physics:
    """What the boxes do beyond loads and sharing: batching (``BATCHING_GAIN``) and the prefix cache
    (``PREFIX_CACHE_TOKENS`` per loaded model; 0: none)."""

    batching_gain: float = BATCHING_GAIN
    prefix_cache_tokens: int = PREFIX_CACHE_TOKENS
    models: tuple[SimModel, ...] = ()  # () : ``MODELS`` (``sim_models``); else these, already scaled
    parallel: int = PARALLEL  # per model on a box (interlock's per-model slots follow it)
    preload: tuple[str, ...] = PRELOAD


async def fresh_boxes(workers: int, scale: float, physics: Physics = Physics()) -> list[FakeGpuBox]:
    boxes = [
        FakeGpuBox(
            name=f"box{i}",
            models=list(physics.models) or sim_models(scale),
            vram_bytes=int(VRAM_GIB * GIB),
            reply=REPLY,
            record=False,
            batching_gain=physics.batching_gain,
            prefix_cache_tokens=physics.prefix_cache_tokens,
        )
        for i in range(workers)
    ]
    for box in boxes:
        box.preload(*physics.preload)
        await box.astart()
    return boxes


def result(
    name: str, outcomes: Sequence[Outcome], boxes: Sequence[FakeGpuBox], scale: float, wall: float
) -> Result:
    ttfts = sorted(o.ttft_s for o in outcomes if o.ttft_s is not None)
    return Result(
        policy=name,
        requests=len(outcomes),
        errors=sum(1 for o in outcomes if o.error is not None),
        loads=sum(b.loads for b in boxes),
        evictions=sum(b.evictions for b in boxes),
        spills=sum(1 for o in outcomes if o.spilled),
        ttft_s={p: _percentile(ttfts, q) / scale for p, q in PERCENTILES},
        per_worker=[sum(1 for o in outcomes if o.worker == i) for i in range(len(boxes))],
        wall_s=wall,
        cached_share=sum(b.cached_tokens for b in boxes) / max(1, sum(b.prompt_tokens for b in boxes)),
    )


PERCENTILES = (("p50", 0.50), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99))


async def replay(
    name: str, policy: Policy, jobs: Sequence[Job], workers: int, scale: float, physics: Physics = Physics()
) -> Result:
    boxes = await fresh_boxes(workers, scale, physics)
    in_flight = [0] * workers
    outcomes: list[Outcome] = []
    connector = aiohttp.TCPConnector(limit=0)
    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as http:

        async def one(job: Job) -> None:
            await asyncio.sleep(max(0.0, started + job.at_s * scale - time.perf_counter()))
            index = policy(in_flight, job)
            in_flight[index] += 1
            try:
                outcomes.append(await _call(http, boxes[index].url, job, index))
            finally:
                in_flight[index] -= 1

        await asyncio.gather(*(one(job) for job in jobs))
    wall = time.perf_counter() - started
    for box in boxes:
        await box.aclose()
    return result(name, outcomes, boxes, scale, wall)


# ----- interlock: the same schedule through `interlock serve` -----

GATEWAY_CONFIG = """\
version: 1
server: {{alias_namespace: fleet/}}
providers:
  local:
    kind: ollama
    timeouts: {{connect: 2s, first_byte: 120s, total: 300s}}
    workers:
{workers}
health: {{probe_interval: {probe}, probe_timeout: {probe_timeout}}}
preflight: {{mode: off}}
routing: {routing}
aliases:
{aliases}
"""


def gateway_config(
    boxes: Sequence[FakeGpuBox],
    scale: float,
    routing: str = "{}",
    max_concurrent: int = MAX_CONCURRENT,
    parallel: int = PARALLEL,
) -> str:
    """Each box as a worker (slots as the proxies have them, per model as the box runs them, telemetry
    from the box's document); one alias per model; probes every 5 simulated seconds."""
    workers = "\n".join(
        f'      - {{name: {b.name}, url: "{b.url}", max_concurrent: {max_concurrent}, '
        f'model_concurrency: {{"*": {parallel}}}, queue: {{max_waiting: 1000, max_wait: 300s}}, '
        f'telemetry: {{url: "{b.url}/telemetry"}}}}'
        for b in boxes
    )
    names = sorted({name.removesuffix(":latest") for b in boxes for name in b.sim})
    aliases = "\n".join(f'  "fleet/{m}": {{chain: ["local/{m}"]}}' for m in names)
    probe_ms = max(20, int(5000 * scale))
    return GATEWAY_CONFIG.format(
        workers=workers,
        aliases=aliases,
        probe=f"{probe_ms}ms",
        probe_timeout=f"{probe_ms * 4 // 5}ms",
        routing=routing,
    )


def start_gateway(config: str, folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`interlock serve` on a free port, the plan compiled from ``config`` first; (process, URL)."""
    from interlock.compiler import compile_config
    from interlock.schema.canonical import canonical_json

    source = folder / "fleet.yaml"
    source.write_text(config)
    ctx = compile_config(str(source))
    if ctx.plan is None or ctx.sink.errors:
        raise SystemExit(f"the bench configuration does not compile: {[str(d) for d in ctx.sink.items]}")
    plan = folder / "plan.json"
    plan.write_text(canonical_json(ctx.plan.model_dump(mode="json")))
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock", "serve", str(plan), "--port", "0", "--log-level", "warning"],
        stdout=subprocess.PIPE,
        stderr=(folder / "serve.log").open("wb"),
        stdin=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", "")},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    if not line.startswith("interlock serving http://"):
        proc.kill()
        raise SystemExit(f"interlock serve did not start: {line!r}")
    return proc, line.split()[2]


async def replay_interlock(
    jobs: Sequence[Job],
    workers: int,
    scale: float,
    routing: str = "{}",
    max_concurrent: int = MAX_CONCURRENT,
    physics: Physics = Physics(),
) -> Result:
    boxes = await fresh_boxes(workers, scale, physics)
    index = {b.name: i for i, b in enumerate(boxes)}
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="interlock-fleet-") as tmp:
        config = gateway_config(boxes, scale, routing, max_concurrent, physics.parallel)
        proc, url = start_gateway(config, Path(tmp))
        try:
            connector = aiohttp.TCPConnector(limit=0)
            timeout = aiohttp.ClientTimeout(total=300)
            async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
                await _until_ready(http, url)
                started = time.perf_counter()

                async def one(job: Job) -> None:
                    await asyncio.sleep(max(0.0, started + job.at_s * scale - time.perf_counter()))
                    outcomes.append(await _call_gateway(http, url, job, index))

                await asyncio.gather(*(one(job) for job in jobs))
                wall = time.perf_counter() - started
        finally:
            proc.terminate()
            proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()
    for box in boxes:
        await box.aclose()
    return result(INTERLOCK, outcomes, boxes, scale, wall)


async def _until_ready(http: aiohttp.ClientSession, url: str) -> None:
    """Ready (the first probe round, so the first /api/ps, is done) and telemetry read for every box."""
    for _ in range(1000):
        try:
            async with http.get(f"{url}/readyz") as ready, http.get(f"{url}/v1/health") as health:
                workers = (await health.json())["workers"]
                if ready.status == 200 and all("telemetry" in w for w in workers.values()):
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.02)
    raise SystemExit("interlock serve did not become ready")


async def _call_gateway(http: aiohttp.ClientSession, url: str, job: Job, index: dict[str, int]) -> Outcome:
    body = {
        "model": f"fleet/{job.model}",
        "messages": job.body_messages(),
        "stream": True,
        "max_tokens": job.answer_tokens,
    }
    sent = time.perf_counter()
    ttft: float | None = None
    worker = -1
    try:
        async with http.post(f"{url}/v1/chat/completions", data=orjson.dumps(body)) as response:
            worker = index.get(response.headers.get("x-interlock-worker", ""), -1)
            spilled = not response.headers.get("x-interlock-resolved", "local/").startswith("local/")
            if response.status != 200:
                await response.read()
                return Outcome(None, f"HTTP {response.status}", worker)
            async for line in response.content:
                if ttft is None and line.startswith(b"data: {"):
                    ttft = time.perf_counter() - sent
                if line.startswith(b"data: {") and b'"error"' in line:
                    return Outcome(ttft, "stream error", worker, spilled)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Outcome(ttft, type(exc).__name__, worker)
    return Outcome(ttft, None, worker, spilled)


async def _call(http: aiohttp.ClientSession, url: str, job: Job, worker: int) -> Outcome:
    body = {
        "model": job.model,
        "messages": job.body_messages(),
        "stream": True,
        "options": {"num_predict": job.answer_tokens},
    }
    sent = time.perf_counter()
    ttft: float | None = None
    try:
        async with http.post(f"{url}/api/chat", data=orjson.dumps(body)) as response:
            if response.status != 200:
                await response.read()
                return Outcome(None, f"HTTP {response.status}", worker)
            async for line in response.content:
                if ttft is None and line.strip():
                    ttft = time.perf_counter() - sent
                if b'"error"' in line:
                    return Outcome(ttft, "stream error", worker)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return Outcome(ttft, type(exc).__name__, worker)
    return Outcome(ttft, None, worker)


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=1000, method="inclusive")[min(int(q * 1000) - 1, 998)]


def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def table(results: Sequence[Result], scale: float) -> str:
    head = (
        f"{'policy':<22}| loads | evictions | TTFT p50 | TTFT p90 | TTFT p95 | TTFT p99 | cached | spills "
        "| errors | requests per worker"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        t = r.ttft_s
        lines.append(
            f"{r.policy:<22}| {r.loads:>5} | {r.evictions:>9} | {t['p50']:>6.2f} s | {t['p90']:>6.2f} s "
            f"| {t['p95']:>6.2f} s | {t['p99']:>6.2f} s | {r.cached_share:>6.0%} | {r.spills:>6} "
            f"| {r.errors:>6} | {'/'.join(map(str, r.per_worker))}"
        )
    lines.append(
        f"TTFT in simulated seconds (measured / {scale:g}): a 2 s model load ran in {2 * scale * 1000:.0f} ms"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=3, choices=(2, 3, 4))
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--workload",
        choices=sorted([*WORKLOADS, *SESSION_WORKLOADS]),
        default="heavy",
        help="heavy (GPUs 63%% busy without loads), moderate (32%%), interactive (chat traffic, 30%%) "
        "or prefix (sessions sharing long system prompts, multi-turn)",
    )
    parser.add_argument(
        "--batching-gain", type=float, default=BATCHING_GAIN, help="see BATCHING_GAIN (0: none)"
    )
    parser.add_argument(
        "--prefix-cache",
        type=int,
        help=f"each box's prefix cache per loaded model, tokens (0: none; default {PREFIX_CACHE_TOKENS} for "
        "the prefix workload, 0 for the others, whose prompts are `w w w ...` of random lengths: equal "
        "lengths would be cache hits no real traffic has)",
    )
    parser.add_argument(
        "--rate", type=float, help="arrivals per simulated s between bursts (overrides the workload's)"
    )
    parser.add_argument("--scale", type=float, default=0.25, help="real seconds per simulated second")
    parser.add_argument(
        "--policy", action="append", choices=[*sorted(POLICIES), INTERLOCK], help="(default: all)"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=MAX_CONCURRENT,
        help="interlock's max_concurrent per box (first-available's cap stays MAX_CONCURRENT)",
    )
    parser.add_argument("--bounds-only", action="store_true", help="print the bounds, replay nothing")
    parser.add_argument(
        "--above",
        type=float,
        help="also print how many requests each bound has above this TTFT (simulated s)",
    )
    parser.add_argument(
        "--routing",
        default="{}",
        help="interlock's `routing:` section, YAML flow style (default: the defaults)",
    )
    args = parser.parse_args(argv)
    if args.rate is not None and args.rate <= 0:
        parser.error("--rate must be above 0")
    name = args.workload if args.rate is None else f"{args.workload} at rate {args.rate:g}"
    jobs = schedule(args.workload, args.seed, args.requests, args.rate)
    cache = args.prefix_cache
    if cache is None:
        cache = PREFIX_CACHE_TOKENS if args.workload in SESSION_WORKLOADS else 0
    physics = Physics(args.batching_gain, cache)
    counts = {m[0]: sum(1 for j in jobs if j.model == m[0]) for m in MODELS}
    print(
        f"workload: {name} (GPUs {busy(jobs, args.workers):.0%} busy without a single load), "
        f"seed {args.seed}, {len(jobs)} requests over {jobs[-1].at_s:.0f} simulated s, "
        f"{args.workers} boxes x {VRAM_GIB:g} GiB, preloaded {', '.join(PRELOAD)}; per model: "
        + ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        + f"; batching gain {physics.batching_gain:g}, prefix cache {physics.prefix_cache_tokens} tokens"
        + (
            f"; {sum(j.cached_words for j in jobs) / sum(j.prompt_words for j in jobs):.0%} of prompt words "
            "sent before (what a perfect prefix cache would not process)"
            if any(j.cached_words for j in jobs)
            else ""
        )
    )
    bound = bounds(jobs, args.workers, physics.batching_gain)
    for label, ttfts in bound.rows():
        figures = _percentiles(ttfts)
        above = "" if args.above is None else f"; {sum(t > args.above for t in ttfts)} above {args.above:g} s"
        print(
            f"{label:<22}  TTFT p50 {figures['p50']:.2f} s, p90 {figures['p90']:.2f} s, "
            f"p95 {figures['p95']:.2f} s, p99 {figures['p99']:.2f} s{above} (computed from the schedule: "
            "see `bounds`)"
        )
    if args.bounds_only:
        return 0
    results = []
    load_before = _load()
    for name in args.policy or [*POLICIES, INTERLOCK]:
        if name == INTERLOCK:
            row = replay_interlock(jobs, args.workers, args.scale, args.routing, args.max_concurrent, physics)
            results.append(asyncio.run(row))
        else:
            policy = POLICIES[name]()
            results.append(asyncio.run(replay(name, policy, jobs, args.workers, args.scale, physics)))
    print(table(results, args.scale))
    ref = _percentiles(bound.reference_s)
    print(
        f"distance to {REFERENCE} (loads {bound.reference_loads}, evictions {bound.reference_evictions}, "
        f"p50 {ref['p50']:.2f} s, p95 {ref['p95']:.2f} s):"
    )
    for r in results:
        print(
            f"  {r.policy:<22} p50 {r.ttft_s['p50'] / max(ref['p50'], 1e-9):5.2f}x, p95 "
            f"{r.ttft_s['p95'] / max(ref['p95'], 1e-9):5.2f}x, "
            f"loads {r.loads} ({r.loads - bound.reference_loads:+d})"
        )
    print(f"load average {load_before} at the start, {_load()} at the end")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
