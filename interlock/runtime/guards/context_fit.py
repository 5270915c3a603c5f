"""Which routes of a candidate the request's context fits: by the estimate, counted as the server counts.

The effective context per route comes from ``fit.effective_context`` (loaded > Modelfile > worker
default > plan default, capped; a cloud's declared window; a window its upstream named). A caller's
own ``options.num_ctx`` above a route's limit (worker limit, gateway cap, model maximum) makes that
route unusable too. Unknown context passes.

The prompt's size on a route is the estimate as its server would count it (``CountBook.prompt``: what
the answers of that endpoint and model taught), at least what an upstream already counted for this
request (its overflow error). Each route is then one of, best first:

- ``fits``: the whole request (prompt, images, the caller's output limit, margin) fits;
- ``ceiling``: the prompt fits and the output limit does not: usable with the largest limit that fits
  (``guards.ceiling``);
- ``doubtful``: the estimate says it does not fit, but the candidate's upstream says so itself when a
  prompt is over its context (``Candidate.says_overflow``: llama-server, vLLM, SGLang, the clouds),
  and the estimate is not clearly over (``CLEARLY_UNLEARNED``, or the margin once learned): the server
  decides, and its overflow answer moves the walk on. Its output limit is lowered to what fits the
  fewest tokens the prompt may be (vLLM refuses a prompt plus ``max_tokens`` over its window);
- ``too small``: an upstream that truncates silently (Ollama) and the estimate does not fit, or one
  clearly too small with a candidate after it: skipped, a misfit. The last candidate of a chain whose
  upstream says overflow itself is never refused on the estimate alone: it is ``doubtful`` (a
  calibration learned on other traffic can be far off: SmolLM2's template drops tool schemas), unless
  the window is one its server already named in an overflow answer.

With ``preflight.max_tokens: strict`` (the seeds' conservative admission) a route is ``fits`` or
``too small``, nothing between. The candidate keeps only its routes of the best kind. When that is
not ``fits`` and a later candidate exists, it is deferred once (``DEFER``): the router tries it after
the rest of the chain, so a candidate the whole request fits is preferred; come back to, it is used
as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interlock.runtime.books.facts import FactsTable
from interlock.runtime.books.fit import UPSTREAM_SAID, effective_context, limit_on, planned_context
from interlock.runtime.books.learned import REPORTING_FLOOR, TRUNCATING_FLOOR, CountBook
from interlock.runtime.books.metrics import Metrics
from interlock.runtime.guards import DEFER, Admission, Kit
from interlock.runtime.guards.ceiling import fitting, lowered
from interlock.runtime.guards.misfit import MisfitGuard
from interlock.runtime.guards.preflight import Misfit, Preflight
from interlock.runtime.loaded.tables import Candidate, Route

log = logging.getLogger("interlock.preflight")

FITS, CEILING, DOUBTFUL, TOO_SMALL = 0, 1, 2, 3
CLEARLY_UNLEARNED = 4.0  # before any answer, "clearly too small": the estimate over 4x the window
# (a template may drop the tool schemas whole); once answers taught the counts, over the margin


class ContextGuard(MisfitGuard):
    def __init__(self, facts: FactsTable, metrics: Metrics, counts: CountBook | None = None) -> None:
        super().__init__(facts, metrics)
        self.counts = counts if counts is not None else CountBook()

    def verdict(self, admission: Admission, body: Mapping[str, Any]) -> str | None:
        """Each route judged by how the request fits its window (the kinds above): None when the
        candidate goes on (its routes maybe fewer, its output limit maybe lowered), else a refusal or
        ``DEFER``."""
        preflight = admission.preflight
        if preflight is None or preflight.mode == "off":
            return None
        needs = preflight.needs
        candidate = admission.candidate
        if not candidate.live_facts:  # a window is known only when declared, or named by an upstream
            windows, key, slots = self.facts.windows, candidate.facts_key, self.facts.slot_windows
            for route in admission.routes:
                label = route.endpoint.label
                if route.context_default is not None or (windows and (label, key) in windows):
                    break
                if slots and label in slots:
                    break
            else:  # none known: it fits wherever it goes (as the loop below would find)
                return None
        settings = preflight.settings
        margin = settings.margin_percent
        reserve = needs.images * settings.image_reserve_tokens
        text, schema = needs.prompt_tokens - needs.schema_tokens, needs.schema_tokens
        floor = REPORTING_FLOOR if candidate.says_overflow else TRUNCATING_FLOOR
        output = needs.output_tokens
        best, kept = TOO_SMALL, []
        ceiling: int | None = None
        largest: int | None = None
        details: list[str] = []
        reason = "context_too_small"
        needed = 0
        for route in admission.routes:
            if needs.num_ctx is not None and route.live_facts:  # the caller's own window for Ollama
                above = self._num_ctx_above(route, candidate, needs.num_ctx)
                if above is not None:
                    reason = "num_ctx_above_limit"
                    details.append(above)
                    continue
            window, source = effective_context(route, candidate, self.facts, needs.num_ctx)
            if window is None:
                if route.live_facts:  # Ollama's own default applies: say so
                    preflight.note(f"context of {candidate.id} on {route.endpoint.label} unknown")
                kind, room = FITS, None
            else:
                label = route.endpoint.label
                learned = self.counts.get(label, candidate.facts_key)
                prompt = self.counts.prompt(label, candidate.facts_key, text, schema, floor)
                floor_tokens = needs.counted - output  # an upstream's count of this request: a floor
                prompt = max(prompt, floor_tokens) + reserve
                fit = Fit(window, output, margin, needs.counted, settings.max_tokens_ceiling)
                last = not admission.has_next and source != UPSTREAM_SAID  # not refused on the estimate
                kind, room = fit.kind(prompt, learned is not None, candidate.says_overflow, last)
                if (
                    kind == TOO_SMALL
                    and preflight.enforcing
                    and (learned is not None or source == UPSTREAM_SAID)
                ):
                    raw = max(text + schema, floor_tokens) + reserve  # the prompt without what was learned
                    tried = self._trial(admission, route, fit, raw)
                    if tried is not None:  # its answer teaches again: counts, and a window it named
                        kind, room = tried
                        prompt, learned = raw, None
                needed = max(needed, fit.whole(prompt))
                if kind != FITS:
                    largest = window if largest is None else max(largest, window)
                    counted = "as learned" if learned is not None else "not yet learned"
                    details.append(f"context {window} ({source}) on {label}, prompt ~{prompt} ({counted})")
            if kind < best:
                best, kept, ceiling = kind, [route], room
            elif kind == best and kind != TOO_SMALL:
                kept.append(route)
                if room is not None and (ceiling is None or room < ceiling):
                    ceiling = room
        if best == FITS and len(kept) == len(admission.routes):
            return None
        return self._short(
            admission, preflight, body, _Judged(best, kept, ceiling, reason, details, largest, needed)
        )

    def _short(
        self, admission: Admission, preflight: Preflight, body: Mapping[str, Any], judged: _Judged
    ) -> str | None:
        """Not every route fits the whole request: observed (a note and a count), or, enforcing, the
        candidate refused (too small everywhere), deferred, or kept to the routes of its best kind with
        the output limit lowered to the ceiling that fits."""
        candidate, best, ceiling = admission.candidate, judged.best, judged.ceiling
        detail = "; ".join(judged.details)
        if not preflight.enforcing:
            if best != FITS:
                self.metrics.preflight.labels(candidate.metric_label, judged.reason, "observed").inc()
                preflight.note(f"observe: {candidate.id} too small ({detail} < {judged.needed})")
                log.info("preflight (observe): %s: %s < %d tokens", candidate.id, detail, judged.needed)
            return None
        if best == TOO_SMALL:
            misfit = Misfit(candidate.id, "context", judged.reason, detail, judged.largest, judged.needed)
            return self.enforce(admission, preflight, [], misfit)
        admission.routes = tuple(judged.kept)
        if best != FITS and admission.has_next and preflight.defer(candidate.id):
            return DEFER  # tried after the candidates the whole request fits
        if best in (CEILING, DOUBTFUL) and ceiling is not None:
            sent = lowered(body if admission.body is None else admission.body, ceiling)
            if sent is not None:  # the caller's limit is above what fits: the ceiling goes instead
                admission.body, admission.ceiling = sent, ceiling
                preflight.lowered(candidate.id, ceiling)
        return None

    def _trial(self, admission: Admission, route: Route, fit: Fit, raw: int) -> tuple[int, int | None] | None:
        """A candidate that only what was learned makes too small (the count book's counts, a window
        its server named in an overflow answer) is tried anyway once every ``TRIAL_EVERY_S`` when,
        without them, it would be: the kind of fit it would have then; else None."""
        candidate = admission.candidate
        window, _ = planned_context(route, candidate, self.facts, None)
        kind: tuple[int, int | None] = (FITS, None)  # no window known: it fits wherever it goes
        if window is not None:
            unlearned = Fit(window, fit.output, fit.margin, fit.counted, fit.ceiling)
            kind = unlearned.kind(raw, False, candidate.says_overflow, not admission.has_next)
        label, model = route.endpoint.label, candidate.facts_key
        if kind[0] == TOO_SMALL or not self.counts.trial(label, model):
            return None
        if admission.preflight is not None:
            admission.preflight.note(f"{candidate.id} on {label} tried: too small only as learned")
        return kind

    def _num_ctx_above(self, route: Route, candidate: Candidate, num_ctx: int) -> str | None:
        """What is wrong when a caller's ``options.num_ctx`` is above the route's limit (worker limit,
        gateway cap, model maximum); None when it is not."""
        limit = limit_on(route, candidate, self.facts)
        if limit is not None and num_ctx > limit:
            return f"options.num_ctx {num_ctx} > limit {limit} on {route.endpoint.label}"
        return None


@dataclass(slots=True)
class _Judged:
    """What a candidate's routes came to when not all of them fit the whole request."""

    best: int  # the best kind of fit among them
    kept: list[Route]  # the routes of that kind
    ceiling: int | None  # the lowest output limit that fits on them (CEILING, DOUBTFUL)
    reason: str  # the misfit's reason: context too small, or options.num_ctx above a limit
    details: list[str]  # per route that did not fit: its window and the prompt's size there
    largest: int | None  # the largest window among the routes that did not fit
    needed: int  # the most tokens the whole request needs on any of them (margin included)


