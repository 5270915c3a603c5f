"""Where the tests find the CLIs, and that CI (``INTERLOCK_REQUIRE_CLIS``) fails without them."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clients.clis import cli_path

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_cli_skips_here_and_fails_where_it_is_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("INTERLOCK_NODE_PREFIX", str(tmp_path))
    monkeypatch.delenv("INTERLOCK_REQUIRE_CLIS", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^no `claude` CLI at .*npm install --prefix"):
        cli_path("claude")
    monkeypatch.setenv("INTERLOCK_REQUIRE_CLIS", "1")  # as .ci/run sets it
    with pytest.raises(pytest.fail.Exception, match=r"^no `codex` CLI at .*INTERLOCK_REQUIRE_CLIS is set"):
        cli_path("codex")


def test_ci_installs_the_pinned_clis_and_requires_them() -> None:
    from tests.clients.clis import PACKAGES

    script = (ROOT / ".ci" / "run").read_text()
    assert all(package in script for package in PACKAGES.values())
    assert "export INTERLOCK_REQUIRE_CLIS=1" in script
