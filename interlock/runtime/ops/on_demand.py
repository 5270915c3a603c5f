"""The ops app, built by its first request: ``OpsApp`` stands in for the FastAPI app of ``ops.admin``.

A gateway's start imports nothing of the cold routes (FastAPI, ``admin.py``, its route table): the
first request the route table does not hold (``/healthz``, ``/v1/models``, the status page...) imports
them and builds the app once, as the status page's first ``GET /ui`` loads its renderer
(``ops/ui/page.py``). Never on the API request path: the surface routes are dispatched before it. The
import (FastAPI's: 0.3-0.6 s) runs in a thread, so the event loop goes on serving the streams in flight
meanwhile; the cold requests that arrive during it wait on the same import, and the app is built once
(``build_admin``: a few milliseconds, on the loop).
"""

from __future__ import annotations

import asyncio
import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from interlock.runtime.base.asgi import Receive, Scope, Send

if TYPE_CHECKING:
    from fastapi import FastAPI

    from interlock.runtime.request.services import LiveState

ADMIN = "interlock.runtime.ops.admin"


class OpsApp:
    """The cold routes' ASGI application for ``live``, made by its first call (``app``)."""

    __slots__ = ("_app", "_importing", "_live")

    def __init__(self, live: LiveState) -> None:
        self._live = live
        self._app: FastAPI | None = None
        self._importing: asyncio.Future[ModuleType] | None = None  # the import under way, if any

    @property
    def app(self) -> FastAPI:
        """The FastAPI app (``ops.admin.build_admin``), built now if not yet (imported here if not yet:
        for a caller off the request path, a test or a bench)."""
        app = self._app
        if app is None:
            app = self._app = importlib.import_module(ADMIN).build_admin(self._live)
        return app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app
        if app is None:
            app = await self._built()
        await app(scope, receive, send)

    async def _built(self) -> FastAPI:
        """The app, once its module is imported off the event loop (one import for every request that
        waits on it; a failed one is tried again by the next request)."""
        importing = self._importing
        if importing is None:
            importing = self._importing = asyncio.ensure_future(
                asyncio.to_thread(importlib.import_module, ADMIN)
            )
        try:
            module = await asyncio.shield(importing)  # a caller that goes away leaves it to the others
        finally:
            if importing.done():
                self._importing = None
        app = self._app
        if app is None:
            app = self._app = module.build_admin(self._live)
        return app
