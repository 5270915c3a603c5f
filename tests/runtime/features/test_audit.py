"""The audit log: a bounded queue that never blocks, one writer, sinks by table, metadata only."""

from __future__ import annotations

import asyncio
import functools
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.books.record import Answered, RequestRecord
from interlock.runtime.features.audit import ACTIONS, SINKS, AuditLog, Sink, SinkError, families, open_sink
from interlock.runtime.features.audit.sinks import JsonLinesFile
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.state.memory import MemorySlots
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]


class GatedSink(Sink):
    """A sink whose writes wait for ``gate``: a disk or database that has stalled."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.batches: list[list[dict[str, Any]]] = []
        self.closed = False

    @property
    def describe(self) -> str:
        return "gated"

    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        self.entered.set()
        await self.gate.wait()
        self.batches.append(list(events))

    async def close(self) -> None:
        self.closed = True


class BrokenSink(GatedSink):
    async def write(self, events: Sequence[dict[str, Any]]) -> None:
        raise OSError(28, "No space left on device")


def sample(audit: AuditLog, plan: RuntimePlan, name: str, **labels: str) -> float:
    seat = functools.partial(families, audit)  # the row's seat (``features.audit.plugged``)
    metrics = Metrics(StateView(lambda: plan, HealthBook(plan.health), MemorySlots(), audit=seat))
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            if s.name == name and s.labels == labels:
                return float(s.value)
    raise AssertionError(f"{name} {labels} not exposed")


def test_a_full_queue_drops_and_counts_and_never_blocks(basic_plan: RuntimePlan) -> None:
    async def scenario() -> tuple[GatedSink, AuditLog]:
        sink = GatedSink()
        audit = AuditLog(sink, capacity=3, linger_s=0)
        audit.start()
        audit.action("key_added", key_id="k0", tenant="t")
        await sink.entered.wait()  # the writer holds event k0 and is stuck in the sink
        for n in range(1, 8):  # not awaited: the producers' side is synchronous
            audit.action("key_added", key_id=f"k{n}", tenant="t")
        assert len(audit.queue) == 3
        assert audit.dropped["queue_full"] == 4
        assert sample(audit, basic_plan, "interlock_audit_dropped_total", reason="queue_full") == 4
        assert sample(audit, basic_plan, "interlock_audit_queued") == 3
        sink.gate.set()
        await audit.close()
        return sink, audit

    sink, audit = asyncio.run(scenario())
    written = [e["key_id"] for batch in sink.batches for e in batch]
    assert written == ["k0", "k1", "k2", "k3"]  # in order; the ones that found the queue full are gone
    assert (audit.written, audit.dropped) == (4, {"queue_full": 4, "sink_error": 0, "closed": 0})
    assert sink.closed
    assert sample(audit, basic_plan, "interlock_audit_written_total") == 4


def test_a_failing_sink_is_counted_and_the_writer_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> AuditLog:
        audit = AuditLog(BrokenSink(), batch=2)
        audit.start()
        for n in range(5):
            audit.action("key_removed", key_id=f"k{n}")
        await audit.close()
        audit.action("key_removed", key_id="late")  # after close: nothing would write it
        return audit

    audit = asyncio.run(scenario())
    assert (audit.written, audit.dropped) == (0, {"queue_full": 0, "sink_error": 5, "closed": 1})
    assert "No space left on device" in caplog.text


def test_admin_events_take_only_their_table_row() -> None:
    audit = AuditLog(GatedSink())
    with pytest.raises(ValueError, match=r"^unknown audit action 'key_stolen'; expected one of \["):
        audit.action("key_stolen", key_id="k")
    with pytest.raises(
        ValueError, match=r"^audit action 'key_added' takes no field\(s\) \['secret'\]; it takes"
    ):
        audit.action("key_added", key_id="k", secret="sk-nope")
    with pytest.raises(ValueError, match=r"^audit field 'change' must be a plain scalar, not dict$"):
        audit.action("key_changed", key_id="k", change={"messages": ["hi"]})  # type: ignore[arg-type]
    audit.action("reload", outcome="refused", error="x" * 1000)
    assert len(audit.queue[0]["error"]) == 400
    assert list(audit.queue) == [audit.queue[0]]


def test_the_request_event_is_metadata_read_from_the_record(basic_plan: RuntimePlan, tmp_path: Path) -> None:
    alias = next(name for name, a in basic_plan.aliases.items() if len(a.candidates) > 1)
    target = basic_plan.aliases[alias]
    record = RequestRecord("chat", b"req-9")
    record.target, record.status = target, 200
    result = {
        "choices": [{"message": {"content": "SECRET ANSWER"}}],
        "usage": {"prompt_tokens": 3, "total_tokens": 5},
    }
    record.answered = Answered(target.candidates[1], target.candidates[1].routes[0], result, 0.01, 0.0)
    path = tmp_path / "audit.jsonl"

    async def scenario() -> None:
        audit = AuditLog(open_sink(str(path)), wall=lambda: 1764550000.25)
        audit.start()
        audit.request(record)  # the row's ``finish`` (``features.audit.plugged``), after the journal's
        audit.action(
            "credit_change", tenant="team-a", delta=-1000, balance=4000, unit="tokens", reason="debit"
        )
        await audit.close()

    asyncio.run(scenario())
    request, credit = (orjson.loads(line) for line in path.read_bytes().splitlines())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", request.pop("time"))
    assert request.pop("duration_ms") >= 0
    assert request == {
        "event": "request",
        "request_id": "req-9",
        "key_id": None,
        "tenant": None,
        "endpoint": "chat",
        "stream": False,
        "alias": alias,
        "candidate": target.candidates[1].id,
        "worker": target.candidates[1].routes[0].worker,
        "status": 200,
        "error_class": None,
        "tokens": {"prompt_tokens": 3, "total_tokens": 5},
    }
    assert credit == {
        "time": "2025-12-01T00:46:40.250Z",
        "event": "admin",
        "action": "credit_change",
        "tenant": "team-a",
        "delta": -1000,
        "balance": 4000,
        "unit": "tokens",
        "reason": "debit",
    }
    assert b"SECRET ANSWER" not in path.read_bytes()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_sinks_are_chosen_by_table_and_bad_targets_are_refused(tmp_path: Path) -> None:
    assert set(SINKS) == {"file"}
    assert isinstance(open_sink(f"file:{tmp_path / 'a.jsonl'}"), JsonLinesFile)
    assert isinstance(open_sink(str(tmp_path / "b.jsonl")), JsonLinesFile)
    with pytest.raises(
        SinkError, match=r"^unknown audit sink 'postgresql://'; expected a file path or one of \['file'\]$"
    ):
        open_sink("postgresql://db/audit")
    with pytest.raises(SinkError, match=r"^the audit log .* is not a regular file$"):
        open_sink("/dev/null")
    with pytest.raises(
        SinkError, match=r"^cannot open the audit log .*/missing/x.jsonl: No such file or directory$"
    ):
        open_sink(str(tmp_path / "missing" / "x.jsonl"))


def test_every_admin_action_and_audit_field_is_documented() -> None:
    text = (ROOT / "docs" / "observability.md").read_text()
    assert ACTIONS  # an empty table would let the loop below prove nothing
    for action, (_, fields) in ACTIONS.items():
        assert f"`{action}`" in text, action
        for name in fields:
            assert f"`{name}`" in text, (action, name)


def test_a_reload_says_which_keys_and_budgets_changed_never_their_secrets() -> None:
    from interlock.runtime.features.audit.keys import access_changes
    from interlock.schema.plan import PlanAccess, PlanKey, PlanLimits, PlanTenant

    def limits(**changes: Any) -> PlanLimits:
        return PlanLimits(allowed=None, denied=[], **changes)

    def key(key_id: str, tenant: str, **changes: Any) -> PlanKey:
        fields: dict[str, Any] = {"key_env": f"{key_id.upper()}_KEY", "hash": None, "limits": limits()}
        fields.update(changes)
        return PlanKey(id=key_id, tenant=tenant, **{"description": "", **fields})

    tenants = {n: PlanTenant(name=n, description="", limits=limits()) for n in ("a", "b")}
    old = PlanAccess(
        tenants=tenants,
        keys={"gone": key("gone", "a"), "ci": key("ci", "a"), "same": key("same", "b")},
    )
    new = PlanAccess(
        tenants={**tenants, "b": PlanTenant(name="b", description="", limits=limits(credits=5000))},
        keys={
            "ci": key(
                "ci",
                "b",
                key_env="OTHER_VAR",
                operator=True,
                limits=limits(requests_per_minute=60, credits=10),
            ),
            "same": key("same", "b", description="edited"),
            "new": key("new", "a"),
        },
    )
    assert list(access_changes(old, new)) == [
        ("key_added", {"key_id": "new", "tenant": "a", "actor": "reload"}),
        ("key_removed", {"key_id": "gone", "tenant": "a", "actor": "reload"}),
        (
            "key_changed",
            {
                "key_id": "ci",
                "tenant": "b",
                "actor": "reload",
                "change": "secret replaced, tenant a -> b, operator granted, requests_per_minute 0 -> 60",
            },
        ),
        (
            "credit_change",
            {
                "key_id": "ci",
                "tenant": "b",
                "actor": "reload",
                "unit": "tokens",
                "reason": "budget unlimited -> 10 tokens",
            },
        ),
        (
            "credit_change",
            {"tenant": "b", "actor": "reload", "unit": "tokens", "reason": "budget unlimited -> 5000 tokens"},
        ),
    ]
    assert "OTHER_VAR" not in str(list(access_changes(old, new)))


def test_a_write_that_fails_part_way_leaves_no_torn_line(tmp_path: Path) -> None:
    """A real short write: the kernel's file size limit (RLIMIT_FSIZE) stops the batch part way, as a
    full disk does. The file keeps its whole lines only, and the next batch starts on a line of its own."""
    import resource
    import signal

    path = tmp_path / "audit.jsonl"
    sink = JsonLinesFile(str(path))
    first = {"event": "request", "status": 200, "usage": {"completion_tokens": 5}}
    asyncio.run(sink.write([first]))
    size = path.stat().st_size
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 40, hard))
    try:
        with pytest.raises(OSError, match=r"File too large"):
            asyncio.run(sink.write([{**first, "status": 201}, {**first, "status": 202}]))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert path.stat().st_size == size  # the part that was written is cut back off
    asyncio.run(sink.write([{**first, "status": 203}]))
    asyncio.run(sink.close())
    lines = path.read_bytes().splitlines()
    assert [orjson.loads(line)["status"] for line in lines] == [200, 203]


KILLED_WRITER = """
import sys
from interlock.runtime.features.audit.sinks import JsonLinesFile
sink = JsonLinesFile(sys.argv[1])
data = b'{"event":"request","status":200,"pad":"' + b"x" * 1000 + b'"}\\n'
data *= 16384  # 16 MiB a batch: nearly all the time of this loop is inside a write
print("writing", flush=True)
while True:
    sink._append(data)
