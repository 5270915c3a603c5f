"""One answered request's usage: the upstream's token counts, or the gateway's estimate when it sent none.

The answer's ``usage`` (a stream's final usage chunk: every surface asks for one) is taken as reported,
each count cut to ``MAX_REPORTED_TOKENS`` (``reported``: the one place an upstream's token counts enter the
ledger, the callers' tokens per minute and the learned estimates; a cut is counted in
``interlock_upstream_usage_clamped_total``), so no store, book or metric ever sees an absurd number.
When the upstream reported no usage, the prompt is the preflight's estimate (``needs``: text, messages,
tool schemas) and the completion is the answer's text by the same rule (UTF-8 bytes / 3.5); the row then
counts the request as ``estimated``. Money is tokens times the plan's price per million tokens of the
answering model, kept in millionths of the currency (an integer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from interlock.runtime.books.estimate import Needs, chars_tokens, text_tokens
from interlock.runtime.usage.base import Tally

if TYPE_CHECKING:
    from interlock.runtime.books.record import RequestRecord
    from interlock.runtime.loaded.plan import RuntimePlan

MAX_REPORTED_TOKENS = 100_000_000
"""The most tokens one answer may claim for its prompt or its completion: ten times the largest context
window served today. An upstream claiming more (2^64 - 1, say) is cut to it: a month of such answers
stays far inside the stores' 64-bit columns."""

Price = tuple[float, float]
"""(input, output) price per million tokens, in the plan's currency."""


class Counted(NamedTuple):
    """An upstream's token counts, bounded; ``clamped``: one of them claimed more than the bound."""

    prompt: int
    completion: int
    clamped: bool = False


def reported(usage: Any) -> Counted | None:
    """(prompt, completion) tokens of an OpenAI-shaped ``usage`` object, when it holds any: a count that
    is not a positive int is 0, one past ``MAX_REPORTED_TOKENS`` is cut to it (and said: ``clamped``)."""
    if type(usage) is not dict:
        return None
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if type(prompt) is not int and type(completion) is not int:
        return None
    prompt = prompt if type(prompt) is int and prompt > 0 else 0
    completion = completion if type(completion) is int and completion > 0 else 0
    if prompt <= MAX_REPORTED_TOKENS and completion <= MAX_REPORTED_TOKENS:
        return Counted(prompt, completion)
    return Counted(min(prompt, MAX_REPORTED_TOKENS), min(completion, MAX_REPORTED_TOKENS), True)


def answer_text(result: Mapping[str, Any]) -> str:
    """The first choice's text (content and reasoning) of an OpenAI-shaped answer."""
    choices = result.get("choices")
    choice = choices[0] if type(choices) is list and choices and type(choices[0]) is dict else {}
    message = choice.get("message")
    if type(message) is not dict:
        return ""
    parts = (message.get("content"), message.get("reasoning") or message.get("reasoning_content"))
    return "".join(part for part in parts if type(part) is str)


def tally_of(
    counted: tuple[int, int] | Counted | None, needs: Needs, output_tokens: int, price: Price | None
) -> Tally:
    """One request's tally: ``counted`` when the upstream reported it, else the estimate."""
    if counted is None:
        prompt, completion, estimated = needs.prompt_tokens, output_tokens, 1
    else:
        prompt, completion, estimated = counted[0], counted[1], 0
    cost = 0 if price is None else round(prompt * price[0] + completion * price[1])
    return Tally(1, prompt, completion, cost, estimated)


def estimated_usage(needs: Needs, completion: int) -> dict[str, int]:
    """interlock's estimate in OpenAI's shape, for an answer whose upstream reported no usage: what every
    surface then shows (never zeros), while the ledger still counts the request as ``estimated``."""
    return {
        "prompt_tokens": needs.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": needs.prompt_tokens + completion,
    }


def delta_chars(chunk: Mapping[str, Any]) -> int:
    """The length of a stream chunk's text (content and reasoning of its first choice's delta). Runs for
    every chunk: the content read at once, the reasoning fields only when the delta has one."""
    choices = chunk.get("choices")
    if not choices or type(choices) is not list or type(choices[0]) is not dict:
        return 0
    delta = choices[0].get("delta")
    if type(delta) is not dict:
        return 0
    content = delta.get("content")
    size = len(content) if type(content) is str else 0
    if "reasoning" in delta or "reasoning_content" in delta:
        for name in REASONING:
            part = delta.get(name)
            if type(part) is str:
                size += len(part)
    return size


REASONING = ("reasoning", "reasoning_content")
"""The delta fields a reasoning model's thinking comes in (llama-server, vLLM, Ollama's OpenAI API)."""


def request_tally(record: RequestRecord, needs: Needs, price: Price | None) -> Tally:
    """The tally of one answered request: a stream's usage chunk or text, or the answer's (a count the
    bound cut sets ``record.clamped``, for the lifecycle's metric)."""
    if record.stream:
        counted = reported(record.usage)
        estimate = chars_tokens(record.output_chars) if counted is None else 0  # the same rule
    else:
        result = record.answered.result if record.answered is not None else None
        result = result if isinstance(result, dict) else {}
        counted = reported(result.get("usage"))
        estimate = text_tokens(answer_text(result)) if counted is None else 0  # the preflight's rule
    if counted is not None and counted.clamped:
        record.clamped = True
    return tally_of(counted, needs, estimate, price)


def price_of(plan: RuntimePlan, candidate: str) -> Price | None:
    """The plan's price of ``candidate`` (None when ``pricing`` names none for it)."""
    priced = plan.source.access.prices.get(candidate)
    return (priced.input, priced.output) if priced is not None else None


def metered(record: RequestRecord, needs: Needs, plan: RuntimePlan) -> Tally | None:
    """What one finished request used (None when no upstream answered): worked out once, for the
    ledger and the caller's tokens per minute alike."""
    answered = record.answered
    if answered is None:
        return None
    return request_tally(record, needs, price_of(plan, answered.candidate.id))
