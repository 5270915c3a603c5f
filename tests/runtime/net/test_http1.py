"""The upstream client's own HTTP/1.1 (runtime/net/http1.py, client.py) against loopback servers:
TLS through ``ssl`` with a self-signed certificate made here, deadlines per phase, size caps, the
pool's connection cap, what it refuses to send or read.

Each server is a real asyncio server on 127.0.0.1 that answers with the bytes a test gives it.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from interlock.runtime.base.errors import ConnectFailed, ConnectTimeout, FirstByteTimeout, ProtocolFailure
from interlock.runtime.net import http1, http_errors
from interlock.runtime.net.client import UpstreamClient
from interlock.runtime.net.transport import Request
from interlock.runtime.upstream.base import adapter_for
from tests.runtime.net.origins import origin
from tests.runtime.upstream.helpers import endpoint
from tests.waiting import until

HI = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
COMPLETION = orjson.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
    }
)


def ok(body: bytes, *extra: str) -> bytes:
    head = "".join(f"{line}\r\n" for line in extra)
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        + head.encode()
        + (b"Content-Length: %d\r\n\r\n" % len(body) + body)
    )


Answer = Callable[[bytes], bytes | None]  # the request's head -> the bytes to write (None: write nothing)


class Loopback:
    """An HTTP/1.1-ish server on 127.0.0.1: reads each request, writes what ``answer`` returns."""

    def __init__(self, answer: Answer, *, close: bool = False) -> None:
        self.answer = answer
        self.close = close  # close the connection after each answer
        self.requests: list[bytes] = []
        self.connections = 0
        self.open = 0
        self.most_open = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                self.requests.append(head)
                data = self.answer(head)
                if data is None:
                    await asyncio.Event().wait()  # hang
                writer.write(data)
                await writer.drain()
                if self.close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            self.open -= 1
            writer.close()


@asynccontextmanager
async def loopback(
    answer: Answer, *, close: bool = False, tls: ssl.SSLContext | None = None
) -> AsyncIterator[tuple[Loopback, int]]:
    server_state = Loopback(answer, close=close)
    server = await asyncio.start_server(server_state.serve, "127.0.0.1", 0, ssl=tls)
    try:
        yield server_state, server.sockets[0].getsockname()[1]
    finally:
        server.close()


def run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(fn())


async def get(
    client: UpstreamClient, url: str, *, headers: dict[str, str] | None = None, wait_s: float = 5
) -> Any:
    loop = asyncio.get_running_loop()
    at = loop.time() + wait_s
    response = await client.send(Request(origin(url, headers, connect_s=wait_s), "GET", "/x", None, at, at))
    response.answered()
    body = await response.read_all(1 << 20)
    response.release()
    return response.status, body


def self_signed(tmp_path: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A certificate for 127.0.0.1 made now: the server's context, and a client context trusting it."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "interlock test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert_file, key_file)
    client = ssl.create_default_context(cafile=str(cert_file))
    return server, client


def test_tls_with_a_trusted_certificate_carries_a_chat(tmp_path: Path) -> None:
    server_tls, client_tls = self_signed(tmp_path)

    async def go() -> tuple[str, int, int]:
        async with loopback(lambda _: ok(COMPLETION), tls=server_tls) as (server, port):
            async with UpstreamClient.create(ssl_context=client_tls) as client:
                adapter = adapter_for("openai", client)
                ep = endpoint("openai", f"https://127.0.0.1:{port}/v1")
                answers = [await adapter.chat(ep, "m", HI) for _ in range(3)]
            return answers[0]["choices"][0]["message"]["content"], len(server.requests), server.connections

    assert run(go) == ("hi", 3, 1)  # three requests, one TLS connection kept alive


def test_tls_with_an_untrusted_certificate_is_connect_failed(tmp_path: Path) -> None:
    server_tls, _ = self_signed(tmp_path)

    async def go() -> None:
        async with (
            loopback(lambda _: ok(COMPLETION), tls=server_tls) as (_, port),
            UpstreamClient.create() as client,
        ):  # the system's CAs: this certificate is not one
            await adapter_for("openai", client).chat(
                endpoint("openai", f"https://127.0.0.1:{port}/v1"), "m", HI
            )

    with pytest.raises(ConnectFailed, match=r"^TLS certificate rejected$"):
        run(go)


def test_a_tls_handshake_that_never_ends_is_a_connect_timeout() -> None:
    """A plain TCP server that never answers the TLS hello: connecting (TCP + TLS) is past connect_s."""

    async def go() -> None:
        async with loopback(lambda _: None) as (_, port), UpstreamClient.create() as client:
            ep = endpoint("openai", f"https://127.0.0.1:{port}/v1", connect_s=0.2, first_byte_s=30)
            await adapter_for("openai", client).chat(ep, "m", HI)

    with pytest.raises(ConnectTimeout, match=r"^connect timed out$"):
        run(go)


def test_the_request_head_is_what_http_1_1_expects() -> None:
    async def go() -> bytes:
        async with loopback(lambda _: ok(COMPLETION)) as (server, port), UpstreamClient.create() as client:
            ep = endpoint("openai", f"http://127.0.0.1:{port}/v1/", key="sk-1")
            await adapter_for("openai", client).chat(ep, "m", HI)
            return server.requests[0]

    lines = run(go).decode().split("\r\n")
    assert lines[0] == "POST /v1/chat/completions HTTP/1.1"
    assert {line.split(": ")[0].lower() for line in lines[1:] if line} >= {
        "host",
        "user-agent",
        "accept-encoding",
        "content-type",
        "content-length",
        "authorization",
    }
    assert "Accept-Encoding: identity" in lines


def test_a_header_with_a_line_break_is_never_sent() -> None:
    async def go() -> None:
        async with loopback(lambda _: ok(b"{}")) as (server, port), UpstreamClient.create() as client:
            with pytest.raises(http_errors.InvalidHeader):
                await get(client, f"http://127.0.0.1:{port}", headers={"x-a": "1\r\nx-b: 2"})
            assert server.requests == []

    run(go)


def test_a_response_head_over_the_limit_is_refused() -> None:
    huge = "X-Filler: " + "a" * (http1.MAX_HEAD_BYTES + 10)

    async def go() -> None:
        async with loopback(lambda _: ok(b"{}", huge)) as (_, port), UpstreamClient.create() as client:
            with pytest.raises(http_errors.HeadTooLarge):
                await get(client, f"http://127.0.0.1:{port}")

    run(go)


def test_a_compressed_answer_is_refused() -> None:
    async def go() -> None:
        async with (
            loopback(lambda _: ok(b"\x1f\x8b", "Content-Encoding: gzip")) as (_, port),
            UpstreamClient.create() as client,
        ):
            ep = endpoint("openai", f"http://127.0.0.1:{port}/v1")
            await adapter_for("openai", client).chat(ep, "m", HI)

    with pytest.raises(ProtocolFailure, match=r"^response body could not be decoded$"):
        run(go)


def test_a_compressed_answer_is_refused_whatever_the_spelling_and_repeats() -> None:
    async def go() -> None:
        answer = ok(b"{}", "CONTENT-ENCODING:  identity", "content-encoding: gzip")
        async with loopback(lambda _: answer) as (_, port), UpstreamClient.create() as client:
            with pytest.raises(http_errors.UnsupportedEncoding):
                await get(client, f"http://127.0.0.1:{port}")

    run(go)


def test_the_answer_head_is_read_as_it_came_after_an_interim_answer() -> None:
    """The head is kept as bytes; its headers are what httptools would have said of each line."""
    answer = (
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nX-A:  one \r\nx-a: two\r\n"
        b"CONTENT-LENGTH: 2\r\n\r\n{}"
    )

    async def go() -> tuple[Any, ...]:
        async with loopback(lambda _: answer) as (_, port), UpstreamClient.create() as client:
            at = asyncio.get_running_loop().time() + 5
            response = await client.send(
                Request(origin(f"http://127.0.0.1:{port}", {}, connect_s=5), "GET", "/x", None, at, at)
            )
            body = await response.read_all(100)
            response.release()
            return response.status, response.content_length, response.raw_headers, response.headers, body

    status, length, raw, headers, body = run(go)
    assert (status, length, body) == (200, 2, b"{}")
    assert raw == [(b"X-A", b"one "), (b"x-a", b"two"), (b"CONTENT-LENGTH", b"2")]
    assert headers == {"x-a": "one , two", "content-length": "2"}


def test_a_body_without_a_length_ends_with_the_connection() -> None:
    async def go() -> tuple[int, bytes]:
        answer = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + COMPLETION
        async with loopback(lambda _: answer, close=True) as (_, port), UpstreamClient.create() as client:
            result: tuple[int, bytes] = await get(client, f"http://127.0.0.1:{port}")
            return result

    assert run(go) == (200, COMPLETION)


def test_a_body_cut_before_its_length_is_cut_short() -> None:
    async def go() -> None:
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{}"
        async with loopback(lambda _: answer, close=True) as (_, port), UpstreamClient.create() as client:
            with pytest.raises(http_errors.CutShort):
                await get(client, f"http://127.0.0.1:{port}")

    run(go)


def test_an_answer_that_is_not_http_is_a_bad_response() -> None:
    async def go() -> None:
        async with (
            loopback(lambda _: b"SSH-2.0-OpenSSH_9.6\r\n\r\n") as (_, port),
            UpstreamClient.create() as client,
        ):
            with pytest.raises(http_errors.BadResponse):
                await get(client, f"http://127.0.0.1:{port}")

    run(go)


def test_max_connections_caps_open_connections_and_every_request_is_served() -> None:
    async def go() -> tuple[list[int], int]:
        async with loopback(lambda _: ok(b"{}")) as (server, port):
            async with UpstreamClient.create(max_connections=2) as client:
                url = f"http://127.0.0.1:{port}"
                answers = await asyncio.gather(*(get(client, url) for _ in range(8)))
            return [status for status, _ in answers], server.most_open

    statuses, most_open = run(go)
    assert statuses == [200] * 8
    assert most_open <= 2


def test_a_first_byte_deadline_names_its_phase() -> None:
    async def go() -> None:
        async with loopback(lambda _: None) as (_, port), UpstreamClient.create() as client:
            with pytest.raises(http_errors.Timeout) as info:
                await get(client, f"http://127.0.0.1:{port}", wait_s=0.2)
            assert info.value.phase == http_errors.FIRST_BYTE
            assert client.open_connections == 0 or client.idle_connections() == 0

    run(go)


class MovedOn(asyncio.SelectorEventLoop):
    """A loop whose clock a test moves on (``ahead``): a deadline passes without waiting for it."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead = 0.0

    def time(self) -> float:
        return super().time() + self.ahead


