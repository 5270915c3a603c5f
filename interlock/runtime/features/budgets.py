"""Credits and budgets at ``admit``, and the ceiling cut: a caller with credits reserves them
(``usage.credits``), one with rates is counted against its tokens per minute (``state.counters``), and
a request whose output its budgets cover only in part is cut to what they cover, in its own format too,
said in ``X-Interlock-Max-Tokens``. What it took is a stake, settled however the request ends: the
credits released (after the ledger's debit: in this process they never look free), the minute's tokens
given what was used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from interlock.runtime.base.errors import CallerLimited
from interlock.runtime.books.estimate import needs_of
from interlock.runtime.features import Feature, Settings
from interlock.runtime.guards.ceiling import said
from interlock.runtime.guards.preflight import CEILING_HEADER
from interlock.runtime.loaded.access import refusal_message
from interlock.runtime.loaded.callers import Refusal
from interlock.runtime.surfaces.base import capped
from interlock.runtime.usage.credits import LEAST_OUTPUT_TOKENS, release_credits, reserve_credits

if TYPE_CHECKING:
    from interlock.runtime.loaded.callers import Budget
    from interlock.runtime.request.lifecycle import Exchange
    from interlock.runtime.request.services import RequestServices
    from interlock.runtime.state.counters import CallerCounters, Held
    from interlock.runtime.usage.base import Tally


class Taken:
    """What one request took of its caller's credits and rates: given back by ``__call__``."""

    __slots__ = ("budgets", "counters", "estimate", "held")

    def __init__(self, counters: CallerCounters) -> None:
        self.counters = counters
        self.held: Held | None = None  # credits reserved
        self.budgets: tuple[Budget, ...] | None = None  # counted against these rates
        self.estimate = 0  # the tokens reserved against the caller's tokens per minute

    async def __call__(self, tally: Tally | None) -> None:
        if self.held is not None:
            await release_credits(self.counters, self.held)
        if self.budgets is not None:
            await self.counters.done(self.budgets, tally.tokens if tally is not None else 0, self.estimate)


def plug(services: RequestServices, settings: Settings) -> Feature:
    counters, ledger = services.counters(), services.ledger  # the counters: made by the first plan asking

    async def admit(exchange: Exchange) -> None:
        caller, preflight = exchange.caller, exchange.preflight
        if not caller.credits and not caller.budgets:
            return
        taken = Taken(counters)
        exchange.stake(taken)
        cut: tuple[int, bytes] | None = None  # the output ceiling its budgets cover, and which
        needs = preflight.needs
        if caller.credits:  # before the rates: a refused request takes none of them
            held = taken.held = await reserve_credits(
                counters, ledger, caller, needs, exchange.plan, exchange.target
            )
            if held.output is not None and held.output < needs.output_tokens:
                cut = (held.output, b"credits")
        if caller.budgets:
            prompt = needs.prompt_tokens
            output = needs.output_tokens if cut is None else cut[0]
            answer = await counters.reserve(caller.budgets, prompt + output, prompt + LEAST_OUTPUT_TOKENS)
            if isinstance(answer, Refusal):
                raise CallerLimited(refusal_message(caller, answer), retry_after=answer.retry_after_s)
            taken.budgets, taken.estimate = caller.budgets, answer  # what the minute's tokens hold for it
            if answer - prompt < output:
                cut = (answer - prompt, b"tokens_per_minute")
        if cut is not None:  # cut to what its budgets cover, in its own format too
            parsed = exchange.parsed = capped(exchange.parsed, cut[0], exchange.surface.limits)
            preflight.needs = needs_of(parsed.body, parsed.operation, exchange.plan.preflight)
            exchange.headers.append((CEILING_HEADER, said(*cut)))

    return Feature(admit=admit, waits=True)
