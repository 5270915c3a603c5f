"""Learned prompt counts: how the server's own token count relates to the estimate, per (endpoint, model).

The estimate (``guards.needs``) counts a prompt in two parts: its text (messages, instructions, with
their per-message overhead) and its structure (tool schemas, tool calls and other JSON parts). A
server's count differs from each part in its own way: its tokenizer runs nearer 4 bytes a token or
nearer 3, and its chat template may render the tool schemas in full, with instructions around them,
or not at all (SmolLM2's drops them), and adds text of its own to every request (SmolLM2's adds a
default system prompt of about 20 tokens when there is none). So the book learns, per (endpoint label,
model as ``FactsTable`` names it), the template's tokens per request and one coefficient per part,
from every answer that reports the prompt's tokens (``usage``:
OpenAI's ``prompt_tokens``, Anthropic's input plus its cache reads and writes, Ollama's
``prompt_eval_count``) and from every context-overflow error that names the count.

The fit is ridge regression towards the prior (no template part, both coefficients 1), the newest
answer weighted most (``FORGET``): after one answer the same traffic is predicted as the server counted
it, and the error is put on the part that dominated the prompt (the template's for a short one), so a
later prompt of another shape is moved only as far as that answer showed. A request costs one
dictionary lookup and three multiplications (``prompt``); learning, at the end of a request, the same,
and a 3x3 solve only when the answer is more than ``SETTLED`` from what the book predicted (``learn``).
The book is bounded (``MAX_ENTRIES``, least recently updated dropped first) and lives in this process
only: a restart learns again from the first answer.

A floor keeps the coefficients of an upstream that truncates silently (Ollama) from collapsing: its
``prompt_eval_count`` leaves out a cached prefix and stops at the window it truncated to, so a low
count there may say nothing about the tokenizer; below ``TRUNCATING_FLOOR`` the book does not go.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

MAX_ENTRIES = 4096
FORGET = 0.5  # the weight the older answers keep at each new one
PRIOR_WEIGHT = 1.0  # the prior, in squared tokens: one answer of any size outweighs it
TEMPLATE_UNIT = 32  # tokens: the scale of the per-request part (a chat template's own text)
PRIOR = (0.0, 1.0, 1.0)  # before any answer: no template part, text and structure as estimated
REPORTING_FLOOR = 0.0  # a server that says "too long" itself: its template may drop a part entirely
TRUNCATING_FLOOR = 0.5  # Ollama: never below half the estimate (see the module docstring)
MIN_PROMPT_TOKENS = 4  # a server's count below this says nothing
SETTLED = 0.02  # an answer the book already predicts this closely is not solved for again


@dataclass(frozen=True, slots=True)
class Counted:
    """What is learned for one (endpoint, model): the template's tokens per request, a coefficient per
    part of the estimate, and how many answers taught it."""

    template: float  # tokens a request gets from the chat template beyond its text (a default system
    # prompt, role markers); below 0 where the estimate's per-message overhead is more than it adds
    text: float
    schema: float
    samples: int
    last_ratio: float  # the server's count over the estimate, at the newest answer


class _Fit:
    """The ridge sums: ``a`` the 3x3 moment matrix (row-major), ``b`` the moment vector."""

    __slots__ = ("a", "b", "samples")

    def __init__(self) -> None:
        self.a = [PRIOR_WEIGHT if i % 4 == 0 else 0.0 for i in range(9)]
        self.b = [PRIOR_WEIGHT * c for c in PRIOR]
        self.samples = 0

    def add(self, x: tuple[float, float, float], y: float) -> tuple[float, float, float] | None:
        """One answer (older ones fade, the prior stays); the coefficients solved anew."""
        a, b = self.a, self.b
        if self.samples:
            for i in range(9):
                prior = PRIOR_WEIGHT if i % 4 == 0 else 0.0
                a[i] = prior + FORGET * (a[i] - prior)
            for i in range(3):
                b[i] = PRIOR_WEIGHT * PRIOR[i] + FORGET * (b[i] - PRIOR_WEIGHT * PRIOR[i])
        for i in range(3):
            b[i] += x[i] * y
            for j in range(3):
                a[3 * i + j] += x[i] * x[j]
        self.samples += 1
        return _solve(a, b)


def _solve(a: list[float], b: list[float]) -> tuple[float, float, float] | None:
    """``a x = b`` for a symmetric positive 3x3 ``a`` (Cramer's rule); None when it is singular."""
    a11, a12, a13, a21, a22, a23, a31, a32, a33 = a
    det = a11 * (a22 * a33 - a23 * a32) - a12 * (a21 * a33 - a23 * a31) + a13 * (a21 * a32 - a22 * a31)
    if det <= 0:
        return None
    b1, b2, b3 = b
    x1 = b1 * (a22 * a33 - a23 * a32) - a12 * (b2 * a33 - a23 * b3) + a13 * (b2 * a32 - a22 * b3)
    x2 = a11 * (b2 * a33 - a23 * b3) - b1 * (a21 * a33 - a23 * a31) + a13 * (a21 * b3 - b2 * a31)
    x3 = a11 * (a22 * b3 - b2 * a32) - a12 * (a21 * b3 - b2 * a31) + b1 * (a21 * a32 - a22 * a31)
    return x1 / det, x2 / det, x3 / det


class CountBook:
    """Learned counts per (endpoint label, model); ``prompt`` is the per-request read."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self.max_entries = max_entries
        self._learned: OrderedDict[tuple[str, str], Counted] = OrderedDict()
        self._fits: dict[tuple[str, str], _Fit] = {}

    def get(self, label: str, model: str) -> Counted | None:
        return self._learned.get((label, model))

    def prompt(self, label: str, model: str, text: int, schema: int, floor: float) -> int:
        """The prompt's tokens as the server there would count them: the template's part plus the
        estimate's parts (``text``, ``schema``) times what was learned, each coefficient at least
        ``floor``; the estimate as it is before any answer."""
        learned = self._learned.get((label, model))
        if learned is None:
            return text + schema
        counted = learned.template + text * max(learned.text, floor) + schema * max(learned.schema, floor)
        return max(int(counted + 0.5), 0)

    def learn(self, label: str, model: str, text: int, schema: int, counted: int) -> None:
        """One answer: the estimate's parts and the server's count of the same prompt."""
        if counted < MIN_PROMPT_TOKENS:
            return
        key = (label, model)
        learned = self._learned.get(key)
        if learned is not None:  # already counted as the server counts: nothing to solve
            predicted = learned.template + text * learned.text + schema * learned.schema
            if abs(predicted - counted) <= counted * SETTLED:
                return
        fit = self._fits.get(key)
        if fit is None:
            fit = self._fits[key] = _Fit()
        solved = fit.add((float(TEMPLATE_UNIT), float(text), float(schema)), float(counted))
        if solved is None:
            return
        template, c_text, c_schema = solved
        self._learned.pop(key, None)
        self._learned[key] = Counted(
            template * TEMPLATE_UNIT, c_text, c_schema, fit.samples, counted / max(text + schema, 1)
        )
        while len(self._learned) > self.max_entries:
            old, _ = self._learned.popitem(last=False)
            self._fits.pop(old, None)

    def snapshot(self) -> dict[str, dict[str, dict[str, float | int]]]:
        """``{label: {model: {template, text, schema, samples, last_ratio}}}`` for /v1/health."""
        out: dict[str, dict[str, dict[str, float | int]]] = {}
        for (label, model), learned in sorted(self._learned.items()):
            out.setdefault(label, {})[model] = {
                "template_tokens": round(learned.template, 1),
                "text": round(learned.text, 3),
                "schema": round(learned.schema, 3),
                "samples": learned.samples,
                "last_ratio": round(learned.last_ratio, 3),
            }
        return out