def test_an_answer_whose_deadline_passes_before_it_is_read_is_a_timeout_not_an_empty_body() -> None:
    """A loaded loop late by more than the deadline: the answer arrives whole (the read callback runs
    first) and the timer fires before the reader resumes. The late read is the deadline's, as ``read``
    says; the body the timer discarded was once returned as the whole answer, ``b""``, and a healthy
    worker's probe failed as "response is not valid JSON (Input is a zero-length, empty document...)"."""

    async def go() -> tuple[type[BaseException], str, int]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, MovedOn)

        def late(_: bytes) -> bytes:
            loop.ahead += 60  # the answer goes out, and the client's loop runs next 60 s on
            return ok(b'{"models": []}')

        async with loopback(late) as (_, port), UpstreamClient.create() as client:
            adapter = adapter_for("ollama", client)
            with pytest.raises(FirstByteTimeout) as info:
                await adapter.probe(endpoint("ollama", f"http://127.0.0.1:{port}"), 5.0)
            return type(info.value), str(info.value), client.idle_connections()

    with asyncio.Runner(loop_factory=MovedOn) as runner:
        assert runner.run(go()) == (FirstByteTimeout, "no answer within 5 s", 0)


def test_a_url_that_is_not_http_is_refused() -> None:
    async def go() -> None:
        async with UpstreamClient.create() as client:
            with pytest.raises(http_errors.InvalidURL):
                await get(client, "ftp://127.0.0.1:21")

    run(go)


