"""The composition root: ``Gateway``, the ASGI application over one ``Parts`` (``parts.build_parts``
builds them for a plan): it dispatches requests, runs the parts' lifespan and hands reloads on.

It hands down two objects: ``RequestServices`` to the request path, ``LiveState`` to the ops app;
nothing below this module names ``Gateway``. A surface endpoint (a row of ``route_table``) is one
dictionary lookup to its raw ASGI handler (the lifecycle, which authenticates first); anything else goes
to the ops app (built by the first such request: ``ops.on_demand.OpsApp``), after the keys' check when
the path needs a key. A request reads the plan once (``Current``, swapped whole by ``reload.Reloads``)
and finishes on it. With CORS on, an ``Origin`` is looked up first (``loaded.cors``): preflights are
answered there. Gateways are made by ``commands/gateway.py``'s ``build_gateway`` (``Gateway.from_plan``).
"""

from __future__ import annotations

import logging
from typing import Any

from interlock.runtime.app.parts import Parts, build_parts
from interlock.runtime.base.asgi import Message, Receive, Scope, Send, closing, has_body, send_json
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.loaded.callers import needs_key
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.surfaces.base import Failure
from interlock.runtime.surfaces.openai import ChatCompletions
from interlock.runtime.usage.base import UsageStoreError

log = logging.getLogger("interlock")


class Gateway:
    """The ASGI application for one plan (and its successors after reloads)."""

    __slots__ = ("_admin_errors", "_metered", "_paths", "_routes", "admin", "current", "parts", "services")

    def __init__(self, parts: Parts) -> None:
        self.parts = parts  # what it was built from: tests and benches reach a part here
        self.current = parts.services.current
        self.services = parts.services
        self.admin = parts.admin
        self._routes = parts.routes.handlers
        self._paths = parts.routes.paths
        self._metered = parts.routes.metered
        self._admin_errors = ChatCompletions()  # the admin routes answer errors in OpenAI's shape

    @classmethod
    def from_plan(cls, plan: RuntimePlan, **options: Any) -> Gateway:
        return cls(build_parts(plan, **options))

    @property
    def plan(self) -> RuntimePlan:
        """The plan being served now."""
        return self.current.plan

    @property
    def metrics(self) -> Metrics:
        """What the server counts its connections into."""
        return self.services.metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            plan, hooks = self.current.plan, self.current.hooks  # read together: one plan's
            if plan.cors is not None:
                admitted_origin = await plan.cors.admit(scope, send, plan.plan_header)
                if admitted_origin is None:  # a preflight, answered
                    return
                send = admitted_origin
            path = scope["path"]
            handler = self._routes.get((scope["method"], path))
            if handler is not None and path in self._metered:  # the lifecycle authenticates first
                await handler(self.services, scope, receive, send)
                return
            row = self._paths.get(path)
            authenticate = hooks.authenticate  # the plan's keys (`features/keys.py`)
            if authenticate is not None and needs_key(path):  # `auth: off` skips this at once
                surface = row[1] if row is not None else self._admin_errors
                known = row is not None
                if (
                    await authenticate(self.services, scope, send, surface, route=known, metered=False)
                    is None
                ):
                    return
            if handler is not None:
                await handler(self.services, scope, receive, send)
            elif row is not None:
                await self._method_not_allowed(scope, closing(send) if has_body(scope) else send)
            else:
                admin_send = self._with_plan_header(send)
                await self.admin(scope, receive, closing(admin_send) if has_body(scope) else admin_send)
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        elif kind == "websocket":  # only under a server that loads a WebSocket library: refuse (403)
            await send({"type": "websocket.close", "code": 1008})

    async def _method_not_allowed(self, scope: Scope, send: Send) -> None:
        methods, surface = self._paths[scope["path"]]
        allowed = ", ".join(methods)
        message = f"{scope['method']} {scope['path']}: Method Not Allowed (use {allowed})"
        payload = surface.error(Failure(405, message, "invalid_request_error", None, "405"))
        headers = [self.plan.plan_header, (b"allow", allowed.encode())]
        await send_json(send, 405, payload, headers)

    # -- lifespan -----------------------------------------------------------------------------------

    async def startup(self) -> None:
        await self.parts.lifespan.start()

    async def shutdown(self) -> None:
        await self.parts.lifespan.stop()

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    if isinstance(
                        exc, UsageStoreError
                    ):  # a store that cannot be opened: its message says why
                        log.error("startup failed: %s", exc)
                    else:
                        log.exception("startup failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    # -- reload -------------------------------------------------------------------------------------

    def request_reload(self) -> None:
        """For a SIGHUP handler on the event loop: reload in the background."""
        self.parts.reloads.request()

    async def reload(self) -> bool:
        """Read the plan again; swap it in when sound, else keep serving the old one (logged, counted)."""
        return await self.parts.reloads.reload()

    def apply(self, plan: RuntimePlan) -> None:
        """Swap the plan in; requests already running keep the one they started with."""
        self.parts.reloads.apply(plan)

    def _with_plan_header(self, send: Send) -> Send:
        header = self.plan.plan_header

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        return send_with_header
