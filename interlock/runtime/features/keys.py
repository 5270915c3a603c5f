"""Caller keys at ``admit``: the caller (authenticated before the body was read, ``lifecycle.admitted``)
on the record, its priority turn, whether it may use the target, and the target's chain without what
it may not use. A refusal is the caller's 403, answered in the surface's shape."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlock.runtime.features import Feature

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


def plug(services: RequestServices) -> Feature:
    return Feature(admit=admit)
