"""The audit log and OpenTelemetry tracing through a real `interlock serve` (issue 14, part C).

One gateway runs with ``--audit-log FILE --otel``, exporting OTLP/HTTP to a real receiver on loopback
(``tests/otlp_receiver.py``); the clients are the real ``openai`` SDK; the upstreams are the fakes.
Everything is waited for by state (lines in the file, spans at the receiver), never by time.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest

from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.replies import Reply
from tests.e2e.harness import Served, compile_to
from tests.otlp_receiver import OtlpReceiver
from tests.waiting import wait_until

UPSTREAM_KEY = "sk-upstream-SECRET-93be1f"
CALLER_KEY = "sk-caller-SECRET-4d07aa"
PROMPT = "PROMPT-CANARY-who-was-the-fourth-man"
ANSWER = "ANSWER-CANARY-harry-lime"

CONFIG = """\
version: 1
server: {{default_alias: obs/chat, alias_namespace: obs/, auth: required}}
tenants:
  team-a: {{}}
keys:
  ci: {{tenant: team-a, key_env: CALLER_KEY, allowed: ["obs/*"]}}
providers:
  down:
    kind: ollama
    probe: false
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
    workers: [{{name: down-box, url: "{down}"}}]
  cloud:
    kind: openai
    base_url: "{cloud}/v1"
    api_key_env: OBS_KEY
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
health: {{failure_threshold: 1, open_for: 60s}}
aliases:
  obs/chat: {{description: straight to the cloud, chain: [cloud/o-chat]}}
  obs/fallback: {{description: a dead box first, chain: [down/llama3.2:3b, cloud/o-fallback]}}
