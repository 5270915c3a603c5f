"""Real headless Chromium (Debian's ``chromium``) driven by Playwright, for the status page's tests.

Playwright drives the browser over its DevTools protocol and reports console messages and page errors
as events, which is what "no console errors" needs; Selenium would need a matching ``chromedriver`` and
the logging capability. ``playwright install`` is never run: the system browser is used.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[4]
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    """The system Chromium; skipped when absent, unless ``INTERLOCK_REQUIRE_BROWSER`` is set (CI)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("INTERLOCK_REQUIRE_BROWSER"):
            pytest.fail(
                "no `chromium` on PATH, and INTERLOCK_REQUIRE_BROWSER is set (apt-get install chromium)"
            )
        pytest.skip("no `chromium` on PATH (apt-get install chromium)")
    return found


def artifacts() -> Path:
    """Where screenshots for CI go (gitignored): ``$INTERLOCK_ARTIFACTS`` or ``artifacts/``."""
    folder = Path(os.environ.get("INTERLOCK_ARTIFACTS", ROOT / "artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


class Console:
    """Every console error and uncaught page error of a page."""

    def __init__(self, page: Any) -> None:
        self.errors: list[str] = []
        page.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: self.errors.append(str(exc)))


@contextmanager
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=FLAGS)
        try:
            yield launched
        finally:
            launched.close()
