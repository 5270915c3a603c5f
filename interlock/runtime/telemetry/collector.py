"""The background telemetry loop and the book of what it last read, per worker.

Every ``probe_interval`` (the health cycle's), outside the request path, each worker whose plan entry
declares ``telemetry`` is read from its declared sources, concurrently; a worker without it costs
nothing (no process, no file, no request). A source that fails drops its values and records its error
class; the next success brings them back. Local commands run in a thread with a deadline (a hung one
is killed); the sidecar is fetched with the runtime's own HTTP client (net/client.py, a client of its own: its
connections never share the providers' pools), opened only when a plan names one.
Targets are built once per plan (keyed by its content hash), so a reload takes effect at the next round.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson

from interlock.runtime.base.clock import Clock, iso_utc
from interlock.runtime.base.periodic import Periodic
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.net.http_errors import BodyTooLarge, HTTPError, InvalidURL, Timeout
from interlock.runtime.net.transport import Request
from interlock.runtime.telemetry.readings import GpuReading, HostMemory, overlay
from interlock.runtime.telemetry.source_errors import (
    SourceFailed,
    SourceMalformed,
    SourceTimeout,
    TelemetryError,
)

log = logging.getLogger("interlock.telemetry")

SOURCES: tuple[str, ...] = ("nvidia_smi", "host_memory", "url")
BACKSTOP_S = 2.0  # beyond the probe timeout, for a source that does not time out itself


@dataclass(frozen=True, slots=True)
class Target:
    """One worker's declared sources, from the plan."""

    worker: str
    gpu: int
    nvidia_smi: bool
    host_memory: bool
    url: str | None
    unified_memory: bool  # the plan's hardware says the GPU uses system memory


def targets(plan: RuntimePlan) -> tuple[Target, ...]:
    """Every worker of the plan that declares telemetry, in name order."""
    out = []
    for name, worker in sorted(plan.source.workers.items()):
        t = worker.telemetry
        if t is None or not (t.nvidia_smi or t.host_memory or t.url):
            continue
        unified = worker.hardware.unified_memory if worker.hardware else False
        out.append(Target(name, t.gpu, t.nvidia_smi, t.host_memory, t.url, unified))
    return tuple(out)


@dataclass(slots=True)
class SourceState:
    """The last attempt to read one source, and a count of attempts by result."""

    error_class: str | None = None
    last_at: float | None = None  # wall clock
    last_ok_at: float | None = None
    results: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class WorkerTelemetry:
    """What is known about one worker now: each source's last good values, merged on demand."""

    target: Target
    local_gpu: GpuReading | None = None
    local_host: HostMemory | None = None
    remote_gpu: GpuReading | None = None
    remote_host: HostMemory | None = None
    remote_errors: dict[str, str] = field(default_factory=dict)  # what the sidecar could not read
    sources: dict[str, SourceState] = field(default_factory=dict)

    @property
    def gpu(self) -> GpuReading | None:
        return overlay(self.local_gpu, self.remote_gpu)

    @property
    def host(self) -> HostMemory | None:
        return overlay(self.local_host, self.remote_host)

    @property
    def unified(self) -> bool:
        host = self.host
        return self.target.unified_memory or (host is not None and host.unified)

    def vram(self) -> tuple[int | None, int | None]:
        """(used, total) bytes: the GPU's own, else the system memory on a unified-memory box."""
        gpu = self.gpu
        if gpu is not None and gpu.vram_total_bytes is not None:
            return gpu.vram_used_bytes, gpu.vram_total_bytes
        host = self.host
        if self.unified and host is not None:
            return host.used_bytes, host.total_bytes
        return None, None


