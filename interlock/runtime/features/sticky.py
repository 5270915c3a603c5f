"""Sticky sessions at ``admit``: the request's session header, which the slot guard keeps on one worker
(``fleet.sticky``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlock.runtime.features import Feature, Settings
from interlock.runtime.fleet.sticky import session_header

if TYPE_CHECKING:
    from interlock.runtime.request.lifecycle import Exchange
    from interlock.runtime.request.services import RequestServices


def admit(exchange: Exchange) -> None:
    sticky = exchange.plan.routing.sticky
    if sticky is not None:
        exchange.preflight.session = session_header(exchange.scope, sticky.header)


def plug(services: RequestServices, settings: Settings) -> Feature:
    return Feature(admit=admit)