"""


@dataclass
class Setup:
    gateway: Served
    cloud: FakeOpenAI
    receiver: OtlpReceiver
    audit: Path
    config: Path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    folder = tmp_path_factory.mktemp("observability")
    cloud = FakeOpenAI(name="cloud", api_key=UPSTREAM_KEY, reply=Reply(text=f"{ANSWER} {{model}}")).start()
    down = FakeOllama(name="down").start()
    down.refuse_connections()
    receiver = OtlpReceiver().start()
    config = folder / "obs.yaml"
    compile_to(config, CONFIG.format(down=down.url, cloud=cloud.url), folder / "obs.json")
    audit = folder / "audit.jsonl"
    env = {
        "OBS_KEY": UPSTREAM_KEY,
        "CALLER_KEY": CALLER_KEY,
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # export within 50 ms instead of 5 s
    }
    gateway = Served(config, env, folder / "serve.log", "--audit-log", str(audit), "--otel")
    try:
        yield Setup(gateway, cloud, receiver, audit, config)
    finally:
        gateway.stop()
        receiver.stop()
        cloud.stop()
        down.stop()


def sdk(setup: Setup) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{setup.gateway.url}/v1", api_key=CALLER_KEY, max_retries=0)


def audit_lines(setup: Setup) -> list[dict[str, Any]]:
    text = setup.audit.read_bytes() if setup.audit.exists() else b""
    return [orjson.loads(line) for line in text.splitlines()]


def request_line(setup: Setup, request_id: str) -> dict[str, Any] | None:
    return next((e for e in audit_lines(setup) if e.get("request_id") == request_id), None)


def test_requests_and_reloads_are_audited_without_prompts_answers_or_secrets(setup: Setup) -> None:
    client = sdk(setup)
    answer = client.chat.completions.with_raw_response.create(
        model="obs/chat",
        messages=[{"role": "user", "content": PROMPT}],
        extra_headers={"x-request-id": "aud-1"},
    )
    assert ANSWER in (answer.parse().choices[0].message.content or "")
    stream = client.chat.completions.create(
        model="obs/chat",
        messages=[{"role": "user", "content": PROMPT}],
        stream=True,
        stream_options={"include_usage": True},
        extra_headers={"x-request-id": "aud-2"},
    )
    assert ANSWER in "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(
            model="obs/nothing",
            messages=[{"role": "user", "content": PROMPT}],
            extra_headers={"x-request-id": "aud-3"},
        )
    wrong = openai.OpenAI(base_url=f"{setup.gateway.url}/v1", api_key="sk-not-a-key-SECRET", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.chat.completions.create(model="obs/chat", messages=[{"role": "user", "content": PROMPT}])
    health = setup.gateway.http.get("/v1/health", headers={"authorization": f"Bearer {CALLER_KEY}"})
    plan = health.json()["plan"]["content_hash"]
    setup.gateway.sighup()  # the same file again: loaded, same hash
    wait_until(
        lambda: any(e.get("action") == "reload" for e in audit_lines(setup)), 30, "the reload's audit line"
    )
    good = setup.config.read_text()
    setup.config.write_text("version: 1\naliases: [not, a, mapping]\n")
    try:
        setup.gateway.sighup()
        wait_until(
            lambda: any(e.get("outcome") == "refused" for e in audit_lines(setup)),
            30,
            "the refused reload's line",
        )
    finally:
        setup.config.write_text(good)
    wait_until(lambda: all(request_line(setup, f"aud-{n}") for n in (1, 2, 3)), 60, "three request lines")

    first, streamed, unknown = (request_line(setup, f"aud-{n}") for n in (1, 2, 3))
    assert first is not None
    assert streamed is not None
    assert unknown is not None
    assert first["event"] == "request"
    assert first["time"].endswith("Z")
    assert {
        k: first[k] for k in ("endpoint", "stream", "alias", "candidate", "worker", "status", "error_class")
    } == {
        "endpoint": "chat",
        "stream": False,
        "alias": "obs/chat",
        "candidate": "cloud/o-chat",
        "worker": None,
        "status": 200,
        "error_class": None,
    }
    assert first["tokens"]["total_tokens"] > 0
    assert first["duration_ms"] > 0
    assert (first["key_id"], first["tenant"]) == ("ci", "team-a")
    assert streamed["stream"] is True
    assert streamed["status"] == 200
    assert streamed["tokens"]["completion_tokens"] > 0  # from the stream's usage chunk
    assert (unknown["status"], unknown["error_class"], unknown["alias"]) == (404, "model_not_found", None)

    (refused,) = [e for e in audit_lines(setup) if e.get("action") == "auth_refused"]
    assert refused | {"time": None} == {
        "time": None,
        "event": "security",
        "action": "auth_refused",
        "method": "POST",
        "path": "/v1/chat/completions",
        "key_sent": True,
        "status": 401,
    }

    reloads = [e for e in audit_lines(setup) if e.get("action") == "reload"]
    assert reloads[0] | {"time": None} == {
        "time": None,
        "event": "admin",
        "action": "reload",
        "outcome": "loaded",
        "from_plan": plan,
        "to_plan": plan,
        "changes": 0,
    }
    assert reloads[1]["outcome"] == "refused"
    assert reloads[1]["to_plan"] is None
    assert reloads[1]["from_plan"] == plan
    assert "does not compile" in reloads[1]["error"]

    text = setup.audit.read_text()
    for secret in (PROMPT, ANSWER, UPSTREAM_KEY, CALLER_KEY, "sk-not-a-key-SECRET"):
        assert secret not in text
    assert setup.gateway.metric("interlock_audit_written_total") >= 5
    assert setup.gateway.metric("interlock_audit_dropped_total", reason="queue_full") == 0


def test_a_fallback_is_one_server_span_with_an_attempt_span_per_candidate(setup: Setup) -> None:
    trace_id, caller_span = secrets.token_hex(16), secrets.token_hex(8)
    answer = sdk(setup).chat.completions.create(
        model="obs/fallback",
        messages=[{"role": "user", "content": PROMPT}],
        extra_headers={"traceparent": f"00-{trace_id}-{caller_span}-01"},
    )
    assert ANSWER in (answer.choices[0].message.content or "")
    wait_until(lambda: len(setup.receiver.trace(trace_id)) >= 3, 30, "the request's three spans")

    spans = setup.receiver.trace(trace_id)
    (server,) = [s for s in spans if s.kind == 2]
    assert (server.name, server.parent_id, server.service) == (
        "POST /v1/chat/completions",
        caller_span,
        "interlock",
    )
    assert server.attributes["interlock.alias"] == "obs/fallback"
    assert server.attributes["interlock.candidate"] == "cloud/o-fallback"
    assert server.attributes["http.response.status_code"] == 200
    assert (server.attributes["interlock.key_id"], server.attributes["interlock.tenant"]) == ("ci", "team-a")
    attempts = sorted((s for s in spans if s.kind == 3), key=lambda s: s.name != "attempt down/llama3.2:3b")
    assert [s.name for s in attempts] == ["attempt down/llama3.2:3b", "attempt cloud/o-fallback"]
    assert all(s.parent_id == server.span_id for s in attempts)
    failed, answered = attempts
    assert failed.attributes | {} == {
        "interlock.alias": "obs/fallback",
        "interlock.candidate": "down/llama3.2:3b",
        "interlock.provider": "down",
        "interlock.worker": "down-box",
        "interlock.outcome": "failed",
        "error.type": "connect",
    }
    assert failed.status_code == 2
    assert answered.attributes["interlock.outcome"] == "ok"
    assert "error.type" not in answered.attributes

    # the answering attempt's context went upstream as W3C traceparent
    (sent,) = [r for r in setup.cloud.requests if r.body and r.body.get("model") == "o-fallback"]
    assert sent.headers["traceparent"] == f"00-{trace_id}-{answered.span_id}-01"

    # the next request skips the dead box (its circuit is open): an event, not an attempt span
    again = secrets.token_hex(16)
    sdk(setup).chat.completions.create(
        model="obs/fallback",
        messages=[{"role": "user", "content": PROMPT}],
        extra_headers={"traceparent": f"00-{again}-{caller_span}-01"},
    )
    wait_until(lambda: len(setup.receiver.trace(again)) >= 2, 30, "the second request's spans")
    (server2,) = [s for s in setup.receiver.trace(again) if s.kind == 2]
    assert [a["interlock.candidate"] for _, a in server2.events] == ["down/llama3.2:3b"]
    assert [s.name for s in setup.receiver.trace(again) if s.kind == 3] == ["attempt cloud/o-fallback"]

    exported = b"".join(setup.receiver.bodies)
    for secret in (PROMPT, ANSWER, UPSTREAM_KEY, CALLER_KEY):
        assert secret.encode() not in exported


def test_a_request_without_traceparent_starts_its_own_trace(setup: Setup) -> None:
    before = {s.trace_id for s in setup.receiver.spans}
    sdk(setup).chat.completions.create(model="obs/chat", messages=[{"role": "user", "content": "hi"}])
    wait_until(lambda: {s.trace_id for s in setup.receiver.spans} - before, 30, "a new trace")
    (new,) = {s.trace_id for s in setup.receiver.spans} - before
    wait_until(lambda: len(setup.receiver.trace(new)) >= 2, 30, "its spans")
    (server,) = [s for s in setup.receiver.trace(new) if s.kind == 2]
    assert server.parent_id == ""


def test_a_bad_audit_target_or_otel_setting_stops_the_start(setup: Setup, tmp_path: Path) -> None:
    import subprocess
    import sys

    def start(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "interlock", "serve", str(setup.config), "--port", "0", *args]
        base = {"PATH": "", "OBS_KEY": UPSTREAM_KEY, "CALLER_KEY": CALLER_KEY}
        return subprocess.run(command, capture_output=True, text=True, timeout=60, env={**base, **env})

    missing = tmp_path / "no-such-dir" / "audit.jsonl"
    done = start("--audit-log", str(missing))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        f"interlock serve: --audit-log: cannot open the audit log {missing}: No such file or directory"
    )
    done = start("--otel", OTEL_TRACES_EXPORTER="zipkin")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "interlock serve: --otel: OTEL_TRACES_EXPORTER: unknown exporter(s) zipkin; "
        "expected otlp, console, none"
    )


def test_every_surface_is_audited_and_traced_by_the_one_lifecycle(setup: Setup) -> None:
    import anthropic
    import ollama

    trace_id = secrets.token_hex(16)
    parent = f"00-{trace_id}-{secrets.token_hex(8)}-01"
    claude = anthropic.Anthropic(base_url=setup.gateway.url, api_key=CALLER_KEY, max_retries=0)
    claude.messages.create(
        model="obs/chat",
        max_tokens=50,
        messages=[{"role": "user", "content": PROMPT}],
        extra_headers={"x-request-id": "surface-anthropic", "traceparent": parent},
    )
    local = ollama.Client(
        host=setup.gateway.url,
        headers={
            "Authorization": f"Bearer {CALLER_KEY}",
            "x-request-id": "surface-ollama",
            "traceparent": parent,
        },
    )
    local.chat(model="obs/chat", messages=[{"role": "user", "content": PROMPT}], stream=False)
    wait_until(
        lambda: request_line(setup, "surface-anthropic") and request_line(setup, "surface-ollama"),
        60,
        "two lines",
    )
    for rid in ("surface-anthropic", "surface-ollama"):
        line = request_line(setup, rid)
        assert line is not None
        assert (line["key_id"], line["alias"], line["status"]) == ("ci", "obs/chat", 200)
    wait_until(
        lambda: len([s for s in setup.receiver.trace(trace_id) if s.kind == 2]) == 2, 30, "two server spans"
    )
    paths = sorted(s.attributes["url.path"] for s in setup.receiver.trace(trace_id) if s.kind == 2)
    assert paths == ["/api/chat", "/v1/messages"]
