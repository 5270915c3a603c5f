"""The composition root stays one: ``Gateway`` holds a dozen attributes at most (it dispatches; its parts
are ``parts.build_parts``'s), and what runs beside the requests starts in order, stops in reverse and
leaves nothing running, also after a start that failed.

An attribute is an instance attribute set on ``Gateway``: a name in its ``__slots__`` or assigned as
``self.<name>`` in one of its methods (properties and methods are not attributes).

    python tests/runtime/app/test_composition.py    # the attributes Gateway sets, and how many
"""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.base.lifespan import Lifespan, Step
from interlock.runtime.features import Settings
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.usage.base import UsageStoreError
from interlock.runtime.usage.ledger import Ledger
from interlock.runtime.usage.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[3]
APP = ROOT / "interlock" / "runtime" / "app" / "gateway.py"
MOST_ATTRIBUTES = 12


def gateway_attributes(source: str) -> tuple[set[str], set[str]]:
    """The names ``Gateway`` assigns as ``self.<name>``, and the names in its ``__slots__``."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Gateway")
    assigned: set[str] = set()
    slots: set[str] = set()
    for node in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id == "__slots__" and isinstance(node, ast.Assign):
                slots |= {
                    e.value
                    for e in ast.walk(node.value)
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)
                }
            for part in ast.walk(target):
                if (
                    isinstance(part, ast.Attribute)
                    and isinstance(part.value, ast.Name)
                    and part.value.id == "self"
                ):
                    assigned.add(part.attr)
    return assigned, slots


def test_the_gateway_holds_at_most_a_dozen_attributes() -> None:
    assigned, slots = gateway_attributes(APP.read_text(encoding="utf-8"))
    assert assigned <= slots, "every attribute is a slot: an attribute set elsewhere would raise"
    assert len(assigned | slots) <= MOST_ATTRIBUTES, sorted(assigned | slots)


def test_the_counter_sees_slots_and_assignments_in_any_method() -> None:
    source = (
        "class Gateway:\n"
        "    __slots__ = ('a', 'b')\n"
        "    def __init__(self):\n        self.a = 1\n        self.c: int = 2\n"
        "    def later(self):\n        self.d += 1\n        other.e = 3\n"
        "    @property\n    def f(self):\n        return self.a\n"
    )
    assert gateway_attributes(source) == ({"a", "c", "d"}, {"a", "b"})


def test_no_test_or_bench_reaches_into_the_gateways_private_attributes() -> None:
    """Tests and benches use the factory's ``Parts`` (``gateway.parts``) and the public seams (the HTTP
    API, ``/metrics``, the ops routes), never ``gateway._routes`` and the like."""
    private = re.compile(r"\b(?:gateway|gw|app)\._[a-z]\w*")
    reaching = [
        f"{path.relative_to(ROOT)}: {found.group()}"
        for folder in ("tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != Path(__file__).resolve()
        and not any(part.startswith(".") for part in path.relative_to(ROOT).parts)  # bench/.litellm-venv
        for found in private.finditer(path.read_text(encoding="utf-8"))
    ]
    assert reaching == []


def steps(log: list[str], fails: str | None = None) -> list[Step]:
    def step(name: str) -> Step:
        async def start() -> None:
            if name == fails:
                raise RuntimeError(f"{name} cannot start")
            log.append(f"start {name}")

        async def stop() -> None:
            log.append(f"stop {name}")

        return Step(name, start, stop)

    return [step(name) for name in ("a", "b", "c")]


def test_the_lifespan_starts_in_order_and_stops_in_reverse_once() -> None:
    log: list[str] = []
    lifespan = Lifespan(steps(log))

    async def scenario() -> None:
        await lifespan.stop()  # nothing started: nothing to stop
        await lifespan.start()
        await lifespan.stop()
        await lifespan.stop()  # a second stop stops nothing again

    asyncio.run(scenario())
    assert log == ["start a", "start b", "start c", "stop c", "stop b", "stop a"]


def test_a_failed_start_stops_what_had_started_and_raises_what_failed() -> None:
    log: list[str] = []
    lifespan = Lifespan(steps(log, fails="b"))

    async def scenario() -> None:
        with pytest.raises(RuntimeError, match=r"^b cannot start$"):
            await lifespan.start()
        await lifespan.stop()  # unwound already: nothing left to stop

    asyncio.run(scenario())
    assert log == ["start a", "stop a"]


def others() -> set[asyncio.Task[Any]]:
    return asyncio.all_tasks() - {asyncio.current_task()}


def test_a_gateway_stopped_leaves_no_task_running(tmp_path: Path, basic_plan: RuntimePlan) -> None:
    """Probes on (against a closed port), the speeds file kept, the audit writer and the usage ledger's
    writer running: after shutdown, no task of the gateway's is left."""
    settings = Settings(audit_log=str(tmp_path / "audit.jsonl"))  # the audit log's row: plugged in
    gateway = build_gateway(basic_plan, state_dir=str(tmp_path), settings=settings)

    async def scenario() -> tuple[int, set[str]]:
        await gateway.startup()
        running = len(others())
        await gateway.shutdown()
        return running, {task.get_name() for task in others()}

    running, left = asyncio.run(scenario())
    assert running >= 4  # the loops, the speeds file's timer, the ledger's and the audit log's writers
    assert left == set()


def test_a_gateway_whose_start_failed_leaves_no_task_running(tmp_path: Path, basic_plan: RuntimePlan) -> None:
    """The audit log (a feature, started with the features) starts before the usage ledger; a ledger
    that cannot be opened fails the start, and the audit log's writer, already started, is stopped
    again."""
    (tmp_path / "file").write_text("")
    ledger = Ledger(SqliteStore(str(tmp_path / "file" / "usage.db")))
    settings = Settings(audit_log=str(tmp_path / "audit.jsonl"))
    gateway = build_gateway(basic_plan, probes=False, ledger=ledger, settings=settings)

    async def scenario() -> set[str]:
        with pytest.raises(UsageStoreError, match=r": cannot open the usage ledger: File exists$"):
            await gateway.startup()
        return {task.get_name() for task in others()}

    assert asyncio.run(scenario()) == set()


if __name__ == "__main__":
    assigned, slots = gateway_attributes(APP.read_text(encoding="utf-8"))
    print("Gateway's attributes:", " ".join(sorted(assigned | slots)))
    print(f"{len(assigned | slots)} attribute(s) (at most {MOST_ATTRIBUTES})")
