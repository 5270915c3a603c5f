"""What each answer teaches the gateway about its upstream: how it counts a prompt, and how fast it reads one.

At the end of every request an upstream answered with its own token counts (``lifecycle``), two books
learn, keyed by the answering route's endpoint label and the model as ``FactsTable`` names it:

- ``counts`` (``CountBook``): the server's prompt tokens against the estimate's parts, so that the
  context guard counts the next prompt as that server will;
- ``prefill`` (``PrefillBook``): prompt tokens per second, which the first-byte deadline of the next
  call there stretches by (``deadline``) and the scorer weighs prefix-cache hits with
  (``fleet.prefix``). Its samples: llama-server's ``timings`` (``prompt_n`` tokens in ``prompt_ms``),
  else the prompt's tokens not read from a cache over the seconds the upstream took to answer (a
  stream: to its first chunk; a whole answer: to its end, which makes the speed lower than it is: the
  safe side). Ollama's own prompt timings are fed by its adapter (``prompt_eval_count`` in
  ``prompt_eval_duration``).

Learning costs a few dictionary writes and multiplications, after the answer went out; reading (the
context guard's ``CountBook.prompt``, the router's ``deadline``) one lookup each: a stretched deadline
is rounded up to a step of a geometric grid, so its copy of the endpoint is made once per step, not per
request. Both books live in
this module, below the guards and the fleet that read them: it imports only ``record`` and ``wire``,
and reads a request's estimate through ``Estimate`` (``books.estimate.Needs`` is one).

How a prompt is counted (``CountBook``). The estimate (``books.estimate.needs_of``) counts a prompt
in two parts: its text (messages, instructions, with their per-message overhead) and its structure
(tool schemas, tool calls and other JSON parts). A server's count differs from each part in its own
way: its tokenizer runs nearer 4 bytes a token or nearer 3, and its chat template may render the tool
schemas in full, with instructions around them, or not at all (SmolLM2's drops them), and adds text of
its own to every request (SmolLM2's adds a default system prompt of about 20 tokens when there is
none). So the book learns, per (endpoint label, model), the template's tokens per request and one
coefficient per part, from every answer that reports the prompt's tokens (``usage``: OpenAI's
``prompt_tokens``, Anthropic's input plus its cache reads and writes, Ollama's ``prompt_eval_count``)
and from every context-overflow error that names the count.

The fit is ridge regression towards the prior (no template part, both coefficients 1), the newest
answer weighted most (``FORGET``): after one answer the same traffic is predicted as the server counted
it, and the error is put on the part that dominated the prompt (the template's for a short one), so a
later prompt of another shape is moved only as far as that answer showed. A request costs one
dictionary lookup and three multiplications (``prompt``); learning, at the end of a request, the same,
and a 3x3 solve only when the answer is more than ``SETTLED`` from what the book predicted (``learn``).
The books are bounded (``MAX_ENTRIES``, ``MAX_RATES``; least recently updated dropped first), keyed by
the server an endpoint label is on (``configure``: scheme, host and port), so the endpoints on one
server learn together, and kept across restarts and shared by replicas by ``learned_kept`` (``rows``
out, ``restore`` in, checked as an answer is). They age: an older value weighs less against the next
answer (``COUNT_HALF_LIFE_S``, ``PREFILL_HALF_LIFE_S``), and one older than ``MAX_AGE_S`` is not
restored.

A floor keeps the coefficients of an upstream that truncates silently (Ollama) from collapsing: its
``prompt_eval_count`` leaves out a cached prefix and stops at the window it truncated to, so a low
count there may say nothing about the tokenizer; below ``TRUNCATING_FLOOR`` the book does not go.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard
from urllib.parse import urlsplit

from interlock.runtime.books.record import RequestRecord
from interlock.runtime.wire.base import Endpoint

MAX_ENTRIES = 4096
FORGET = 0.5  # the weight the older answers keep at each new one
PRIOR_WEIGHT = 1.0  # the prior, in squared tokens: one answer of any size outweighs it
TEMPLATE_UNIT = 32  # tokens: the scale of the per-request part (a chat template's own text)
PRIOR = (0.0, 1.0, 1.0)  # before any answer: no template part, text and structure as estimated
REPORTING_FLOOR = 0.0  # a server that says "too long" itself: its template may drop a part entirely
TRUNCATING_FLOOR = 0.5  # Ollama: never below half the estimate (see the module docstring)
SETTLED = 0.02  # an answer the book already predicts this closely is not solved for again
MIN_COUNTED_TOKENS = 4  # a server's count below this says nothing
DEFAULT_PREFILL_TOKENS_PER_S = 1_000.0  # before any prompt timing is learned (a small GPU, a fast CPU)
MIN_PREFILL_TOKENS = 32  # shorter prompt evaluations say more about overhead than speed
MAX_RATES = 4096
MAX_PREFILL_S = 3600.0  # a deadline is never stretched further than this
MIN_PREFILL_S = 0.25  # a shorter prefill leaves the deadline as it is (no copy of the endpoint)
STRETCH_STEP = 1.0625  # a stretch is rounded up to the next power of this (times MIN_PREFILL_S)
MAX_STRETCHED = 4096  # stretched endpoints kept, all endpoints together (oldest dropped first)
# the border (issue 39): what an answer may teach, however absurd the numbers it reports
MAX_COUNT_RATIO = 4.0  # a server's count is at most this times the estimate ...
MAX_TEMPLATE_TOKENS = 2048  # ... plus this (a template's own text, a default system prompt)
TRIAL_EVERY_S = 60.0  # a candidate skipped only because of what was learned is tried once this often
MIN_PREFILL_TOKENS_PER_S = 1.0  # a learned prompt speed is never below this ...
MAX_PREFILL_TOKENS_PER_S = 1e7  # ... nor above this
# ageing: an older value weighs less against the next answer, and one too old is not restored
COUNT_HALF_LIFE_S = 7 * 86400.0  # how a server counts changes with its model or template, rarely
PREFILL_HALF_LIFE_S = 86400.0  # a prompt speed changes with the server's load and hardware
MAX_AGE_S = 30 * 86400.0  # older than this: not restored (the state file, the shared store)
MAX_MOMENT = 1e24  # a restored fit's sums (tokens squared) are at most this


Coefficients = tuple[float, float, float]  # the template's (in TEMPLATE_UNIT tokens), text, schema


class Windows(Protocol):
    """Where windows learned from overflow answers live (``books.facts.FactsTable``)."""

    def answered(self, label: str, model: str, prompt_tokens: int) -> None: ...


class Estimate(Protocol):
    """What the books read of a request's estimate (``books.estimate.Needs``)."""

    prompt_tokens: int  # text, messages and tool schemas
    schema_tokens: int  # of those, the structure
    counted: int  # the request's tokens as an upstream counted them (its overflow error), 0 when not


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

    __slots__ = ("a", "at", "b", "samples")

    def __init__(self) -> None:
        self.a = [PRIOR_WEIGHT if i % 4 == 0 else 0.0 for i in range(9)]
        self.b = [PRIOR_WEIGHT * c for c in PRIOR]
        self.samples = 0
        self.at = 0.0  # wall-clock seconds of the newest answer

    def add(self, x: tuple[float, float, float], y: float, now: float) -> tuple[float, float, float] | None:
        """One answer at ``now`` (older ones fade, the more the older they are; the prior stays); the
        coefficients solved anew."""
        a, b = self.a, self.b
        if self.samples:
            keep = FORGET * 0.5 ** (max(now - self.at, 0.0) / COUNT_HALF_LIFE_S)
            for i in range(9):
                prior = PRIOR_WEIGHT if i % 4 == 0 else 0.0
                a[i] = prior + keep * (a[i] - prior)
            for i in range(3):
                b[i] = PRIOR_WEIGHT * PRIOR[i] + keep * (b[i] - PRIOR_WEIGHT * PRIOR[i])
        self.at = now
        for i in range(3):
            b[i] += x[i] * y
            for j in range(3):
                a[3 * i + j] += x[i] * x[j]
        self.samples += 1
        return _solve_coefficients(a, b)


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


