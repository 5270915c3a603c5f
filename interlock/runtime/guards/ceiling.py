"""``max_tokens`` is a ceiling: where a request's output limit is lowered to fit a window.

A caller's output limit says the most it wants, not what it needs (Claude Code sends ``max_tokens:
32000`` with every request, "say hi" included). Where the prompt fits a candidate's window and that
limit does not, the context guard (``preflight.max_tokens: ceiling``, the default) lets the candidate
through with the largest limit that fits (``fitting``), and this module writes it into what that
candidate is sent: every output key the body has, in any wire format (``wire.fields.ANY_LIMIT``: the
top-level keys, and Ollama's ``options.num_predict``), the caller's own format's body too when it is
relayed.
A key at or below the ceiling stays as it is; a body with none is sent as it came (the plan's
``default_output_tokens`` is only what the estimate assumes). The answer says what was sent in
``X-Interlock-Max-Tokens`` (``said``).

The fields are written by ``wire.fields.limited``, the one writer of output limits: the cut to what a
caller's credits or token rate cover (``surfaces.base.capped``) writes them with it too, clamping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlock.runtime.wire.base import Native
from interlock.runtime.wire.fields import ANY_LIMIT, limited

MIN_CEILING = 16  # a window with less room than this after the prompt does not fit it


def fitting(window: int, prompt: int, margin_percent: int) -> int | None:
    """The largest output that fits ``window`` after ``prompt`` with the margin on the whole (the
    estimate's rule: ``(prompt + output) * (100 + margin) / 100 <= window``); None below ``MIN_CEILING``."""
    room = window * 100 // (100 + margin_percent) - prompt
    return room if room >= MIN_CEILING else None


def lowered(body: Mapping[str, Any], ceiling: int) -> dict[str, Any] | None:
    """``body`` with every output limit above ``ceiling`` set to it, in any format's fields; None when
    none is above it."""
    return limited(body, ANY_LIMIT, ceiling)


def lowered_native(native: Native, ceiling: int) -> Native:
    """A relayed request (the caller's own format) with its output limit lowered the same way."""
    body = lowered(native.body, ceiling)
    return native if body is None else Native(native.format, body, native.headers)


def said(ceiling: int, by: bytes) -> bytes:
    """``X-Interlock-Max-Tokens``: the output limit sent and what cut it (``context``, ``credits``,
    ``tokens_per_minute``)."""
    return b"%d; clamped-by=%b" % (ceiling, by)
