"""A simulated GPU box: an Ollama worker with a VRAM budget, model loads, eviction, parallelism and speed.

It speaks Ollama's wire format through a ``FakeOllama`` it holds (never started: its route functions
render tags, show, chat and embed answers), and adds the physics a routing policy has to live with:

- a VRAM budget; each ``SimModel`` takes ``vram_bytes`` while loaded;
- a load time per model (``load_s``, scaled down from real seconds) before a cold model's first token;
- LRU eviction of idle models when a new one does not fit; a model serving requests is never evicted,
  so a load that cannot make room waits until it can, and (as in Ollama's scheduler) the requests that
  arrived after it wait behind it; a model larger than the whole budget is refused with Ollama's 500;
- per-model parallelism (``parallel``, Ollama's ``OLLAMA_NUM_PARALLEL``): further requests queue;
- prompt processing (``prompt_tokens_per_s``) and output speed (``tokens_per_s``), each a model's speed
  when it has the GPU to itself: stream chunks, one token each, are paced; the final message's
  ``load_duration``, ``prompt_eval_duration`` and ``eval_duration`` tell the truth;
- one GPU shared: requests computing at once (processing a prompt or generating, of one model or of
  several) share the box's throughput equally, so with ``n`` computing each advances at 1/n of its solo
  speed (processor sharing, in steps of one token or ``PROMPT_STEP`` prompt tokens). ``batching_gain``
  (default 0: none) makes decoding cheaper together: ``n`` requests generating at once make
  ``n ** batching_gain`` times one alone's tokens/s between them (prompt processing, compute-bound,
  gains nothing). A request waiting for a slot, a load or room does not compute; a load takes
  ``load_s`` whatever else runs;
- a prefix cache (``prefix_cache_tokens``, default 0: none), as vLLM's automatic prefix caching or
  llama.cpp's slots keep one: per loaded model, the prompt's messages as chained blocks (a message's
  block names every message before it too), least recently used dropped first beyond that many
  tokens, all of a model's dropped when it is evicted; a prompt's leading blocks found there are not
  processed again. ``cached_tokens`` / ``prompt_tokens`` count them (all requests), and the final
  message's ``prompt_eval_count`` is the tokens processed, as Ollama reports it;
- ``/api/ps`` lists exactly the loaded models with their VRAM, ``/api/tags`` the installed ones; a load
  request (``/api/generate`` without a prompt, a warm-up) loads a model without taking a slot;
  ``GET /telemetry`` serves a telemetry sidecar's document with the box's true VRAM use.

Invariants: ``vram_in_use() <= vram_bytes``; a model is loaded or loading, or neither; ``running`` of a
model never exceeds its ``parallel``; ``computing`` never exceeds ``running()``. Everything runs on the
box's event loop, so state changes are atomic between awaits; ``until(predicate)`` lets a test wait on
state instead of time, and ``hold()`` stops generation (after any load) until ``release()``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, replace
from typing import Any

import orjson

from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_server import (
    Answer,
    ErrorAnswer,
    FakeServer,
    Incoming,
    JsonAnswer,
    Route,
    StreamAnswer,
)
from interlock.testing.http import Connection, Request
from interlock.testing.replies import Reply, count_words

_NDJSON = "application/x-ndjson"
_SIMULATED = frozenset({("POST", "/api/chat"), ("POST", "/api/generate"), ("POST", "/api/embed")})
GIB = 1024**3
PROMPT_STEP = 64  # prompt tokens processed per step of the shared GPU


@dataclass(frozen=True, slots=True)
class SimModel:
    """An installed model and how it behaves on this box."""

    spec: ModelSpec
    vram_bytes: int
    load_s: float = 0.1
    tokens_per_s: float = 200.0
    prompt_tokens_per_s: float = 10_000.0
    parallel: int = 1
    # seconds per prompt token found in the prefix cache (a hit is not free: llama-server took 0.7 s for
    # a 4,219-token prompt with 4,212 cached, against 45.6 s cold at 93 tokens/s, SmolLM2-135M on one
    # CPU thread: 0.15 ms a cached token, 1/73 of a processed one); 0: free
    cached_token_s: float = 0.0

    @property
    def name(self) -> str:
        return self.spec.full_name


def sim_model(name: str, vram_gib: float, **behaviour: Any) -> SimModel:
    """``sim_model("qwen3:8b", 6.5, load_s=0.1, tokens_per_s=120)``: a chat model of that size."""
    size = int(vram_gib * GIB)
    spec = ModelSpec(name, ("completion", "tools"), size=size)
    return SimModel(spec=spec, vram_bytes=size, **behaviour)


@dataclass(slots=True)
class ModelState:
    loaded: bool = False
    loading: bool = False
    refs: int = 0  # requests given this model (it cannot be evicted while any is)
    running: int = 0  # requests holding one of the model's parallel slots (a load included)
    waiting: int = 0  # requests not yet holding a slot: in line, waiting for room, a load or a slot
    last_used: float = 0.0
    peak_running: int = 0
    served: int = 0


@dataclass(frozen=True, slots=True)
class BoxEvent:
    kind: str  # load | evict
    model: str


@dataclass(slots=True)
class _Timing:
    load_s: float = 0.0
    prompt_s: float = 0.0
    eval_s: float = 0.0
    prompt_n: int | None = None  # prompt tokens processed (the prefix cache's not counted)


class FakeGpuBox(FakeServer):
    """An Ollama "GPU box" on loopback; ``url`` is the worker URL."""

    kind = "fake-gpu-box"

    def __init__(
        self,
        *,
        models: Sequence[SimModel],
        vram_bytes: int,
        name: str | None = None,
        reply: Reply | None = None,
        max_queue: int = 512,
        record: bool = True,
        port: int = 0,
        batching_gain: float = 0.0,
        prefix_cache_tokens: int = 0,
    ) -> None:
        name = name or self.kind
        # The wire: never started; its route functions render Ollama's answers. Made first, because
        # FakeServer.__init__ asks for the routes.
        self.wire = FakeOllama(name=name, models=[m.spec for m in models], reply=reply, record=False)
        super().__init__(name=name, reply=self.wire.reply, record=record, port=port)
        self.vram_bytes = vram_bytes
        self.max_queue = max_queue
        self.sim = {m.name: m for m in models}
        self.state = {m.name: ModelState() for m in models}
        self.events: list[BoxEvent] = []
        self.wire = FakeOllama(
            name=self.name, models=[m.spec for m in models], reply=self.reply, record=False
        )
        self._changed: asyncio.Condition | None = None
        self._tickets = itertools.count()
        self._line: list[int] = []  # tickets of requests waiting for their model, in arrival order
        self._go = asyncio.Event()
        self._go_set = True
        self.computing = 0  # requests processing a prompt or generating now (they share the GPU)
        self.peak_computing = 0
        self.batching_gain = batching_gain
        self.prefix_cache_tokens = prefix_cache_tokens
        self._cache: dict[str, dict[int, int]] = {}  # model -> block hash -> its tokens (LRU order)
        self.cached_tokens = 0  # prompt tokens found in the prefix cache (all requests)
        self.prompt_tokens = 0  # prompt tokens asked for (all requests)

    # ----- what tests and benchmarks read -----

    @property
    def loads(self) -> int:
        return sum(1 for e in self.events if e.kind == "load")

    @property
    def evictions(self) -> int:
        return sum(1 for e in self.events if e.kind == "evict")

    def loaded(self) -> list[str]:
        return sorted(name for name, s in self.state.items() if s.loaded)

    def vram_in_use(self) -> int:
        return sum(self.sim[n].vram_bytes for n, s in self.state.items() if s.loaded or s.loading)

    def queued(self) -> int:
        return sum(s.waiting for s in self.state.values())

    def running(self) -> int:
        return sum(s.running for s in self.state.values())

    async def until(self, predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
        """Wait, on the box's loop, until ``predicate()`` holds after some state change."""
        cond = self._condition()
        async with cond:
            await asyncio.wait_for(cond.wait_for(predicate), timeout_s)

    def hold(self) -> None:
        """Requests stop before their first token (after any load) until ``release()``."""
        self._in_loop(self._hold)

    def release(self) -> None:
        self._in_loop(self._release)

    def preload(self, *names: str) -> None:
        """Mark models as loaded without a load (the box's state before a run); before ``start``."""
        for name in names:
            state = self.state[self.sim[name].name]
            state.loaded = True
        if self.vram_in_use() > self.vram_bytes:
            raise ValueError(f"{self.name}: {', '.join(names)} do not fit in {self.vram_bytes} bytes")

    # ----- FakeServer -----

    def routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/api/tags"): self.wire._tags,
            ("POST", "/api/show"): self.wire._show,
            ("GET", "/api/ps"): self._ps,
            ("POST", "/api/chat"): self.wire._chat,  # only under a fault; else simulated
            ("POST", "/api/generate"): self.wire._generate,
            ("POST", "/api/embed"): self.wire._embed,
            ("GET", "/api/version"): self.wire._version,
            ("GET", "/telemetry"): self._telemetry,
        }

    def error_body(self, status: int, message: str) -> bytes:
        return self.wire.error_body(status, message)

    def malformed_frame(self) -> bytes:
        return self.wire.malformed_frame()

    def error_frame(self, message: str) -> bytes:
        return self.wire.error_frame(message)

    def _dispatch(self, conn: Connection, request: Request) -> Coroutine[Any, Any, None] | None:
        """Chat and embed go through the simulation (or a fault in force); the rest as in any fake."""
        key = (request.method, request.path)
        if key not in _SIMULATED:
            return super()._dispatch(conn, request)
        try:
            body = orjson.loads(request.body) if request.body else None
        except orjson.JSONDecodeError:
            return super()._dispatch(conn, request)  # answers 400 as every fake does
        model = body.get("model") if isinstance(body, dict) else None
        incoming = Incoming(*key, request.headers, body, model if isinstance(model, str) else None)
        if self.record:
            self._recorded.append(incoming)
        fault = self.faults.take(incoming.model)
        if fault is not None:
            return self._faulty(conn, fault, self._routes[key], incoming)
        return self._simulate(conn, incoming)

    # ----- the simulation -----

    def _ps(self, incoming: Incoming) -> Answer:
        models = []
        for name in self.loaded():
            entry = self.wire._entry(self.sim[name].spec)
            del entry["modified_at"]
            size = self.sim[name].vram_bytes
            entry.update(size=size, size_vram=size, expires_at="2099-01-01T00:00:00Z", context_length=4096)
            models.append(entry)
        return JsonAnswer({"models": models})

    def _telemetry(self, incoming: Incoming) -> Answer:
        """The telemetry sidecar's document (``runtime.telemetry.document``): this box's true VRAM use,
        and a utilisation that is the share of its models' parallel slots running."""
        capacity = sum(sim.parallel for sim in self.sim.values()) or 1
        gpu = {
            "index": 0,
            "name": "simulated GPU",
            "vram_total_bytes": self.vram_bytes,
            "vram_used_bytes": self.vram_in_use(),
            "utilization_percent": min(100.0, 100.0 * self.running() / capacity),
        }
        return JsonAnswer({"format": "interlock-telemetry/1", "gpus": [gpu], "errors": {}})

    async def _simulate(self, conn: Connection, incoming: Incoming) -> None:
        routes = {"/api/chat": self.wire._chat, "/api/generate": self.wire._generate}
        answer = routes.get(incoming.path, self.wire._embed)(
            incoming
        )  # the wire answer: validation errors come back before any load
        if isinstance(answer, ErrorAnswer):
            await self._finish(self._send(conn, answer, None))
            return
        assert incoming.model is not None
        sim = self.sim[self.wire.models[_full(incoming.model)].full_name]
        if sim.vram_bytes > self.vram_bytes:
            need, have = sim.vram_bytes / GIB, self.vram_bytes / GIB
            message = f"model requires more system memory ({need:.1f} GiB) than is available ({have:.1f} GiB)"
            await self._finish(self._send(conn, ErrorAnswer(500, message), None))
            return
        if self.queued() >= self.max_queue:
            busy = ErrorAnswer(503, "server busy, please try again.  maximum pending requests exceeded")
            await self._finish(self._send(conn, busy, None))
            return
        timing = _Timing()
        state = self.state[sim.name]
        body = incoming.body if isinstance(incoming.body, dict) else {}
        if (incoming.path == "/api/generate" and not body.get("prompt")) or (
            incoming.path == "/api/chat" and body.get("messages") == []
        ):
            await self._load_only(conn, answer, sim, state, body)
            return
        await self._admit(sim, state, timing)
        try:
            await self._generate(conn, incoming, answer, sim, timing)
        finally:
            state.running -= 1
            state.refs -= 1
            state.served += 1
            state.last_used = self._now()
            self._notify()

    async def _load_only(
        self, conn: Connection, answer: Answer, sim: SimModel, state: ModelState, body: dict[str, Any]
    ) -> None:
        """A load request (a warm-up): the model gets onto the GPU as for any request (in line, making
        room, ``load_s``), but no parallel slot is taken and nothing is generated; ``keep_alive`` 0
        unloads an idle model instead. Answered once the model is in memory."""
        if body.get("keep_alive") in (0, "0", "0s"):
            if state.loaded and state.refs == 0:
                state.loaded = False
                self.events.append(BoxEvent("evict", sim.name))
                self._notify()
        else:
            await self._admit(sim, state, _Timing(), slot=False)
            state.refs -= 1
            state.last_used = self._now()
            self._notify()
        await self._finish(self._send(conn, answer, None))

    async def _admit(self, sim: SimModel, state: ModelState, timing: _Timing, *, slot: bool = True) -> None:
        """Get the model onto the GPU (loading it, evicting idle models, when it is cold), then take
        one of its parallel slots (``slot``; a load request takes none, and waits only for the model).

        As Ollama's scheduler does, requests get a model in arrival order: one whose model must wait for
        room holds up those behind it (head of line), so a load is never starved by busy models.
        """
        cond = self._condition()
        ticket = next(self._tickets)
        must_load = counted = False
        state.waiting += 1
        self._notify()
        try:
            async with cond:
                self._line.append(ticket)
                try:
                    await cond.wait_for(
                        lambda: (
                            self._line[0] == ticket
                            and (state.loaded or state.loading or self._make_room(sim))
                        )
                    )
                finally:
                    self._line.remove(ticket)
                    cond.notify_all()
                if not (state.loaded or state.loading):
                    state.loading = must_load = True
                state.refs += 1
                counted = True
                if slot:
                    await cond.wait_for(lambda: state.running < sim.parallel and (must_load or state.loaded))
                    state.running += 1
                    state.peak_running = max(state.peak_running, state.running)
                elif not must_load:
                    await cond.wait_for(lambda: state.loaded)
        except BaseException:
            if counted:
                state.refs -= 1
            if must_load:
                state.loading = False
            raise
        finally:
            state.waiting -= 1
            self._notify()
        if not must_load:
            return
        self.events.append(BoxEvent("load", sim.name))
        try:
            await asyncio.sleep(sim.load_s)
        except BaseException:
            state.loading = False
            state.running -= 1 if slot else 0
            state.refs -= 1
            self._notify()
            raise
        timing.load_s = sim.load_s
        state.loading = False
        state.loaded = True
        self._notify()

    def _make_room(self, sim: SimModel) -> bool:
        """Evict idle models, least recently used first, until ``sim`` fits; False when it cannot yet."""
        need = self.vram_in_use() + sim.vram_bytes - self.vram_bytes
        idle = sorted(
            (s.last_used, n) for n, s in self.state.items() if s.loaded and s.refs == 0 and n != sim.name
        )
        if need > sum(self.sim[n].vram_bytes for _, n in idle):
            return False
        for _, name in idle:
            if need <= 0:
                break
            self.state[name].loaded = False
            self._cache.pop(name, None)  # its KV cache goes with it
            self.events.append(BoxEvent("evict", name))
            need -= self.sim[name].vram_bytes
        return True

    async def _generate(
        self, conn: Connection, incoming: Incoming, answer: Answer, sim: SimModel, timing: _Timing
    ) -> None:
        body = incoming.body if isinstance(incoming.body, dict) else {}
        prompt_tokens = count_words(body.get("messages")) if incoming.path == "/api/chat" else 1
        self.prompt_tokens += prompt_tokens
        if self.prefix_cache_tokens and incoming.path == "/api/chat":
            cached = self._cached(sim.name, body.get("messages"))
            self.cached_tokens += cached
            prompt_tokens -= cached
            timing.prompt_n = prompt_tokens
        else:
            cached = 0
        token_s = 1.0 / sim.tokens_per_s
        self._computing(+1)
        try:
            if cached and sim.cached_token_s:
                timing.prompt_s += await self._share(cached * sim.cached_token_s)
            while prompt_tokens > 0:
                step = min(prompt_tokens, PROMPT_STEP)
                prompt_tokens -= step
                timing.prompt_s += await self._share(step / sim.prompt_tokens_per_s)
            if not self._go_set:
                self._computing(-1)  # held: not computing
                try:
                    await self._go.wait()
                finally:
                    self._computing(+1)
            if isinstance(answer, StreamAnswer):
                conn.start_chunked(200, answer.content_type)
                *tokens, final = answer.frames
                for frame in tokens:
                    timing.eval_s += await self._share(token_s, decode=True)
                    conn.write_chunk(frame)
                conn.write_chunk(_with_timing(final, timing))
                conn.write_chunk(answer.trailer)
                conn.end_chunked()
                return
            assert isinstance(answer, JsonAnswer)
            count = answer.obj.get("eval_count", 0) if isinstance(answer.obj, dict) else 0
            for _ in range(count):
                timing.eval_s += await self._share(token_s, decode=True)
        finally:
            self._computing(-1)
        obj = {**answer.obj, **_durations(timing)} if isinstance(answer.obj, dict) else answer.obj
        await self._finish(self._send(conn, replace(answer, obj=obj), None))

    async def _share(self, solo_s: float, *, decode: bool = False) -> float:
        """Do ``solo_s`` seconds of work (its time with the GPU to itself) while sharing the GPU with
        every request computing now: it takes ``solo_s`` x their number (a decoding step: x their
        number ** (1 - ``batching_gain``)). Returns the time it took."""
        n = max(1, self.computing)
        took = solo_s * (n ** (1.0 - self.batching_gain) if decode else n)
        await asyncio.sleep(took)
        return took

    def _cached(self, model: str, messages: Any) -> int:
        """The prompt's leading tokens found in ``model``'s prefix cache; the prompt's blocks are in
        it afterwards (most recently used), the least recently used dropped beyond the capacity."""
        if not isinstance(messages, list):
            return 0
        cache = self._cache.setdefault(model, {})
        chain, cached, leading = 0, 0, True
        for message in messages:
            tokens = count_words([message])
            chain = hash((chain, orjson.dumps(message)))
            if leading and chain in cache:
                cached += tokens
            else:
                leading = False
            cache.pop(chain, None)
            cache[chain] = tokens
        total = sum(cache.values())
        while total > self.prefix_cache_tokens and cache:
            total -= cache.pop(next(iter(cache)))
        return cached

    def _computing(self, step: int) -> None:
        self.computing += step
        self.peak_computing = max(self.peak_computing, self.computing)
        self._notify()

    # ----- state plumbing -----

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    def _notify(self) -> None:
        cond = self._condition()

        async def wake() -> None:
            async with cond:
                cond.notify_all()

        asyncio.get_running_loop().create_task(wake())

    def _hold(self) -> None:
        self._go = asyncio.Event()
        self._go_set = False

    def _release(self) -> None:
        self._go_set = True
        self._go.set()

    @staticmethod
    def _now() -> float:
        return asyncio.get_running_loop().time()


def _full(model: str) -> str:
    return model if ":" in model else f"{model}:latest"


def _durations(timing: _Timing) -> dict[str, int]:
    ns = 1_000_000_000
    durations = {
        "load_duration": int(timing.load_s * ns),
        "prompt_eval_duration": int(timing.prompt_s * ns),
        "eval_duration": int(timing.eval_s * ns),
        "total_duration": int((timing.load_s + timing.prompt_s + timing.eval_s) * ns),
    }
    if timing.prompt_n is not None:
        durations["prompt_eval_count"] = timing.prompt_n
    return durations


def _with_timing(frame: bytes, timing: _Timing) -> bytes:
    final = orjson.loads(frame)
    final.update(_durations(timing))
    return orjson.dumps(final) + b"\n"


__all__ = ["BoxEvent", "FakeGpuBox", "ModelState", "SimModel", "sim_model"]
