"""What the gateway answers besides completions, through a real `interlock serve` and the real openai SDK:
every candidate rate limited (429 + Retry-After the SDK obeys), model objects, CORS (as a browser would
send it: the preflight, then the request with its `Origin`).

A gateway of its own (one process for this module), in front of the session's fakes, with its own
model names: nothing here touches the shared gateway's circuits.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import openai
import pytest

from interlock.testing.faults import Fault
from tests.e2e.conftest import ENV, Fakes
from tests.e2e.harness import Served

HI = [{"role": "user", "content": "hi"}]

CONFIG = """\
version: 1
server:
  default_alias: x/limited
  alias_namespace: x/
  direct_models: allow
  cors: {{allow_origins: ["https://app.example.com", "http://localhost:5173"], allow_credentials: true}}
providers:
  alpha:
    kind: openai
    base_url: "{alpha}/v1"
    api_key_env: ALPHA_KEY
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
  bravo:
    kind: openai
    base_url: "{bravo}/v1"
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
models:
  alpha/x-tools: {{capabilities: [completion, tools], context_tokens: 131072}}
health: {{probe_interval: 30s, failure_threshold: 1, open_for: 60s, rate_limit_open_for: 30s}}
aliases:
  x/limited: {{description: both rate limited, chain: [alpha/x-rl-a, bravo/x-rl-b]}}
  x/brief:  # the SDK's own retry is the subject: the gateway tries no candidate twice
    {{description: both rate limited briefly, chain: [alpha/x-brief-a, bravo/x-brief-b], retry: {{count: 0}}}}
  x/waits: {{description: rate limited for a moment, chain: [alpha/x-wait-a, bravo/x-wait-b]}}
  x/mixed: {{description: "", chain: [alpha/x-mix-a, bravo/x-mix-b]}}
  x/tools: {{description: tool calls, chain: [alpha/x-tools]}}
