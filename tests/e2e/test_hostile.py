"""Hostile clients, performed at small scale against a real `interlock serve` (issue 7, items 1 and 5).

The plan here sets low limits (20 connections, 2 s to send headers, 2 s of body silence), so each
attack is bounded in time: the checks wait on state (a socket closed, a metric counted), they never
assert how long something took. The timeouts are short for a test but long next to anything a client
here does between two sends, so a busy 2-core CI machine cannot make a well-behaved client late; the
gateway's own delays are covered by the gateway (a deadline counts the bytes that arrived in time).
Metrics are read on a fresh connection: a kept-alive one could be closed by `header_timeout` just
as it is reused.
"""

from __future__ import annotations

import select
import signal
import socket
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest

from interlock.testing.faults import Fault
from tests.e2e.conftest import Fakes
from tests.e2e.harness import Served
from tests.waiting import wait_until

TIMEOUT_S = 2.0  # server.header_timeout and server.body_timeout below

CONFIG = """\
version: 1
server:
  default_alias: h/one
  direct_models: allow
  header_timeout: 2s
  body_timeout: 2s
  max_connections: 20
providers:
  bravo: {{kind: openai, base_url: "{bravo}/v1", timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}}}
  stuck: {{kind: openai, base_url: "{bravo}/v1", timeouts: {{connect: 1s, first_byte: 60s, total: 60s}}}}
aliases:
  h/one: {{description: one, chain: [bravo/h-one]}}
  h/stuck: {{description: an upstream that never answers, chain: [stuck/h-stuck]}}
"""
CHAT = orjson.dumps({"model": "h/one", "messages": [{"role": "user", "content": "hi"}]})


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, fakes: Fakes) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("hostile")
    config = folder / "interlock.yaml"
    config.write_text(CONFIG.format(bravo=fakes.bravo.url))
    gateway = Served(config, {}, folder / "serve.log", "--log-level", "debug")
    try:
        yield gateway
    finally:
        gateway.stop()


def connect(gateway: Served) -> socket.socket:
    host, port = gateway.url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the gateway sends until it closes the connection (a reset counts as closed)."""
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def read_health(sock: socket.socket) -> bytes:
    """One whole answer from /healthz, the connection left open."""
    data = b""
    while not data.endswith(b'{"status":"ok"}'):
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    return data


def fresh(gateway: Served, path: str = "/healthz", method: str = "GET") -> httpx.Response:
    with httpx.Client(base_url=gateway.url, timeout=60) as http:
        return http.request(method, path)


def closed(gateway: Served, reason: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(fresh(gateway, "/metrics").text):
        for sample in family.samples:
            if sample.name == "interlock_connections_closed_total" and sample.labels.get("reason") == reason:
                return float(sample.value)
    return 0.0


def test_idle_sockets_are_closed_and_a_fresh_client_is_served_meanwhile(served: Served) -> None:
    evicted, timed_out = closed(served, "evicted"), closed(served, "header_timeout")
    idle = [connect(served) for _ in range(50)]  # 2.5 times the cap, sending nothing
    try:
        assert fresh(served).json() == {"status": "ok"}  # at the cap, an idle one made room
        assert [read_all(sock) for sock in idle] == [b""] * 50  # every one closed, without a word
    finally:
        for sock in idle:
            sock.close()
    assert closed(served, "evicted") >= evicted + 30
    assert closed(served, "header_timeout") > timed_out
    log = served.log()
    assert "connection limit reached (server.max_connections is 20): closed the oldest idle" in log


def test_half_sent_headers_get_a_408_and_the_connection_closed(served: Served) -> None:
    before = closed(served, "header_timeout")
    with connect(served) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert b'"code":"request_timeout"' in answer
    assert closed(served, "header_timeout") >= before + 1  # (idle keep-alive connections count too)
    assert "no complete request headers within server.header_timeout" in served.log()  # debug level


def test_a_keep_alive_connection_that_stalls_in_its_second_request_is_closed(served: Served) -> None:
    with connect(served) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = read_health(sock)
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        assert read_all(sock).startswith(b"HTTP/1.1 408 ")


def test_a_gateway_too_busy_to_read_in_time_still_counts_what_arrived_in_time(served: Served) -> None:
    with connect(served) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_health(sock).startswith(b"HTTP/1.1 200 OK\r\n")
        served.proc.send_signal(signal.SIGSTOP)  # a starved gateway: its header deadline runs on
        try:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # in time, unread
            starve(TIMEOUT_S + 0.5)
        finally:
            served.proc.send_signal(signal.SIGCONT)
        answer = read_all(sock)  # the deadline has passed when it runs again, the bytes still wait:
    assert answer.startswith(b"HTTP/1.1 408 ")  # read first, they make this a 408, not a silent close


def starve(seconds: float) -> None:
    """How long the stopped gateway gets no CPU (the condition set up, not a wait for something)."""
    time.sleep(seconds)


def test_a_stalled_body_is_closed_but_a_slow_steady_one_is_served(served: Served) -> None:
    before = closed(served, "body_timeout")
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    with connect(served) as sock:
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(CHAT) + CHAT[:10])
        assert read_all(sock).startswith(b"HTTP/1.1 408 ")
    assert closed(served, "body_timeout") == before + 1
    gap = TIMEOUT_S / 8  # each piece comes well within the idle timeout, all of them well past it: served
    pieces = [CHAT[index : index + 6] for index in range(0, len(CHAT), 6)]
    assert (len(pieces) - 1) * gap > TIMEOUT_S
    with connect(served) as sock:
        sock.sendall(head + b"Content-Length: %d\r\n\r\n" % len(CHAT))
        for piece in pieces:
            sock.sendall(piece)
            wait_for_gap(gap)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert closed(served, "body_timeout") == before + 1


def wait_for_gap(seconds: float) -> None:
    """A pause inside an attack (the attacker's pace, not a check)."""
    time.sleep(seconds)


def test_at_the_cap_with_nothing_idle_a_new_connection_gets_a_503(served: Served, fakes: Fakes) -> None:
    before = closed(served, "over_limit")
    fakes.bravo.set_fault(Fault.hang(), model="h-stuck")
    stuck = orjson.dumps({"model": "h/stuck", "messages": [{"role": "user", "content": "hi"}]})
    busy = [connect(served) for _ in range(20)]
    try:
        for sock in busy:  # a request in progress on each: waiting on an upstream that never answers
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(stuck)
            )
            sock.sendall(stuck)
        wait_until(lambda: upstream_calls(fakes, "h-stuck") == 20, 60, "20 requests to be in progress")
        with connect(served) as sock:  # a client that sends its request before it reads: no reset
            select.select([sock], [], [], 60)  # the 503 has arrived: the gateway has answered
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 262144\r\n\r\n")
            sock.sendall(b"x" * 262144)
            answer = read_all(sock)
        assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        assert b"retry-after: 1\r\n" in answer
        assert b"server.max_connections is 20" in answer
    finally:
        for sock in busy:
            sock.close()
        fakes.bravo.clear_faults(model="h-stuck")
    assert closed_now(served, before)
    assert "refused a new connection with 503, none is idle" in served.log()


