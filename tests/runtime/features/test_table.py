"""The feature table: which rows a plan plugs in, in table order, settled at plan load and again at a
reload; a row's module is imported the first time a plan wants it, never before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from interlock.runtime.app.parts import build_parts
from interlock.runtime.features import FEATURES, Plugged
from interlock.runtime.loaded.plan import load_plan
from tests.runtime.conftest import compile_text

OPEN = """\
version: 1
server: {default_alias: chat}
providers:
  cloud: {kind: openai, base_url: "http://127.0.0.1:9/v1", probe: false}
aliases:
  chat: {chain: [cloud/c1]}
"""
KEYED = OPEN.replace("{default_alias: chat}", "{default_alias: chat, auth: required}") + (
    "tenants:\n  lab: {description: every key's}\n"
    "keys:\n  poor: {tenant: lab, key_env: POOR_KEY, credits: 40}\n"
)
STICKY = OPEN + "routing:\n  sticky: {enabled: true}\n"


def test_a_plan_plugs_in_the_rows_it_wants_in_table_order(tmp_path: Path) -> None:
    open_plan = load_plan(compile_text(tmp_path, OPEN), {})
    keyed = load_plan(compile_text(tmp_path, KEYED), {"POOR_KEY": "sk-poor-8d3b6e0a1c"})
    sticky = load_plan(compile_text(tmp_path, STICKY), {})
    plugged = Plugged(build_parts(open_plan, probes=False).services)
    assert plugged.hooks(open_plan).names == ("what answers teach", "usage ledger")
    hooks = plugged.hooks(keyed)
    assert hooks.names == ("caller keys", "credits and budgets", "what answers teach", "usage ledger")
    assert [waits for _, waits in hooks.admit] == [False, True]  # the keys' check makes no coroutine
    assert len(hooks.settle) == 2
    assert plugged.hooks(sticky).names[0] == "sticky sessions"
    free = load_plan(
        compile_text(tmp_path, KEYED.replace(", credits: 40", "")), {"POOR_KEY": "sk-poor-8d3b6e0a1c"}
    )
    assert plugged.hooks(free).names[:2] == ("caller keys", "what answers teach")  # no budget: no row
    assert plugged.hooks(keyed).admit == hooks.admit  # plugged once per gateway, not per plan


def test_every_row_names_a_module_with_a_plug() -> None:
    for row in FEATURES:
        module = __import__(row.module, fromlist=["plug"])
        assert callable(module.plug), row.name


def test_a_reload_that_adds_keys_imports_their_features_then(tmp_path: Path) -> None:
    """The gateway starts on an open plan (keys' modules not imported); the swap to a plan with keys
    plugs them in, as a reload does."""
    open_file, keyed_file = tmp_path / "open.json", tmp_path / "keyed.json"
    from interlock.schema.canonical import canonical_json

    open_file.write_text(canonical_json(compile_text(tmp_path, OPEN)))
    keyed_file.write_text(canonical_json(compile_text(tmp_path, KEYED)))
    program = (
        "import sys\n"
        "from interlock.runtime.loaded.plan import load_plan, read_plan_file\n"
        "from interlock.runtime.app.parts import build_parts\n"
        f"parts = build_parts(load_plan(read_plan_file({str(open_file)!r}), {{}}), probes=False)\n"
        "before = 'interlock.runtime.features.budgets' in sys.modules\n"
        f"keyed = load_plan(read_plan_file({str(keyed_file)!r}), {{'POOR_KEY': 'sk-poor-8d3b6e0a1c'}})\n"
        "parts.reloads._swap(keyed)\n"
        "print(before, 'interlock.runtime.features.budgets' in sys.modules,\n"
        "      parts.services.current.hooks.names[:2], parts.services.current.plan is keyed)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False True ('caller keys', 'credits and budgets') True"


def test_the_serve_settings_plug_in_the_tracing_and_the_audit_log(tmp_path: Path) -> None:
    """``--otel`` and ``--audit-log`` are rows wanted by the serve settings: plugged at the first plan,
    seated at the lifecycle's and the router's points, started and stopped with the gateway; a request
    through the lifecycle leaves its audit line (the row's ``finish``), a refused reload its action."""
    import asyncio

    import orjson

    from interlock.runtime.features import Settings
    from interlock.runtime.features.tracing.otel import Tracing

    plan = load_plan(compile_text(tmp_path, OPEN), {})
    path = tmp_path / "audit.jsonl"
    settings = Settings(audit_log=str(path), otel=True, environ={"OTEL_TRACES_EXPORTER": "none"})
    parts = build_parts(plan, probes=False, settings=settings)
    hooks = parts.services.current.hooks
    assert hooks.names[:2] == ("tracing", "audit log")
    assert isinstance(getattr(hooks.begin, "__self__", None), Tracing)
    assert parts.services.router.attempt == hooks.attempt is not None
    assert parts.services.router.skip == hooks.skip is not None
    assert len(hooks.finish) == 1
    assert hooks.action is not None
    plain = build_parts(plan, probes=False)
    assert plain.services.current.hooks.names == ("what answers teach", "usage ledger")
    assert plain.services.router.attempt is None
    assert plain.services.current.hooks.finish == ()

    sent: list[dict[str, object]] = []
    body = b'{"model": "nowhere", "messages": [{"role": "user", "content": "hi"}]}'

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": body}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    async def scenario() -> None:
        await parts.lifespan.start()
        handler = parts.routes.handlers[("POST", "/v1/chat/completions")]
        scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}
        await handler(parts.services, scope, receive, send)
        parts.reloads._refused("a test's")
        await parts.lifespan.stop()

    asyncio.run(scenario())
    assert sent[0]["status"] == 404
    request, reload = (orjson.loads(line) for line in path.read_bytes().splitlines())
    assert (request["event"], request["status"], request["endpoint"]) == ("request", 404, "chat")
    assert (reload["action"], reload["outcome"], reload["error"]) == ("reload", "refused", "a test's")