class TelemetryBook:
    """The telemetry state of one gateway process, keyed by worker name."""

    def __init__(self, *, wall: Clock = time.time) -> None:
        self.wall = wall
        self.workers: dict[str, WorkerTelemetry] = {}

    def configure(self, current: tuple[Target, ...]) -> None:
        """Keep the state of workers still declared (with their new target), forget the others."""
        kept = {}
        for target in current:
            state = self.workers.get(target.worker) or WorkerTelemetry(target)
            state.target = target
            if not target.nvidia_smi:
                state.local_gpu = None
            if not target.host_memory:
                state.local_host = None
            if not target.url:
                state.remote_gpu = state.remote_host = None
                state.remote_errors = {}
            kept[target.worker] = state
        self.workers = kept

    def record(self, worker: str, source: str, error: TelemetryError | None) -> bool:
        """Count one attempt; True when the source's state changed (ok <-> failing)."""
        state = self.workers[worker].sources.setdefault(source, SourceState())
        before = state.error_class
        now = self.wall()
        state.last_at = now
        result = "ok" if error is None else error.error_class
        state.results[result] = state.results.get(result, 0) + 1
        state.error_class = None if error is None else error.error_class
        if error is None:
            state.last_ok_at = now
        return before != state.error_class

    def report(self, worker: str) -> dict[str, Any] | None:
        """``/v1/health``'s view of one worker: readings, and each source's last result (no messages)."""
        state = self.workers.get(worker)
        if state is None:
            return None
        gpu, host = state.gpu, state.host
        used, total = state.vram()
        return {
            "gpu": None
            if gpu is None
            else {
                "index": gpu.index,
                "name": gpu.name,
                "utilization_percent": gpu.utilization_percent,
                "temperature_celsius": gpu.temperature_celsius,
                "power_watts": gpu.power_watts,
                "power_limit_watts": gpu.power_limit_watts,
            },
            "vram_used_bytes": used,
            "vram_total_bytes": total,
            "memory_used_bytes": host.used_bytes if host else None,
            "memory_total_bytes": host.total_bytes if host else None,
            "unified_memory": state.unified,
            "sidecar_errors": dict(state.remote_errors),
            "sources": {
                name: {
                    "ok": s.error_class is None,
                    "error_class": s.error_class,
                    "last_at": iso_utc(s.last_at),
                    "last_ok_at": iso_utc(s.last_ok_at),
                }
                for name, s in sorted(state.sources.items())
            },
        }

    def __iter__(self) -> Iterator[WorkerTelemetry]:
        return iter(self.workers.values())


