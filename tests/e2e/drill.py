"""The failover drill (issue 40): sixteen kinds of provider misbehaviour, each through `interlock serve`.

Each scenario gets its own alias, ``drill/<name>``, with the chain ``[p-<name>/m, f-<name>/m]`` (a
single-candidate one, ``drill/<name>-alone``, where the scenario says so), and its own two upstreams:
``Upstream``, an HTTP/1.1 server on 127.0.0.1 written on asyncio's streams (so it can break HTTP the way
a real server does), answering every request as the scenario's script says. The gateway runs with its
**default** settings for every kind; a ``scale`` below 1 (the tests) shortens every duration of the
compiled plan (its timeouts and health times, whatever their names) and every delay of the scripts by
the same factor, so the drill keeps its proportions in a fraction of the time.

Every request is streamed. Its outcome, read from what the caller saw:

- ``rescued``: status 200, the whole answer (every token, a finish reason, the success terminator);
- ``clean error``: an error status with an error body, or an error event and no success terminator;
- ``truncated``: the success terminator after an incomplete answer (passed off as complete);
- ``hang``: no end within ``HANG_S`` (scaled).

Shared by ``tests/e2e/test_failover_drill.py`` (scaled down, one gateway, every scenario at once) and
``bench/failover.py`` (real time, the table for the issue's closing note).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import orjson

TOKENS = 60  # every full answer: ``w0 w1 ... w59`` in one chunk each, then the finish reason and usage
FULL = "".join(f"w{i} " for i in range(TOKENS))
PROMPT_TOKENS = 11
HANG_S = 150.0  # a request not ended by then hung (scaled)
KEY = "sk-drill-0123456789"
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


@dataclass(slots=True)
class Asked:
    """One request an upstream read: its number on that upstream (0 first), path and parsed body."""

    number: int
    path: str
    body: Any


Script = Callable[["Upstream", Asked, asyncio.StreamWriter], Awaitable[bool]]
"""Answers (or not) one chat request; returns False when the connection is to close."""


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def _event(obj: Any) -> bytes:
    return _frame(b"data: " + orjson.dumps(obj) + b"\n\n")


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-drill",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


USAGE = {"prompt_tokens": PROMPT_TOKENS, "completion_tokens": TOKENS, "total_tokens": PROMPT_TOKENS + TOKENS}


async def stream(
    writer: asyncio.StreamWriter,
    *,
    upto: int = TOKENS,
    first_delay_s: float = 0.0,
    done: bool = True,
    head: bool = True,
) -> None:
    """The SSE answer: the role chunk, ``upto`` tokens (the first after ``first_delay_s``), and when all
    of them went, the finish chunk with usage and (``done``) ``[DONE]`` and the body's end."""
    if head:
        writer.write(SSE_HEAD + _event(_chunk({"role": "assistant", "content": ""})))
        await writer.drain()
    if first_delay_s:
        await asyncio.sleep(first_delay_s)
    for i in range(upto):
        writer.write(_event(_chunk({"content": f"w{i} "})))
        if i % 10 == 9:
            await writer.drain()
    await writer.drain()
    if upto < TOKENS:
        return
    writer.write(_event(_chunk({}, "stop", USAGE)))
    if done:
        writer.write(_frame(b"data: [DONE]\n\n"))
    writer.write(b"0\r\n\r\n")
    await writer.drain()


def error(status: int, body: Any, headers: dict[str, str] | None = None) -> bytes:
    data = orjson.dumps(body)
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    reason = {400: "Bad Request", 429: "Too Many Requests", 500: "Internal Server Error"}.get(status, "Error")
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        f"{extra}\r\n"
    ).encode() + data