def test_an_idle_connection_past_keepalive_is_closed_not_reused() -> None:
    """The pool's clock is the loop's: a connection idle longer than ``keepalive_s`` is closed when met."""

    async def go() -> tuple[bool, bool, int]:
        async with (
            loopback(lambda _: ok(b"{}")) as (server, port),
            UpstreamClient.create(keepalive_s=30) as client,
        ):
            url = f"http://127.0.0.1:{port}"
            await get(client, url)
            pool, _ = client._base(url, "", None)
            now = asyncio.get_running_loop().time()
            young = pool.take(now + 29, client._poller)
            assert young is not None
            pool.put(young)
            old = pool.take(young.idle_since + 31, client._poller)
            await until(lambda: client.open_connections == 0, "the old connection to close")
            await get(client, url)  # a new one
            return young.closed, old is None, server.connections

    assert run(go) == (True, True, 2)


def test_a_kept_alive_connection_moves_one_deadline_timer_not_one_per_exchange() -> None:
    """Twenty exchanges on one connection schedule one deadline timer (its deadline moved lazily)."""

    async def go() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        scheduled = 0
        call_at = loop.call_at

        def counting(when: float, callback: Callable[..., object], *args: object, **kw: Any) -> Any:
            nonlocal scheduled
            if isinstance(getattr(callback, "__self__", None), http1.Connection | http1.Response):
                scheduled += 1
            return call_at(when, callback, *args, **kw)

        loop.call_at = counting  # type: ignore[method-assign]
        async with loopback(lambda _: ok(b"{}")) as (server, port), UpstreamClient.create() as client:
            for _ in range(20):
                assert await get(client, f"http://127.0.0.1:{port}") == (200, b"{}")
            return scheduled, server.connections

    assert run(go) == (1, 1)


