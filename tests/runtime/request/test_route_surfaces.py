"""The route table holds the rows of the surfaces the plan serves (``server.surfaces``), built when the
plan loads; a reload that changes them rebuilds it in place, before the new plan serves."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from interlock.commands.gateway import build_gateway
from interlock.runtime.loaded.plan import load_plan
from interlock.runtime.request.route_table import ROWS, route_table
from tests.runtime.conftest import compile_text
from tests.runtime.test_boundaries import SMALLEST

OPENAI_ONLY = SMALLEST.replace("{default_alias: chat}", "{default_alias: chat, surfaces: [openai]}")


def test_every_surface_has_rows_and_every_row_one_surface() -> None:
    assert set(ROWS) == {"openai", "anthropic", "responses", "ollama"}
    table = route_table()
    assert len(table.handlers) == sum(len(specs) for specs in ROWS.values())
    assert route_table(["ollama"]).paths.keys() == {spec.path for spec in ROWS["ollama"]}


def test_a_reload_changes_the_surfaces_served(tmp_path: Path) -> None:
    every = load_plan(compile_text(tmp_path, SMALLEST), {"CLOUD_KEY": "k"})
    openai_only = load_plan(compile_text(tmp_path, OPENAI_ONLY), {"CLOUD_KEY": "k"})
    gateway = build_gateway(openai_only, probes=False)
    body = {"model": "chat", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}

    async def statuses() -> tuple[int, int]:
        transport = httpx.ASGITransport(app=gateway)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as http:
            tags = await http.get("/api/tags")
            messages = await http.post("/v1/messages/count_tokens", json=body)
            return tags.status_code, messages.status_code

    assert asyncio.run(statuses()) == (404, 404)  # not served: the ops app's 404
    gateway.apply(every)
    assert asyncio.run(statuses()) == (200, 200)
    gateway.apply(openai_only)
    assert asyncio.run(statuses()) == (404, 404)
    assert sorted(gateway.parts.routes.paths) == ["/v1/chat/completions", "/v1/embeddings"]


def test_the_served_document_lists_the_surfaces_the_plan_serves(tmp_path: Path) -> None:
    from interlock.runtime.ops.openapi import plan_document

    every = load_plan(compile_text(tmp_path, SMALLEST), {"CLOUD_KEY": "k"})
    openai_only = load_plan(compile_text(tmp_path, OPENAI_ONLY), {"CLOUD_KEY": "k"})
    served = {
        path for path in plan_document(openai_only)["paths"] if not path.startswith(("/v1/models", "/ui"))
    }
    assert {"/v1/chat/completions", "/v1/embeddings"} <= served
    assert not served & {"/v1/messages", "/v1/responses", "/api/chat", "/api/show", "/"}
    assert {"/v1/messages", "/v1/responses", "/api/chat", "/api/show", "/"} <= set(
        plan_document(every)["paths"]
    )
