"""No function in ``interlock/`` is longer than 80 lines, outside tables and generated code (issue 41).

A function's length is ``end_lineno - lineno + 1`` of its ``def`` node (decorators not counted, its
docstring and nested functions counted), as the count in issue 41 measures it. A long function is split by
meaning (named helpers, small dataclasses, tables), not cut at line 80.

module moved to another room keeps its entry.

    python tests/test_function_length.py    # every function over the limit, longest first
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "interlock"
LIMIT = 80

# Tables and generated code, which may be long: one row per function, with the reason it may.
ALLOWED: dict[str, str] = {}

# Long functions that others are splitting in this wave (issue 41): this list only shrinks. An entry
# whose function is no longer long fails the test, so that it is taken out when its function lands.
PENDING: dict[str, str] = {}


def lengths(root: Path = PACKAGE) -> dict[str, int]:
    """Every function and method under ``root``, by ``file::qualified.name``, with its length in lines."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str, file: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    assert child.end_lineno is not None
                    key = f"{file}::{name}"
                    found[key] = max(found.get(key, 0), child.end_lineno - child.lineno + 1)
                visit(child, name + ".", file)
            else:
                visit(child, prefix, file)

    for path in sorted(root.rglob("*.py")):
        visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), "", path.name)
    return found


def long_functions() -> dict[str, int]:
    return {key: n for key, n in lengths().items() if n > LIMIT}


def test_no_function_over_the_limit() -> None:
    over = {key: n for key, n in long_functions().items() if key not in ALLOWED and key not in PENDING}
    assert not over, f"functions over {LIMIT} lines (split them by meaning): {over}"


def test_allow_lists_hold_only_long_functions() -> None:
    long = long_functions()
    stale = sorted(key for key in ALLOWED.keys() | PENDING.keys() if key not in long)
    assert not stale, f"no longer over {LIMIT} lines (or gone): take them out of the allow-list: {stale}"


def test_every_allowed_entry_says_why() -> None:
    assert all(reason.strip() for reason in (*ALLOWED.values(), *PENDING.values()))


def test_the_count_sees_methods_and_nested_functions(tmp_path: Path) -> None:
    """The walk finds methods and nested functions and measures them as issue 41's count does."""
    body = "\n".join(f"        x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "mod.py").write_text(
        f"class A:\n    def long(self) -> None:\n{body}\n\n"
        "def outer() -> None:\n    def inner() -> None:\n        pass\n"
    )
    assert lengths(tmp_path) == {"mod.py::A.long": LIMIT + 1, "mod.py::outer": 3, "mod.py::outer.inner": 2}


if __name__ == "__main__":
    for key, n in sorted(long_functions().items(), key=lambda item: -item[1]):
        print(n, key, "(allowed)" if key in ALLOWED else "(pending)" if key in PENDING else "")