def test_a_later_exchange_with_an_earlier_deadline_times_out_on_time() -> None:
    """The connection's timer, armed for a first exchange's 30 s, is moved for the next one's 0.2 s."""

    async def go() -> tuple[str, float, int]:
        answers = iter([ok(b"{}"), None])  # the second request is never answered
        async with loopback(lambda _: next(answers)) as (server, port), UpstreamClient.create() as client:
            url = f"http://127.0.0.1:{port}"
            await get(client, url, wait_s=30)
            started = asyncio.get_running_loop().time()
            with pytest.raises(http_errors.Timeout) as info:
                await get(client, url, wait_s=0.2)
            return info.value.phase, asyncio.get_running_loop().time() - started, server.connections

    phase, waited, connections = run(go)
    assert phase == http_errors.FIRST_BYTE
    assert 0.2 <= waited < 1.5
    assert connections == 1


def test_a_later_exchange_is_not_cut_by_the_timer_of_an_earlier_one() -> None:
    """A first exchange's 0.2 s deadline, still armed on the connection when it is reused, does not cut
    the next exchange, whose answer comes after 0.5 s of its 5 s; that one's own deadline still holds."""

    async def go() -> tuple[int, bytes, str]:
        served = 0

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal served
            try:
                while True:
                    await reader.readuntil(b"\r\n\r\n")
                    served += 1
                    if served == 2:
                        await asyncio.sleep(0.5)
                    if served == 3:
                        await asyncio.Event().wait()  # never answered
                    writer.write(ok(b'{"n": %d}' % served))
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            async with UpstreamClient.create() as client:
                await get(client, url, wait_s=0.2)
                status, body = await get(client, url, wait_s=5)
                with pytest.raises(http_errors.Timeout) as info:
                    await get(client, url, wait_s=0.3)
                return status, body, info.value.phase
        finally:
            server.close()

    assert run(go) == (200, b'{"n": 2}', http_errors.FIRST_BYTE)


def test_a_client_made_on_a_loop_reads_that_loops_time() -> None:
    """Made on the running loop, the client keeps it (its deadlines are read from it without asking
    asyncio for the running loop per request); made outside one, it asks."""

    async def go() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        async with UpstreamClient.create() as client:
            return client.loop is loop, abs(client.time() - loop.time()) < 1.0

    assert run(go) == (True, True)
    outside = UpstreamClient.create()
    assert outside.loop is None
