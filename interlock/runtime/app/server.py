"""Running the gateway: uvicorn (uvloop) on a bound socket, SIGHUP reload, worker processes.

uvicorn runs the process (lifespan, signals, the graceful drain); each client connection is a
``net.connections.GuardedProtocol`` (HTTP/1.1 on httptools, header/body timeouts, the cap on open
connections, WebSocket upgrades refused).

One worker serves in this process. ``N`` workers are spawned processes sharing the listening socket;
this process supervises them: SIGHUP reloads the plan here first and is forwarded only when it loads
(each worker then swaps it in atomically), SIGINT/SIGTERM stop them, and a worker that dies is replaced
(with a growing delay while replacements keep dying).
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from multiprocessing.context import SpawnContext
from multiprocessing.process import BaseProcess
from operator import attrgetter
from types import FrameType
from typing import Any

from interlock.runtime.app.gateway import Gateway
from interlock.runtime.base import gc_policy
from interlock.runtime.net.fds import open_file_limit

log = logging.getLogger("interlock")


@dataclass(frozen=True, slots=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    log_level: str = "info"
    access_log: str | None = None  # None, "text" (uvicorn's line per request) or "json" (journal)
    state_dir: str | None = None
    usage_url: str = "memory:"  # where the usage ledger lives (runtime/usage)
    usage_flush_ms: int = 500
    usage_flush_debits: int = 256
    usage_refresh_ms: int = 5000
    audit_log: str | None = None  # --audit-log: where this process's audit events go
    otel: bool = False  # --otel: OpenTelemetry tracing


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket; port 0 picks a free one (read it back with ``getsockname``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def wait_ready(url: str, timeout_s: float, *, alive: Callable[[], bool] = lambda: True) -> bool:
    """Poll ``{url}/readyz`` until it answers 200 (True); False after ``timeout_s`` or once not alive."""
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while alive() and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=1) as response:
                if response.status == 200:
                    return True
        except OSError:  # not listening yet, or 503 while starting (urllib raises HTTPError for it)
            pass
        time.sleep(0.02)
    return False


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s",
        stream=sys.stderr,
    )


def run(gateway: Gateway, sock: socket.socket, options: ServeOptions) -> None:
    """Serve ``gateway`` on ``sock`` in this process until SIGINT/SIGTERM; SIGHUP reloads the plan."""
    import uvicorn

    from interlock.runtime.net.connections import ConnectionBook, protocol_for

    settings = partial(attrgetter("plan.server"), gateway)  # read at each connection, no frame of ours
    book = ConnectionBook(settings, gateway.metrics)
    log_limits(gateway)
    config = uvicorn.Config(
        gateway,
        loop="uvloop",
        # our protocol on httptools (timeouts, the connection cap), unless INTERLOCK_SERVER=uvicorn
        http=protocol_for(os.environ.get("INTERLOCK_SERVER") or "own", book),
        ws="none",  # a WebSocket upgrade is refused by the protocol; no WebSocket library is loaded
        lifespan="on",
        access_log=options.access_log == "text",
        log_level="debug" if options.log_level == "debug" else "warning",
        log_config=None,
        server_header=False,
        date_header=False,
        proxy_headers=False,  # nothing here reads the client address; saves work on every request
    )
    if options.access_log == "text":  # uvicorn's log_level applies to its access logger too
        logging.getLogger("uvicorn.access").setLevel(logging.INFO)

    server = uvicorn.Server(config)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # until the loop's handler is in place: never die of it

    gc_policy.settle()  # the plan is loaded: freeze it, collect young objects less often
    loop_factory = config.get_loop_factory()
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        # uvicorn's serve() straight on the loop: no frame of this module wakes at its 0.1 s tick
        runner.get_loop().add_signal_handler(signal.SIGHUP, gateway.request_reload)
        runner.run(server.serve(sockets=[sock]))


def log_limits(gateway: Gateway) -> None:
    """At debug level: the connection and upstream limits in force, and the descriptors they need."""
    server, limit = gateway.plan.server, open_file_limit()
    log.debug(
        "limits: header_timeout %gs, body_timeout %gs, max_connections %d (open-file limit %s), "
        "max_body_bytes %d, max_upstream_body_bytes %d, max_stream_line_bytes %d",
        server.header_timeout_s,
        server.body_timeout_s,
        server.max_connections,
        "unlimited or unknown" if limit is None else limit,
        server.max_body_bytes,
        server.max_upstream_body_bytes,
        server.max_stream_line_bytes,
    )
    if limit is not None and limit < 2 * server.max_connections + 64:  # a client + an upstream each
        log.warning(
            "server.max_connections is %d but this process may open only %d files: under load, "
            "connections may fail before the cap applies (raise `ulimit -n`, or lower the cap)",
            server.max_connections,
            limit,
        )


@dataclass(slots=True)
class Backoff:
    """The wait before replacing a worker: none after one that ran a while, doubling after quick deaths."""

    quick_s: float = 10.0  # a worker that dies sooner than this after its start counts as crashing
    first_s: float = 0.5
    max_s: float = 30.0
    streak: int = 0

    def delay(self, lived_s: float) -> float:
        if lived_s >= self.quick_s:
            self.streak = 0
            return 0.0
        delay: float = min(self.max_s, self.first_s * 2.0**self.streak)
        self.streak += 1
        return delay


@dataclass(eq=False, repr=False)
class Supervisor:
    """Keeps ``workers`` processes running ``target(*args)``; SIGHUP reloads, SIGINT/SIGTERM stop.

    On SIGHUP, ``reload`` (when given) runs first, in this process: only when it accepts the new plan is
    the signal forwarded to the workers. A worker that dies is replaced, after a delay that doubles
    while replacements keep dying soon after their start (``Backoff``).
    """

    workers: int
    target: Callable[..., None]
    args: tuple[Any, ...]
    _: KW_ONLY
    reload: Callable[[], bool] | None = None
    clock: Callable[[], float] = time.monotonic
    context: SpawnContext = field(default_factory=lambda: multiprocessing.get_context("spawn"), init=False)
    # per worker: its process, when it started, when a dead one's replacement starts, its backoff
    processes: list[BaseProcess] = field(default_factory=list, init=False)
    started_at: list[float] = field(default_factory=list, init=False)
    due: list[float | None] = field(default_factory=list, init=False)
    backoff: list[Backoff] = field(default_factory=list, init=False)
    stopping: bool = field(default=False, init=False)
    reloads: int = field(default=0, init=False)
    _reload_wanted: bool = field(default=False, init=False)

    def run(self) -> int:
        handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        previous = {sig: signal.signal(sig, self._on_signal) for sig in handled}
        try:
            self.processes = [self._spawn() for _ in range(self.workers)]
            self.started_at = [self.clock()] * self.workers
            self.due = [None] * self.workers
            self.backoff = [Backoff() for _ in range(self.workers)]
            while not self.stopping:
                time.sleep(0.1)
                if self._reload_wanted:
                    self._reload_wanted = False
                    self._reload()
                for index in range(self.workers):
                    if not self.stopping:
                        self._tend(index)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            for process in self.processes:
                if process.is_alive():
                    process.terminate()
            for process in self.processes:
                process.join(10)
        return 0

    def _tend(self, index: int) -> None:
        """Notice a dead worker (and schedule its replacement), or start the replacement when due."""
        now = self.clock()
        due = self.due[index]
        if due is None:
            process = self.processes[index]
            if process.is_alive():
                return
            lived = now - self.started_at[index]
            delay = self.backoff[index].delay(lived)
            log.error(
                "worker %s exited with %s after %.1fs; starting a new one%s",
                process.pid,
                process.exitcode,
                lived,
                f" in {delay:g}s ({self.backoff[index].streak} quick exit(s) in a row)" if delay else "",
            )
            due = self.due[index] = now + delay
        if now >= due:
            self.due[index] = None
            self.processes[index] = self._spawn()
            self.started_at[index] = self.clock()

    def _reload(self) -> None:
        if self.reload is not None and not self.reload():
            return
        for process in self.processes:
            if process.pid is not None and process.is_alive():
                os.kill(process.pid, signal.SIGHUP)

    def _spawn(self) -> BaseProcess:
        process = self.context.Process(target=self.target, args=self.args, daemon=False)
        process.start()
        return process

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGHUP:
            self.reloads += 1
            self._reload_wanted = True
            return
        self.stopping = True
