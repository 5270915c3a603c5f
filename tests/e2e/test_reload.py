"""SIGHUP: a sound plan is swapped in atomically (requests already running finish on theirs); a bad one
is refused, logged and counted, and the old plan keeps serving. Also: several worker processes."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from interlock.testing.fake_server import FakeServer
from interlock.testing.faults import Fault
from tests.e2e.conftest import Fakes
from tests.e2e.harness import Served, compile_to
from tests.waiting import wait_until

FIRST = """\
version: 1
server: {{default_alias: r/one, alias_namespace: r/, direct_models: allow, resolved_header: X-Answered-By}}
providers:
  bravo: {{kind: openai, base_url: "{bravo}/v1", timeouts: {{connect: 1s, first_byte: 60s, total: 60s}}}}
aliases:
  r/one: {{description: one, chain: [bravo/r-one]}}
  r/slow: {{description: slow, chain: [bravo/r-slow]}}
"""
SECOND = """\
version: 1
server: {{default_alias: r/two, alias_namespace: r/, direct_models: deny, resolved_header: X-Answered-By}}
providers:
  bravo: {{kind: openai, base_url: "{bravo}/v1", timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}}}
aliases:
  r/two: {{description: two, chain: [bravo/r-two]}}
"""
HI = [{"role": "user", "content": "hi"}]


def ask(gateway: Served, model: str) -> httpx.Response:
    with httpx.Client(base_url=gateway.url, timeout=60) as http:
        return http.post("/v1/chat/completions", json={"model": model, "messages": HI})


def sent_to(fake: FakeServer, model: str) -> bool:
    return any(isinstance(r.body, dict) and r.body.get("model") == model for r in fake.requests)


def reloaded(gateway: Served, result: str) -> bool:
    last = gateway.health()["plan"]["last_reload"]
    return last is not None and last["result"] == result


@pytest.fixture(scope="module")
def plans(tmp_path_factory: pytest.TempPathFactory, fakes: Fakes) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("plans")
    first = compile_to(folder / "first.yaml", FIRST.format(bravo=fakes.bravo.url), folder / "first.json")
    second = compile_to(folder / "second.yaml", SECOND.format(bravo=fakes.bravo.url), folder / "second.json")
    return first, second


@pytest.fixture
def served(tmp_path: Path, plans: tuple[Path, Path]) -> Iterator[Served]:
    live = tmp_path / "plan.json"
    live.write_bytes(plans[0].read_bytes())
    gateway = Served(live, {}, tmp_path / "serve.log")
    try:
        yield gateway
    finally:
        gateway.stop()


def test_a_bad_plan_is_refused_and_the_old_one_keeps_serving(served: Served) -> None:
    before = served.health()["plan"]["content_hash"]
    first = ask(served, "r/one")
    assert first.headers["x-answered-by"] == "bravo/r-one"  # the plan names the header
    served.plan.write_text('{"format_version": 1, "broken": ')
    served.sighup()
    wait_until(lambda: reloaded(served, "refused"), 60, "the reload to be refused")
    assert served.health()["plan"]["last_reload"]["error"].startswith(
        f"{served.plan}: the plan is not valid JSON"
    )
    answer = ask(served, "r/one")
    assert (answer.status_code, answer.headers["x-interlock-plan"]) == (200, before)
    assert served.metric("interlock_plan_reloads_total", result="refused") == 1
    assert "plan reload refused; still serving " + before in served.log()


def test_a_good_plan_is_swapped_in_while_running_requests_finish_on_theirs(
    served: Served, plans: tuple[Path, Path], fakes: Fakes
) -> None:
    old = served.health()["plan"]["content_hash"]
    gate = threading.Event()  # r-slow's answer is held until the new plan is in (first_byte is 60 s)
    fakes.bravo.set_fault(Fault.hold(gate), model="r-slow", times=1)
    with ThreadPoolExecutor(1) as pool:
        try:
            running = pool.submit(ask, served, "r/slow")
            wait_until(lambda: sent_to(fakes.bravo, "r-slow"), 60, "the slow request to reach the upstream")
            served.plan.write_bytes(plans[1].read_bytes())
            served.sighup()
            wait_until(lambda: reloaded(served, "loaded"), 60, "the new plan to load")
            new = served.health()["plan"]["content_hash"]
            assert new != old
        finally:
            gate.set()
        finished = running.result()
    assert finished.status_code == 200
    assert (finished.headers["x-interlock-plan"], finished.headers["x-interlock-alias"]) == (old, "r/slow")
    two = ask(served, "r/two")
    assert (two.status_code, two.headers["x-interlock-plan"]) == (200, new)
    assert ask(served, "r/one").status_code == 404
    denied = ask(served, "bravo/r-raw")
    assert (denied.status_code, denied.json()["error"]["code"]) == (400, "direct_model_denied")
    assert served.metric("interlock_plan_reloads_total", result="loaded") == 1


def test_several_workers_serve_and_all_reload(tmp_path: Path, plans: tuple[Path, Path]) -> None:
    live = tmp_path / "plan.json"
    live.write_bytes(plans[0].read_bytes())
    gateway = Served(live, {}, tmp_path / "serve.log", "--workers", "2")
    try:
        assert gateway.banner.endswith("2 processes)")
        assert all(ask(gateway, "r/one").status_code == 200 for _ in range(4))
        live.write_bytes(plans[1].read_bytes())
        gateway.sighup()

        def all_reloaded() -> bool:  # a new connection each time: the kernel spreads them over both workers
            return all(httpx.get(f"{gateway.url}/v1/aliases").json()["default"] == "r/two" for _ in range(12))

        wait_until(all_reloaded, 60, "both workers to reload")
    finally:
        gateway.stop()


PROBED = """\
version: 1
server: {{alias_namespace: p/, direct_models: allow}}
providers:
  flaky: {{kind: openai, base_url: "{flaky}/v1", probe: {probe}, timeouts: {{connect: 1s, total: 10s}}}}
  steady: {{kind: openai, base_url: "{steady}/v1", timeouts: {{connect: 1s, total: 10s}}}}
