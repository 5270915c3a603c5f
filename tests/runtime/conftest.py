"""Plans for runtime tests: compiled from small YAML configurations by the real compiler."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from interlock.compiler import compile_config
from interlock.runtime.loaded.plan import RuntimePlan, load_plan
from interlock.schema.canonical import canonical_json
from tests.redis_server import RedisServer

BASIC = """\
version: 1
server: {default_alias: t/chat, alias_namespace: t/, direct_models: allow}
providers:
  local:
    kind: ollama
    timeouts: {connect: 500ms, first_byte: 2s, total: 10s}
    workers:
      - name: box1
        url: http://127.0.0.1:9/
        max_concurrent: 2
        model_concurrency: {"m1": 1, "big:*": 1, "*": 2}
        queue: {max_waiting: 2, max_wait: 1s}
  cloud:
    kind: openai
    base_url: http://127.0.0.1:9/v1/
    api_key_env: CLOUD_KEY
  free:
    kind: openai
    base_url: http://127.0.0.1:9/free/v1
    api_key_env: null
health: {probe_interval: 30s, probe_timeout: 1s, failure_threshold: 2, open_for: 30s, rate_limit_open_for: 5s}
aliases:
  t/chat:
    description: test chain
    chain: [local/m1, cloud/c1, free/f1]
  t/cloud:
    description: cloud only
    chain: [cloud/c1, free/f1]
"""


def compile_text(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "interlock.yaml"
    path.write_text(text)
    ctx = compile_config(str(path))
    assert ctx.plan is not None, [str(d) for d in ctx.sink.items]
    data: dict[str, Any] = __import__("json").loads(canonical_json(ctx.plan.model_dump(mode="json")))
    return data


@pytest.fixture
def plan_data(tmp_path: Path) -> Callable[[str], dict[str, Any]]:
    return lambda text=BASIC: compile_text(tmp_path, text)


@pytest.fixture
def basic_plan(tmp_path: Path) -> RuntimePlan:
    return load_plan(compile_text(tmp_path, BASIC), {"CLOUD_KEY": "sk-cloud-secret"})


def build(data: Mapping[str, Any], env: Mapping[str, str] | None = None) -> RuntimePlan:
    return load_plan(data, env if env is not None else {"CLOUD_KEY": "sk-cloud-secret"})


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server of this test's own, on a free port (skips where none is installed)."""
    server = RedisServer(tmp_path).start()
    try:
        yield server
    finally:
        server.stop()


def in_fresh_process(tmp_path: Path, plan: RuntimePlan, program: str) -> str:
    """Run ``program`` in a new interpreter after it has loaded ``plan`` (from a plan file, as `serve`
    does) into ``plan`` and made ``gateway = build_gateway(plan, probes=False)``; its standard output,
    stripped. For what a process imports: this one has imported nothing else of the test's."""
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(canonical_json(plan.source.model_dump(mode="json")))
    preamble = (
        "import sys, asyncio\n"
        "from interlock.runtime.loaded.plan import load_plan, read_plan_file\n"
        f"plan = load_plan(read_plan_file({str(plan_file)!r}), {{'CLOUD_KEY': 'k'}})\n"
        "from interlock.commands.gateway import build_gateway\n"
        "gateway = build_gateway(plan, probes=False)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", preamble + program], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()
