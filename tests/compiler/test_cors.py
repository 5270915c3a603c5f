"""CORS: origins normalized or refused by the compiler; the runtime's header tables built from the plan."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from interlock.compiler.passes.cors import normalize_origin
from interlock.runtime.loaded.cors import CorsPolicy
from interlock.schema.plan import PlanCors
from tests.conftest import compile_text

PROVIDERS = """\
version: 1
providers:
  groq: {kind: openai, base_url: "https://api.groq.com/openai/v1", api_key_env: GROQ_API_KEY}
aliases:
  fast: {chain: [groq/a, groq/b]}
"""


@pytest.mark.parametrize(
    ("written", "origin"),
    [
        ("https://app.example.com", "https://app.example.com"),
        ("HTTPS://App.Example.COM", "https://app.example.com"),
        ("https://app.example.com:443", "https://app.example.com"),
        ("http://app.example.com:80", "http://app.example.com"),
        ("http://localhost:5173", "http://localhost:5173"),
        ("https://app.example.com:8443", "https://app.example.com:8443"),
        ("http://[::1]:8080", "http://[::1]:8080"),
    ],
)
def test_origins_are_written_as_browsers_send_them(written: str, origin: str) -> None:
    assert normalize_origin(written) == (origin, "")


EXAMPLE = "e.g. `https://app.example.com` or `http://localhost:5173`"
NO_PATH = "an origin has no path, query or trailing `/`: write `https://app.example.com`"
NO_SCHEME = f"an origin is `http://` or `https://` and a host, {EXAMPLE}"


@pytest.mark.parametrize(
    ("written", "hint"),
    [
        ("https://app.example.com/", NO_PATH),
        ("https://app.example.com/chat?x=1", NO_PATH),
        ("ftp://files.example.com", NO_SCHEME),
        ("https://app.example.com:99999", EXAMPLE),
        ("https://user:pw@app.example.com", "an origin holds no user name or password"),
        ("", NO_SCHEME),
    ],
)
def test_what_is_not_an_origin_says_how_to_write_one(written: str, hint: str) -> None:
    assert normalize_origin(written) == (None, hint)


def test_an_empty_origin_list_is_an_error(tmp_path: Path) -> None:
    ctx = compile_text(tmp_path, PROVIDERS + "server: {cors: {allow_origins: []}}\n")
    assert [(d.code, d.message) for d in ctx.sink.errors] == [
        ("IL802", "`server.cors.allow_origins` is empty, so no browser origin would be allowed")
    ]
    assert ctx.plan is None


def test_any_origin_without_credentials_compiles(tmp_path: Path) -> None:
    ctx = compile_text(tmp_path, PROVIDERS + "server: {cors: {allow_origins: ['*'], max_age: 90s}}\n")
    assert ctx.plan is not None
    assert ctx.plan.server.cors == PlanCors(
        allow_origins=["*"], allow_credentials=False, allow_headers=["*"], max_age_ms=90_000
    )


def scope(*headers: tuple[bytes, bytes], method: str = "POST") -> dict[str, object]:
    return {"type": "http", "method": method, "path": "/v1/chat/completions", "headers": list(headers)}


def test_any_origin_answers_every_origin_with_a_star() -> None:
    policy = CorsPolicy(
        PlanCors(allow_origins=["*"], allow_credentials=False, allow_headers=["*"], max_age_ms=90_500),
        "X-Model",
    )
    answer = policy.answer_for(b"https://anything.example")
    assert answer is not None
    assert answer is policy.answer_for(b"http://other.example")
    assert answer.echo_headers
    assert answer.response == (
        (b"access-control-allow-origin", b"*"),
        (
            b"access-control-expose-headers",
            b"x-model, x-interlock-alias, x-interlock-plan, x-interlock-worker, x-request-id, retry-after, "
            b"retry-after-ms",
        ),
    )
    assert answer.preflight == (
        (b"access-control-allow-origin", b"*"),
        (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
        (b"access-control-max-age", b"90"),
        (b"vary", b"Access-Control-Request-Headers"),
    )  # fmt: skip


def test_listed_origins_are_named_back_with_their_headers() -> None:
    cors = PlanCors(
        allow_origins=["https://app.example.com"],
        allow_credentials=True,
        allow_headers=["authorization", "content-type"],
        max_age_ms=600_000,
    )
    policy = CorsPolicy(cors, "X-Interlock-Resolved")
    assert policy.answer_for(b"https://other.example") is None
    assert policy.answer_for(b"https://app.example.com/") is None  # browsers never send a path
    answer = policy.answer_for(b"https://app.example.com")
    assert answer is not None
    assert not answer.echo_headers
    assert answer.preflight == (
        (b"access-control-allow-origin", b"https://app.example.com"),
        (b"access-control-allow-credentials", b"true"),
        (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
        (b"access-control-max-age", b"600"),
        (b"access-control-allow-headers", b"authorization, content-type"),
        (b"vary", b"Origin"),
    )
    assert answer.response[-1] == (b"vary", b"Origin")


class Sent:
    def __init__(self) -> None:
        self.messages: list[dict[str, object]] = []

    async def __call__(self, message: dict[str, object]) -> None:
        self.messages.append(message)


def admit(policy: CorsPolicy, *headers: tuple[bytes, bytes], method: str = "POST") -> tuple[bool, Sent]:
    """Whether the request goes on (else it was answered as a preflight), and what was sent."""
    sent = Sent()
    admitted = asyncio.run(policy.admit(scope(*headers, method=method), sent, (b"x-interlock-plan", b"p")))
    return admitted is not None, sent


def test_only_options_with_origin_and_a_requested_method_is_a_preflight() -> None:
    policy = CorsPolicy(
        PlanCors(allow_origins=["*"], allow_credentials=False, allow_headers=["*"], max_age_ms=0), "X"
    )
    origin = (b"origin", b"https://app.example.com")
    method = (b"access-control-request-method", b"POST")
    asked = (b"access-control-request-headers", b"authorization, x-stainless-os")
    assert admit(policy, origin, method, asked, method="OPTIONS")[0] is False
    assert admit(policy, origin, method="OPTIONS")[0] is True  # a plain OPTIONS: routed as usual (405)
    assert admit(policy, method, method="OPTIONS")[0] is True  # no Origin: not a browser's preflight
    assert admit(policy, origin, method)[0] is True
    _, sent = admit(policy, origin, method, asked, method="OPTIONS")
    start = sent.messages[0]
    assert start["status"] == 204
    assert (b"access-control-allow-headers", b"authorization, x-stainless-os") in start["headers"]  # type: ignore[operator]
