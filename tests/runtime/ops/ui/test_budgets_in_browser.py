"""The status page's budgets in a real headless Chromium: every tenant and key with its credits for the
month, ``∞`` where unlimited, what was used and what remains, and no key secret on the page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from interlock.testing.fake_openai import FakeOpenAI
from tests.e2e.harness import Served
from tests.runtime.ops.ui.browser import Console, artifacts, browser

CONFIG = """\
version: 1
server: {{default_alias: b/chat, alias_namespace: b/, auth: optional}}
providers:
  cloud: {{kind: openai, base_url: "{cloud}/v1", timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}}}
aliases:
  b/chat: {{description: chat, chain: [cloud/gpt-4o-mini]}}
tenants:
  lab: {{description: research, credits: 500}}
  ops: {{}}
keys:
  lab-ci: {{tenant: lab, key_env: LAB_KEY, credits: 100}}
  ops-bot: {{tenant: ops, key_env: OPS_KEY}}
"""
ENV = {"LAB_KEY": "sk-lab-SECRET-41d0", "OPS_KEY": "sk-ops-SECRET-9e2a"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("budgets")
    with FakeOpenAI(name="cloud") as cloud:
        config = folder / "interlock.yaml"
        config.write_text(CONFIG.format(cloud=cloud.url))
        gateway = Served(config, ENV, folder / "serve.log", "--state-dir", str(folder))
        try:
            yield gateway
        finally:
            gateway.stop()


def test_the_page_shows_budgets_with_infinity_for_unlimited(served: Served, tmp_path: Path) -> None:
    for key in ("LAB_KEY", "LAB_KEY", "OPS_KEY"):
        answer = served.http.post(
            "/v1/chat/completions",
            headers={"authorization": f"Bearer {ENV[key]}"},
            json={"model": "b/chat", "messages": [{"role": "user", "content": "hello"}]},
        )
        assert answer.status_code == 200
    used = served.health()["usage"]["keys"]["lab-ci"]["used"]
    assert used > 0
    with browser() as chromium:
        page: Any = chromium.new_page()
        console = Console(page)
        response = page.goto(f"{served.url}/ui")
        assert response is not None
        assert response.status == 200
        section = page.locator("#budgets")
        lab = section.locator("tr.tenant", has=page.locator("th", has_text="lab"))
        assert lab.locator("td").nth(0).inner_text() == "500 tokens"
        assert lab.locator("td.remaining").inner_text() == str(500 - used)
        key = section.locator("tr.key[data-key='lab-ci']")
        assert key.locator("td").nth(0).inner_text() == "100 tokens"
        assert key.locator("td.remaining").inner_text() == str(100 - used)
        ops = section.locator("tr.key[data-key='ops-bot']")
        assert ops.locator("td").nth(0).inner_text() == "∞"
        assert ops.locator("td.remaining").inner_text() == "∞"
        assert "kept in sqlite" in section.inner_text()
        html = page.content()
        assert all(secret not in html for secret in ENV.values())
        page.screenshot(path=str(artifacts() / "status-page-budgets.png"), full_page=True)
        assert console.errors == []
        page.close()
    assert httpx.get(f"{served.url}/ui/budgets").status_code == 200
