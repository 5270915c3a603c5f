"""`serve --state-url`: only a shared store is taken, and a wrong one stops the start with a clear line."""

from __future__ import annotations

import pytest

from interlock.cli import main
from tests.conftest import ROOT

CONFIG = str(ROOT / "tests" / "fixtures" / "plans" / "preset-rtx4090.yaml")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "unix:/tmp/slots.sock",
            "interlock serve: --state-url: 'unix:' is not a shared store; use redis:// or rediss:// "
            "(--workers N shares limits across its processes by itself)\n",
        ),
        (
            "memcached://127.0.0.1:11211",
            "interlock serve: --state-url: 'memcached:' is not a shared store; use redis:// or rediss:// "
            "(--workers N shares limits across its processes by itself)\n",
        ),
    ],
)
def test_a_state_url_that_is_not_a_shared_store_is_refused(
    url: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", CONFIG, "--state-url", url]) == 2
    assert capsys.readouterr().err == message


def test_the_state_url_can_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("INTERLOCK_STATE_URL", "unix:/tmp/slots.sock")
    assert main(["serve", CONFIG]) == 2
    assert capsys.readouterr().err.startswith("interlock serve: --state-url: 'unix:' is not a shared store")
