"""``max_tokens`` is a ceiling: where a request's output limit is lowered to fit a window.

(The cut to what a caller's credits or token rate cover is ``surfaces.base.capped``: a second writer of
the same limits, which also sets one where the caller sent none. Folding the two into one is owed.)

A caller's output limit says the most it wants, not what it needs (Claude Code sends ``max_tokens:
32000`` with every request, "say hi" included). Where the prompt fits a candidate's window and that
limit does not, the context guard (``preflight.max_tokens: ceiling``, the default) lets the candidate
through with the largest limit that fits (``fitting``), and this module writes it into what that
candidate is sent: every output key the body has, in any wire format (``needs.OUTPUT_KEYS`` at the top
level, and Ollama's ``options.num_predict``), the caller's own format's body too when it is relayed.
A key at or below the ceiling stays as it is; a body with none is sent as it came (the plan's
``default_output_tokens`` is only what the estimate assumes). The answer says what was sent in
``X-Interlock-Max-Tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlock.runtime.guards.needs import OUTPUT_KEYS
from interlock.runtime.wire.base import Native

MIN_CEILING = 16  # a window with less room than this after the prompt does not fit it


def fitting(window: int, prompt: int, margin_percent: int) -> int | None:
    """The largest output that fits ``window`` after ``prompt`` with the margin on the whole (the
    estimate's rule: ``(prompt + output) * (100 + margin) / 100 <= window``); None below ``MIN_CEILING``."""
    room = window * 100 // (100 + margin_percent) - prompt
    return room if room >= MIN_CEILING else None


def lowered(body: Mapping[str, Any], ceiling: int) -> dict[str, Any] | None:
    """``body`` with every output limit above ``ceiling`` set to it; None when none is above it."""
    out: dict[str, Any] | None = None
    for key in OUTPUT_KEYS:
        value = body.get(key)
        if type(value) is int and value > ceiling:
            out = dict(body) if out is None else out
            out[key] = ceiling
    options = body.get("options")
    if isinstance(options, Mapping):
        value = options.get("num_predict")
        if type(value) is int and value > ceiling:
            out = dict(body) if out is None else out
            out["options"] = {**options, "num_predict": ceiling}
    return out


def lowered_native(native: Native, ceiling: int) -> Native:
    """A relayed request (the caller's own format) with its output limit lowered the same way."""
    body = lowered(native.body, ceiling)
    return native if body is None else Native(native.format, body, native.headers)