def _solve_coefficients(a: list[float], b: list[float]) -> tuple[float, float, float] | None:
    """The fit with no part negative: where the unconstrained solve puts one below 0 (two answers of
    different shapes can: ``schema: -0.587``; a server that counts a short prompt below the estimate
    puts the template's part below 0, and a negative template counted a two-word prompt as 0 tokens),
    it is held at 0 and the others are solved again without it: the least-squares optimum over the
    faces of the non-negative octant, three unknowns, so every face is tried."""
    solved = _solve(a, b)
    if solved is None or min(solved) >= 0:
        return solved
    best: tuple[float, float, float] | None = None
    for free in ((0, 1), (0, 2), (1, 2), (0,), (1,), (2,)):
        x = _solve_on(a, b, free)
        if x is None or min(x) < 0:
            continue
        if best is None or _objective(a, b, x) < _objective(a, b, best):
            best = x
    return best


def _solve_on(a: list[float], b: list[float], free: tuple[int, ...]) -> tuple[float, float, float] | None:
    """``a x = b`` restricted to the coefficients ``free`` (the others 0): Gaussian elimination."""
    n = len(free)
    m = [[a[3 * i + j] for j in free] + [b[i]] for i in free]
    for col in range(n):
        pivot = m[col][col]
        if pivot <= 1e-12:
            return None
        for row in range(col + 1, n):
            f = m[row][col] / pivot
            for k in range(col, n + 1):
                m[row][k] -= f * m[col][k]
    values = [0.0] * n
    for row in range(n - 1, -1, -1):
        values[row] = (m[row][n] - sum((m[row][k] * values[k] for k in range(row + 1, n)), 0.0)) / m[row][row]
    x = [0.0, 0.0, 0.0]
    for i, v in zip(free, values, strict=True):
        x[i] = v
    return x[0], x[1], x[2]


