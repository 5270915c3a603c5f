"""The files a scan reads: regular files under the given paths, minus folders nobody writes by hand."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

SKIPPED_FOLDERS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        ".nox",
    }
)
"""Version control, installed packages and tool caches, skipped by name."""

ENVIRONMENT_MARKERS = frozenset({"pyvenv.cfg", "conda-meta"})
"""A folder holding one of these is a Python virtual environment (or a conda one), whatever its name."""


def walk(root: str, pruned: Callable[[str], bool]) -> Iterator[str]:
    """Every regular file under ``root`` (or ``root`` itself), sorted, symlinks not followed.

    ``pruned(folder)`` is asked about each folder below ``root``; True skips its whole subtree.
    """
    if not os.path.isdir(root):
        yield root
        return
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue  # unreadable or vanished: nothing to scan there
        names = {entry.name for entry in entries}
        if folder != root and names & ENVIRONMENT_MARKERS:
            continue
        subfolders = []
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in SKIPPED_FOLDERS and not pruned(entry.path):
                    subfolders.append(entry.path)
            elif entry.is_file(follow_symlinks=False):
                yield entry.path
        stack.extend(reversed(subfolders))
