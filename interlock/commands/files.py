"""Writing the files the commands produce (plans, schemas, generated code)."""

from __future__ import annotations

import os


def write_atomically(path: str, text: str) -> None:
    """Write atomically: readers (a runtime reloading the plan) never see half a file."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)
