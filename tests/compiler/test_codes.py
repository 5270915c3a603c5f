"""Completeness: every code is raised by a fixture, documented, and emitted somewhere; every pass runs."""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

from interlock.compiler import passes
from interlock.compiler.codes import CODES
from tests.conftest import FIXTURES, ROOT, compile_fixture

DOC = ROOT / "docs" / "diagnostics.md"
SCAN_CODES = {code for code in CODES if code.startswith("IL6")}


@pytest.mark.usefixtures("at_root")
def test_every_code_has_a_fixture_that_raises_it() -> None:
    raised: dict[str, set[str]] = {}
    for path in FIXTURES.glob("*/IL*.yaml"):
        raised.setdefault(path.stem.split("-", 1)[0], set()).update(
            d.code for d in compile_fixture(path).sink.items
        )
    missing = [code for code in CODES if code not in raised.get(code, set()) and code not in SCAN_CODES]
    assert missing == []


def test_every_scan_code_is_raised_by_the_scan_tests() -> None:
    """IL6xx come from `lint --scan`, not from a config alone; the scan tests raise each of them."""
    scan_tests = (ROOT / "tests" / "prflow" / "test_scan.py").read_text()
    assert [code for code in SCAN_CODES if code not in scan_tests] == []


def test_every_code_is_documented_in_the_readme_table() -> None:
    rows = re.findall(
        r"^\| `(IL\d{3})` \| `([a-z0-9-]+)` \| (error|warning) \| (.+?) \|$", DOC.read_text(), re.M
    )
    documented = {code: (name, level, meaning) for code, name, level, meaning in rows}
    expected = {code: (info.name, info.level, info.summary) for code, info in CODES.items()}
    assert documented == expected


def test_every_code_is_emitted_by_the_compiler_source() -> None:
    source = "\n".join(
        path.read_text()
        for package in ("compiler", "scan")
        for path in (ROOT / "interlock" / package).rglob("*.py")
        if path.name != "codes.py"
    )
    assert [code for code in CODES if f'"{code}"' not in source] == []


def test_codes_are_well_formed_and_stable() -> None:
    assert CODES  # an empty table would let the loop below prove nothing
    for code, info in CODES.items():
        assert re.fullmatch(r"IL\d{3}", code)
        assert info.code == code
        assert info.level in ("error", "warning")
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", info.name)
    assert len({info.name for info in CODES.values()}) == len(CODES)


def test_every_pass_module_is_registered_in_order() -> None:
    modules = {m.name for m in pkgutil.iter_modules(passes.__path__)}
    registered = [run.__module__.rsplit(".", 1)[-1] for run in passes.PASSES]
    assert sorted(registered) == sorted(modules)
    for name in modules:  # one pass a module, named like it
        module = importlib.import_module(f"interlock.compiler.passes.{name}")
        assert getattr(module, name) in passes.PASSES
    assert registered[0] == "shape"
    assert registered.index("aliases") < registered.index("capabilities")