def upstream_calls(fakes: Fakes, model: str) -> int:
    return sum(1 for r in fakes.bravo.requests if r.model == model)


def closed_now(gateway: Served, before: float) -> bool:
    """Once the busy connections are gone, the refusal shows in the metrics."""
    wait_until(lambda: fresh(gateway).status_code == 200, 60, "the gateway to serve again")
    return closed(gateway, "over_limit") == before + 1


def test_head_answers_like_get_without_a_body(served: Served) -> None:
    for path in ("/healthz", "/readyz", "/v1/models", "/v1/aliases", "/v1/health", "/metrics"):
        get, head = fresh(served, path), fresh(served, path, "HEAD")
        assert (path, head.status_code, head.content) == (path, 200, b"")
        assert head.headers["content-type"] == get.headers["content-type"]
        assert "x-interlock-plan" in head.headers


def test_a_websocket_upgrade_is_refused_cleanly(served: Served) -> None:
    before = closed(served, "websocket")
    with connect(served) as sock:
        sock.sendall(
            b"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
            b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert b'"code":"websocket_unsupported"' in answer
    assert closed(served, "websocket") == before + 1
    assert "Exception" not in served.log()
    assert fresh(served).status_code == 200


def test_a_404_cuts_a_long_path(served: Served) -> None:
    answer = fresh(served, "/" + "a" * 10_000)
    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert message == "GET /" + "a" * 98 + "…: Not Found"


def test_a_trailing_slash_is_not_redirected_to_the_host_the_caller_wrote(served: Served) -> None:
    for path in (b"/v1/health/", b"/v1/models/", b"/ui/"):
        with connect(served) as sock:
            sock.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")
            answer = read_all(sock)
        assert answer.startswith(b"HTTP/1.1 404 Not Found\r\n"), answer[:200]
        assert b"evil.example" not in answer.lower()


def test_an_admin_path_answers_a_big_body_without_reading_it(served: Served) -> None:
    with connect(served) as sock:
        sock.sendall(b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n" + b"x" * 65536)
        answer = read_all(sock)  # the other 10 MB are never sent: the answer comes, then the close
    assert answer.startswith(b"HTTP/1.1 404 Not Found\r\n")
    assert b"connection: close\r\n" in answer
    with connect(served) as sock:
        sock.sendall(b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n" + b"x" * 65536)
        assert read_all(sock).startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")
    with connect(served) as sock:  # the hot paths' 405 too
        head = b"PUT /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n\r\n"
        sock.sendall(head + b"x" * 65536)
        answer = read_all(sock)
    assert answer.startswith(b"HTTP/1.1 405 Method Not Allowed\r\n")
    assert b"connection: close\r\n" in answer


def test_debug_level_prints_debug_lines(served: Served) -> None:
    assert " DEBUG interlock[" in served.log()
    assert "limits: header_timeout 2s, body_timeout 2s, max_connections 20" in served.log()


def test_the_log_is_clean(served: Served) -> None:
    assert "Traceback" not in served.log()
