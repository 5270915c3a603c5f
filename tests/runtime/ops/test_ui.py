"""The status page's routes in-process: sections, static files, headers, escaping, and the pictures."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.app.gateway import Gateway
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.ops.ui import svg
from interlock.runtime.ops.ui.view import SECTIONS, span
from tests.runtime.conftest import BASIC, build


def get(gateway: Gateway, path: str) -> httpx.Response:
    async def fetch() -> httpx.Response:
        transport = httpx.ASGITransport(app=gateway)
        async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
            return await client.get(path)

    return asyncio.run(fetch())


def test_the_page_and_every_section_render_with_safe_headers(basic_plan: RuntimePlan) -> None:
    gateway = build_gateway(basic_plan, probes=False)
    page = get(gateway, "/ui")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    assert SECTIONS  # an empty table would let the loop below prove nothing
    for name in SECTIONS:
        assert f'<section id="{name}"' in page.text
        fragment = get(gateway, f"/ui/{name}")
        assert fragment.status_code == 200
        assert fragment.text.lstrip().startswith(f'<h2 id="{name}-title">')
    assert "sk-cloud-secret" not in page.text
    assert "127.0.0.1:9" not in page.text  # upstream URLs are never shown


def test_unknown_sections_and_files_are_404s(basic_plan: RuntimePlan) -> None:
    gateway = build_gateway(basic_plan, probes=False)
    for path in ("/ui/nope", "/ui/static/nope.js", "/ui/static/..%2F__init__.py"):
        answer = get(gateway, path)
        assert answer.status_code == 404, path
        assert answer.json()["error"]["type"] == "not_found_error"
    script = get(gateway, "/ui/static/refresh.js")
    assert (script.status_code, script.headers["content-type"]) == (200, "text/javascript; charset=utf-8")


def test_plan_text_is_escaped(plan_data: Callable[[str], dict[str, Any]]) -> None:
    hostile = BASIC.replace("description: test chain", 'description: "<script>alert(1)</script>"')
    gateway = build_gateway(build(plan_data(hostile)), probes=False)
    page = get(gateway, "/ui")
    assert "<script>alert(1)</script>" not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text


def test_the_share_bar_sizes_segments_by_share() -> None:
    drawn = svg.share_bar(
        [
            {"id": "a/x", "position": 1, "share": 0.25, "answers": 1},
            {"id": "b/<y>", "position": 2, "share": 0.75, "answers": 3},
            {"id": "c/z", "position": 3, "share": None, "answers": 0},
        ]
    )
    assert 'width="60.0"' in drawn
    assert 'x="60.0" y="0" width="180.0"' in drawn
    assert "b/&lt;y&gt;: 75% (3 answers)" in drawn
    assert svg.share_bar([]).count("seg-none") == 1


def test_the_occupancy_line_steps_through_the_samples() -> None:
    drawn = svg.occupancy([(-300.0, 0), (-150.0, 2), (0.0, 1)], limit=2, window_s=300.0)
    assert 'd="M0.0,38.0H120.0V2.0H240.0V20.0H240"' in drawn
    assert "now 1 of 2" in drawn


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.4, "0 s"), (89, "89 s"), (600, "10 min"), (7200, "2.0 h"), (-40, "40 s")]
)
def test_spans_read_like_people_talk(seconds: float, text: str) -> None:
    assert span(seconds) == text


def test_a_reload_records_what_changed_once(
    basic_plan: RuntimePlan, plan_data: Callable[[str], dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    grown = BASIC.replace("failure_threshold: 2", "failure_threshold: 3") + (
        "  t/extra: {description: extra, chain: [free/f2]}\n"
    )
    new_plan = build(plan_data(grown))
    gateway = build_gateway(basic_plan, source=lambda: new_plan, probes=False)
    monkeypatch.setattr("interlock.commands.gateway.MAX_RELOAD_CHANGES", 1)
    assert asyncio.run(gateway.reload())
    last = gateway.parts.live.last_reload
    assert last is not None
    assert (last["result"], last["from"], last["to"]) == (
        "loaded",
        basic_plan.content_hash,
        new_plan.content_hash,
    )
    assert last["changes_total"] > 1
    assert [c["summary"] for c in last["changes"]] == ["new alias `t/extra` answers with free/f2"]
    page = get(gateway, "/ui/plan").text
    assert f"{last['changes_total']} changes (the first 1 shown, most severe first)" in page


def test_the_workers_section_shows_who_waited_by_tenant_and_class(basic_plan: RuntimePlan) -> None:
    """The table reads the slot guard's counts (``interlock_queue_*``); nothing waited: no table."""
    gateway = build_gateway(basic_plan, probes=False)
    assert "Waiting for slots" not in get(gateway, "/ui/workers").text
    metrics = gateway.parts.live.metrics
    metrics.queue_waiting.labels("lab", "batch").inc()
    metrics.queue_wait_seconds.labels("app", "interactive").observe(1.5)
    metrics.queue_wait_seconds.labels("app", "interactive").observe(0.5)
    metrics.queue_turned_away.labels("app", "interactive").inc()
    text = get(gateway, "/ui/workers").text
    assert "Waiting for slots, by tenant" in text
    table = text[text.index("Waiting for slots") :]
    rows = [line.strip() for line in table.splitlines() if line.strip().startswith('<tr><th scope="row">')]
    assert rows[:2] == [
        '<tr><th scope="row">app</th><td>interactive</td><td>0</td><td>2</td><td>1.00 s</td><td>1</td></tr>',
        '<tr><th scope="row">lab</th><td>batch</td><td>1</td><td>0</td><td>—</td><td>0</td></tr>',
    ]
