"""The ops app, built by its first request: ``OpsApp`` stands in for the FastAPI app of ``ops.admin``.

A gateway's start imports nothing of the cold routes (FastAPI, ``admin.py``, its route table): the
first request the route table does not hold (``/healthz``, ``/v1/models``, the status page...) imports
them and builds the app once, as the status page's first ``GET /ui`` loads its renderer
(``ops/ui/page.py``). Never on the API request path: the surface routes are dispatched before it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlock.runtime.base.asgi import Receive, Scope, Send

if TYPE_CHECKING:
    from fastapi import FastAPI

    from interlock.runtime.request.services import LiveState


class OpsApp:
    """The cold routes' ASGI application for ``live``, made by its first call (``app``)."""

    __slots__ = ("_app", "_live")

    def __init__(self, live: LiveState) -> None:
        self._live = live
        self._app: FastAPI | None = None

    @property
    def app(self) -> FastAPI:
        """The FastAPI app (``ops.admin.build_admin``), built now if not yet."""
        app = self._app
        if app is None:
            from interlock.runtime.ops.admin import build_admin  # FastAPI: on the first cold request

            app = self._app = build_admin(self._live)
        return app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