class TelemetryLoop(Periodic):
    """Reads every declared source each health cycle; ``collect_all`` is one round (tests call it)."""

    task_name = "interlock-telemetry"
    log = log
    failed = "telemetry round failed"

    def __init__(self, plan: Callable[[], RuntimePlan], book: TelemetryBook) -> None:
        self.plan = plan
        self.book = book
        self._targets: tuple[str, tuple[Target, ...]] = ("", ())
        self._client: UpstreamClient | None = None  # opened at the first sidecar read

    async def stop(self) -> None:
        await super().stop()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def current_targets(self) -> tuple[Target, ...]:
        plan = self.plan()
        if self._targets[0] != plan.content_hash:
            self._targets = (plan.content_hash, targets(plan))
            self.book.configure(self._targets[1])
        return self._targets[1]

    async def collect_all(self) -> None:
        """One round: every source of every worker that declares telemetry, concurrently."""
        current = self.current_targets()
        if not current:
            return
        timeout_s = self.plan().health.probe_timeout_s
        jobs = []
        for t in current:
            if t.nvidia_smi:
                jobs.append(self._read(t, "nvidia_smi", self._nvidia_smi(t, timeout_s)))
            if t.host_memory:
                jobs.append(self._read(t, "host_memory", self._host_memory(timeout_s)))
            if t.url:
                jobs.append(self._read(t, "url", self._remote(t.url, t.gpu, timeout_s)))
        await asyncio.gather(*jobs)

    async def round(self) -> None:
        await self.collect_all()

    def pause_s(self) -> float:
        return self.plan().health.probe_interval_s

    async def _read(self, target: Target, source: str, reading: Any) -> None:
        error: TelemetryError | None = None
        try:
            values = await asyncio.wait_for(reading, self.plan().health.probe_timeout_s + BACKSTOP_S)
        except TelemetryError as exc:
            error, values = exc, None
        except TimeoutError:
            error, values = SourceTimeout(f"{source}: no answer in time"), None
        state = self.book.workers.get(target.worker)
        if state is None or state.target != target:
            return  # the plan changed while this was being read
        if source == "nvidia_smi":
            state.local_gpu = values
        elif source == "host_memory":
            state.local_host = values
        else:
            state.remote_gpu, state.remote_host, state.remote_errors = (
                values if values is not None else (None, None, {})
            )
        if self.book.record(target.worker, source, error):
            if error is not None:
                log.warning(
                    "telemetry: %s %s failed (%s): %s", target.worker, source, error.error_class, error
                )
            else:
                log.info("telemetry: %s %s reads again", target.worker, source)

    # the sources' modules are imported by their first read (a worker with telemetry), never before:
    # a plan without telemetry loads none of them

    async def _nvidia_smi(self, target: Target, timeout_s: float) -> GpuReading:
        from interlock.runtime.telemetry.nvidia_smi import query_gpus

        readings = await asyncio.to_thread(query_gpus, target.gpu, timeout_s)
        return readings[0]

    async def _host_memory(self, timeout_s: float) -> HostMemory:
        from interlock.runtime.telemetry.host_memory import read_host_memory

        return await asyncio.to_thread(read_host_memory, timeout_s)

    async def _remote(
        self, url: str, gpu: int, timeout_s: float
    ) -> tuple[GpuReading | None, HostMemory | None, dict[str, str]]:
        from interlock.runtime.telemetry import document

        try:
            body = await self._fetch(url, timeout_s)
        except Timeout as exc:
            raise SourceTimeout(f"the sidecar did not answer within {timeout_s:g}s") from exc
        except BodyTooLarge as exc:
            raise SourceMalformed(f"the document is larger than {document.MAX_BYTES} bytes") from exc
        except (HTTPError, OSError) as exc:
            raise SourceFailed(f"the sidecar could not be reached ({type(exc).__name__})") from exc
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise SourceMalformed("the document is not JSON") from exc
        gpu_reading, host = document.read(data, gpu)
        return gpu_reading, host, document.read_errors(data)

    async def _fetch(self, url: str, timeout_s: float) -> bytes:
        """The body of ``GET url`` within ``timeout_s`` (at most ``document.MAX_BYTES``); SourceFailed
        for any status but 200."""
        from interlock.runtime.telemetry import document

        if self._client is None:
            self._client = UpstreamClient.create()
        client = self._client
        now = client.time()
        at = now + timeout_s
        response = await client.send(
            Request(Sidecar.of(url, timeout_s), "GET", Sidecar.path(url), None, at, at, now)
        )
        try:
            if response.status != 200:
                raise SourceFailed(f"the sidecar answered HTTP {response.status}")
            response.answered()
            return await response.read_all(document.MAX_BYTES)
        except BaseException:
            response.close()
            raise
        finally:
            response.release()


@dataclass(frozen=True, slots=True)
class Sidecar:
    """A sidecar's URL as the transport's ``Origin``: its own pool, no headers, no patience."""

    url: str
    connect_s: float
    label: str = "telemetry"
    kind: str = "telemetry"
    headers: Mapping[str, str] = field(default_factory=dict)
    lines: bytes | None = b""
    patience: None = None

    @classmethod
    def of(cls, url: str, timeout_s: float) -> Sidecar:
        """The origin of ``url`` (its scheme and authority; an invalid one is refused when sent)."""
        parts = urlsplit(url)
        if not parts.scheme or not parts.netloc:
            raise InvalidURL("invalid upstream URL")
        return cls(f"{parts.scheme}://{parts.netloc}", timeout_s)

    @staticmethod
    def path(url: str) -> str:
        """``url``'s path and query, as the request line carries them."""
        parts = urlsplit(url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
