"""``mypyc_attr`` for the classes that the optional mypyc build compiles and that other code subclasses.

The hot modules can be compiled with mypyc (``bench/mypyc_build.sh``, docs/benchmarks.md); a compiled
class refuses subclasses written in plain Python unless it is marked
``@mypyc_attr(allow_interpreted_subclasses=True)``, and the test doubles and benches subclass a few of
them (``ChatStream``, ``Adapter``, ``Store``, ``MemoryStore``). mypyc reads the decorator from
``mypy_extensions`` when it type-checks; at run time it is a no-op, so the plain install needs no
``mypy_extensions``. (What else compiles differently is checked on the plain source:
tests/runtime/base/test_mypyc_marks.py.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr
else:

    def mypyc_attr(*_names, **_flags):
        """The decorator with no effect (interpreted code has nothing to mark)."""
        return lambda cls: cls


__all__ = ["mypyc_attr"]
