"""Caller keys: the caller authenticated before the body is read (``authenticate``: ``admitted``, for
every lifecycle route and the ops routes that need a key), then at ``admit`` the caller on the record,
its priority turn, whether it may use the target, and the target's chain without what it may not use.
A refusal is the caller's 401 or 403, answered in the surface's shape."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlock.runtime.base.asgi import Scope, Send, closing, has_body, send_json
from interlock.runtime.base.errors import OperatorOnly, Unauthenticated
from interlock.runtime.books.record import RequestRecord
from interlock.runtime.features import Feature, Settings
from interlock.runtime.loaded.access import KEY_HEADERS
from interlock.runtime.loaded.callers import CALLER, Caller, operator_route
from interlock.runtime.surfaces.base import Surface, failure_of

if TYPE_CHECKING:
    from interlock.runtime.request.lifecycle import Exchange
    from interlock.runtime.request.services import RequestServices


def admit(exchange: Exchange) -> None:
    caller, target = exchange.caller, exchange.target
    exchange.record.caller = caller
    exchange.preflight.turn = (
        caller.turn if caller.turns is None else caller.turn_for(exchange.scope["headers"])
    )
    exchange.record.target = target  # a refusal below is logged and audited with what was asked for
    caller.check(target.label)
    exchange.target = caller.targets.get(target.label, target)


def plug(services: RequestServices, settings: Settings) -> Feature:
    return Feature(admit=admit, authenticate=admitted)


async def admitted(
    services: RequestServices, scope: Scope, send: Send, surface: Surface, *, route: bool, metered: bool
) -> Caller | None:
    """The first step of every request that needs a key (the caller's ``keys`` are in the plan):
    authenticate the caller (returned, and kept in the scope for the handlers after) and admit it to
    the path (the operator routes). A refusal is answered here, 401 or 403 in ``surface``'s shape,
    without reading the body, and audited as ``auth_refused``; then None. On a ``metered`` route (one
    that runs the lifecycle) it is counted and logged like the route's other answers. ``route``: the
    path is a surface route (else the audit line names it only when it is an operator route)."""
    keys = services.current.plan.keys
    assert keys is not None
    caller = None
    try:
        caller = scope[CALLER] = keys.authenticate(scope["headers"])
        keys.admit(caller, scope["path"])  # the operator routes (a test of `caller.operator`)
    except (Unauthenticated, OperatorOnly) as exc:
        await _refuse(services, scope, send, surface, exc, caller, route=route, metered=metered)
        return None
    return caller


async def _refuse(
    services: RequestServices,
    scope: Scope,
    send: Send,
    surface: Surface,
    exc: Unauthenticated | OperatorOnly,
    caller: Caller | None,
    *,
    route: bool,
    metered: bool,
) -> None:
    """401 (no valid key) or 403 (an operator route, and a key that is not an operator). ``caller``: the
    authenticated caller, None when the key was missing or wrong."""
    plan = services.current.plan
    path = scope["path"]
    failure = failure_of(exc, plan)
    status = failure.status
    action = services.current.hooks.action  # the audit log's, with ``--audit-log``
    if action is not None:
        named = operator_route(path) if caller is not None else None  # `admit` refused: a known route
        known = (
            {} if caller is None or caller.anonymous else {"key_id": caller.key_id, "tenant": caller.tenant}
        )
        action(
            "auth_refused",
            method=scope["method"][:16],
            path=path if route else named or "(not a surface route)",
            key_sent=any(name in KEY_HEADERS for name, _ in scope["headers"]),
            status=status,
            **known,
        )
    headers = [plan.plan_header, *failure.headers]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="interlock"'))
    record = None
    if metered:  # a lifecycle route: counted and logged like its other answers
        record = RequestRecord(surface.operation, services.journal.request_id(scope["headers"]))
        record.surface = surface
        if caller is not None:
            record.caller = caller
        headers.append((b"x-request-id", record.id))
    await send_json(closing(send) if has_body(scope) else send, status, surface.error(failure), headers)
    if record is not None:
        record.status, record.error = status, exc
        services.metrics.requests.labels(record.endpoint, str(status)).inc()
        services.journal.finish(record)  # no features' `finish`: audited above, as `auth_refused`
