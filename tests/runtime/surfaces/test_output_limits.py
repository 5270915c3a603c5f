"""Output ceilings (issue 30 item 5): ``max_tokens`` and kin must be integers from 1 to 2**31 - 1 on every
surface (a 400 naming the field, in the surface's own shape, and nothing sent upstream), and the ceiling
that goes upstream is never above what the caller's credits and tokens per minute cover (cut, and said
in ``X-Interlock-Max-Tokens``; a 402 or a 429 where not even the least answer is covered)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from interlock.commands.gateway import build_gateway
from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_openai import FakeOpenAI
from tests.runtime.conftest import build

CONFIG = """\
version: 1
server: {{default_alias: t/plain, alias_namespace: t/, auth: required}}
providers:
  plain: {{kind: openai, base_url: "{plain}", probe: false}}
  claude: {{kind: anthropic, base_url: "{claude}", probe: false, api_key_env: CLOUD_KEY}}
  local:
    kind: ollama
    probe: false
    workers: [{{name: box, url: "{local}"}}]
aliases:
  t/plain: {{description: openai-compatible, chain: [plain/p1]}}
  t/claude: {{description: anthropic, chain: [claude/c1]}}
  t/local: {{description: ollama, chain: [local/llama3.2:3b]}}
tenants:
  lab: {{description: the tenant of every key}}
keys:
  rich-key: {{tenant: lab, key_env: RICH_KEY}}
  poor-key: {{tenant: lab, key_env: POOR_KEY, credits: 40}}
  broke-key: {{tenant: lab, key_env: BROKE_KEY, credits: 13}}
  rate-key: {{tenant: lab, key_env: RATE_KEY, tokens_per_minute: 40}}
"""
ENV = {
    "CLOUD_KEY": "sk-cloud-secret",
    "RICH_KEY": "sk-rich-4f1a9c2e7b",
    "POOR_KEY": "sk-poor-8d3b6e0a1c",
    "BROKE_KEY": "sk-broke-2c7e9a4f6d",
    "RATE_KEY": "sk-rate-5b8d1f3a9e",
}
HI = [{"role": "user", "content": "hello there, how are you today?"}]  # 13 tokens by the estimate
# each surface's path, a request without a ceiling, and the caller's ceiling field
SURFACES: list[tuple[str, dict[str, Any], str]] = [
    ("/v1/chat/completions", {"model": "t/plain", "messages": HI}, "max_tokens"),
    ("/v1/chat/completions", {"model": "t/plain", "messages": HI}, "max_completion_tokens"),
    ("/v1/chat/completions", {"model": "t/plain", "messages": HI}, "num_predict"),
    ("/v1/chat/completions", {"model": "t/plain", "messages": HI}, "options.num_predict"),
    ("/v1/responses", {"model": "t/plain", "input": HI}, "max_output_tokens"),
    ("/v1/messages", {"model": "t/claude", "messages": HI}, "max_tokens"),
    ("/api/chat", {"model": "t/local", "messages": HI, "stream": False}, "options.num_predict"),
]
BAD = [-5, 0, 1.5, "100", True, 10**30, 2**31, [1]]


@dataclass
class Rig:
    plain: FakeOpenAI
    claude: FakeAnthropic
    local: FakeOllama
    ask: Callable[[str, str, dict[str, Any]], httpx.Response]

    def sent(self) -> list[Any]:
        """The bodies the upstreams got (chats and messages only)."""
        fakes: list[Any] = [self.plain, self.claude, self.local]
        return [
            r.body
            for fake in fakes
            for r in fake.requests
            if r.path.endswith(("/chat/completions", "/messages", "/api/chat"))
        ]


@pytest.fixture
def rig(plan_data: Callable[[str], dict[str, Any]]) -> Iterator[Rig]:
    with (
        FakeOpenAI(name="plain") as plain,
        FakeAnthropic(name="claude", api_key=ENV["CLOUD_KEY"]) as claude,
        FakeOllama(name="local", models=[ModelSpec("llama3.2:3b", ("completion",))]) as local,
    ):
        data = plan_data(CONFIG.format(plain=plain.base_url, claude=claude.url, local=local.url))
        gateway = build_gateway(build(data, ENV), probes=False)
        loop = asyncio.new_event_loop()
        loop.run_until_complete(gateway.startup())
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=gateway), base_url="http://t")

        def ask(key: str, path: str, body: dict[str, Any]) -> httpx.Response:
            headers = {"authorization": f"Bearer {ENV[key]}"}
            return loop.run_until_complete(http.post(path, json=body, headers=headers))

        try:
            yield Rig(plain, claude, local, ask)
        finally:
            loop.run_until_complete(http.aclose())
            loop.run_until_complete(gateway.shutdown())
            loop.close()


def with_ceiling(body: dict[str, Any], field: str, value: Any) -> dict[str, Any]:
    if field == "options.num_predict":
        return {**body, "options": {"num_predict": value}}
    return {**body, field: value}


def error_of(path: str, answer: httpx.Response) -> tuple[str, str | None]:
    """(message, param) of a refusal in the surface's own shape."""
    body = answer.json()
    if path == "/api/chat":
        assert set(body) == {"error"}
        return body["error"], None
    if path == "/v1/messages":
        assert (body["type"], body["error"]["type"]) == ("error", "invalid_request_error")
        return body["error"]["message"], None
    assert body["error"]["type"] == "invalid_request_error"
    return body["error"]["message"], body["error"]["param"]


