"""One request's preflight: what it needs, what the guards found, and how that is told to the caller.

The lifecycle works out a request's ``Needs`` once (``needs_of``: its capabilities and a conservative
estimate of its context) and builds its ``Preflight`` around them; the router gives that to every
candidate's ``Admission``, and the capability and context guards record into it what did not fit. The
lifecycle turns it into response headers (``X-Interlock-Skipped``, ``X-Interlock-Preflight``). When
every candidate was skipped for what the request needs (not for health), the router raises
``refusal()``: a 400 whose code says what did not fit (``context_length_exceeded``, or
``model_not_supported`` for a capability), worded from the same estimate.

The estimate itself (``Needs``, ``needs_of``) is read by the request, low: ``runtime/books/estimate.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from interlock.runtime.base.errors import (
    CandidateOutcome,
    CapabilityMissing,
    ContextTooLarge,
    RequestDoesNotFit,
)
from interlock.runtime.books.estimate import Needs
from interlock.runtime.guards.ceiling import said
from interlock.runtime.loaded.callers import COMMON
from interlock.runtime.loaded.tables import PreflightSettings

# -- what the guards found -------------------------------------------------------------------------

Header = tuple[bytes, bytes]
MAX_HEADER_ITEMS = 8  # a long chain must not make headers unbounded
CEILING_HEADER = b"x-interlock-max-tokens"  # the output limit sent, when lower than the caller's
DEFAULT_SETTINGS = PreflightSettings("enforce", 600, None, None, 1024, 2048, 15, True)
# what to change, by where the largest window came from (``fit.effective_context``'s source)
HINTS = {
    "declared": "declare the model's real window (`context_tokens`) if the server has more",
    "default": "set the worker's `default_context_tokens` (or `context_limits`) if the model can take more",
    "loaded": "load the model with a larger `num_ctx` (the worker's `default_context_tokens`, its Modelfile)",
    "modelfile": "raise the Modelfile's `num_ctx` or the worker's `default_context_tokens`",
    "caller": "send a larger `options.num_ctx`",
    "upstream said": "give the server a larger context (llama-server `--ctx-size`, vLLM `--max-model-len`)",
    "server's slot": "give each slot more: llama-server splits `--ctx-size` over its `--parallel` slots",
}


@dataclass(frozen=True, slots=True)
class Misfit:
    """A candidate that cannot serve the request: ``kind`` is ``context`` or ``capability``."""

    candidate: str
    kind: str
    reason: str  # the short metric label, e.g. ``lacks_vision``, ``context_too_small``
    detail: str  # for people: "lacks vision", "context 8192 < 41234 (loaded)"
    window: int | None = None  # context misfits: the largest window this candidate offered
    tokens: int | None = None  # context misfits: what the estimate needed there
    counted: int | None = None  # a context its server refused: the request's tokens by the server's count


MAX_CALLER_TIMEOUT_S = 86_400.0  # a caller's timeout above a day says nothing


class Preflight:
    """Built per request: a plain class (a dataclass with list factories costs more to build)."""

    __slots__ = (
        "attempts",
        "calling",
        "calling_since",
        "ceilings",
        "deferred",
        "misfits",
        "mode",
        "needs",
        "notes",
        "request_headers",
        "session",
        "settings",
        "skipped",
        "started",
        "turn",
        "walked_s",
    )

    def __init__(self, needs: Needs, mode: str, settings: PreflightSettings = DEFAULT_SETTINGS) -> None:
        self.needs = needs
        self.mode = mode  # "enforce" | "observe" | "off"
        self.settings = settings
        self.misfits: list[Misfit] = []
        self.skipped: list[str] = []
        self.notes: list[str] = []
        self.session: bytes | None = None  # the session header's value, when sticky sessions are on
        self.deferred: set[str] | None = None  # candidates a guard put after the rest of the chain
        self.ceilings: dict[str, bytes] | None = None  # candidate -> X-Interlock-Max-Tokens, when lowered
        self.turn = COMMON  # where it waits for a slot (``runtime.state.fair``): its caller's
        self.request_headers: list[tuple[bytes, bytes]] = []  # read only by ``deadline``
        self.started = 0.0  # when the request arrived (``time.perf_counter()``)
        # the walk so far, for the access log (``record.Walked``): its calls that failed or were
        # skipped, the candidate called now (and since when), the seconds its finished calls took
        self.attempts: list[CandidateOutcome] | None = None
        self.calling: str | None = None
        self.calling_since = 0.0
        self.walked_s = 0.0

    def deadline(self) -> float | None:
        """When the caller stops waiting (``time.perf_counter()``), from the timeout its SDK sends with
        every request (``X-Stainless-Timeout``, seconds: the OpenAI and Anthropic SDKs); None when it
        sent none. Read only when a retry is weighed, never on a request that needs none."""
        for name, value in self.request_headers:
            if name == b"x-stainless-timeout":
                try:
                    seconds = float(value)
                except ValueError:
                    return None
                return self.started + seconds if 0 < seconds < MAX_CALLER_TIMEOUT_S else None
        return None

    @property
    def enforcing(self) -> bool:
        return self.mode == "enforce"

    def defer(self, candidate: str) -> bool:
        """Whether ``candidate`` may be put after the rest of the chain: the first time only."""
        if self.deferred is None:
            self.deferred = set()
        elif candidate in self.deferred:
            return False
        self.deferred.add(candidate)
        return True

    def lowered(self, candidate: str, ceiling: int) -> None:
        """``candidate`` is sent ``ceiling`` as its output limit: lower than the caller's (or than what its
        credits or tokens per minute cut it to, which the context's ceiling then replaces)."""
        if self.ceilings is None:
            self.ceilings = {}
        self.ceilings[candidate] = said(ceiling, b"context")

    def note(self, text: str) -> None:
        if text not in self.notes and len(self.notes) < MAX_HEADER_ITEMS:
            self.notes.append(text)

    def overflowed(self, candidate: str, label: str, window: int | None, tokens: int | None) -> None:
        """The candidate's upstream refused the prompt as over its context: a context misfit (said in
        ``X-Interlock-Skipped``), and the rest of the walk needs more than that window (or the size the
        upstream counted), so the guard skips any later candidate known to be no larger."""
        said = (
            f"context {window} (upstream said)" if window is not None else "context too small (upstream said)"
        )
        detail = f"{said} on {label}" + (f", {tokens} tokens by its count" if tokens else "")
        self.misfits.append(Misfit(candidate, "context", "context_too_small", detail, window, counted=tokens))
        self.skipped.append(f"{candidate} (context_too_small, called)")  # called, not skipped
        floor = max(tokens or 0, window + 1 if window is not None else 0)  # of the whole request: an
        if floor > self.needs.counted:  # upstream's count may hold the completion too (vLLM's does)
            self.needs.counted = floor  # the one write to a built ``Needs``: the upstream counted better

    def headers(self, answered: str | None = None) -> list[Header]:
        """The preflight's response headers; ``answered``: the candidate that answered, if any."""
        out: list[Header] = []
        self.add_headers(out, answered)
        return out

    def add_headers(self, headers: list[Header], answered: str | None) -> None:
        """The preflight's response headers after ``headers`` (``answered``: the candidate that
        answered, if any); its ``X-Interlock-Max-Tokens`` (the context's ceiling, the lower) replaces
        one the credits or rates cut earlier: one header says what was sent."""
        ceilings = self.ceilings
        if answered is not None and ceilings is not None and answered in ceilings:
            headers[:] = [h for h in headers if h[0] != CEILING_HEADER]
            headers.append((CEILING_HEADER, ceilings[answered]))
        if self.skipped:
            headers.append((b"x-interlock-skipped", _ascii(", ".join(self.skipped[:MAX_HEADER_ITEMS]))))
        if self.notes:
            headers.append((b"x-interlock-preflight", _ascii("; ".join(self.notes))))

    def refusal(self, target: str, candidates: int) -> RequestDoesNotFit | None:
        """The 400 to answer when every one of ``candidates`` was skipped as a misfit; else None."""
        if not self.misfits or len({m.candidate for m in self.misfits}) < candidates:
            return None
        lacking = [m for m in self.misfits if m.kind == "capability"]
        listed = "; ".join(f"{m.candidate}: {m.detail}" for m in self.misfits[:MAX_HEADER_ITEMS])
        if lacking:
            needed = ", ".join(sorted(self.needs.capabilities - {"completion"}) or self.needs.capabilities)
            return CapabilityMissing(
                f"no candidate of {target} supports what this request needs ({needed}): {listed}",
                param="model",
            )
        context = [m for m in self.misfits if m.window is not None]
        widest = max(context, key=lambda m: m.window or 0) if context else None
        needs = self.needs
        tokens = widest.tokens if widest is not None and widest.tokens else needs.tokens
        largest = f"the largest context available is {widest.window} tokens" if widest else "no window fits"
        hint = _hint(widest.detail if widest is not None else "")
        strict = "" if self.settings.max_tokens_ceiling else ", or set `preflight.max_tokens: ceiling`"
        refused = max((m for m in context if m.counted), key=lambda m: m.counted or 0, default=None)
        if refused is not None:  # a server counted it, and refused it: its count, not the estimate
            size = f"this request is {refused.counted} tokens by {refused.candidate}'s server's own count"
        else:
            size = (
                f"this request needs about {tokens} tokens of context (an estimate, not the server's "
                f"count: {needs.prompt_tokens} prompt before calibration, {needs.images} image(s), "
                f"{needs.output_tokens} output, plus {self.settings.margin_percent}% margin)"
            )
        return ContextTooLarge(
            f"{size}; {largest} "
            f"in {target}: {listed}. To change it: {hint}; or send less (a shorter history, fewer "
            f"tools, a lower max_tokens){strict}; `preflight.mode: observe` lets every server decide",
            param="messages",
        )


def _hint(detail: str) -> str:
    """What would make the window larger, by the source a misfit's detail names (``context N (source)``)."""
    source = detail.partition("(")[2].partition(")")[0].removesuffix(", capped")
    return HINTS.get(source, "declare a larger window for the model")


def _ascii(text: str) -> bytes:
    return text.encode("ascii", "replace")
