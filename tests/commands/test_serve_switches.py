"""`serve` with a debugging switch (docs/operations.md) that names no row of its table stops before it
serves, with one line: it printed `interlock serving ...` and then a traceback."""

from __future__ import annotations

import pytest

from interlock.cli import main
from tests.conftest import ROOT

CONFIG = str(ROOT / "tests" / "fixtures" / "plans" / "preset-rtx4090.yaml")


@pytest.mark.parametrize(
    ("variable", "message"),
    [
        ("INTERLOCK_TRANSPORT", "INTERLOCK_TRANSPORT='htpx' is not one of own, httpx"),
        ("INTERLOCK_SERVER", "INTERLOCK_SERVER='htpx' is not one of own, uvicorn"),
    ],
)
def test_a_mistyped_switch_stops_the_start_with_one_line(
    variable: str, message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, "htpx")
    assert main(["serve", CONFIG, "--port", "0"]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"interlock serve: {message}\n"
    assert "interlock serving" not in captured.out
