"""Writing files atomically: shared by the commands (plans, schemas, code) and the runtime (state files).

A neutral module on purpose: the runtime must not import the compiler or the commands, and both need
one definition of "a reader never sees half a file".
"""

from __future__ import annotations

import contextlib
import os
import threading


def write_atomically(path: str, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it over ``path``.

    The temporary name holds the process and thread ids, so writers of the same file (``serve --workers``)
    never write into each other's temporary file; the last rename wins, whole.
    """
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
