"""The operator role against a real `interlock serve`: once a key is `operator: true`, the routes that
show the whole fleet (every tenant's budget, the workers) answer only operator keys; every other key
gets 403 there and keeps its own model routes. (A plan with no operator: ``test_access.py``.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import ollama
import openai
import pytest

from interlock.cli import main
from interlock.testing.fake_openai import FakeOpenAI
from tests.e2e.harness import Served
from tests.waiting import wait_until

ADMIN = "admin-5d1a7c-SECRET"
ALICE = "alice-93be20-SECRET"
CONFIG = """\
version: 1
server: {{auth: required}}
providers:
  cloud: {{kind: openai, base_url: "{cloud}/v1", timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}}}
tenants:
  mana: {{allowed: ["mana/*"], credits: 100000}}
  ops: {{}}
keys:
  admin: {{tenant: ops, key_env: ADMIN_KEY, operator: true}}
  alice: {{tenant: mana, key_env: ALICE_KEY}}
aliases:
  mana/fast: {{description: fast, chain: [cloud/m-fast]}}
"""
ADMIN_ROUTES = ("/ui", "/ui/budgets", "/v1/health", "/v1/metadata")
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("operator")
    cloud = FakeOpenAI(name="cloud").start()
    config = folder / "interlock.yaml"
    config.write_text(CONFIG.format(cloud=cloud.url))
    env = {"ADMIN_KEY": ADMIN, "ALICE_KEY": ALICE}
    audit = folder / "audit.jsonl"
    gateway = Served(config, env, folder / "serve.log", "--audit-log", str(audit))
    gateway.audit = audit  # type: ignore[attr-defined]
    try:
        yield gateway
    finally:
        gateway.stop()
        cloud.stop()
        log = gateway.log()
        assert not [key for key in (ADMIN, ALICE) if key in log], "a caller key reached the log"


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def audit_lines(served: Served) -> list[dict[str, object]]:
    path: Path = served.audit  # type: ignore[attr-defined]
    text = path.read_text() if path.exists() else ""
    return [json.loads(line) for line in text.splitlines()]


def test_an_operator_key_reads_the_fleet_and_no_warning_is_given(served: Served) -> None:
    for path in (*ADMIN_ROUTES, "/api/ps"):
        answer = httpx.get(f"{served.url}{path}", headers=bearer(ADMIN))
        assert answer.status_code == 200, (path, answer.text)
    health = httpx.get(f"{served.url}/v1/health", headers=bearer(ADMIN)).json()
    assert health["usage"]["tenants"]["mana"]["credits"] == 100000  # another tenant's budget
    assert "IL820" not in served.log()


def test_another_key_gets_403_on_each_operator_route_in_its_surfaces_shape(served: Served) -> None:
    message = (
        "key `alice` (tenant `mana`) may not read `{route}`: it shows every tenant's state and needs an "
        "operator key (`operator: true` in the key's entry)"
    )
    assert ADMIN_ROUTES  # an empty table would let the loop below prove nothing
    for path in ADMIN_ROUTES:
        answer = httpx.get(f"{served.url}{path}", headers=bearer(ALICE))
        assert answer.status_code == 403, path
        assert "www-authenticate" not in answer.headers
        route = "/ui/{section}" if path == "/ui/budgets" else path
        assert answer.json() == {
            "error": {
                "message": message.format(route=route),
                "type": "permission_error",
                "param": None,
                "code": "operator_required",
            }
        }
        assert "admin" not in answer.text  # no other key is named
    native = ollama.Client(host=served.url, headers=bearer(ALICE))
    with pytest.raises(ollama.ResponseError) as refused:
        native.ps()
    assert refused.value.status_code == 403
    assert refused.value.error == message.format(route="/api/ps")
    head = httpx.head(f"{served.url}/v1/health", headers=bearer(ALICE))
    assert head.status_code == 403


def test_another_key_keeps_its_own_routes(served: Served) -> None:
    client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=ALICE, max_retries=0)
    answer = client.chat.completions.create(model="mana/fast", messages=HI)  # type: ignore[arg-type]
    assert answer.choices[0].message.content
    assert [model.id for model in client.models.list()] == ["mana/fast"]
    assert httpx.get(f"{served.url}/v1/aliases", headers=bearer(ALICE)).status_code == 200
    assert httpx.get(f"{served.url}/ui/static/page.css").status_code == 200  # no data: open to all
    document = httpx.get(f"{served.url}/openapi.json", headers=bearer(ALICE)).json()
    health = document["paths"]["/v1/health"]["get"]["responses"]
    assert health["403"]["description"].startswith("The route shows every tenant's state")
    assert "403" not in document["paths"]["/v1/aliases"]["get"]["responses"]


def test_without_a_valid_key_the_operator_routes_still_answer_401(served: Served) -> None:
    assert ADMIN_ROUTES  # an empty table would let the loop below prove nothing
    for path in ADMIN_ROUTES:
        for headers in ({}, bearer("wrong")):
            answer = httpx.get(f"{served.url}{path}", headers=headers)
            assert answer.status_code == 401, (path, headers)
            assert answer.headers["www-authenticate"] == 'Bearer realm="interlock"'
            assert answer.json()["error"]["code"] == "invalid_api_key"


def test_the_403_is_audited_with_the_key_id_like_other_refusals(served: Served) -> None:
    httpx.get(f"{served.url}/v1/metadata", headers=bearer(ALICE))
    httpx.get(f"{served.url}/api/ps", headers=bearer(ALICE))

    def refused() -> list[dict[str, object]]:
        return [
            {k: v for k, v in line.items() if k != "time"}
            for line in audit_lines(served)
            if line.get("action") == "auth_refused" and line.get("status") == 403
        ]

    wait_until(lambda: len(refused()) >= 2, 30, "the refusals to reach the audit log")
    lines = refused()
    for path in ("/v1/metadata", "/api/ps"):
        assert {
            "event": "security",
            "action": "auth_refused",
            "method": "GET",
            "path": path,
            "key_sent": True,
            "status": 403,
            "key_id": "alice",
            "tenant": "mana",
        } in lines
    assert ALICE not in json.dumps(lines)


def test_status_reads_the_gateway_with_an_operator_key(
    served: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("INTERLOCK_API_KEY", ADMIN)
    assert main(["status", "--url", served.url, "--format", "json"]) in (0, 1)
    assert '"aliases"' in capsys.readouterr().out
    monkeypatch.setenv("INTERLOCK_API_KEY", ALICE)
    assert main(["status", "--url", served.url]) == 2
    assert (
        "answered 403: this gateway shows its state to operator keys only; put a key with "
        "`operator: true` in INTERLOCK_API_KEY" in capsys.readouterr().err
    )


def test_refusals_are_counted_under_their_own_endpoint_and_listings_are_not_counted(served: Served) -> None:
    """A refusal on a lifecycle route counts under that route's endpoint, like its other answers; one on
    an Ollama listing route (whose errors borrow the Embed surface's shape) is not counted, as its other
    answers are not, instead of counting as an `embeddings` request."""
    assert httpx.get(f"{served.url}/api/ps", headers=bearer(ALICE)).status_code == 403
    chat = {"model": "mana/fast", "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(f"{served.url}/v1/chat/completions", json=chat).status_code == 401
    metrics = httpx.get(f"{served.url}/metrics").text
    assert 'interlock_requests_total{endpoint="chat",status="401"}' in metrics
    assert 'endpoint="embeddings",status="403"' not in metrics
    assert 'endpoint="embeddings",status="401"' not in metrics