@dataclass(slots=True)
class Fit:
    """One route's window against a request: which kind of fit a prompt size makes (best first)."""

    window: int
    output: int
    margin: int
    counted: int  # the request's tokens as an upstream counted them (its overflow error), 0 when not
    ceiling: bool  # ``preflight.max_tokens: ceiling`` (else strict: fits or too small)

    def whole(self, prompt: int) -> int:
        """The whole request's tokens, margin included, at least what an upstream counted."""
        return max(-(-(prompt + self.output) * (100 + self.margin) // 100), self.counted)

    def kind(self, prompt: int, learned: bool, says_overflow: bool, last: bool) -> tuple[int, int | None]:
        """``FITS``, ``CEILING``, ``DOUBTFUL`` or ``TOO_SMALL`` for a prompt of ``prompt`` tokens (as
        learned there or not), with the output limit that fits where it is not ``FITS``; ``last``: the
        chain's last candidate, on a window its server has not named (never refused on the estimate)."""
        window, margin = self.window, self.margin
        if self.whole(prompt) <= window:
            return FITS, None
        room = fitting(window, prompt, margin)
        if room is not None and self.ceiling:
            return CEILING, room
        if self.ceiling and says_overflow and (last or not _clearly(prompt, window, learned, margin)):
            # the server decides; the limit sent fits its least plausible count
            return DOUBTFUL, fitting(window, _least(prompt, learned, margin), margin)
        return TOO_SMALL, room


def _least(prompt: int, learned: bool, margin: int) -> int:
    """The fewest tokens ``prompt`` (the estimate) may be by the server's count, short of clearly over."""
    return prompt * 100 // (100 + margin) if learned else int(prompt / CLEARLY_UNLEARNED)


def _clearly(prompt: int, window: int, learned: bool, margin: int) -> bool:
    """Whether ``prompt`` (the estimate, as learned or not) is clearly over ``window``."""
    if learned:
        return prompt * 100 > window * (100 + margin)
    return prompt > window * CLEARLY_UNLEARNED


def guard(kit: Kit) -> ContextGuard:
    return ContextGuard(kit.facts, kit.metrics, kit.counts)
