"""One request's preflight: its needs, what the guards found, and how that is told to the caller.

The surface builds a ``Preflight`` once per request (``needs_of``) and hands it to the router, which
gives it to every candidate's ``Admission``; the guards record into it. The surface turns it into
response headers (``X-Interlock-Skipped``, ``X-Interlock-Preflight``). When every candidate was skipped
for what the request needs (not for health), the router raises ``refusal()``: a 400 whose code says
what did not fit (``context_length_exceeded``, or ``model_not_supported`` for a capability).
"""

from __future__ import annotations

from dataclasses import dataclass

from interlock.runtime.access import COMMON
from interlock.runtime.errors import CapabilityMissing, ContextTooLarge, RequestDoesNotFit
from interlock.runtime.guards.needs import Needs

Header = tuple[bytes, bytes]
MAX_HEADER_ITEMS = 8  # a long chain must not make headers unbounded


@dataclass(frozen=True, slots=True)
class Misfit:
    """A candidate that cannot serve the request: ``kind`` is ``context`` or ``capability``."""

    candidate: str
    kind: str
    reason: str  # the short metric label, e.g. ``lacks_vision``, ``context_too_small``
    detail: str  # for people: "lacks vision", "context 8192 < 41234 (loaded)"
    window: int | None = None  # context misfits: the largest window this candidate offered


class Preflight:
    """Built per request: a plain class (a dataclass with list factories costs more to build)."""

    __slots__ = ("misfits", "mode", "needs", "notes", "session", "skipped", "turn")

    def __init__(self, needs: Needs, mode: str) -> None:
        self.needs = needs
        self.mode = mode  # "enforce" | "observe" | "off"
        self.misfits: list[Misfit] = []
        self.skipped: list[str] = []
        self.notes: list[str] = []
        self.session: bytes | None = None  # the session header's value, when sticky sessions are on
        self.turn = COMMON  # where it waits for a slot (``runtime.state.fair``): its caller's

    @property
    def enforcing(self) -> bool:
        return self.mode == "enforce"

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
        self.misfits.append(Misfit(candidate, "context", "context_too_small", f"{said} on {label}", window))
        self.skipped.append(f"{candidate} (context_too_small)")
        floor = max(tokens or 0, window + 1 if window is not None else 0)
        if floor > self.needs.tokens:
            self.needs.tokens = floor  # the one write to a built ``Needs``: the upstream counted better

    def headers(self) -> list[Header]:
        out: list[Header] = []
        if self.skipped:
            out.append((b"x-interlock-skipped", _ascii(", ".join(self.skipped[:MAX_HEADER_ITEMS]))))
        if self.notes:
            out.append((b"x-interlock-preflight", _ascii("; ".join(self.notes))))
        return out

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
        windows = [m.window for m in self.misfits if m.window is not None]
        largest = f"the largest context available is {max(windows)} tokens" if windows else "no window fits"
        needs = self.needs
        return ContextTooLarge(
            f"this request needs about {needs.tokens} tokens of context (estimate: {needs.prompt_tokens} "
            f"prompt, {needs.images} image(s), {needs.output_tokens} output, plus margin); {largest} "
            f"in {target}: {listed}",
            param="messages",
        )


def _ascii(text: str) -> bytes:
    return text.encode("ascii", "replace")
