"""The request journal: request ids, the bounded ring of fallbacks and errors, the access-log line."""

from __future__ import annotations

import io
import re

import orjson

from interlock.runtime.base.errors import AllCandidatesFailed, CandidateOutcome, ModelNotFound
from interlock.runtime.books.journal import Journal
from interlock.runtime.books.record import Answered, RequestRecord
from interlock.runtime.loaded.plan import RuntimePlan


def test_a_plain_caller_id_is_kept_anything_else_replaced() -> None:
    journal = Journal()
    assert journal.request_id([(b"x-request-id", b"trace-7f:01/A+b=c@d")]) == b"trace-7f:01/A+b=c@d"
    for bad in (b"", b"x" * 129, b"has space", b"semi;colon", "é".encode()):
        made = journal.request_id([(b"x-request-id", bad)])
        assert re.fullmatch(rb"[0-9a-f]{24}", made), bad
    first, second = journal.request_id([]), journal.request_id([])
    assert first != second
    assert first[:12] == second[:12]  # one process: one prefix, then a counter


def answered(plan: RuntimePlan, alias: str, position: int) -> tuple[RequestRecord, Answered[dict[str, int]]]:
    target = plan.aliases[alias]
    record = RequestRecord("chat", b"r1")
    record.target = target
    outcomes = tuple(CandidateOutcome(c.id, "connect", called=True) for c in target.candidates[:position])
    done = Answered(
        target.candidates[position], target.candidates[position].routes[0], {}, 0.01, 0.0, outcomes
    )
    record.answered, record.status = done, 200
    return record, done


def test_only_fallbacks_and_failures_enter_the_ring_and_it_stays_bounded(basic_plan: RuntimePlan) -> None:
    alias = next(name for name, a in basic_plan.aliases.items() if len(a.candidates) > 1)
    journal = Journal(size=3)
    first, _ = answered(basic_plan, alias, 0)
    journal.finish(first)
    assert list(journal.events) == []  # the first candidate answered: nothing to show
    fell_back, _ = answered(basic_plan, alias, 1)
    journal.finish(fell_back)
    (event,) = journal.events
    assert (event.kind, event.alias, event.position, event.status) == ("fallback", alias, 2, 200)
    for _ in range(5):
        failed = RequestRecord("chat", b"r2")
        failed.status, failed.error = 404, ModelNotFound("no such model")
        journal.finish(failed)
    assert len(journal.events) == 3
    assert {(e.kind, e.error_class, e.alias) for e in journal.events} == {("error", "model_not_found", "-")}
    assert journal.requests == 7


def test_the_access_log_line_names_every_attempt_and_no_message(basic_plan: RuntimePlan) -> None:
    alias = next(name for name, a in basic_plan.aliases.items() if len(a.candidates) > 1)
    stream = io.BytesIO()
    journal = Journal(access_log=stream)
    record = RequestRecord("chat", b"r3")
    record.target = basic_plan.aliases[alias]
    outcomes = [CandidateOutcome(c.id, "server_error", 502, called=True) for c in record.target.candidates]
    record.status, record.error = 503, AllCandidatesFailed(alias, outcomes)
    journal.finish(record)
    line = orjson.loads(stream.getvalue())
    assert stream.getvalue().endswith(b"}\n")
    assert (line["status"], line["error_class"], line["candidate"]) == (503, "all_candidates_failed", None)
    assert [a["status"] for a in line["attempts"]] == [502] * len(outcomes)
    assert "no candidate" not in stream.getvalue().decode()  # classes, never messages


def test_a_broken_log_stream_turns_the_log_off_and_requests_go_on(basic_plan: RuntimePlan) -> None:
    stream = io.BytesIO()
    journal = Journal(access_log=stream)
    stream.close()
    record = RequestRecord("chat", b"r4")
    record.status = 400
    journal.finish(record)
    journal.finish(record)
    assert journal.access_log is None
    assert journal.requests == 2