@pytest.mark.parametrize(("path", "body", "field"), SURFACES)
def test_a_ceiling_that_is_not_a_positive_bounded_integer_is_refused_naming_the_field(
    rig: Rig, path: str, body: dict[str, Any], field: str
) -> None:
    for value in BAD:
        answer = rig.ask("RICH_KEY", path, with_ceiling(body, field, value))
        assert answer.status_code == 400, (field, value, answer.text)
        message, param = error_of(path, answer)
        shown = "a boolean" if value is True else "an array" if value == [1] else "a string"
        if isinstance(value, int | float) and not isinstance(value, bool):
            shown = repr(float(value) if value == 10**30 else value)  # JSON's 1e30 reads as a float
        assert message == f"`{field}` must be a positive integer of at most 2147483647, not {shown}"
        assert param in (None, field)
    assert rig.sent() == []  # nothing refused went upstream
    answer = rig.ask("RICH_KEY", path, with_ceiling(body, field, 2**31 - 1))  # the bound itself passes
    assert answer.status_code == 200, answer.text
    assert "x-interlock-max-tokens" not in answer.headers  # no credits: nothing cut


def test_ollamas_own_no_limit_values_pass_on_its_surface_only(rig: Rig) -> None:
    for value in (-1, -2):
        native = {"model": "t/local", "messages": HI, "stream": False, "options": {"num_predict": value}}
        assert rig.ask("RICH_KEY", "/api/chat", native).status_code == 200
        chat = {"model": "t/plain", "messages": HI, "options": {"num_predict": value}}
        assert rig.ask("RICH_KEY", "/v1/chat/completions", chat).status_code == 400
    assert [body["options"]["num_predict"] for body in rig.sent()] == [-1, -2]


# what the upstream got as its ceiling, by surface: the caller's field in a same-format relay, else the
# internal form's `max_tokens` in the upstream's format
def ceiling_sent(path: str, body: dict[str, Any]) -> Any:
    if path == "/api/chat":
        return body["options"]["num_predict"]
    return body.get("max_tokens", body.get("max_completion_tokens"))


@pytest.mark.parametrize(("path", "body", "field"), SURFACES)
def test_the_ceiling_sent_is_cut_to_what_the_credits_cover(
    rig: Rig, path: str, body: dict[str, Any], field: str
) -> None:
    """40 tokens of credits, a prompt of 13: a ceiling of 2**31 - 1 goes upstream as 27, and says so."""
    answer = rig.ask("POOR_KEY", path, with_ceiling(body, field, 2**31 - 1))
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-interlock-max-tokens"] == "27; clamped-by=credits"
    (sent,) = rig.sent()
    assert ceiling_sent(path, sent) == 27, sent
    if path == "/v1/chat/completions":  # the field the caller set is cut, none added beside it
        names = ("max_tokens", "max_completion_tokens", "num_predict")
        named = {name: sent[name] for name in names if name in sent}
        lifted = "max_tokens" if field.endswith("num_predict") else field  # the adapter lifts num_predict
        assert named == {lifted: 27}, sent


def test_a_ceiling_within_the_credits_is_sent_as_it_came(rig: Rig) -> None:
    body = {"model": "t/plain", "messages": HI, "max_tokens": 20}
    answer = rig.ask("POOR_KEY", "/v1/chat/completions", body)
    assert answer.status_code == 200
    assert "x-interlock-max-tokens" not in answer.headers
    assert [body["max_tokens"] for body in rig.sent()] == [20]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/api/chat"])
def test_without_a_ceiling_one_is_set_when_the_default_is_more_than_the_credits_cover(
    rig: Rig, path: str
) -> None:
    """The preflight's default output (256) is above the 27 the credits cover: a ceiling is added, in the
    Ollama worker's own request too (``options.num_predict``), and its ``-1`` ("no limit") is cut."""
    body = {"model": "t/local", "messages": HI, "stream": False, "options": {"num_predict": -1}}
    answer = rig.ask("POOR_KEY", path, body if path == "/api/chat" else {**body, "options": {}})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-interlock-max-tokens"] == "27; clamped-by=credits"
    (sent,) = rig.sent()
    assert sent["options"]["num_predict"] == 27


def test_a_prompt_the_credits_cannot_answer_at_all_is_refused_with_402(rig: Rig) -> None:
    """13 tokens of credits, a prompt of 13: not even one token of answer is covered."""
    for path, body, _ in SURFACES:
        answer = rig.ask("BROKE_KEY", path, {**body, "max_tokens": 1})
        assert answer.status_code == 402, (path, answer.text)
    assert rig.sent() == []
    short = [{"role": "user", "content": "hi"}]
    answer = rig.ask("BROKE_KEY", "/v1/chat/completions", {"model": "t/plain", "messages": short})
    assert answer.status_code == 200  # a prompt of 5: 8 tokens of answer are covered
    assert answer.headers["x-interlock-max-tokens"] == "8; clamped-by=credits"
    assert orjson.loads(answer.content)["usage"]["completion_tokens"] <= 8


def test_the_ceiling_sent_is_cut_to_what_the_tokens_per_minute_leave(rig: Rig) -> None:
    """40 tokens a minute, a prompt of 13: the ceiling goes upstream as 27; a prompt that the minute can
    never answer is a 429 (nothing sent)."""
    body = {"model": "t/plain", "messages": HI, "max_tokens": 2**31 - 1}
    answer = rig.ask("RATE_KEY", "/v1/chat/completions", body)
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-interlock-max-tokens"] == "27; clamped-by=tokens_per_minute"
    assert [sent["max_tokens"] for sent in rig.sent()] == [27]
    long = [{"role": "user", "content": "word " * 30}]  # 4 + 43 tokens by the estimate
    refused = rig.ask("RATE_KEY", "/v1/chat/completions", {"model": "t/plain", "messages": long})
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["message"].startswith("key `rate-key`")
    assert len(rig.sent()) == 1