def _objective(a: list[float], b: list[float], x: tuple[float, float, float]) -> float:
    """The ridge objective up to a constant: ``x' a x - 2 b' x``."""
    # float starts: compiled (bench/mypyc_build.sh), ``sum`` of floats from the int 0 raised TypeError
    quad = sum((x[i] * a[3 * i + j] * x[j] for i in range(3) for j in range(3)), 0.0)
    return quad - 2 * sum((b[i] * x[i] for i in range(3)), 0.0)


def _fit_of(row: Any, now: float) -> tuple[tuple[str, str], _Fit, tuple[float, float, float], float] | None:
    """A kept fit, checked: its names, finite sums within ``MAX_MOMENT``, a time not in the future nor
    older than ``MAX_AGE_S``, coefficients that solve within the border; None when it is not one."""
    if type(row) is not dict:
        return None
    server, model, a, b, samples, at, ratio = (
        row.get(k) for k in ("server", "model", "a", "b", "samples", "at", "last_ratio")
    )
    if not (type(server) is str and type(model) is str and 0 < len(server) + len(model) <= 1024):
        return None
    if not (_numbers(a, 9) and _numbers(b, 3) and type(samples) is int and samples > 0):
        return None
    if not (_number(at) and _number(ratio) and now - MAX_AGE_S <= at <= now + 60):
        return None
    fit = _Fit()
    fit.a, fit.b, fit.samples, fit.at = [float(v) for v in a], [float(v) for v in b], samples, min(at, now)
    solved = _solve_coefficients(fit.a, fit.b)
    if solved is None or not all(abs(c) <= MAX_COUNT_RATIO * MAX_TEMPLATE_TOKENS for c in solved):
        return None
    return (server, model), fit, solved, float(ratio)


def _number(value: Any) -> TypeGuard[float]:
    return type(value) in (int, float) and math.isfinite(value) and abs(value) <= MAX_MOMENT


def _numbers(values: Any, n: int) -> TypeGuard[list[float]]:
    return type(values) is list and len(values) == n and all(_number(v) for v in values)


def ceiling(estimate: int) -> int:
    """The most tokens a server may count of a prompt the estimate puts at ``estimate``."""
    return int(estimate * MAX_COUNT_RATIO) + MAX_TEMPLATE_TOKENS


