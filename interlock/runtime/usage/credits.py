"""Credits: a request that would go past its key's or its tenant's budget for the month is refused.

A budget (``credits`` in ``credits_unit``, per key and per tenant; ``0`` = unlimited, never refused)
covers the ledger's window, the calendar month in UTC. Before the walk, each level with a budget is
claimed (``CallerCounters.claim``, one ``Claim`` per level): the request is refused with
``CreditsExhausted`` (402) when what the ledger says was used (``Ledger.spent`` / ``tenant_spent``: in
memory, no I/O), plus what requests in flight reserved, plus this request's prompt (the preflight's
estimate, priced at the first candidate's input price for money) and the least answer
(``LEAST_OUTPUT_TOKENS``), is more than the budget. Otherwise it **reserves** its estimate, prompt plus
requested output (``max_tokens`` and kin, else the preflight's default), at every level at once, or
as much of it as the budget still leaves, until it ends (answered, failed, cancelled, its client gone:
``release_credits``), when what it really used is debited instead. Where less than the estimate was
left, the request's output ceiling is cut to what the reservation covers (``Held.output``; the
lifecycle forwards it as the request's ``max_tokens`` and says so in ``X-Interlock-Max-Tokens``). So
requests admitted at once cannot all spend the same remaining credits, and none is sent upstream with
a ceiling its credits cannot pay for: together they pass the budget only by what the prompts used
beyond the preflight's estimate, or an answer beyond its ceiling (an upstream that ignores it), or,
where the caller set no ceiling and the budget covered the default, what its answer used beyond it.

Reservations live where the caller counters do, so they span what the counters span: this process
(``memory:``), every worker of ``--workers N`` (the supervisor's table; a dead worker's come back when
its connection closes), every replica sharing Redis (a replica killed mid-request leaves its own until
they go unused for ``IN_FLIGHT_TTL_S``: more refused, never more admitted). What was *used* is each
process's ledger, which sees the others' debits at its next refresh: a request that ended gives its
reservation back at once, so in the next ``refresh_s + flush_s`` other processes may admit against
credits it just spent, and together pass a budget by what they admit in that time. A lost store
reserves per process (each process, on its own view, by at most one answer). A caller without
credits never reaches this module (``Caller.credits``, settled at plan load: one field test per
request).
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

from interlock.runtime.base.errors import CreditsExhausted
from interlock.runtime.books.estimate import Needs
from interlock.runtime.loaded.callers import Caller
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.loaded.tables import Target
from interlock.runtime.state.counters import CallerCounters, Claim, Held
from interlock.runtime.usage.base import Tally
from interlock.runtime.usage.ledger import Ledger, next_window
from interlock.runtime.usage.metering import Price, price_of, tally_of
from interlock.schema.plan import PlanAccess, PlanLimits

LEAST_OUTPUT_TOKENS = 1
"""The least answer a request must be able to pay for beside its prompt to be admitted (then its
output ceiling is cut to what its credits cover)."""


def any_budget(access: PlanAccess) -> bool:
    """Whether any tenant or key of the plan has credits."""
    levels = [t.limits for t in access.tenants.values()] + [k.limits for k in access.keys.values()]
    return any(level.credits > 0 for level in levels)


async def reserve_credits(
    counters: CallerCounters, ledger: Ledger, caller: Caller, needs: Needs, plan: RuntimePlan, target: Target
) -> Held:
    """``CreditsExhausted`` when this request would go past the key's or the tenant's budget (priced,
    for money, at the target's first candidate); else its reservation, which the caller must
    ``release_credits`` when the request ends."""
    price = price_of(plan, target.candidates[0].id)
    estimate = tally_of((needs.prompt_tokens, needs.output_tokens), needs, 0, price)
    asked = tally_of((needs.prompt_tokens, LEAST_OUTPUT_TOKENS), needs, 0, price)
    prompt = tally_of((needs.prompt_tokens, 0), needs, 0, price)
    levels: list[tuple[PlanLimits, Tally, str, str]] = []
    key, tenant = caller.key_limits, caller.tenant_limits
    if key is not None and key.credits > 0:
        levels.append((key, ledger.spent(caller.account), f"k:{caller.key_id}", f"key `{caller.key_id}`"))
    if tenant is not None and tenant.credits > 0:
        name = caller.account[0]
        levels.append((tenant, ledger.tenant_spent(name), f"t:{name}", f"tenant `{caller.tenant}`"))
    answer = await counters.claim(
        [_claim(limits, spent, asked, estimate, name) for limits, spent, name, _ in levels]
    )
    if isinstance(answer, Held):
        answer.output = _covered(answer, [limits for limits, _, _, _ in levels], prompt, price)
        return answer
    limits, spent, _, who = levels[answer.index]
    _refuse(limits, spent, answer.held, plan.source.access.currency, ledger, who)


async def release_credits(counters: CallerCounters, held: Held) -> None:
    """The request ended (answered, failed, cancelled, its client gone): its holds go (idempotent;
    what it used is the ledger's ``debit``)."""
    if not held.released:
        held.released = True
        await counters.unclaim(held)


def _covered(held: Held, levels: list[PlanLimits], prompt: Tally, price: Price | None) -> int | None:
    """The most output tokens every level's granted hold covers beside the prompt (None: no level
    bounds it, a money budget with no output price); at least ``LEAST_OUTPUT_TOKENS``."""
    output: int | None = None
    for limits, claim in zip(levels, held.claims, strict=True):
        if limits.credits_unit == "tokens":
            covered = claim.hold - prompt.tokens
        elif price is not None and price[1] > 0:
            covered = math.floor((claim.hold - prompt.cost_micros) / price[1])
        else:
            continue
        output = covered if output is None else min(output, covered)
    return None if output is None else max(LEAST_OUTPUT_TOKENS, output)


def _claim(limits: PlanLimits, spent: Tally, asked: Tally, estimate: Tally, name: str) -> Claim:
    """One level's claim, in its unit: tokens, or millionths of the currency."""
    if limits.credits_unit == "tokens":
        room = math.floor(limits.credits) - spent.tokens
        return Claim(f"{name}:tokens", room, asked.tokens, estimate.tokens)
    room = round(limits.credits * 1_000_000) - spent.cost_micros
    return Claim(f"{name}:money", room, asked.cost_micros, estimate.cost_micros)


def _refuse(limits: PlanLimits, spent: Tally, held: int, currency: str, ledger: Ledger, who: str) -> NoReturn:
    """``spent``: what was used; ``held``: what requests in flight reserved, in the level's unit."""
    if limits.credits_unit == "tokens":
        used: float = spent.tokens + held
        unit, shown_used = "tokens", f"{used:.0f}"
    else:
        used = (spent.cost_micros + held) / 1_000_000
        unit, shown_used = currency, _amount(used)
    what = "has used" if used >= limits.credits else "would pass its budget with this request: it has used"
    raise CreditsExhausted(
        f"{who} {what} {shown_used} of its {_amount(limits.credits)} {unit} of credits this month (since "
        f"{ledger.window} UTC); the budget starts again on {next_window(ledger.window)}"
    )


UNLIMITED = "∞"


def budget_report(ledger: Ledger, access: PlanAccess) -> dict[str, Any]:
    """Every tenant's and key's budget for the window: credits, unit, used, remaining (``∞`` when
    unlimited). For /v1/health and the status page; never per request."""
    tenants = {
        name: _budget(tenant.limits, ledger.tenant_spent(name), access.currency)
        for name, tenant in sorted(access.tenants.items())
    }
    keys = {
        key_id: {
            "tenant": key.tenant,
            **_budget(key.limits, ledger.spent((key.tenant, key_id)), access.currency),
        }
        for key_id, key in sorted(access.keys.items())
    }
    return {"window_start": ledger.window, "currency": access.currency, "tenants": tenants, "keys": keys}


def _budget(limits: PlanLimits, spent: Tally, currency: str) -> dict[str, Any]:
    money = limits.credits_unit == "money"
    used: float = round(spent.cost_micros / 1_000_000, 6) if money else spent.tokens
    unlimited = limits.credits <= 0
    return {
        "unit": currency if money else "tokens",
        "credits": UNLIMITED if unlimited else _plain(limits.credits),
        "used": used,
        "remaining": UNLIMITED if unlimited else _plain(max(0.0, round(limits.credits - used, 6))),
        "requests": spent.requests,
        "estimated": spent.estimated,
    }


def _plain(value: float) -> float | int:
    """A whole number as an int (``500``, not ``500.0``)."""
    return int(value) if float(value).is_integer() else value


def _amount(value: float) -> str:
    """An amount for people: ``40``, ``0.00003``, ``12.5`` (never ``3e-05``; millionths at most)."""
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"
