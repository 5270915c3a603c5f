"""What answers teach, at ``settle``: a server's own prompt count against the request's estimate
(``learned.Learned.observe``: how that server counts, and its prompt speed)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlock.runtime.features import Feature, Settings

if TYPE_CHECKING:
    from interlock.runtime.request.lifecycle import Exchange
    from interlock.runtime.request.services import RequestServices
    from interlock.runtime.usage.base import Tally


def plug(services: RequestServices, settings: Settings) -> Feature:
    observe = services.learned.observe

    def settle(exchange: Exchange, tally: Tally) -> None:
        if not tally.estimated:  # the server's count: what the estimate learns
            observe(exchange.record, exchange.preflight.needs, tally.prompt_tokens)

    return Feature(settle=settle)
