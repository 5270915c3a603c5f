"""Writing the files the commands produce (plans, schemas, generated code): see ``interlock.fileio``."""

from __future__ import annotations

from interlock.fileio import write_atomically

__all__ = ["write_atomically"]
