"""The runtime is rooms, and the tests mirror the package.

A room is a folder of ``interlock/runtime/``; a module loose at its root is a room of one file that
nobody named. The package root holds only the command line (``cli.py``, ``__main__.py``): what the
compiler, the runtime and the diff share is ``interlock/common/``. Each room of the runtime has its
tests in ``tests/runtime/<room>/``, so a reader finds a room's tests where its code is.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "interlock"
RUNTIME = PACKAGE / "runtime"
TESTS = ROOT / "tests" / "runtime"


def rooms() -> list[str]:
    return sorted(p.name for p in RUNTIME.iterdir() if (p / "__init__.py").is_file())


def test_no_module_is_loose_at_the_runtime_root() -> None:
    loose = {p.name for p in RUNTIME.glob("*.py")} - {"__init__.py"}
    assert loose == set()


def test_the_package_root_holds_only_the_command_line() -> None:
    assert {p.name for p in PACKAGE.glob("*.py")} == {"__init__.py", "__main__.py", "cli.py"}


def test_every_room_of_the_runtime_has_its_test_folder() -> None:
    missing = [room for room in rooms() if not any((TESTS / room).glob("test_*.py"))]
    assert missing == [], f"rooms without tests/runtime/<room>/test_*.py: {missing}"


def test_no_test_of_a_room_is_left_at_the_runtime_tests_root() -> None:
    """At ``tests/runtime/``'s root only what checks the runtime as a whole: its layers, its rooms and
    what it must never import."""
    left = {p.name for p in TESTS.glob("test_*.py")}
    assert left == {"test_boundaries.py", "test_layers.py", "test_rooms.py"}


def test_the_tests_root_holds_only_what_checks_the_whole_package() -> None:
    """The compiler's tests are in ``tests/compiler/``, the shared modules' in ``tests/common/``, each
    command group's, ``connect``'s, ``deploy``'s and ``discover``'s in their folders."""
    left = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    assert left == {"test_docs.py", "test_function_length.py", "test_wheel.py"}
