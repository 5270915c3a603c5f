"""Caller keys against a real `interlock serve` under `server.auth: required`: the real SDKs see 401,
403 and 429 (with Retry-After) in their own error classes; listings show only what a key may use."""

from __future__ import annotations

import json
from collections.abc import Iterator

import anthropic
import httpx
import ollama
import openai
import pytest

from interlock.cli import main
from interlock.common.apikeys import hash_key, new_key
from interlock.testing.fake_openai import FakeOpenAI
from tests.e2e.harness import Served

ALICE = "alice-0f4c2b9e-SECRET"
LIMITED = "limited-77d1e0-SECRET"
THRIFTY = "thrifty-a93b12-SECRET"
LOCAL = "local-6e2f90-SECRET"
GENERATED = new_key("ci")
CONFIG = """\
version: 1
server: {{auth: required, direct_models: allow}}
providers:
  cloud: {{kind: openai, base_url: "{cloud}/v1", timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}}}
  groq: {{kind: openai, base_url: "{groq}/v1", timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}}}
tenants:
  mana: {{allowed: ["mana/*"]}}
  ops: {{}}
keys:
  alice: {{tenant: mana, key_env: ALICE_KEY}}
  ci: {{tenant: ops, hash: "{hash}"}}
  limited: {{tenant: ops, key_env: LIMITED_KEY, requests_per_minute: 2}}
  thrifty: {{tenant: ops, key_env: THRIFTY_KEY, tokens_per_minute: 1}}
  local-only: {{tenant: ops, key_env: LOCAL_KEY, denied: ["groq/*"]}}
aliases:
  mana/fast: {{description: fast, chain: [cloud/m-fast]}}
  mana/big: {{description: big, chain: [groq/llama-3.3-70b]}}
  mana/mixed: {{description: groq first, chain: [groq/g-mixed, cloud/c-mixed]}}
  team/other: {{description: not under mana/, chain: [groq/llama-3.1-8b]}}
"""
HI = [{"role": "user", "content": "hi"}]
SECRETS = (ALICE, LIMITED, THRIFTY, LOCAL, GENERATED)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("access")
    cloud, groq = FakeOpenAI(name="cloud").start(), FakeOpenAI(name="groq").start()
    config = folder / "interlock.yaml"
    config.write_text(CONFIG.format(cloud=cloud.url, groq=groq.url, hash=hash_key(GENERATED)))
    env = {"ALICE_KEY": ALICE, "LIMITED_KEY": LIMITED, "THRIFTY_KEY": THRIFTY, "LOCAL_KEY": LOCAL}
    gateway = Served(config, env, folder / "serve.log", "--access-log", "json")
    try:
        yield gateway
    finally:
        gateway.stop()
        cloud.stop()
        groq.stop()
        log = gateway.log()
        assert not [s for s in SECRETS if s in log], "a caller key reached the log"


def sdk(served: Served, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=key, max_retries=0)


def test_no_key_is_401_in_openai_shape_naming_what_is_missing(served: Served) -> None:
    answer = httpx.post(f"{served.url}/v1/chat/completions", json={"model": "mana/fast", "messages": HI})
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == 'Bearer realm="interlock"'
    assert answer.json()["error"] == {
        "message": "this gateway needs an API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`",
        "type": "authentication_error",
        "param": None,
        "code": "invalid_api_key",
    }
    with pytest.raises(openai.AuthenticationError) as refused:
        sdk(served, "not-a-key").chat.completions.create(model="mana/fast", messages=HI)  # type: ignore[arg-type]
    assert refused.value.status_code == 401
    assert "not valid for this gateway" in refused.value.message
    assert "alice" not in refused.value.response.text  # which keys exist is never said


def test_a_key_calls_what_it_may_and_gets_404_for_the_rest(served: Served) -> None:
    alice = sdk(served, ALICE)
    done = alice.chat.completions.create(model="mana/fast", messages=HI)  # type: ignore[arg-type]
    assert done.choices[0].message.content
    with pytest.raises(openai.NotFoundError) as refused:
        alice.chat.completions.create(model="groq/llama-3.3-70b", messages=HI)  # type: ignore[arg-type]
    assert refused.value.status_code == 404
    assert refused.value.message == (
        "Error code: 404 - `groq/llama-3.3-70b` is not a model key `alice` (tenant `mana`) may use; its "
        "aliases: mana/big, mana/fast, mana/mixed; GET /v1/models lists every model it may use"
    )
    generated = httpx.post(  # a generated key, by `x-api-key`, may call anything of its tenant's
        f"{served.url}/v1/chat/completions",
        json={"model": "groq/llama-3.3-70b", "messages": HI},
        headers={"x-api-key": GENERATED},
    )
    assert generated.status_code == 200


