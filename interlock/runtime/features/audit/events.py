"""What an audit line may hold: one table of event kinds and their fields, and the request event.

Why a table: the audit log's promise is metadata only (never a prompt, an answer or a secret). Each
admin action names the fields it may carry, so a caller elsewhere in the code (key management, the
credits ledger) cannot slip a body or a credential into the log by passing one more keyword: an unknown
action or field is a programming error (``ValueError``), caught by tests, not a line written.
Field values are plain scalars (str, int, float, bool, None); a string is cut to ``MAX_TEXT``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from interlock.runtime.books.record import error_class, usage_of

if TYPE_CHECKING:
    from interlock.runtime.books.record import RequestRecord

MAX_TEXT = 400  # longest string value kept in an audit field (a refused reload's reason, say)

Scalar = str | int | float | bool | None

ACTIONS: Mapping[str, tuple[str, frozenset[str]]] = {
    # a SIGHUP reload: the plan hashes before and after ("to" null when refused), the outcome, and why not
    "reload": ("admin", frozenset({"outcome", "from_plan", "to_plan", "changes", "error"})),
    # API keys: never the secret, only its id and owner
    "key_added": ("admin", frozenset({"key_id", "tenant", "actor"})),
    "key_removed": ("admin", frozenset({"key_id", "tenant", "actor"})),
    "key_changed": ("admin", frozenset({"key_id", "tenant", "actor", "change"})),
    # the credits ledger: a grant, a reset or a manual adjustment (a request's own debit is its request line)
    "credit_change": (
        "admin",
        frozenset({"tenant", "key_id", "actor", "delta", "balance", "unit", "reason"}),
    ),
    # a request refused before it was read: 401 (which route, whether any key was sent, never which), or
    # 403 on an operator route (the valid key's id and tenant, never the key)
    "auth_refused": ("security", frozenset({"method", "path", "key_sent", "status", "key_id", "tenant"})),
}
"""Every action the audit log takes besides requests: its event kind and the fields it may carry
(besides ``time``, ``event`` and ``action``)."""


def action_event(action: str, fields: Mapping[str, Scalar], at: float) -> dict[str, Any]:
    """The line for one action; ``ValueError`` for an unknown action, field or value type."""
    row = ACTIONS.get(action)
    if row is None:
        raise ValueError(f"unknown audit action {action!r}; expected one of {sorted(ACTIONS)}")
    kind, allowed = row
    unknown = fields.keys() - allowed
    if unknown:
        raise ValueError(
            f"audit action {action!r} takes no field(s) {sorted(unknown)}; it takes {sorted(allowed)}"
        )
    event: dict[str, Any] = {"time": at, "event": kind, "action": action}
    for name, value in fields.items():
        if isinstance(value, str):
            value = value if len(value) <= MAX_TEXT else value[: MAX_TEXT - 1] + "…"
        elif not (value is None or isinstance(value, int | float | bool)):
            raise ValueError(f"audit field {name!r} must be a plain scalar, not {type(value).__name__}")
        event[name] = value
    return event


def request_event(record: RequestRecord) -> dict[str, Any]:
    """The line for one finished request: who asked for what, who answered, how it ended. Read from
    the journal's record at the end of the request; nothing from the body, the answer or the headers
    but the request id (already checked plain by the journal)."""
    answered, target, caller = record.answered, record.target, record.caller
    return {
        "time": record.wall,
        "event": "request",
        "request_id": record.id.decode(),
        "key_id": caller.key_id,
        "tenant": caller.tenant,
        "endpoint": record.endpoint,
        "stream": record.stream,
        "alias": target.label[:MAX_TEXT] if target is not None else None,
        "candidate": answered.candidate.id if answered is not None else None,
        "worker": answered.route.worker if answered is not None else None,
        "status": record.status,
        "error_class": error_class(record.error),
        "tokens": usage_of(record),
        "duration_ms": round((time.perf_counter() - record.started) * 1000, 3),
    }