def openai_error(message: str, kind: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


async def good(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    await stream(writer)
    return True


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0): what a crashed server or a proxy's cut looks like."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        import socket
        import struct

        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


class Upstream:
    """One raw upstream: counts the chat requests it read (``attempts``), answers probes, and answers
    each chat request by ``script``; ``down()``/``up()`` stop and restart listening on the same port."""

    def __init__(self, script: Script, scale: float) -> None:
        self.script = script
        self.scale = scale
        self.attempts = 0
        self.bodies: list[Any] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def up(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        """Refuse connections from now on (and drop those open): a server that is gone."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds * self.scale)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, *rest = head.decode("latin-1").split("\r\n")
                fields = dict(x.lower().split(": ", 1) for x in rest if ": " in x)
                body = await reader.readexactly(int(fields.get("content-length", "0")))
                path = line.split()[1]
                if not path.endswith("/chat/completions"):
                    data = b'{"object":"list","data":[{"id":"m","object":"model"}]}'
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(data), data)
                    )
                    await writer.drain()
                    continue
                asked = Asked(self.attempts, path, orjson.loads(body) if body else None)
                self.attempts += 1
                self.bodies.append(asked.body)
                if not await self.script(self, asked, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:  # the drill is over while a script still waits
            pass
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()


@dataclass(slots=True)
class Seen:
    """What the caller saw of one streamed request."""

    status: int = 0
    text: str = ""
    finish: str | None = None
    terminated: bool = False  # the success terminator (``data: [DONE]``)
    error_event: bool = False
    error_body: Any = None
    resolved: str | None = None
    request_id: str | None = None
    seconds: float = 0.0
    hung: bool = False

    @property
    def outcome(self) -> str:
        if self.hung:
            return "hang"
        if self.terminated and not self.error_event:
            return "rescued" if self.text == FULL and self.finish is not None else "truncated"
        if self.status != 200 or self.error_event:
            return "clean error"
        return "truncated"  # ended without a terminator or an error: a caller cannot tell


async def ask(client: httpx.AsyncClient, model: str, scale: float, messages: Any = None) -> Seen:
    """One streamed chat request through the gateway, read to its end (or ``HANG_S``)."""
    seen = Seen()
    body = {
        "model": model,
        "stream": True,
        "messages": messages or [{"role": "user", "content": "Count to sixty."}],
    }
    started = time.perf_counter()
    try:
        async with asyncio.timeout(HANG_S * scale):
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                seen.status = response.status_code
                seen.resolved = response.headers.get("x-interlock-resolved")
                seen.request_id = response.headers.get("x-request-id")
                if response.status_code != 200:
                    raw = await response.aread()
                    seen.error_body = orjson.loads(raw) if raw else None
                else:
                    await _read_events(response, seen)
    except TimeoutError:
        seen.hung = True
    seen.seconds = time.perf_counter() - started
    return seen


async def _read_events(response: httpx.Response, seen: Seen) -> None:
    event = b""
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            event = line[6:].strip().encode()
            continue
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            seen.terminated = True
            continue
        obj = orjson.loads(data)
        if event == b"error" or "error" in obj:
            seen.error_event = True
            seen.error_body = obj
            continue
        if seen.resolved is None and isinstance(obj.get("model"), str):  # a head sent before the walk
            seen.resolved = obj["model"]  # ended (a keepalive): every chunk names who answered
        for choice in obj.get("choices") or []:
            seen.text += (choice.get("delta") or {}).get("content") or ""
            seen.finish = choice.get("finish_reason") or seen.finish


@dataclass(slots=True)
class Result:
    """One scenario's row: the attempts each upstream saw, the wall time, the outcome, and the target."""

    name: str
    primary: int
    fallback: int
    seconds: float
    outcome: str
    answered_by: str
    target: str
    met: bool
    note: str = ""
    scale: float = 1.0
    seen: Seen | None = None
    log: dict[str, Any] | None = None


@dataclass(slots=True)
class Scenario:
    """``primary``/``fallback``: the scripts; ``run``: how the requests go (one, by default);
    ``target``: what a clean rescue (or the right clean error) is, checked by ``meets``."""

    name: str
    what: str
    primary: Script
    fallback: Script = good
    target: str = "rescued"
    meets: Callable[[Result], bool] | None = None
    run: Callable[[Drill, Scenario], Awaitable[Result]] | None = None
    alone: bool = False  # the chain is the primary alone


# -- the sixteen -----------------------------------------------------------------------------------


def _once(first: Callable[[Upstream, Asked, asyncio.StreamWriter], Awaitable[bool]]) -> Script:
    """``first`` for the first request, a good answer after."""

    async def script(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
        if asked.number == 0:
            return await first(up, asked, writer)
        return await good(up, asked, writer)

    return script


async def _429_retry_after(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    wait = 2.0 * up.scale
    headers = {"Retry-After": "2", "retry-after-ms": str(round(wait * 1000))}
    body = openai_error("Rate limit reached for requests", "requests", "rate_limit_exceeded")
    writer.write(error(429, body, headers))
    await writer.drain()
    return True


async def _429(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    writer.write(error(429, openai_error("Rate limit reached", "requests", "rate_limit_exceeded")))
    await writer.drain()
    return True


async def _500(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    writer.write(error(500, openai_error("The server had an error", "server_error", None)))
    await writer.drain()
    return True


async def _503(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    writer.write(error(503, openai_error("The engine is currently overloaded", "server_error", None)))
    await writer.drain()
    return True


async def _reset(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    reset(writer)
    return False


async def _silent(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    await up.sleep(HANG_S)
    return False


async def _first_token_late(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    writer.write(SSE_HEAD + _event(_chunk({"role": "assistant", "content": ""})))
    await writer.drain()
    await up.sleep(20.0)
    await stream(writer, head=False)
    return True


async def _cut_40(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    await stream(writer, upto=40)
    reset(writer)
    return False


async def _stall(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    await stream(writer, upto=10)
    await up.sleep(30.0)
    writer.transport.abort()
    return False


async def _malformed(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    writer.write(SSE_HEAD + _event(_chunk({"role": "assistant", "content": ""})))
    writer.write(_frame(b'data: {"id": "chatcmpl-drill", "choices": [{"delta": {"content": "w0\n\n'))
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    return True


async def _no_done(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    await stream(writer, done=False)
    return True


async def _context_400(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    message = (
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 "
        "tokens. Please reduce the length of the messages."
    )
    body = openai_error(message, "invalid_request_error", "context_length_exceeded")
    writer.write(error(400, body))
    await writer.drain()
    return True


async def _content_filter(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    message = "Your request was rejected as a result of our safety system."
    writer.write(error(400, openai_error(message, "invalid_request_error", "content_policy_violation")))
    await writer.drain()
    return True


async def _cut_30(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    await stream(writer, upto=30)
    reset(writer)
    return False


async def _rejects_prefill(up: Upstream, asked: Asked, writer: asyncio.StreamWriter) -> bool:
    messages = (asked.body or {}).get("messages") or [{}]
    if messages[-1].get("role") == "assistant":
        message = "This model does not support assistant message prefill."
        writer.write(error(400, openai_error(message, "invalid_request_error", "prefill_unsupported")))
        await writer.drain()
        return True
    return await good(up, asked, writer)


def _by(result: Result, who: str) -> bool:
    return result.outcome == "rescued" and result.answered_by == who


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "429-retry-after",
        "429 with Retry-After: 2, once",
        _once(_429_retry_after),
        target="rescued by the primary after the header's wait",
        meets=lambda r: _by(r, "primary"),
    ),
    Scenario("429", "429 without Retry-After, every time", _429),
    Scenario(
        "500-once",
        "a 500 once",
        _once(_500),
        target="rescued by the primary (a retry)",
        meets=lambda r: _by(r, "primary"),
    ),
    Scenario("503", "a persistent 503", _503),
    Scenario("reset", "a reset before the headers, every time", _reset),
    Scenario(
        "silent",
        "an upstream that never answers",
        _silent,
        target="rescued by the fallback within 15 s",
        meets=lambda r: _by(r, "fallback") and r.seconds <= 15.0 * r.scale,
    ),
    Scenario(
        "first-token-20s",
        "a first token after 20 s",
        _first_token_late,
        target="rescued by the fallback within 15 s",
        meets=lambda r: _by(r, "fallback") and r.seconds <= 15.0 * r.scale,
    ),
    Scenario(
        "cut-40-of-60",
        "a stream cut after 40 of 60 tokens",
        _cut_40,
        target="clean error",
        meets=lambda r: r.outcome == "clean error",
    ),
    Scenario(
        "stall-30s",
        "a stream that stalls 30 s, connection open",
        _stall,
        target="clean error, bounded by the idle timeout",
        meets=lambda r: r.outcome == "clean error",
    ),
    Scenario("malformed-sse", "a malformed SSE event before any content", _malformed),
    Scenario("no-done", "no [DONE] after a whole answer", _no_done),
    Scenario("context-400", "a context-length 400", _context_400, target="rescued by the fallback"),
    Scenario(
        "content-filter-400",
        "a content-filter 400",
        _content_filter,
        target="clean error, the upstream's code kept",
        meets=lambda r: (
            r.outcome == "clean error" and r.fallback == 0 and "content_policy_violation" in r.note
        ),
    ),
    Scenario(
        "cut-prefill-rejected",
        "a cut whose fallback rejects an assistant prefill",
        _cut_30,
        _rejects_prefill,
        target="clean error (never the prefill 400)",
        meets=lambda r: r.outcome == "clean error" and "prefill_unsupported" not in r.note,
    ),
    Scenario(
        "429-retry-after-alone",
        "429 with Retry-After: 2, once, single-candidate alias",
        _once(_429_retry_after),
        target="rescued by the primary after the header's wait",
        meets=lambda r: _by(r, "primary"),
        alone=True,
    ),
    Scenario(
        "500-once-alone",
        "a 500 once, single-candidate alias",
        _once(_500),
        target="rescued by the primary (a retry)",
        meets=lambda r: _by(r, "primary"),
        alone=True,
    ),
)


async def _down_for(drill: Drill, scenario: Scenario, down_s: float = 60.0) -> Result:
    """The primary refuses connections for ``down_s`` under one request a second, then comes back;
    the traffic goes on 30 s more. Rescued when every request was; the note says when the primary was
    back in use after its recovery (the target: within 30 s)."""
    scale = drill.scale
    primary, fallback = drill.upstreams[scenario.name]
    await primary.down()
    started = time.perf_counter()
    tasks: list[tuple[float, asyncio.Task[Seen]]] = []
    recovered_at: float | None = None
    while (elapsed := time.perf_counter() - started) < (down_s + 30.0) * scale:
        if recovered_at is None and elapsed >= down_s * scale:
            await primary.up()
            recovered_at = elapsed
        tasks.append((elapsed, asyncio.create_task(ask(drill.client, drill.model(scenario), scale))))
        await asyncio.sleep(1.0 * scale)
    seen = [await task for _, task in tasks]
    outcomes = {s.outcome for s in seen}
    outcome = "rescued" if outcomes == {"rescued"} else "/".join(sorted(outcomes))
    back = next(
        (
            at
            for (at, _), s in zip(tasks, seen, strict=False)
            if recovered_at is not None and at >= recovered_at and drill.who(scenario, s) == "primary"
        ),
        None,
    )
    back_s = None if back is None or recovered_at is None else back - recovered_at
    note = f"{len(seen)} requests; primary back in use " + (
        "never" if back_s is None else f"{back_s / scale:.1f} s (unscaled) after its recovery"
    )
    met = outcome == "rescued" and back_s is not None and back_s <= 30.0 * scale
    return Result(
        scenario.name,
        primary.attempts,
        fallback.attempts,
        time.perf_counter() - started,
        outcome,
        "both" if back_s is not None else "fallback",
        scenario.target,
        met,
        note,
        scale,
    )


def down(seconds: int) -> Scenario:
    """The primary down for ``seconds`` under steady traffic (``bench/failover.py --down``: other lengths)."""

    async def run(drill: Drill, scenario: Scenario) -> Result:
        return await _down_for(drill, scenario, float(seconds))

    return Scenario(
        f"down-{seconds}s",
        f"a primary down for {seconds} s under steady traffic",
        good,
        target="every request rescued; the primary back in use within 30 s of its recovery",
        run=run,
    )


async def _accounting(drill: Drill, scenario: Scenario) -> Result:
    """A request the fallback answers: the access log must name it, count its tokens, list the primary."""
    result = await drill.one(scenario)
    line = result.log or {}
    attempts = line.get("attempts") or []
    right = (
        line.get("candidate") == f"f-{scenario.name}/m"
        and line.get("tokens") == USAGE
        and any(a.get("candidate") == f"p-{scenario.name}/m" and a.get("called") for a in attempts)
    )
    result.note = f"access log: candidate {line.get('candidate')}, tokens {line.get('tokens')}, " + (
        f"{len(attempts)} attempts listed"
    )
    result.met = result.outcome == "rescued" and right
    return result


SCENARIOS = (
    *SCENARIOS[:14],
    down(60),
    Scenario(
        "accounting",
        "the accounting of a fallback (primary 503)",
        _503,
        target="rescued; the access log names the fallback, its tokens, the primary's attempt",
        run=_accounting,
    ),
    *SCENARIOS[14:],
)


# -- the drill -------------------------------------------------------------------------------------


def _scaled(plan: dict[str, Any], scale: float) -> dict[str, Any]:
    """Every duration of the compiled plan's provider timeouts and health (``*_ms``), and the stream
    keepalive, times ``scale``, as source keys: the defaults, kept in proportion."""

    def each(section: dict[str, Any]) -> dict[str, str]:
        return {
            key.removesuffix("_ms"): f"{max(1, round(value * scale))}ms"
            for key, value in section.items()
            if key.endswith("_ms") and isinstance(value, int)
        }

    providers = plan["providers"]
    rows = providers.values() if isinstance(providers, dict) else providers
    server = {k: v for k, v in plan["server"].items() if k == "stream_keepalive_ms"}  # its heartbeat
    return {
        "timeouts": {row["name"]: each(row["timeouts"]) for row in rows},
        "health": each(plan["health"]),
        "server": each(server),
    }


class Drill:
    """The upstreams of ``scenarios`` and one `interlock serve` in front of them, with default settings
    (every duration times ``scale``)."""

    def __init__(self, scenarios: Sequence[Scenario], scale: float, workdir: Path) -> None:
        self.scenarios = tuple(scenarios)
        self.scale = scale
        self.workdir = workdir
        self.upstreams: dict[str, tuple[Upstream, Upstream]] = {}
        self.proc: asyncio.subprocess.Process | None = None
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(None))
        self.log_path = workdir / "access.log"

    def model(self, scenario: Scenario) -> str:
        return f"drill/{scenario.name}"

    def who(self, scenario: Scenario, seen: Seen) -> str:
        if seen.resolved == f"p-{scenario.name}/m":
            return "primary"
        if seen.resolved == f"f-{scenario.name}/m":
            return "fallback"
        return "-"

    def config(self, overrides: dict[str, Any] | None = None) -> str:
        server = {"alias_namespace": "drill/", **(overrides["server"] if overrides is not None else {})}
        lines = ["version: 1", f"server: {json.dumps(server)}"]
        if overrides is not None:
            lines.append(f"health: {json.dumps(overrides['health'])}")
        lines.append("providers:")
        for scenario in self.scenarios:
            for role, up in zip("pf", self.upstreams[scenario.name], strict=False):
                name = f"{role}-{scenario.name}"
                extra = ""
                if overrides is not None and overrides["timeouts"].get(name):
                    extra = f", timeouts: {json.dumps(overrides['timeouts'][name])}"
                lines.append(
                    f'  {name}: {{kind: openai, base_url: "{up.base_url}", api_key_env: DRILL_KEY{extra}}}'
                )
        lines.append("aliases:")
        for scenario in self.scenarios:
            chain = (
                [f"p-{scenario.name}/m"]
                if scenario.alone
                else [f"p-{scenario.name}/m", f"f-{scenario.name}/m"]
            )
            lines.append(f"  {self.model(scenario)}: {{description: drill, chain: {json.dumps(chain)}}}")
        return "\n".join(lines) + "\n"

    async def __aenter__(self) -> Drill:
        for scenario in self.scenarios:
            pair = (Upstream(scenario.primary, self.scale), Upstream(scenario.fallback, self.scale))
            for up in pair:
                await up.up()
            self.upstreams[scenario.name] = pair
        config = self.workdir / "drill.yaml"
        config.write_text(self.config())
        if self.scale != 1.0:
            plan = self.workdir / "plan.json"
            await self._run("compile", str(config), "-o", str(plan))
            config.write_text(self.config(_scaled(orjson.loads(plan.read_bytes()), self.scale)))
        await self._serve(config)
        return self

    async def _run(self, *args: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "interlock", *args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        out, _ = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"interlock {args[0]} failed: {out.decode(errors='replace')}")

    async def _serve(self, config: Path) -> None:
        env = {"PATH": os.environ.get("PATH", ""), "DRILL_KEY": KEY}
        self._log = self.log_path.open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "interlock",
            "serve",
            str(config),
            "--port",
            "0",
            "--access-log",
            "json",
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            env=env,
        )
        assert self.proc.stdout is not None
        line = (await self.proc.stdout.readline()).decode()
        if not line.startswith("interlock serving http://"):
            raise RuntimeError(f"interlock serve did not start: {line!r}\n{self.log_path.read_text()}")
        self.client.base_url = httpx.URL(line.split()[2])
        for _ in range(600):
            with contextlib.suppress(httpx.TransportError):
                if (await self.client.get("/readyz")).status_code == 200:
                    return
            await asyncio.sleep(0.1)
        raise RuntimeError("interlock serve never became ready")

    async def __aexit__(self, *exc: object) -> None:
        await self.client.aclose()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(10):
                    await self.proc.wait()
            if self.proc.returncode is None:
                self.proc.kill()
                await self.proc.wait()
        if hasattr(self, "_log"):
            self._log.close()
        for pair in self.upstreams.values():
            for up in pair:
                await up.down()

    def access_lines(self) -> dict[str, dict[str, Any]]:
        """The access log's lines so far, by request id."""
        lines: dict[str, dict[str, Any]] = {}
        self._log.flush()
        for raw in self.log_path.read_bytes().splitlines():
            if raw.startswith(b"{"):
                with contextlib.suppress(orjson.JSONDecodeError):
                    obj = orjson.loads(raw)
                    if "request_id" in obj:
                        lines[obj["request_id"]] = obj
        return lines

    async def one(self, scenario: Scenario) -> Result:
        seen = await ask(self.client, self.model(scenario), self.scale)
        primary, fallback = self.upstreams[scenario.name]
        error = seen.error_body.get("error") if isinstance(seen.error_body, dict) else None
        note = ""
        if isinstance(error, dict):
            note = f"{seen.status} {error.get('type')}/{error.get('code')}: {str(error.get('message'))[:90]}"
        elif seen.error_body is not None:
            note = str(seen.error_body)[:120]
        log = None
        if seen.request_id is not None:
            for _ in range(100):  # the line is written once the request has finished
                log = self.access_lines().get(seen.request_id)
                if log is not None:
                    break
                await asyncio.sleep(0.05)
        result = Result(
            scenario.name,
            primary.attempts,
            fallback.attempts,
            seen.seconds,
            seen.outcome,
            self.who(scenario, seen),
            scenario.target,
            False,
            note,
            self.scale,
            seen,
            log,
        )
        meets = scenario.meets or (lambda r: r.outcome == "rescued")
        result.met = meets(result)
        return result

    async def run(self) -> list[Result]:
        """Every scenario at once (each has its own alias and upstreams): the rows, in order."""

        async def each(scenario: Scenario) -> Result:
            run = scenario.run or (lambda drill, sc: drill.one(sc))
            return await run(self, scenario)

        return list(await asyncio.gather(*(each(s) for s in self.scenarios)))


def table(results: Sequence[Result], scale: float = 1.0) -> str:
    """The drill's table in Markdown: attempts each upstream saw, wall time, outcome, target."""
    rows = [
        f"every duration of the defaults and the scripts times {scale:g}" if scale != 1 else "real time",
        "",
        "| scenario | attempts (primary/fallback) | time | outcome | answered by | target | met | note |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        rows.append(
            f"| {r.name} | {r.primary}/{r.fallback} | {r.seconds:.1f} s | {r.outcome} | "
            f"{r.answered_by} | {r.target} | {'yes' if r.met else 'NO'} | {r.note.replace('|', '/')} |"
        )
    counted = [r for r in results if not r.name.endswith("-alone")]
    rescued = sum(1 for r in counted if r.outcome == "rescued" and r.met)
    hangs = sum(1 for r in results if r.outcome == "hang")
    truncated = sum(1 for r in results if r.outcome == "truncated")
    rows.append("")
    rows.append(
        f"{rescued} of {len(counted)} rescued cleanly; {hangs} hangs; "
        f"{truncated} truncated passed as complete; "
        f"targets met {sum(r.met for r in results)} of {len(results)}"
    )
    return "\n".join(rows)


def main_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="drill-"))