class CountBook:
    """Learned counts per (server, model), read and taught by endpoint label (``servers``: each label's
    server, so the endpoints on one server learn together); ``prompt`` is the per-request read."""

    def __init__(
        self,
        max_entries: int = MAX_ENTRIES,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries = max_entries
        self.wall = wall
        self.clock = clock  # when a candidate locked out by what was learned was last tried
        self.servers: dict[str, str] = {}  # endpoint label -> its server (``Learned.configure``)
        self.version = 0  # counts what was learned or restored: the state file is written when it moved
        self._learned: OrderedDict[tuple[str, str], Counted] = OrderedDict()
        self._fits: dict[tuple[str, str], _Fit] = {}
        self._trials: dict[tuple[str, str], float] = {}  # (label, model) -> when one was last let through

    def get(self, label: str, model: str) -> Counted | None:
        return self._learned.get((self.servers.get(label, label), model))

    def prompt(self, label: str, model: str, text: int, schema: int, floor: float) -> int:
        """The prompt's tokens as the server there would count them: the template's part plus the
        estimate's parts (``text``, ``schema``) times what was learned, each coefficient at least
        ``floor``, never more than ``ceiling`` of the estimate; the estimate as it is before any answer."""
        learned = self._learned.get((self.servers.get(label, label), model))
        if learned is None:
            return text + schema
        counted = learned.template + text * max(learned.text, floor) + schema * max(learned.schema, floor)
        return min(max(int(counted + 0.5), 1 if text + schema else 0), ceiling(text + schema))

    def trial(self, label: str, model: str) -> bool:
        """Whether a candidate that only what was learned here skips may be tried anyway (once every
        ``TRIAL_EVERY_S``): its answer teaches the book again, so nothing learned locks it out."""
        last = self._trials.get((label, model))
        if last is not None and self.clock() - last < TRIAL_EVERY_S:
            return False
        self.mark(label, model)
        return True

    def mark(self, label: str, model: str) -> None:
        """Start the wait for the next trial there now (the router, when a server named its window)."""
        key = (label, model)
        self._trials.pop(key, None)
        self._trials[key] = self.clock()
        while len(self._trials) > self.max_entries:
            del self._trials[next(iter(self._trials))]

    def learn(self, label: str, model: str, text: int, schema: int, counted: int) -> None:
        """One answer: the estimate's parts and the server's count of the same prompt (refused when
        over ``ceiling`` of the estimate: no chat template adds that much)."""
        if counted < MIN_COUNTED_TOKENS or counted > ceiling(text + schema):
            return
        key = (self.servers.get(label, label), model)
        learned = self._learned.get(key)
        if learned is not None:  # already counted as the server counts: nothing to solve
            predicted = learned.template + text * learned.text + schema * learned.schema
            if abs(predicted - counted) <= counted * SETTLED:
                return
        fit = self._fits.get(key)
        if fit is None:
            fit = self._fits[key] = _Fit()
        solved = fit.add((float(TEMPLATE_UNIT), float(text), float(schema)), float(counted), self.wall())
        if solved is not None:
            self._keep(key, fit, solved, counted / max(text + schema, 1))

    def _keep(self, key: tuple[str, str], fit: _Fit, solved: Coefficients, ratio: float) -> None:
        template, c_text, c_schema = solved
        self._learned.pop(key, None)
        self._learned[key] = Counted(template * TEMPLATE_UNIT, c_text, c_schema, fit.samples, ratio)
        self.version += 1
        while len(self._learned) > self.max_entries:
            old, _ = self._learned.popitem(last=False)
            self._fits.pop(old, None)

    def rows(self, since: float = 0.0) -> list[dict[str, Any]]:
        """What is kept (the state file, the shared store): each fit's sums, taught after ``since``."""
        out = []
        for (server, model), fit in self._fits.items():
            learned = self._learned.get((server, model))
            if learned is not None and fit.at > since:
                row = {"server": server, "model": model, "a": fit.a, "b": fit.b, "samples": fit.samples}
                out.append({**row, "at": fit.at, "last_ratio": learned.last_ratio})
        return out

    def restore(self, rows: Any, *, newer: bool = False) -> int:
        """Fits from ``rows`` (another process's, or this one's before a restart), each checked as an
        answer is (a row that is not one is skipped), those older than ``MAX_AGE_S`` left out; with
        ``newer``, only those taught after this book's own. Returns how many were taken."""
        now, taken = self.wall(), 0
        for row in rows if isinstance(rows, list) else ():
            kept = _fit_of(row, now)
            if kept is None:
                continue
            key, fit, solved, ratio = kept
            own = self._fits.get(key)
            if own is not None and newer and own.at >= fit.at:
                continue
            self._fits[key] = fit
            self._keep(key, fit, solved, ratio)
            taken += 1
        return taken

    def snapshot(self) -> dict[str, dict[str, dict[str, float | int]]]:
        """``{server: {model: {template, text, schema, samples, last_ratio}}}`` for /v1/health."""
        out: dict[str, dict[str, dict[str, float | int]]] = {}
        labels = _labels(self.servers)
        for (server, model), learned in sorted(self._learned.items()):
            entry: dict[str, float | int] = {
                "template_tokens": round(learned.template, 1),
                "text": round(learned.text, 3),
                "schema": round(learned.schema, 3),
                "samples": learned.samples,
                "last_ratio": round(learned.last_ratio, 3),
            }
            for label in labels.get(server, (server,)):
                out.setdefault(label, {})[model] = entry
        return out


class PrefillBook:
    """Learned prompt tokens/s per (endpoint label, model): Ollama's own prompt timings, and the other
    kinds' answers (``Learned.observe``: llama-server's ``timings``, else usage over the time taken);
    the prefix scoring (``fleet.prefix``) weighs a cache hit with it, the router's deadline stretches
    by it."""

    def __init__(self, smoothing: float = 0.3, wall: Callable[[], float] = time.time) -> None:
        self.smoothing = smoothing
        self.wall = wall
        self.servers: dict[str, str] = {}  # endpoint label -> its server (``Learned.configure``)
        self.version = 0  # counts what was learned or restored
        self._rates: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._at: dict[tuple[str, str], float] = {}  # wall-clock seconds of each rate's newest sample
        self._models: dict[str, float] = {}  # model -> the last learned rate on any worker

    def observe(self, label: str, model: str, final: Mapping[str, Any]) -> None:
        """Ollama's final message of a finished chat: its prompt tokens and the time they took."""
        count, duration = final.get("prompt_eval_count"), final.get("prompt_eval_duration")
        if isinstance(count, bool) or not isinstance(count, int) or not isinstance(duration, int):
            return
        if count < MIN_PREFILL_TOKENS or duration <= 0:
            return
        self.record(label, model, count / (duration / 1e9))

    def record(self, label: str, model: str, tokens_per_s: float) -> None:
        """One sample, bounded where it enters (``MIN_PREFILL_TOKENS_PER_S``, ``MAX_PREFILL_TOKENS_PER_S``;
        not a number: ignored), so no answer can make a deadline arbitrarily long."""
        if math.isnan(tokens_per_s):
            return
        tokens_per_s = min(max(tokens_per_s, MIN_PREFILL_TOKENS_PER_S), MAX_PREFILL_TOKENS_PER_S)
        key, now = (self.servers.get(label, label), model), self.wall()
        old = self._rates.get(key)
        if old is not None:  # the older the rate, the more the new sample weighs
            stale = 1 - 0.5 ** (max(now - self._at.get(key, now), 0.0) / PREFILL_HALF_LIFE_S)
            weight = max(self.smoothing, stale)
            tokens_per_s = weight * tokens_per_s + (1 - weight) * old
        self._set(key, tokens_per_s, now)

    def _set(self, key: tuple[str, str], rate: float, at: float) -> None:
        self._rates.pop(key, None)
        self._rates[key], self._at[key] = rate, at
        self._models[key[1]] = rate
        self.version += 1
        while len(self._rates) > MAX_RATES:
            old, _ = self._rates.popitem(last=False)
            self._at.pop(old, None)
        if len(self._models) > MAX_RATES:
            del self._models[next(iter(self._models))]

    def learned(self, label: str, model: str) -> float | None:
        """The rate learned of ``model`` on that endpoint's server, None before its first sample there."""
        return self._rates.get((self.servers.get(label, label), model))

    def tokens_per_s(self, label: str, model: str) -> float:
        rate = self._rates.get((self.servers.get(label, label), model))
        if rate is None:
            rate = self._models.get(model, DEFAULT_PREFILL_TOKENS_PER_S)
        return rate

    def rows(self, since: float = 0.0) -> list[dict[str, Any]]:
        """What is kept (the state file, the shared store): each rate learned after ``since``."""
        at = self._at
        return [
            {"server": server, "model": model, "tokens_per_s": rate, "at": at[(server, model)]}
            for (server, model), rate in self._rates.items()
            if at.get((server, model), 0.0) > since
        ]

    def restore(self, rows: Any, *, newer: bool = False) -> int:
        """Rates from ``rows``, bounded as a sample is (a row that is not one is skipped), those older
        than ``MAX_AGE_S`` left out; with ``newer``, only those learned after this book's own."""
        now, taken = self.wall(), 0
        for row in rows if isinstance(rows, list) else ():
            if type(row) is not dict:
                continue
            server, model, rate, at = (row.get(k) for k in ("server", "model", "tokens_per_s", "at"))
            if not (type(server) is str and type(model) is str and 0 < len(server) + len(model) <= 1024):
                continue
            if not (_number(rate) and _number(at) and now - MAX_AGE_S <= at <= now + 60):
                continue
            if not MIN_PREFILL_TOKENS_PER_S <= rate <= MAX_PREFILL_TOKENS_PER_S:
                continue
            key = (server, model)
            if newer and self._at.get(key, -math.inf) >= at:
                continue
            self._set(key, float(rate), min(at, now))
            taken += 1
        return taken

    def snapshot(self) -> dict[str, dict[str, float]]:
        """``{label: {model: tokens/s}}``: each endpoint on a server shows what that server taught."""
        out: dict[str, dict[str, float]] = {}
        labels = _labels(self.servers)
        for (server, model), rate in sorted(self._rates.items()):
            for label in labels.get(server, (server,)):
                out.setdefault(label, {})[model] = round(rate, 1)
        return out


def server_of(url: str) -> str:
    """The server an endpoint's URL names (scheme, host and port): an ``anthropic`` provider and an
    ``openai`` worker on one llama-server are one server, and learn together."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return url
    host = (parts.hostname or "").lower()
    if not host:
        return url
    return f"{parts.scheme}://[{host}]:{port}" if ":" in host else f"{parts.scheme}://{host}:{port}"


def _labels(servers: Mapping[str, str]) -> dict[str, list[str]]:
    """server -> the endpoint labels on it, sorted."""
    out: dict[str, list[str]] = {}
    for label, server in sorted(servers.items()):
        out.setdefault(server, []).append(label)
    return out


class Told:
    """Server counts of whole prompts (``request.count_tokens`` asked the server's tokenizer), by
    (server, model, the prompt's digest); bounded, oldest first out."""

    __slots__ = ("_counts",)

    def __init__(self) -> None:
        self._counts: OrderedDict[tuple[str, str, bytes], int] = OrderedDict()

    def get(self, key: tuple[str, str, bytes]) -> int | None:
        return self._counts.get(key)

    def put(self, key: tuple[str, str, bytes], tokens: int) -> None:
        self._counts.pop(key, None)
        self._counts[key] = tokens
        while len(self._counts) > MAX_ENTRIES:
            self._counts.popitem(last=False)


@dataclass(frozen=True, slots=True)
class Learned:
    """The two books; the context guard reads ``counts``, the router ``prefill_s``."""

    counts: CountBook = field(default_factory=CountBook)
    prefill: PrefillBook = field(default_factory=PrefillBook)
    windows: Windows | None = None  # an answer larger than a window learned there forgets that window
    told: Told = field(default_factory=Told, init=False, repr=False)  # what count_tokens asked servers
    # (id of an endpoint, step of its stretch) -> (that endpoint, its copy with the stretched deadline)
    stretched: dict[tuple[int, int], tuple[Endpoint, Endpoint]] = field(
        default_factory=dict, init=False, repr=False
    )

    def configure(self, endpoints: Iterable[Endpoint]) -> None:
        """Which server each endpoint label is on (at start and at every reload): the books key by it."""
        servers = {endpoint.label: server_of(endpoint.url) for endpoint in endpoints}
        self.counts.servers = self.prefill.servers = servers

    def observe(self, record: RequestRecord, needs: Estimate, prompt: int) -> None:
        """One answered request: the upstream counted ``prompt`` tokens of it."""
        answered = record.answered
        if answered is None or prompt <= 0:
            return
        candidate = answered.candidate
        label, model = answered.route.endpoint.label, candidate.facts_key
        self.counts.learn(
            label, model, needs.prompt_tokens - needs.schema_tokens, needs.schema_tokens, prompt
        )
        if self.windows is not None:
            self.windows.answered(label, model, prompt)
        if candidate.kind == "ollama":  # its adapter feeds its own prompt timings
            return
        result = answered.result
        timings = record.timings if record.stream else result.get("timings") if type(result) is dict else None
        if type(timings) is dict:
            count, ms = timings.get("prompt_n"), timings.get("prompt_ms")
            if type(count) is int and isinstance(ms, int | float) and count >= MIN_PREFILL_TOKENS and ms > 0:
                # a prefill longer than the call may take could not have been answered: 1e308 ms is that
                seconds = min(ms / 1000, answered.route.endpoint.total_s)
                self.prefill.record(label, model, count / seconds)
            return
        if answered.attempts:  # the seconds include earlier candidates' calls
            return
        usage = record.usage if record.stream else result.get("usage") if type(result) is dict else None
        fresh = prompt - _cached(usage)
        if fresh >= MIN_PREFILL_TOKENS and answered.upstream_s > 0:
            self.prefill.record(label, model, fresh / answered.upstream_s)

    def prompt_of(self, label: str, model: str, needs: Estimate, floor: float = REPORTING_FLOOR) -> int:
        """A request's prompt tokens as the server behind ``label`` counts them (the estimate as learned
        there): what a translated stream's ``message_start`` reports before the server's own usage."""
        text, schema = needs.prompt_tokens - needs.schema_tokens, needs.schema_tokens
        return self.counts.prompt(label, model, text, schema, floor)

    def deadline(self, endpoint: Endpoint, model: str, needs: Estimate) -> Endpoint:
        """``endpoint`` with its first-byte deadline stretched by the expected prefill of the prompt
        (its tokens as that server counts them, at the prompt speed learned there); as it is before
        any speed is learned, or when the prefill is short.

        The stretch is rounded up to the next step of a geometric grid (``STRETCH_STEP``: at most
        6.25 % longer, never shorter), so an endpoint has some 160 stretched copies at most, each built
        once (its header lines encoded once) and looked up by the next call of that size."""
        rate = self.prefill.learned(endpoint.label, model)
        if rate is None:
            return endpoint
        prompt = max(self.prompt_of(endpoint.label, model, needs), needs.counted)
        extra = min(prompt / rate, MAX_PREFILL_S)
        if extra < MIN_PREFILL_S:
            return endpoint
        step = math.ceil(math.log(extra / MIN_PREFILL_S, STRETCH_STEP))
        key = (id(endpoint), step)
        known = self.stretched.get(key)
        if known is not None and known[0] is endpoint:  # (the endpoint it holds keeps its id unique)
            return known[1]
        extra = min(MIN_PREFILL_S * STRETCH_STEP**step, MAX_PREFILL_S)
        longer = dataclasses.replace(endpoint, first_byte_s=endpoint.first_byte_s + extra)
        if len(self.stretched) >= MAX_STRETCHED:
            del self.stretched[next(iter(self.stretched))]
        self.stretched[key] = (endpoint, longer)
        return longer

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
