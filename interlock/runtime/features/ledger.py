"""The usage ledger, at ``settle``: what answered is debited to the caller's account (an open
gateway's callers share the anonymous one), an answer's or a stream's, cut short or not."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlock.runtime.features import Feature, Settings

if TYPE_CHECKING:
    from interlock.runtime.request.lifecycle import Exchange
    from interlock.runtime.request.services import RequestServices
    from interlock.runtime.usage.base import Tally


def plug(services: RequestServices, settings: Settings) -> Feature:
    debit = services.ledger.debit

    def settle(exchange: Exchange, tally: Tally) -> None:
        record = exchange.record
        if record.answered is not None:  # (always, with a tally)
            debit(record.caller.account, record.answered.candidate.id, tally)

    return Feature(settle=settle)
