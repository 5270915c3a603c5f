"""`interlock status` against a running gateway: tables, JSON, and exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion

from interlock.cli import main
from tests.runtime.ops.ui.conftest import Fleet, _fleet
from tests.waiting import wait_until

MASKS = (
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
    (re.compile(r"sha256:[0-9a-f]{64}"), "sha256:HASH"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"), "TIME"),
    (re.compile(r"\((in )?\d+(\.\d+)? (s|min|h|d)( ago)?\)"), "(AGE)"),
)


def masked(text: str) -> str:
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    yield from _fleet(tmp_path_factory.mktemp("status-fleet"))


def loaded(fleet: Fleet) -> dict[str, Any]:
    """Each worker's loaded models as the gateway knows them now (None: not known)."""
    workers = fleet.served.http.get("/v1/metadata").json()["workers"]
    return {label: facts["loaded"] for label, facts in workers.items()}


def status(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["status", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_all_servable_exits_0(
    fleet: Fleet, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    wait_until(
        lambda: fleet.served.health()["providers"]["cloud"]["endpoints"][0]["last_probe_at"], 60, "a probe"
    )
    code, out, err = status(capsys, "--url", fleet.served.url)
    assert (code, err) == (0, "")
    assert masked(out) == snapshot


def test_an_alias_without_a_healthy_candidate_exits_1(
    fleet: Fleet, capsys: pytest.CaptureFixture[str], snapshot: SnapshotAssertion
) -> None:
    fleet.gpu_b.refuse_connections()
    assert fleet.ask("team/chat").headers["x-interlock-resolved"] == "box-a/llama3.2:3b"
    fleet.cloud.refuse_connections()
    wait_until(lambda: not fleet.served.health()["providers"]["cloud"]["healthy"], 60, "the cloud to be down")
    wait_until(lambda: loaded(fleet)["box-a@gpu-a"], 60, "gpu-a's loaded model")
    wait_until(lambda: loaded(fleet)["box-b@gpu-b"] is None, 60, "gpu-b's facts to be unknown")

    code, out, err = status(capsys, "--url", fleet.served.url)
    assert (code, err) == (1, "")
    assert masked(out) == snapshot

    code, out, _ = status(capsys, "--url", fleet.served.url, "--format", "json")
    assert code == 1
    report = json.loads(out)
    assert report["unservable"] == ["team/vision"]
    chat = next(a for a in report["aliases"] if a["name"] == "team/chat")
    assert (chat["answers_with"], chat["position"]) == ("box-a/llama3.2:3b", 2)
    assert chat["candidates"][0]["circuit_open_until"] is not None
    assert chat["candidates"][0]["last_error_class"] == "connect"
    fleet.cloud.accept_connections()


def test_an_unreachable_gateway_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that was just free: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, out, err = status(capsys, "--url", f"http://127.0.0.1:{port}")
    assert (code, out) == (2, "")
    assert err.startswith(f"interlock status: cannot reach http://127.0.0.1:{port}: ")
