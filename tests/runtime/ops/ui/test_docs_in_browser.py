"""``/docs`` (the ops app's interactive API page) in a real headless Chromium: Swagger UI renders the
gateway's own document of the plan being served, with nothing fetched from anywhere but the gateway."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Served
from tests.runtime.ops.ui.browser import Console, browser

CONFIG = """\
version: 1
server: {default_alias: team/chat, alias_namespace: team/}
providers:
  cloud:
    kind: openai
    base_url: http://127.0.0.1:9/v1
    api_key_env: null
    probe: false
  free:
    kind: openai
    base_url: http://127.0.0.1:9/free/v1
    api_key_env: null
    probe: false
aliases:
  team/chat: {description: chat, chain: [cloud/small, free/tiny]}
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder: Path = tmp_path_factory.mktemp("docs")
    config = folder / "interlock.yaml"
    config.write_text(CONFIG)
    gateway = Served(config, {}, folder / "serve.log")
    try:
        yield gateway
    finally:
        gateway.stop()


def test_swagger_ui_renders_the_plan_offline(served: Served) -> None:
    with browser() as chromium:
        page = chromium.new_page()
        console = Console(page)
        fetched: list[str] = []
        page.on("request", lambda request: fetched.append(request.url))
        response = page.goto(f"{served.url}/docs")
        assert response is not None
        assert response.status == 200
        # the operations are rendered from the plan's /openapi.json
        page.wait_for_selector('[data-path="/v1/chat/completions"]', timeout=60_000)
        assert page.locator(".swagger-ui").count() == 1
        assert fetched, "the page made no requests"
        elsewhere = [url for url in fetched if not url.startswith(served.url)]
        assert elsewhere == []  # no CDN: the page works where the gateway has no internet
        assert f"{served.url}/openapi.json" in fetched
        assert console.errors == []


def test_the_docs_assets_are_the_packaged_ones(served: Served) -> None:
    script = served.http.get("/docs/static/swagger-ui-bundle.js")
    assert (script.status_code, script.headers["content-type"]) == (200, "text/javascript; charset=utf-8")
    assert b"SwaggerUIBundle" in script.content
    missing: Any = served.http.get("/docs/static/index.html")
    assert missing.status_code == 404
    assert missing.json()["error"]["type"] == "not_found_error"