"""


@pytest.fixture(scope="module")
def served(fakes: Fakes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("answers-gateway")
    config = folder / "interlock.yaml"
    config.write_text(CONFIG.format(alpha=fakes.alpha.url, bravo=fakes.bravo.url))
    gateway = Served(config, ENV, folder / "serve.log")
    try:
        yield gateway
    finally:
        gateway.stop()


def sdk(gateway: Served, *, retries: int = 0) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="caller-key", max_retries=retries)


def calls(fakes: Fakes, model: str) -> int:
    return sum(
        1
        for fake in (fakes.alpha, fakes.bravo)
        for r in fake.requests
        if isinstance(r.body, dict) and r.body.get("model") == model
    )


def test_the_start_banner_counts_processes_not_ollama_workers(served: Served) -> None:
    assert served.banner.endswith(", 5 aliases, 1 process)")


# -- every candidate rate limited -------------------------------------------------------------------


def test_every_candidate_rate_limited_is_a_429_with_retry_after(served: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.rate_limited("20"), model="x-rl-a")
    fakes.bravo.set_fault(Fault.rate_limited("7"), model="x-rl-b")
    with pytest.raises(openai.RateLimitError) as info:
        sdk(served).chat.completions.create(model="x/limited", messages=HI)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "7"
    assert info.value.body == {
        "message": "no candidate of x/limited could answer (2 of 2 attempted): "
        "alpha/x-rl-a: rate_limited [429], holding 20 s; bravo/x-rl-b: rate_limited [429], holding 7 s",
        "type": "rate_limit_error",
        "param": None,
        "code": "all_candidates_rate_limited",
    }
    with pytest.raises(openai.RateLimitError) as again:  # both held now: skipped, yet still their 429s
        sdk(served).chat.completions.create(model="x/limited", messages=HI)
    body = again.value.body
    assert isinstance(body, dict)
    assert body["message"].startswith("no candidate of x/limited could answer (0 of 2 attempted): ")
    assert "alpha/x-rl-a: rate_limited [429], holding" in body["message"]
    assert (calls(fakes, "x-rl-a"), calls(fakes, "x-rl-b")) == (1, 1)


def test_the_sdk_waits_out_retry_after_and_its_retry_succeeds(served: Served, fakes: Fakes) -> None:
    # holds longer than the SDK's own first backoff (at most 0.5 s): a retry that did not wait for
    # Retry-After-Ms would find both candidates still held and get a second 429
    fakes.alpha.set_fault(Fault.rate_limited(retry_after_ms="1500"), model="x-brief-a", times=1)
    fakes.bravo.set_fault(Fault.rate_limited(retry_after_ms="1200"), model="x-brief-b", times=1)
    raw = sdk(served, retries=1).chat.completions.with_raw_response.create(model="x/brief", messages=HI)
    # one retry, sent once bravo's hold (the earliest) was over: alpha is still held, bravo answers
    assert (raw.http_response.status_code, raw.headers["x-interlock-resolved"]) == (200, "bravo/x-brief-b")
    assert (calls(fakes, "x-brief-a"), calls(fakes, "x-brief-b")) == (1, 2)


def test_the_gateway_waits_out_a_short_retry_after_itself(served: Served, fakes: Fakes) -> None:
    """A 429 with a `Retry-After` within the retry policy's 5 s: the same candidate answers after it,
    before the walk moves on (docs/runtime.md#retries); the SDK, told not to retry, never sees the 429."""
    fakes.alpha.set_fault(Fault.rate_limited(retry_after_ms="800"), model="x-wait-a", times=1)
    raw = sdk(served, retries=0).chat.completions.with_raw_response.create(model="x/waits", messages=HI)
    assert (raw.http_response.status_code, raw.headers["x-interlock-resolved"]) == (200, "alpha/x-wait-a")
    assert (calls(fakes, "x-wait-a"), calls(fakes, "x-wait-b")) == (2, 0)


def test_a_rate_limit_beside_an_open_circuit_is_a_503_with_retry_after(served: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.http_status(500), model="x-mix-a")
    fakes.bravo.set_fault(Fault.rate_limited("9"), model="x-mix-b")
    with pytest.raises(openai.InternalServerError) as info:
        sdk(served).chat.completions.create(model="x/mixed", messages=HI)
    # alpha's circuit opens for its first half-open period (an eighth of open_for 60 s, jittered down
    # by up to a quarter: 6 to 8 s), before bravo's 9 s hold is over: Retry-After is alpha's
    assert info.value.status_code == 503
    assert info.value.response.headers["retry-after"] in {"6", "7", "8"}
    body = info.value.body
    assert isinstance(body, dict)
    assert re.fullmatch(
        r"no candidate of x/mixed could answer \(2 of 2 attempted\): "
        r"alpha/x-mix-a: server_error \[500\], circuit open for [678] s; "
        r"bravo/x-mix-b: rate_limited \[429\], holding 9 s",
        body.pop("message"),
    )
    assert body == {"type": "server_error", "param": None, "code": "all_candidates_failed"}


# -- model objects ----------------------------------------------------------------------------------


def test_models_retrieve_an_alias(served: Served) -> None:
    model = sdk(served).models.retrieve("x/limited")  # the SDK sends x%2Flimited
    assert (model.id, model.object, model.owned_by) == ("x/limited", "model", "interlock")
    assert model.model_extra == {"description": "both rate limited", "display_name": "x/limited"}
    plain = served.http.get("/v1/models/x/mixed").json()  # an unencoded slash works too
    assert plain["description"] == "alias: alpha/x-mix-a -> bravo/x-mix-b"


def test_models_retrieve_a_direct_model(served: Served) -> None:
    model = sdk(served).models.retrieve("alpha/x-tools")
    assert (model.id, model.owned_by) == ("alpha/x-tools", "alpha")
    assert model.model_extra == {
        "description": "x-tools on provider alpha (openai); completion, tools; 131072 context tokens"
    }
    listed = {m.id: m for m in sdk(served).models.list()}
    assert listed["alpha/x-tools"] == model


def test_models_retrieve_an_unknown_id_is_openais_404(served: Served) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        sdk(served).models.retrieve("x/nope")
    assert info.value.body == {
        "message": "The model `x/nope` does not exist on this gateway; GET /v1/models lists its aliases "
        "and the plan's provider/model candidates",
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    assert served.http.get("/v1/models/alpha/not-in-the-plan").status_code == 404


# -- CORS -------------------------------------------------------------------------------------------

APP = "https://app.example.com"
PREFLIGHT = {
    "origin": APP,
    "access-control-request-method": "POST",
    "access-control-request-headers": "authorization, content-type, x-stainless-os",
}


def test_a_preflight_from_an_allowed_origin_is_answered(served: Served) -> None:
    answer = served.http.options("/v1/chat/completions", headers=PREFLIGHT)
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == APP
    assert answer.headers["access-control-allow-credentials"] == "true"
    assert answer.headers["access-control-allow-methods"] == "GET, POST, OPTIONS"
    assert answer.headers["access-control-allow-headers"] == "authorization, content-type, x-stainless-os"
    assert answer.headers["access-control-max-age"] == "600"
    assert answer.headers["vary"] == "Origin, Access-Control-Request-Headers"
    assert answer.headers["x-interlock-plan"] == served.health()["plan"]["content_hash"]
    assert answer.content == b""


def test_a_preflight_from_another_origin_is_refused(served: Served) -> None:
    answer = served.http.options("/v1/models", headers={**PREFLIGHT, "origin": "https://evil.example"})
    assert answer.status_code == 403
    assert "access-control-allow-origin" not in answer.headers
    assert answer.json()["error"]["code"] == "cors_origin_denied"


def test_the_browser_request_gets_cors_headers_it_can_read(served: Served) -> None:
    body = {"model": "x/tools", "messages": HI}
    answer = served.http.post("/v1/chat/completions", json=body, headers={"origin": "http://localhost:5173"})
    assert answer.status_code == 200
    assert answer.headers["access-control-allow-origin"] == "http://localhost:5173"
    assert answer.headers["access-control-allow-credentials"] == "true"
    exposed = answer.headers["access-control-expose-headers"].split(", ")
    assert {"x-interlock-resolved", "x-interlock-alias", "retry-after"} <= set(exposed)
    assert answer.headers["vary"] == "Origin"
    listing = served.http.get("/v1/models/x/tools", headers={"origin": APP})  # the cold endpoints too
    assert listing.headers["access-control-allow-origin"] == APP


def test_requests_from_other_origins_or_none_get_no_cors_headers(served: Served) -> None:
    body = {"model": "x/tools", "messages": HI}
    other = served.http.post("/v1/chat/completions", json=body, headers={"origin": "https://evil.example"})
    assert other.status_code == 200  # served, but the browser withholds it from the page
    assert not [name for name in other.headers if name.startswith("access-control-")]
    plain = sdk(served).chat.completions.with_raw_response.create(model="x/tools", messages=HI)
    assert not [name for name in plain.headers if name.startswith("access-control-")]


def test_without_cors_in_the_plan_options_stays_405(gateway: Served) -> None:
    answer = gateway.http.options("/v1/chat/completions", headers=PREFLIGHT)
    assert answer.status_code == 405
    assert "access-control-allow-origin" not in answer.headers
