"""No reference cycles per request: what a request leaves behind is freed by reference counting alone,
so the cyclic collector finds nothing to free and never pauses a steady stream of traffic to do so.

The gateway runs as ``interlock serve`` runs it (uvicorn, uvloop, the guarded protocol, the real
upstream client) against a fake upstream in a process of its own; a client on a raw socket in a thread
(it allocates no cycles of its own) sends keep-alive requests. With the collector off, ``gc.collect()``
afterwards finds every object that only it could have freed. What counts is what the request path is made
of (objects of interlock's, uvicorn's, aiohttp's and asyncio's classes, and their frames and coroutines):
a cycle per request always holds some (a cancelled task, a record, a protocol cycle, a frame), while an
earlier test's threads, still winding down in this process, may leave plain garbage of their own.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvloop

from interlock.commands.gateway import build_gateway
from interlock.runtime.loaded.plan import load_plan
from interlock.testing.fake_process import FakeProcess
from interlock.testing.faults import Fault
from interlock.testing.in_process import chat_request, read_answer, serving
from tests.runtime.conftest import compile_text

CONFIG = """\
version: 1
server: {{default_alias: t/chat, alias_namespace: t/}}
providers:
  cloud: {{kind: openai, base_url: "{url}", api_key_env: null, probe: false}}
  spare: {{kind: openai, base_url: "{url}", api_key_env: null, probe: false}}
aliases:
  t/chat: {{description: chat, chain: [cloud/m, spare/n]}}
"""
REQUESTS = 100
SLACK = 20  # request-path objects a run may leave once (a one-off), whatever the number of requests; a cycle
# per request leaves about 11 a request (1,105 after 100 with the old disconnect watch)
PATH_PACKAGES = ("interlock", "uvicorn", "aiohttp", "asyncio", "uvloop", "httptools", "multidict", "yarl")


# Not the gateway's, though of those packages: the fakes' servers (an earlier test's, in a thread of this
# process, may close its connections while this one counts: a CI run found 36 such objects once), and
# asyncio's selector transports (the gateway runs on uvloop; those belong to another thread's loop).
NOT_THE_GATEWAY = ("interlock.testing", "asyncio.selector_events", "asyncio.trsock")


def on_the_request_path(found: object) -> bool:
    """An object of the request path's own classes, or a frame or coroutine of its code."""
    code = getattr(found, "f_code", None) or getattr(found, "cr_code", None)
    if code is not None:
        where = code.co_filename
        return "/interlock/testing/" not in where and any(f"/{p}/" in where for p in PATH_PACKAGES)
    module = type(found).__module__
    if module.startswith(NOT_THE_GATEWAY) or serves_a_fake(found):
        return False
    return module.split(".")[0] in PATH_PACKAGES


def serves_a_fake(found: object) -> bool:
    """A parser (or another helper) whose callbacks are a fake server's: that server's, not the gateway's."""
    for referent in gc.get_referents(found):
        owner = getattr(referent, "__self__", referent)
        if type(owner).__module__.startswith("interlock.testing"):
            return True
    return False


def exchange(port: int, body: bytes, count: int) -> list[bytes]:
    """``count`` requests on one keep-alive connection; the status line of each answer."""
    request, statuses, buffer = chat_request(body), [], b""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        for _ in range(count):
            sock.sendall(request)
            status, buffer = read_answer(sock, buffer)
            statuses.append(status)
    return statuses


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeProcess]:
    with FakeProcess("openai") as process:
        yield process


ASK = b'{"messages": [{"role": "user", "content": "hi"}]}'
STREAM = b'{"messages": [{"role": "user", "content": "hi"}], "stream": true}'
OK, REFUSED = b"HTTP/1.1 200 OK", b"HTTP/1.1 400 Bad Request"
CASES = {  # the request, the fault of each model (``*``: both candidates'), the answers' status line
    "an answer": (ASK, None, OK),
    "a stream": (STREAM, None, OK),
    "a fallback": (ASK, ("m", Fault.http_status(500)), OK),
    "every candidate failing": (ASK, ("*", Fault.http_status(503)), b"HTTP/1.1 503 Service Unavailable"),
    "a refusal passed on": (ASK, ("m", Fault.http_status(400)), REFUSED),
    "a stream cut after its first chunk": (STREAM, ("m", Fault.cut_stream(1)), OK),
    "a request the gateway refuses": (b'{"messages": 3}', None, REFUSED),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_request_leaves_nothing_for_the_cyclic_collector(
    case: str, fake: FakeProcess, tmp_path: Path
) -> None:
    body, fault, status = CASES[case]
    plan = load_plan(compile_text(tmp_path, CONFIG.format(url=fake.base_url)), {})
    fake.clear_faults()
    if fault is not None:
        model, what = fault
        for name in ("m", "n") if model == "*" else (model,):
            fake.set_fault(what, model=name)

    async def scenario() -> int:
        gateway = build_gateway(plan, probes=False)
        async with serving(gateway) as port:
            statuses: list[bytes] = []

            def client(count: int) -> None:
                statuses.extend(exchange(port, body, count))

            await asyncio.to_thread(client, 5)  # first requests: the upstream pool, caches, lazy imports
            gc.collect()
            gc.disable()
            try:
                runner = threading.Thread(target=client, args=(REQUESTS,))
                runner.start()
                while runner.is_alive():  # noqa: ASYNC110 - a thread, not a task
                    await asyncio.sleep(0.01)
                gc.set_debug(gc.DEBUG_SAVEALL)  # keep what it finds, to look at
                gc.collect()
            finally:
                gc.set_debug(0)
                gc.enable()
            found = [type(o).__qualname__ for o in gc.garbage if on_the_request_path(o)]
            gc.garbage.clear()
            assert statuses == [status] * (5 + REQUESTS)
            return found

    found = uvloop.run(scenario())
    assert len(found) <= SLACK, (
        f"{len(found)} request-path objects for the collector after {REQUESTS} requests ({case}): "
        f"{sorted(set(found))[:20]}"
    )