def test_listings_show_only_what_the_key_may_use(served: Served) -> None:
    assert sorted(m.id for m in sdk(served, ALICE).models.list()) == ["mana/big", "mana/fast", "mana/mixed"]
    every = sorted(m.id for m in sdk(served, GENERATED).models.list())
    assert "team/other" in every
    assert "groq/llama-3.3-70b" in every
    with pytest.raises(openai.NotFoundError):
        sdk(served, ALICE).models.retrieve("team/other")
    tags = ollama.Client(host=served.url, headers={"Authorization": f"Bearer {ALICE}"}).list()
    assert sorted(m.model or "" for m in tags.models) == ["mana/big", "mana/fast", "mana/mixed"]


def test_rate_limits_answer_429_with_retry_after(served: Served) -> None:
    """Fixed one-minute windows: at most 2 a window, so 5 calls (at most two windows) meet a 429."""
    limited = sdk(served, LIMITED)
    statuses: list[int] = []
    refusal: openai.RateLimitError | None = None
    for _ in range(5):
        try:
            limited.chat.completions.create(model="mana/fast", messages=HI)  # type: ignore[arg-type]
            statuses.append(200)
        except openai.RateLimitError as exc:
            refusal = exc
            break
    assert refusal is not None, statuses
    assert 2 <= len(statuses) <= 4
    assert 1 <= int(refusal.response.headers["retry-after"]) <= 60
    assert "key `limited` may make 2 requests per minute, and that is used up" in refusal.message


def test_tokens_per_minute_count_the_answers_usage(served: Served) -> None:
    thrifty = sdk(served, THRIFTY)
    refused = None
    for _ in range(3):  # the first answer's usage uses the budget up (unless a minute begins)
        try:
            thrifty.chat.completions.create(model="mana/fast", messages=HI)  # type: ignore[arg-type]
        except openai.RateLimitError as exc:
            refused = exc
            break
    assert refused is not None
    assert "key `thrifty` may make 1 tokens per minute" in refused.message


