"""A silent prefill is not silence: a streamed answer started before its first content when the walk
takes long, then kept alive in its caller's format until the content comes.

Why: the gateway holds a stream's head until a candidate's first content (so that it can still fall
back), and a long prefill on a local server, or a fallback walk, can take minutes. Clients give up on
a silent connection (Claude Code shows a stall after about 20 s and resends the whole prompt at 300 s),
so once the walk has been silent for ``server.stream_keepalive``, the head goes out (200, the format's
stream headers, the gateway's own headers: not yet the one naming who answers) and, every interval
after, the format's keepalive (``StreamRender.keepalive``: an SSE comment, Anthropic's ``ping``, an
empty NDJSON line), until the first content. The walk stays unseen: a candidate that fails before its
content still falls back; only a failure of the whole walk reaches the caller, as the format's in-band
error event.

Cost on the request path: one timer (``loop.call_later``) armed and cancelled; a task runs only for a
stream whose first content takes longer than the interval.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from interlock.runtime.base.asgi import Header, Send
from interlock.runtime.wire.base import StreamRender


class Keepalive:
    """One stream's early head and its keepalives; ``stop`` before anything else writes to ``send``."""

    __slots__ = ("_handle", "_head", "_interval", "_render", "_send", "_stopped", "_task", "started")

    def __init__(
        self, send: Send, interval_s: float, head: Callable[[], tuple[StreamRender, list[Header]]]
    ) -> None:
        self._send = send
        self._interval = interval_s
        self._head = head  # the render (its headers, keepalive and error event) and the gateway's headers
        self._render: StreamRender | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopped: asyncio.Event | None = None
        self.started = False  # the head went out: the answer is a 200 stream from now on
        self._handle: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(
            interval_s, self._due
        )

    def _due(self) -> None:
        self._handle = None
        self._stopped = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._beat())

    async def _beat(self) -> None:
        stopped = self._stopped
        assert stopped is not None
        if stopped.is_set():  # the content came between the timer and this task's turn: no early head
            return
        render, headers = self._head()
        self._render = render
        await self._send({"type": "http.response.start", "status": 200, "headers": headers})
        self.started = True
        while not stopped.is_set():
            await self._send({"type": "http.response.body", "body": render.keepalive(), "more_body": True})
            try:
                await asyncio.wait_for(stopped.wait(), self._interval)
            except TimeoutError:
                continue

    async def stop(self) -> bool:
        """No more keepalives (the one being written ends first); whether the head went out."""
        handle = self._handle
        if handle is not None:
            self._handle = None
            handle.cancel()
            return False
        task, stopped = self._task, self._stopped
        if task is not None and stopped is not None:
            stopped.set()
            await task
        return self.started

    def close(self) -> None:
        """Cancel whatever is left (a request cancelled mid-walk: the client went, the server stops)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def error(self, message: str) -> bytes:
        """The format's in-band error event, for a walk that failed after the head went out."""
        render = self._render
        assert render is not None
        return render.error(message)