"""


def test_a_writer_killed_mid_write_leaves_one_torn_line_the_next_batch_steps_over(tmp_path: Path) -> None:
    """A real SIGKILL during a write: the kernel stops a write between pages once a fatal signal is
    pending, so the file ends in a torn line no writer can cut back off. The next writer's batch starts
    on a line of its own: every line but the torn one is whole JSON."""
    import signal
    import subprocess
    import sys

    path = tmp_path / "audit.jsonl"
    for _attempt in range(5):  # the kill may land between two writes: then try again
        path.unlink(missing_ok=True)
        child = subprocess.Popen(
            [sys.executable, "-c", KILLED_WRITER, str(path)], stdout=subprocess.PIPE, env=dict(os.environ)
        )
        assert child.stdout is not None
        assert child.stdout.readline() == b"writing\n"
        wait_until(lambda: path.exists() and path.stat().st_size > 1_000_000, 30, "a write under way")
        child.send_signal(signal.SIGKILL)
        child.wait()
        if not path.read_bytes().endswith(b"\n"):
            break
    else:
        pytest.fail("five kills all landed between two writes")
    sink = JsonLinesFile(str(path))  # the gateway started again
    asyncio.run(sink.write([{"event": "request", "status": 201}]))
    asyncio.run(sink.close())
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    parsed, torn = [], []
    for line in lines[:-1]:
        try:
            parsed.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            torn.append(line)
    assert len(torn) == 1, [t[:60] for t in torn]
    assert torn[0].startswith(b'{"event":"request"')
    assert parsed[-1] == {"event": "request", "status": 201}
    assert lines.index(torn[0]) == len(lines) - 3  # the torn line is the last one before the new batch