def test_every_surface_words_its_401_in_its_own_shape(served: Served) -> None:
    with pytest.raises(anthropic.AuthenticationError) as claude:
        anthropic.Anthropic(base_url=served.url, api_key="wrong", max_retries=0).messages.create(
            model="mana/fast", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
    assert claude.value.body == {
        "type": "error",
        "error": {
            "type": "authentication_error",
            "message": "the API key sent is not valid for this gateway",
        },
    }
    before = served.metric("interlock_requests_total", endpoint="chat", status="401")
    httpx.post(f"{served.url}/v1/chat/completions", json={"model": "mana/fast", "messages": HI})
    after = served.metric("interlock_requests_total", endpoint="chat", status="401")
    assert after == before + 1  # a refusal is counted like any answer (/metrics needs no key)
    with pytest.raises(ollama.ResponseError) as native:
        ollama.Client(host=served.url).chat(model="mana/fast", messages=HI)
    assert native.value.status_code == 401
    assert native.value.error.startswith("this gateway needs an API key")
    with pytest.raises(openai.AuthenticationError):
        sdk(served, "wrong").responses.create(model="mana/fast", input="hi")
    assert httpx.get(f"{served.url}/v1/health").status_code == 401
    assert httpx.get(f"{served.url}/ui").status_code == 401
    assert httpx.get(f"{served.url}/healthz").status_code == 200  # probes stay open
    assert httpx.get(f"{served.url}/api/version").status_code == 200


def test_status_sends_the_key_from_its_variable(
    served: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("INTERLOCK_API_KEY", raising=False)
    assert main(["status", "--url", served.url]) == 2
    assert (
        "answered 401: the gateway needs a caller key; put one in INTERLOCK_API_KEY"
        in capsys.readouterr().err
    )
    monkeypatch.setenv("INTERLOCK_API_KEY", GENERATED)
    assert main(["status", "--url", served.url, "--format", "json"]) in (0, 1)
    out = capsys.readouterr().out
    assert '"aliases"' in out
    assert GENERATED not in out


def test_without_an_operator_key_any_valid_key_reads_the_fleet_and_the_compiler_says_so(
    served: Served,
) -> None:
    """No key is `operator: true` here: the operator routes answer every valid key, as before operators
    existed (``test_operator.py`` has a plan with one), and `serve` printed the IL820 warning."""
    for path in ("/ui", "/ui/budgets", "/v1/health", "/v1/metadata", "/api/ps"):
        answer = httpx.get(f"{served.url}{path}", headers={"authorization": f"Bearer {ALICE}"})
        assert answer.status_code == 200, path
    health = httpx.get(f"{served.url}/v1/health", headers={"x-api-key": ALICE}).json()
    assert set(health["usage"]["tenants"]) == {"mana", "ops"}  # alice sees tenant `ops` too
    assert (
        "warning IL820 no-operator-key: no key is an operator, so any valid key (5 declared)" in served.log()
    )


def test_the_access_log_names_the_key_and_tenant_never_the_secret(served: Served) -> None:
    sdk(served, ALICE).chat.completions.create(model="mana/fast", messages=HI)  # type: ignore[arg-type]
    httpx.post(f"{served.url}/v1/chat/completions", json={"model": "mana/fast", "messages": HI})
    lines = [json.loads(line) for line in served.log().splitlines() if line.startswith("{")]
    assert {"key": "alice", "tenant": "mana", "status": 200} in [
        {k: line[k] for k in ("key", "tenant", "status")} for line in lines
    ]
    refused = [line for line in lines if line["status"] == 401]
    assert refused
    assert refused[-1]["error_class"] == "invalid_api_key"
    assert refused[-1]["key"] is None


def test_denied_names_leave_an_aliases_chain_for_that_caller(served: Served) -> None:
    """`denied: [groq/*]` is never sent to groq, even through an alias whose chain starts there."""
    local = sdk(served, LOCAL)
    answer = local.chat.completions.with_raw_response.create(model="mana/mixed", messages=HI)  # type: ignore[arg-type]
    assert answer.headers["x-interlock-resolved"] == "cloud/c-mixed"
    others = sdk(served, GENERATED).chat.completions.with_raw_response.create(model="mana/mixed", messages=HI)  # type: ignore[arg-type]
    assert others.headers["x-interlock-resolved"] == "groq/g-mixed"  # another key: the whole chain
    with pytest.raises(openai.NotFoundError):
        local.chat.completions.create(model="mana/big", messages=HI)  # type: ignore[arg-type]
    assert "mana/big" not in [m.id for m in local.models.list()]  # its only candidate is denied


def test_404_in_the_anthropic_and_ollama_shapes(served: Served) -> None:
    claude = anthropic.Anthropic(base_url=served.url, api_key=ALICE, max_retries=0)
    with pytest.raises(anthropic.NotFoundError) as refused:
        claude.messages.create(
            model="team/other", max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
    assert refused.value.body == {
        "type": "error",
        "error": {
            "type": "not_found_error",
            "message": "`team/other` is not a model key `alice` (tenant `mana`) may use; its aliases: "
            "mana/big, mana/fast, mana/mixed; GET /v1/models lists every model it may use",
        },
    }
    native = ollama.Client(host=served.url, headers={"Authorization": f"Bearer {ALICE}"})
    with pytest.raises(ollama.ResponseError) as denied:
        native.chat(model="team/other", messages=HI)
    assert denied.value.status_code == 404
    assert denied.value.error.startswith("`team/other` is not a model key `alice` (tenant `mana`) may use")


@pytest.mark.parametrize("forbidden", ["team/other", "groq/llama-3.3-70b"])
def test_a_forbidden_model_and_an_unknown_one_look_the_same(served: Served, forbidden: str) -> None:
    """Neither confirms what exists: same status and body but for the name, and only the aliases the
    key may use are listed (never `team/other`, never the providers)."""

    def refusal(model: str) -> tuple[int, str]:
        answer = httpx.post(
            f"{served.url}/v1/chat/completions",
            json={"model": model, "messages": HI},
            headers={"Authorization": f"Bearer {ALICE}"},
        )
        return answer.status_code, answer.text.replace(model, "<model>")

    assert refusal(forbidden) == refusal("team/nothing-here") == refusal("nowhere/at-all")
    status, body = refusal(forbidden)
    assert status == 404
    assert "team/other" not in body
    assert "groq" not in body