health: {{probe_interval: 2s, probe_timeout: 1500ms, failure_threshold: 1, open_for: 60s}}
aliases:
  p/chat: {{description: flaky first, chain: [flaky/p-one, steady/p-two]}}
"""


def test_a_reload_to_probe_false_and_back_through_sighup(tmp_path: Path) -> None:
    """A provider found down by its probe, then reloaded (SIGHUP, the YAML compiled in a child) with
    ``probe: false``: it is tried again at once (nothing would ever probe it back) and no longer
    probed; reloaded with ``probe: true``, it is probed again and, found down, skipped again."""
    from interlock.testing.fake_openai import FakeOpenAI

    with FakeOpenAI(name="flaky") as flaky, FakeOpenAI(name="steady") as steady:
        config = tmp_path / "interlock.yaml"

        def write(probe: str) -> None:
            config.write_text(PROBED.format(flaky=flaky.url, steady=steady.url, probe=probe))

        def probes(endpoint: str = "flaky") -> float:
            return sum(
                gateway.metric("interlock_probes_total", endpoint=endpoint, result=r)
                for r in ("ok", "connect")
            )

        def down() -> bool:
            return not gateway.health()["providers"]["flaky"]["healthy"]

        def answered_by() -> str:
            return ask(gateway, "p/chat").headers["x-interlock-resolved"]

        write("true")
        gateway = Served(config, {}, tmp_path / "serve.log")
        try:
            assert answered_by() == "flaky/p-one"
            flaky.refuse_connections()
            wait_until(down, 30, "the probe to find it down")
            assert answered_by() == "steady/p-two"  # skipped without a try
            flaky.accept_connections()
            write("false")
            gateway.sighup()
            wait_until(lambda: reloaded(gateway, "loaded"), 60, "the reload")
            seen = probes()
            assert answered_by() == "flaky/p-one"  # what its last probe said no longer holds
            rounds = probes("steady")
            wait_until(lambda: probes("steady") >= rounds + 3, 30, "three more probe rounds")
            assert probes() <= seen + 1  # at most a round under way at the reload: then none
            flaky.refuse_connections()
            write("true")
            gateway.sighup()
            wait_until(lambda: probes() > seen + 1 and down(), 60, "the reload, and a probe to find it down")
            assert answered_by() == "steady/p-two"
        finally:
            gateway.stop()
