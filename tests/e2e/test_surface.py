"""The rest of the surface: models, aliases, health, metrics, probes of liveness, embeddings, headers."""

from __future__ import annotations

import asyncio

import openai

from tests.e2e.harness import Served


def test_models_lists_aliases_first_then_direct_models(gateway: Served) -> None:
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    ids = [m.id for m in sdk.models.list()]
    aliases = [i for i in ids if i.startswith("e2e/")]
    assert ids[: len(aliases)] == aliases
    assert aliases[0] == "e2e/alldown"
    assert "alpha/a-default" in ids[len(aliases) :]


def test_aliases_show_their_candidates_with_live_health(gateway: Served) -> None:
    data = gateway.http.get("/v1/aliases").json()
    assert data["default"] == "e2e/default"
    default = next(a for a in data["data"] if a["name"] == "e2e/default")
    assert (default["description"], default["requires"]) == ("default", [])
    assert [c["id"] for c in default["candidates"]] == ["box/llama3.2:3b", "alpha/a-default"]
    assert set(default["candidates"][0]) == {
        "id",
        "provider",
        "model",
        "healthy",
        "circuit_open_until",
        "last_selected",
        "last_success_at",
        "last_error_at",
        "last_error_status",
        "last_error_class",
        "consecutive_failures",
        "slow_timeouts",
        "busy_timeouts",
        "next_trial_at",
        "trials_failed",
        "next_check_at",
        "last_check_at",
        "last_check_ok",
    }


def test_health_reports_providers_workers_and_candidates(gateway: Served) -> None:
    report = gateway.health()
    assert report["ready"] is True
    always = {"plan", "ready", "providers", "workers", "slot_state", "usage", "candidates"}
    # once something was learned or hashed (earlier requests in this module): prompt speeds, prefix affinity
    assert always <= set(report) <= always | {"learned", "prefix_affinity"}
    # one process: its own table, and the fleet line (nothing waits in it)
    assert report["slot_state"] == {"scope": "process", "degraded": False, "fleet_waiting": {}}
    assert report["providers"]["box"]["endpoints"][0]["endpoint"] == "box@box1"
    assert report["providers"]["dead"]["probe"] is False
    assert report["workers"]["box1"]["max_concurrent"] == 2
    assert "alpha/a-default" in report["candidates"]


def test_liveness_readiness_and_metrics(gateway: Served) -> None:
    assert gateway.http.get("/healthz").json() == {"status": "ok"}
    ready = gateway.http.get("/readyz")
    assert (ready.status_code, ready.json()["status"]) == (200, "ready")
    metrics = gateway.http.get("/metrics")
    assert metrics.headers["content-type"].startswith("text/plain")
    for name in ("interlock_requests_total", "interlock_provider_healthy", "interlock_plan_info"):
        assert name in metrics.text


def test_every_response_names_the_plan(gateway: Served) -> None:
    plan = gateway.health()["plan"]["content_hash"]
    for path in ("/healthz", "/readyz", "/metrics", "/v1/models", "/v1/aliases", "/v1/health", "/nope"):
        assert gateway.http.get(path).headers["x-interlock-plan"] == plan


def test_embeddings_with_the_async_sdk(gateway: Served) -> None:
    async def scenario() -> tuple[str, str, int]:
        sdk = openai.AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
        raw = await sdk.embeddings.with_raw_response.create(model="e2e/embed", input=["one", "two"])
        result = raw.parse()
        await sdk.close()
        return raw.headers["x-interlock-resolved"], result.model, len(result.data)

    assert asyncio.run(scenario()) == ("box/nomic-embed-text", "box/nomic-embed-text", 2)


def test_overhead_and_latency_are_measured(gateway: Served) -> None:
    sdk = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="x", max_retries=0)
    sdk.chat.completions.create(model="e2e/default", messages=[{"role": "user", "content": "hi"}])
    assert gateway.metric("interlock_gateway_overhead_seconds_count", endpoint="chat") >= 1
    assert gateway.metric("interlock_request_duration_seconds_count", endpoint="chat") >= 1
    assert gateway.metric("interlock_upstream_duration_seconds_count", candidate="box/llama3.2:3b") >= 1
