"""An ASGI app served in this event loop on a loopback port, by uvicorn with a protocol of the test's
choosing (the gateway's ``guarded_protocol``, or uvicorn's own to compare with)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import uvicorn

from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.net.connections import ConnectionBook, guarded_protocol
from interlock.runtime.state.memory import MemorySlots
from tests.waiting import until

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
SERVE: dict[str, Any] = {
    "server_header": False,
    "date_header": False,
    "log_config": None,
}  # as `interlock serve` runs uvicorn


def gateway_protocol(plan: RuntimePlan) -> type[asyncio.Protocol]:
    metrics = Metrics(StateView(lambda: plan, HealthBook(plan.health), MemorySlots()))
    return guarded_protocol(ConnectionBook(lambda: plan.server, metrics))


@asynccontextmanager
async def served(app: App, http: type[asyncio.Protocol] | str, **config: Any) -> AsyncIterator[int]:
    """``app`` served with ``http`` (a protocol class, or uvicorn's name of one): the port."""
    options: dict[str, Any] = {"lifespan": "off", "ws": "none", **SERVE, **config}
    server = uvicorn.Server(uvicorn.Config(app, http=http, **options))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await until(lambda: server.started, "uvicorn to start")  # it offers no event for it
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await task
