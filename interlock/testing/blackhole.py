"""A loopback address where connecting hangs: the listener never accepts and its queue is full.

Linux drops SYNs to a listener whose accept queue is full, so a client's connect neither succeeds
nor is refused until its own timeout: what a black-holed upstream looks like, without leaving
127.0.0.1. ``with SaturatedListener() as url: ...`` gives ``http://127.0.0.1:<port>``.
"""

from __future__ import annotations

import contextlib
import socket
import time
from types import TracebackType


class SaturatedListener:
    def __init__(self) -> None:
        self._listener: socket.socket | None = None
        self._fillers: list[socket.socket] = []

    def __enter__(self) -> str:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        self._listener = listener
        port = listener.getsockname()[1]
        for _ in range(3):  # fill the accept queue (a backlog of 0 still admits one or two)
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            self._fillers.append(filler)
        time.sleep(0.05)  # let the handshakes that can complete, complete
        return f"http://127.0.0.1:{port}"

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for filler in self._fillers:
            filler.close()
        self._fillers.clear()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
