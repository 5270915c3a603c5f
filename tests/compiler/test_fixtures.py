"""Golden diagnostics: each broken configuration under tests/fixtures/<pass>/ against its snapshot.

A fixture is named after the code it exists for (``IL101-unknown-provider-kind.yaml``); the test also
checks that the code is really among the diagnostics, so a snapshot cannot silently drift away from it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion

from tests.conftest import FIXTURES, compile_fixture, text_report

BROKEN = sorted(
    path
    for path in FIXTURES.glob("*/*.yaml")
    if path.parent.name not in ("plans", "determinism") and "parts" not in path.parts
)


@pytest.mark.usefixtures("at_root")
@pytest.mark.parametrize("path", BROKEN, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixture_diagnostics(path: Path, snapshot: SnapshotAssertion) -> None:
    ctx = compile_fixture(path)
    assert ctx.plan is None or not ctx.sink.errors
    code = path.stem.split("-", 1)[0]
    if code.startswith("IL"):
        assert code in {d.code for d in ctx.sink.items}
    assert text_report(ctx) == snapshot


@pytest.mark.usefixtures("at_root")
def test_many_errors_are_each_reported_once() -> None:
    ctx = compile_fixture(FIXTURES / "combined" / "many-errors.yaml")
    places = [(d.code, d.span.file, d.span.line, d.span.col) for d in ctx.sink.items]
    assert len(places) == len(set(places)), "a problem was reported twice"
    codes = {d.code for d in ctx.sink.items}
    # Independent problems in one provider, one worker, one section, one alias: all of them show.
    assert {"IL101", "IL103", "IL003", "IL104", "IL203", "IL204", "IL205", "IL208", "IL201", "IL106"} <= codes
    assert {"IL401", "IL008", "IL402", "IL403", "IL304", "IL305", "IL303", "IL301", "IL302", "IL306"} <= codes
    # Derived noise stays out: facts with a misspelt capability do not make `local/x` "lack vision",
    # and the alias with broken chain entries is not also "single candidate".
    assert not [d for d in ctx.sink.items if d.code == "IL308" and d.value == "local/x"]
    assert "IL502" not in codes
