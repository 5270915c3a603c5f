"""Writing a state file atomically, for the runtime (learned speeds).

The commands' ``commands.files.write_atomically`` checks its target against links and FIFOs with the
compiler's file helpers, which the runtime must not import; this one is for files the runtime owns
(a path from the plan or ``--state-dir``), with the same promise: a reader never sees half a file.
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
