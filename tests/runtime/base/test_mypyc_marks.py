"""What the optional mypyc build (``bench/mypyc_build.sh``, ``runtime/base/mypyc_marks.py``) compiles
differently from the interpreter, checked on the plain source, so the plain suite catches it.

One name bound by two ``except ... as NAME`` clauses of one function: compiled, the name is one
variable typed by its first clause; when that type is a compiled class, an exception caught by a later
clause (``except Exception``) is refused as it is bound (``TypeError: ...UsageRowsRefused object
expected; got ...UsageStoreError``), raised from inside the handler. The ledger's writer then failed every
round without backing off (its failure handler never ran): the compiled ``tests/runtime/usage`` spun
until its timeout."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BUILD = ROOT / "bench" / "mypyc_build.sh"


def compiled_modules() -> list[Path]:
    """The modules ``bench/mypyc_build.sh`` compiles (its ``modules="..."`` list), those that exist."""
    listed = re.search(r'^modules="([^"]*)"', BUILD.read_text(), re.MULTILINE)
    assert listed is not None, 'bench/mypyc_build.sh: no modules="..." list'
    paths = [ROOT / "interlock" / "runtime" / f"{name}.py" for name in listed.group(1).split()]
    return [path for path in paths if path.is_file()]


def rebound_handlers(source: str) -> list[str]:
    """``function: name (types)`` for each name that two except clauses of one function bind to
    different exception types."""
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        bound: dict[str, set[str]] = {}
        for node in ast.walk(function):
            if isinstance(node, ast.ExceptHandler) and node.name is not None:
                caught = ast.unparse(node.type) if node.type is not None else "BaseException"
                bound.setdefault(node.name, set()).add(caught)
        found += [
            f"{function.name}: {name} ({', '.join(sorted(types))})"
            for name, types in bound.items()
            if len(types) > 1
        ]
    return found


def test_the_build_lists_modules_that_exist() -> None:
    assert len(compiled_modules()) >= 40  # the list is read (a renamed room would empty it)


def test_no_compiled_function_binds_one_name_in_except_clauses_of_different_types() -> None:
    found = [
        f"{path.relative_to(ROOT)}::{where}"
        for path in compiled_modules()
        for where in rebound_handlers(path.read_text())
    ]
    assert found == []


def test_the_check_sees_a_name_rebound_by_a_later_clause() -> None:
    source = """
async def commit(store):
    try:
        await store.add()
    except UsageRowsRefused as exc:
        refused(exc)
    except Exception as exc:
        failed(exc)
"""
    assert rebound_handlers(source) == ["commit: exc (Exception, UsageRowsRefused)"]
    apart = source.replace("as exc:\n        refused(exc)", "as no:\n        refused(no)")
    assert rebound_handlers(apart) == []
