"""What each answer teaches the gateway about its upstream: how it counts a prompt, and how fast it reads one.

At the end of every request an upstream answered with its own token counts (``lifecycle``), two books
learn, keyed by the answering route's endpoint label and the model as ``FactsTable`` names it:

- ``counts`` (``guards.calibration.CountBook``): the server's prompt tokens against the estimate's
  parts, so that the context guard counts the next prompt as that server will;
- ``prefill`` (``fleet.prefix.PrefillBook``): prompt tokens per second, which the first-byte deadline
  of the next call there stretches by (``deadline``) and the scorer weighs prefix-cache hits with.
  Its samples: llama-server's ``timings`` (``prompt_n`` tokens in ``prompt_ms``), else the prompt's
  tokens not read from a cache over the seconds the upstream took to answer (a stream: to its first
  chunk; a whole answer: to its end, which makes the speed lower than it is: the safe side). Ollama's
  own prompt timings are fed by its adapter (``prompt_eval_count`` in ``prompt_eval_duration``).

Learning costs a few dictionary writes and multiplications, after the answer went out.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from interlock.runtime.fleet.prefix import MIN_PROMPT_TOKENS, PrefillBook
from interlock.runtime.guards.calibration import REPORTING_FLOOR, CountBook
from interlock.runtime.guards.needs import Needs
from interlock.runtime.record import RequestRecord
from interlock.runtime.wire.base import Endpoint

MAX_PREFILL_S = 3600.0  # a deadline is never stretched further than this
MIN_PREFILL_S = 0.25  # a shorter prefill leaves the deadline as it is (no copy of the endpoint)


@dataclass(frozen=True, slots=True)
class Learned:
    """The two books; the context guard reads ``counts``, the router ``prefill_s``."""

    counts: CountBook = field(default_factory=CountBook)
    prefill: PrefillBook = field(default_factory=PrefillBook)

    def observe(self, record: RequestRecord, needs: Needs, prompt: int) -> None:
        """One answered request: the upstream counted ``prompt`` tokens of it."""
        answered = record.answered
        if answered is None or prompt <= 0:
            return
        candidate = answered.candidate
        label, model = answered.route.endpoint.label, candidate.facts_key
        self.counts.learn(
            label, model, needs.prompt_tokens - needs.schema_tokens, needs.schema_tokens, prompt
        )
        if candidate.kind == "ollama":  # its adapter feeds its own prompt timings
            return
        result = answered.result
        timings = record.timings if record.stream else result.get("timings") if type(result) is dict else None
        if type(timings) is dict:
            count, ms = timings.get("prompt_n"), timings.get("prompt_ms")
            if type(count) is int and isinstance(ms, int | float) and count >= MIN_PROMPT_TOKENS and ms > 0:
                self.prefill.record(label, model, count / (ms / 1000))
            return
        if answered.attempts:  # the seconds include earlier candidates' calls
            return
        usage = record.usage if record.stream else result.get("usage") if type(result) is dict else None
        fresh = prompt - _cached(usage)
        if fresh >= MIN_PROMPT_TOKENS and answered.upstream_s > 0:
            self.prefill.record(label, model, fresh / answered.upstream_s)

    def deadline(self, endpoint: Endpoint, model: str, needs: Needs) -> Endpoint:
        """``endpoint`` with its first-byte deadline stretched by the expected prefill of the prompt
        (its tokens as that server counts them, at the prompt speed learned there); as it is before
        any speed is learned, or when the prefill is short."""
        rate = self.prefill.learned(endpoint.label, model)
        if rate is None:
            return endpoint
        text, schema = needs.prompt_tokens - needs.schema_tokens, needs.schema_tokens
        prompt = max(self.counts.prompt(endpoint.label, model, text, schema, REPORTING_FLOOR), needs.counted)
        extra = min(prompt / rate, MAX_PREFILL_S)
        if extra < MIN_PREFILL_S:
            return endpoint
        return dataclasses.replace(endpoint, first_byte_s=endpoint.first_byte_s + extra)

    def report(self) -> dict[str, Any]:
        """For /v1/health and the status page: per endpoint label and model, the prompt speed and
        how prompts are counted there (empty until an answer taught them)."""
        out: dict[str, Any] = {}
        for label, models in self.prefill.snapshot().items():
            for model, rate in models.items():
                out.setdefault(label, {}).setdefault(model, {})["prompt_tokens_per_s"] = rate
        for label, counts in self.counts.snapshot().items():
            for model, counted in counts.items():
                out.setdefault(label, {}).setdefault(model, {})["prompt_counts"] = counted
        return out


def _cached(usage: Any) -> int:
    """The prompt tokens an OpenAI-shaped ``usage`` (parsed JSON: plain dicts) says were read from a cache."""
    details = usage.get("prompt_tokens_details") if type(usage) is dict else None
    cached = details.get("cached_tokens") if type(details) is dict else None
    return cached if type(cached) is int and cached > 0 else 0
