"""The status page in a real headless Chromium: the right states after a box dies and after a reload,
no console errors, and a screenshot (a CI artifact; ``INTERLOCK_UPDATE_SCREENSHOT=1`` also refreshes the
one in docs/)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.runtime.ops.ui.browser import ROOT, Console, artifacts, browser
from tests.runtime.ops.ui.conftest import CLOUD_KEY, EXTRA, Fleet
from tests.waiting import wait_until

DOCS_SCREENSHOT = ROOT / "docs" / "images" / "status-page.png"


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with browser() as launched:
        yield launched


def open_page(chromium: Any, url: str, **options: Any) -> tuple[Any, Console]:
    page = chromium.new_page(**options)
    console = Console(page)
    response = page.goto(f"{url}/ui")
    assert response is not None
    assert response.status == 200
    return page, console


def test_the_page_shows_a_dead_box_an_open_circuit_and_slots_in_use(fleet: Fleet, chromium: Any) -> None:
    assert fleet.ask("team/chat").headers["x-interlock-resolved"] == "box-b/llama3.2:3b"
    fleet.gpu_b.refuse_connections()  # the box dies
    assert fleet.ask("team/chat").headers["x-interlock-resolved"] == "box-a/llama3.2:3b"
    wait_until(fleet.gpu_read, 60, "gpu-a's GPU readings")
    fleet.hold_slots(2)  # until let_go() below

    page, console = open_page(chromium, fleet.served.url, viewport={"width": 1100, "height": 1700})
    chat = page.locator("#alias-team\\/chat")
    assert "servable" in chat.locator("h3").inner_text()
    dead = chat.locator("tr", has=page.locator("code", has_text="box-b/llama3.2:3b"))
    assert "circuit open" in dead.inner_text()
    assert "connect" in dead.inner_text()  # the last error class
    alive = chat.locator("tr", has=page.locator("code", has_text="box-a/llama3.2:3b"))
    assert "healthy" in alive.inner_text()
    assert chat.locator("svg.bar rect.seg2").count() == 1  # box-a's share of the traffic is drawn

    gpu_b = page.locator("#worker-gpu-b")
    assert "down" in gpu_b.locator("h3").inner_text()
    gpu_a = page.locator("#worker-gpu-a")
    assert "up" in gpu_a.locator("h3").inner_text()
    assert "2 of 3 in use" in gpu_a.inner_text()
    assert gpu_a.locator("svg.spark path.used").count() == 1
    telemetry = gpu_a.locator("dl.telemetry").inner_text()
    assert "NVIDIA H200" in telemetry
    assert "°C" in telemetry
    assert "GiB of" in telemetry

    html = page.content()  # names, states and classes only: no credential, no upstream URL
    assert CLOUD_KEY not in html
    assert all(fake.url not in html for fake in (fleet.gpu_a, fleet.gpu_b, fleet.cloud))

    events = page.locator("#events tbody")
    assert "fallback" in events.inner_text()
    assert "box-a/llama3.2:3b (#2)" in events.inner_text()
    assert fleet.served.health()["candidates"]["box-b/llama3.2:3b"]["circuit_open_until"] is not None

    # the refresh script swaps fresh fragments in without errors
    page.uncheck("#autorefresh")
    with page.expect_response(lambda r: r.url.endswith("/ui/events")):
        page.check("#autorefresh")
    assert "fallback" in page.locator("#events tbody").inner_text()

    shot = artifacts() / "status-page.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("INTERLOCK_UPDATE_SCREENSHOT"):
        DOCS_SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(shot, DOCS_SCREENSHOT)
    page.set_viewport_size({"width": 390, "height": 844})  # a phone: no horizontal scrolling of the page
    page.screenshot(path=str(artifacts() / "status-page-phone.png"))
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    assert console.errors == []
    page.close()
    fleet.let_go()


def test_the_page_shows_what_the_last_reload_changed(fleet: Fleet, chromium: Any) -> None:
    before = fleet.served.health()["plan"]["content_hash"]
    fleet.write_config(EXTRA)
    fleet.served.sighup()
    wait_until(lambda: fleet.served.health()["plan"]["content_hash"] != before, 30, "the reload")

    page, console = open_page(chromium, fleet.served.url, color_scheme="dark")
    plan = page.locator("#plan")
    assert "loaded" in plan.inner_text()
    changes = plan.locator("table").inner_text()
    assert "new alias `team/embed` answers with box-a/nomic-embed-text" in changes
    assert "`nomic-embed-text` on worker `gpu-a`: none → 2 slot(s)" in changes
    assert page.locator("#alias-team\\/embed").count() == 1
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(13, 17, 23)"  # the dark theme applies
    assert console.errors == []
    page.close()
