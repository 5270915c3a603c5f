"""Shared helpers: tests run from the repository root so that paths in diagnostics are stable."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from interlock.compiler import CompileContext, CompileOptions, compile_config
from interlock.compiler.report import render

if TYPE_CHECKING:
    from tests.postgres_server import PostgresServer

# LiteLLM (a dev dependency some tests drive) fetches its model cost map from GitHub at import, in a
# background thread that retries with warnings on stderr: with no network (CI) they landed in another
# test's captured stderr. Its packaged map is what every test here needs.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"


@pytest.fixture
def at_root(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(ROOT)
    return ROOT


def fixture_options(path: Path) -> CompileOptions:
    """A fixture whose first line says `# options: require-env` is compiled with an empty environment, or
    with the one that follows `env:` there (`# options: require-env; env: A_KEY=x, B_KEY=y`)."""
    first = path.read_text(encoding="utf-8").splitlines()[0]
    roots = (str(FIXTURES),)  # fixtures share files under tests/fixtures/loader/parts/
    if first.startswith("# options:") and "require-env" in first:
        _, _, pairs = first.partition("env:")
        environ = dict(pair.strip().split("=", 1) for pair in pairs.split(",") if pair.strip())
        return CompileOptions(require_env=True, environ=environ, include_roots=roots)
    return CompileOptions(environ={}, include_roots=roots)


def compile_fixture(path: Path) -> CompileContext:
    return compile_config(path.relative_to(ROOT).as_posix(), fixture_options(path))


def compile_text(
    tmp_path: Path, text: str, *, require_env: bool = False, environ: Mapping[str, str] | None = None
) -> CompileContext:
    """Compile ``text`` written to ``tmp_path/c.yaml``, with an empty environment unless one is given."""
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return compile_config(str(path), CompileOptions(require_env=require_env, environ=environ or {}))


def text_report(ctx: CompileContext) -> str:
    return render(ctx.sink.items, "text", ctx.sources)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One real PostgreSQL server for the session (skipped without one, failed in CI: see the module)."""
    from tests.postgres_server import PostgresServer

    server = PostgresServer().start()
    try:
        yield server
    finally:
        server.stop()
