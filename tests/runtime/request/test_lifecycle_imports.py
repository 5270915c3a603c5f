"""The lifecycle is the core a newcomer reads first: it imports at most 11 of interlock's modules at its
top level (issue 41), none of them a feature's; what it names only in annotations stays under
``TYPE_CHECKING``, and nothing is imported lazily on the request path (no import inside a function)."""

from __future__ import annotations

import ast
from pathlib import Path

import interlock.runtime.request.lifecycle as lifecycle

LIMIT = 11


def _tree() -> ast.Module:
    return ast.parse(Path(lifecycle.__file__).read_text(encoding="utf-8"))


def test_the_lifecycle_imports_at_most_eleven_interlock_modules() -> None:
    imported = [
        node.module
        for node in _tree().body
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("interlock.")
    ]
    assert len(imported) <= LIMIT, imported
    assert not [name for name in imported if ".features" in name], imported


def test_the_lifecycle_imports_nothing_inside_a_function() -> None:
    lazy = [
        node.lineno
        for function in ast.walk(_tree())
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]
    assert not lazy, f"imports inside functions at lines {lazy}"
