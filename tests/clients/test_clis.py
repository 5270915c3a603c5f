"""Where the tests find the CLIs, and that CI (``INTERLOCK_REQUIRE_CLIS``) fails without them."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from tests.clients.clis import PACKAGES, VERSIONS, cli_path, node_prefix, run

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_cli_skips_here_and_fails_where_it_is_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("INTERLOCK_NODE_PREFIX", str(tmp_path))
    monkeypatch.delenv("INTERLOCK_REQUIRE_CLIS", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"^no `claude` CLI at .*bash \.ci/clis\.sh @anthropic"):
        cli_path("claude")
    monkeypatch.setenv("INTERLOCK_REQUIRE_CLIS", "1")  # as .ci/run sets it
    with pytest.raises(pytest.fail.Exception, match=r"^no `codex` CLI at .*INTERLOCK_REQUIRE_CLIS is set"):
        cli_path("codex")


def test_ci_installs_the_pinned_clis_and_requires_them() -> None:
    script = (ROOT / ".ci" / "run").read_text()
    assert PACKAGES["claude"].startswith("@anthropic-ai/claude-code@")
    assert PACKAGES["codex"].startswith("@openai/codex@")
    assert "bash .ci/clis.sh $AGENT_CLIS" in script
    assert "export INTERLOCK_REQUIRE_CLIS=1" in script


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_the_cli_the_tests_run_is_the_pinned_version(name: str) -> None:
    """Each CLI says its own version (``--version``, run as the tests run it: the prefix's node first
    on ``PATH``): a stale prefix, or a pin changed without a new install, fails here."""
    ran = run([str(cli_path(name)), "--version"], {"HOME": "/nonexistent"}, ROOT)
    assert ran.returncode == 0, ran.explain()
    assert re.search(rf"(^|\s){re.escape(VERSIONS[name])}(\s|$)", ran.stdout), ran.explain()


def test_claude_code_runs_on_a_node_it_accepts() -> None:
    """Claude Code's package asks for node >= 22 (``engines``); the node the tests put first on
    ``PATH`` (the prefix's, where the machine's is older) satisfies it."""
    cli_path("claude")
    manifest = node_prefix() / "node_modules" / "@anthropic-ai" / "claude-code" / "package.json"
    package = orjson.loads(manifest.read_bytes())
    wanted = int(re.fullmatch(r">=\s*(\d+)(\.\d+)*", package["engines"]["node"]).group(1))  # type: ignore[union-attr]
    ran = run(["node", "-p", "process.versions.node"], {}, ROOT)
    assert ran.returncode == 0, ran.explain()
    assert int(ran.stdout.split(".")[0]) >= wanted, ran.explain()
