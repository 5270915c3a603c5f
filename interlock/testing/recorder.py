"""A recording reverse proxy on loopback: what a real client sends, kept as a replayable fixture.

``python -m interlock.testing.recorder --target http://127.0.0.1:8080 --out requests.jsonl --port 0``
prints its URL first, then forwards every request to ``target`` unchanged (bodies and streams relayed
as they come) and appends one JSON line per JSON request to ``out``: the shape of the files in
``tests/fixtures/clients/`` (``client``, ``method``, ``path``, ``query``, ``headers``, ``body``,
``interlock_answered``). Credentials never reach the file: the headers in ``SECRET_HEADERS`` are kept
by name with their value replaced.

It sits between a client and the gateway, so it records what the client sends, not what the gateway
makes of it; the gateway's own logs never hold bodies.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from aiohttp import web

SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "cookie", "proxy-authorization"})
REMOVED = "<removed>"
# hop-by-hop headers (RFC 9110 7.6.1) and the ones aiohttp sets itself; bodies are relayed as they are
# (compressed ones too: the client session does not decompress)
_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "host",
        "content-length",
    }
)
ANSWER_START = 600  # how much of the gateway's answer a record keeps


def scrubbed(headers: Any) -> dict[str, str]:
    """The request's end-to-end headers, secret values replaced (one entry per name, as the fixtures
    hold them); ``Host`` and ``Content-Length`` say nothing about the client, so they are left out."""
    kept = {str(k): v for k, v in headers.items() if k.lower() not in _HOP}
    return {k: REMOVED if k.lower() in SECRET_HEADERS else v for k, v in kept.items()}


def record(client: str, request: web.Request, body: bytes, status: int, answer: bytes) -> dict[str, Any]:
    """One fixture record of ``request`` (its JSON ``body``) and the start of what came back."""
    return {
        "client": client,
        "method": request.method,
        "path": request.path,
        "query": request.query_string,
        "headers": scrubbed(request.headers),
        "body": orjson.loads(body),
        "interlock_answered": {
            "status": status,
            "body_start": answer[:ANSWER_START].decode(errors="replace"),
        },
    }


class Recorder:
    """The proxy's handler: forwards to ``target``, appends a record per JSON request to ``out``."""

    def __init__(self, target: str, out: Path, client: str) -> None:
        self.target = target.rstrip("/")
        self.out = out
        self.client = client
        self._session: aiohttp.ClientSession | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self._session is None:
            # no deadline of its own: a stream lasts as long as the client and the gateway keep it
            timeout = aiohttp.ClientTimeout(total=None)
            self._session = aiohttp.ClientSession(auto_decompress=False, timeout=timeout)
        body = await request.read()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _HOP]  # repeats kept
        upstream = await self._session.request(
            request.method, self.target + request.path_qs, headers=headers, data=body or None
        )
        async with upstream:
            answer = web.StreamResponse(status=upstream.status)
            for name, value in upstream.headers.items():
                if name.lower() not in _HOP:
                    answer.headers.add(name, value)
            await answer.prepare(request)
            start = b""
            async for chunk in upstream.content.iter_any():
                if len(start) < ANSWER_START:
                    start += chunk
                await answer.write(chunk)
        if _is_json(body):  # on disk before the answer ends, so a client that has it finds it
            line = orjson.dumps(record(self.client, request, body, upstream.status, start))
            with self.out.open("ab") as file:
                file.write(line + b"\n")
        await answer.write_eof()
        return answer

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


def _is_json(body: bytes) -> bool:
    if body[:1] not in (b"{", b"["):
        return False
    try:
        orjson.loads(body)
    except orjson.JSONDecodeError:
        return False
    return True


async def serve(target: str, out: Path, client: str, port: int) -> None:
    recorder = Recorder(target, out, client)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    print(f"http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await recorder.close()
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m interlock.testing.recorder", description=__doc__)
    parser.add_argument("--target", required=True, help="where requests go, e.g. the gateway's URL")
    parser.add_argument("--out", required=True, type=Path, help="the JSON-lines file records go to")
    parser.add_argument("--client", default="client", help="the `client` field of each record")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.target, args.out, args.client, args.port))


if __name__ == "__main__":
    main()
