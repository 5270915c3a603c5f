"""Completeness and boundaries: the runtime imports no compiler, every metric is documented."""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.features.audit import families as audit_families
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.state.memory import MemorySlots
from interlock.runtime.telemetry.collector import TelemetryBook
from interlock.runtime.telemetry.gauges import families
from tests.runtime.conftest import in_fresh_process

ROOT = Path(__file__).resolve().parents[2]
# The one runtime module allowed to import jinja2: the status page's renderer, imported by the first
# GET /ui (never by the gateway's import or its request path). The tests below prove both halves.
LAZY_PAGE = "interlock.runtime.ops.ui.page"
RUNTIME_MODULES = [
    name
    for p in sorted((ROOT / "interlock" / "runtime").rglob("*.py"))
    if p.name != "__init__.py"
    and (
        name := "interlock.runtime."
        + str(p.relative_to(ROOT / "interlock" / "runtime").with_suffix("")).replace("/", ".")
    )
    != LAZY_PAGE
]

FORBIDDEN = ("interlock.compiler", "ruamel", "jinja2", "yaml")


def test_the_runtime_never_imports_the_compiler_a_yaml_parser_or_jinja2() -> None:
    assert "interlock.runtime.app.gateway" in RUNTIME_MODULES
    program = (
        "import importlib, sys\n"
        f"for name in {RUNTIME_MODULES!r}: importlib.import_module(name)\n"
        "from interlock.runtime.loaded.plan import load_plan, read_plan_file\n"
        f"bad = sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r}))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_loading_a_plan_imports_no_compiler_either(tmp_path: Path, basic_plan: RuntimePlan) -> None:
    program = f"bad = sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r}))\nprint(','.join(bad))\n"
    assert in_fresh_process(tmp_path, basic_plan, program) == ""


def test_only_the_first_ui_request_loads_jinja2(tmp_path: Path, basic_plan: RuntimePlan) -> None:
    program = (
        "before = 'jinja2' in sys.modules\n"
        "sent = []\n"
        "async def receive(): return {'type': 'http.request', 'body': b''}\n"
        "async def send(m): sent.append(m)\n"
        "scope = {'type': 'http', 'method': 'GET', 'path': '/ui', 'raw_path': b'/ui', 'query_string': b'',\n"
        "         'headers': [], 'http_version': '1.1', 'scheme': 'http', 'root_path': ''}\n"
        "asyncio.run(gateway(scope, receive, send))\n"
        "bad = ('interlock.compiler', 'yaml', 'ruamel')\n"
        "compiler = sorted(m for m in sys.modules if m.startswith(bad))\n"
        "print(before, sent[0]['status'], 'jinja2' in sys.modules, compiler)\n"
    )
    assert in_fresh_process(tmp_path, basic_plan, program) == "False 200 True []"


def test_only_the_first_cold_request_builds_the_ops_app(tmp_path: Path, basic_plan: RuntimePlan) -> None:
    """The gateway's start imports nothing of the ops app (FastAPI, ``ops/admin.py``); its first cold
    request builds it, and only ``/openapi.json`` loads the routes' contracts."""
    program = (
        "ops = ('fastapi', 'interlock.runtime.ops.admin', 'interlock.runtime.ops.routes')\n"
        "docs = ('interlock.runtime.surfaces.contract', 'interlock.runtime.ops.contract')\n"
        "def loaded(names): return [n in sys.modules for n in names]\n"
        "async def receive(): return {'type': 'http.request', 'body': b''}\n"
        "def get(path):\n"
        "    sent = []\n"
        "    async def send(m): sent.append(m)\n"
        "    scope = {'type': 'http', 'method': 'GET', 'path': path, 'raw_path': path.encode(),\n"
        "             'query_string': b'', 'headers': [], 'http_version': '1.1', 'scheme': 'http',\n"
        "             'root_path': ''}\n"
        "    asyncio.run(gateway(scope, receive, send))\n"
        "    return sent[0]['status']\n"
        "print(loaded(ops), loaded(docs))\n"
        "print(get('/healthz'), loaded(ops), loaded(docs))\n"
        "print(get('/openapi.json'), loaded(docs))\n"
    )
    assert in_fresh_process(tmp_path, basic_plan, program).splitlines() == [
        "[False, False, False] [False, False]",
        "200 [True, True, True] [False, False]",
        "200 [True, True]",
    ]


def test_every_metric_is_documented(basic_plan: RuntimePlan) -> None:
    health = HealthBook(basic_plan.health)  # the workers' gauges: a plan with workers plugs them in
    gauges = functools.partial(families, TelemetryBook())
    audit = functools.partial(audit_families, None)  # the audit log's: plugged in by --audit-log
    metrics = Metrics(StateView(lambda: basic_plan, health, MemorySlots(), audit=audit, gauges=gauges))
    exposed = set()
    for family in metrics.registry.collect():
        exposed.add(family.name + "_total" if family.type == "counter" else family.name)
    documented = set(re.findall(r"`(interlock_[a-z_]+)`", (ROOT / "docs" / "runtime.md").read_text()))
    assert exposed - documented == set(), "document these metrics in docs/runtime.md"
    assert documented - exposed == set(), "these documented metrics do not exist"


# The smallest plan: one OpenAI-compatible provider, one alias. What its gateway loads is the core.
SMALLEST = """\
version: 1
server: {default_alias: chat}
providers:
  cloud:
    kind: openai
    base_url: http://127.0.0.1:9/v1
    api_key_env: CLOUD_KEY
aliases:
  chat:
    chain: [cloud/c1]
"""
# Feature modules the smallest plan's gateway must not import (the feature table's rows it does not
# want, and what only they use). Grows as features leave the core.
NOT_IN_THE_CORE = (
    "interlock.runtime.features.budgets",  # credits, tokens per minute, the ceiling cut
    "interlock.runtime.features.keys",  # caller keys
    "interlock.runtime.features.sticky",  # sticky sessions
    "interlock.runtime.usage.credits",
    "interlock.runtime.features.audit",  # the audit log (--audit-log)
    "interlock.runtime.features.tracing",  # OpenTelemetry (--otel)
    "interlock.runtime.state.redis",  # shared state backends (--state-url)
    "interlock.runtime.state.embedded",
    "interlock.runtime.usage.sqlite",  # usage stores (--usage-url, --state-dir)
    "interlock.runtime.usage.postgres",
    # the fleet (``features.FLEET``, plugged by a plan with workers): worker choice, its guards, the
    # fleet line, placement, prefix affinity, load signals and progress, Ollama metadata, learned speeds,
    # and the workers' telemetry (its collector, gauges and sources)
    "interlock.runtime.fleet",  # the whole room (what every plan runs of it is books/'s)
    "interlock.runtime.guards.slots",
    "interlock.runtime.guards.ollama_options",
    "interlock.runtime.telemetry",
    "interlock.runtime.state.pool",  # the workers' slots and their fair queue: made by a plan with workers
    "interlock.runtime.state.fair",
    "interlock.runtime.state.counters",  # the callers' rates: made when the budgets row plugs
    "interlock.runtime.ops.admin",  # the ops app (FastAPI): built by the first cold request
    "interlock.runtime.ops.routes",
    "interlock.runtime.ops.contract",  # the routes' contracts: read only to build /openapi.json
    "interlock.runtime.surfaces.contract",
    "interlock.schema.config",  # the config schema: the compiler's (the runtime reads the plan's)
    "interlock.runtime.loaded.access",  # caller keys (the core reads the Caller: loaded/callers.py)
    "interlock.common.apikeys",
    "interlock.runtime.loaded.cors",  # CORS rules
    # what only a rare path runs, imported by its first run (never by a request on an API route)
    "interlock.runtime.app.reading",  # a reload (SIGHUP): reading the plan, swapping it in or refusing it
    "interlock.runtime.books.checks",  # the checks of an open circuit: made when the first opens
    "interlock.runtime.books.scrape",  # the scrape-time gauges: the ops app's first /metrics
    "interlock.runtime.books.health_report",  # /v1/health's reports: the ops app's first
    "interlock.runtime.books.access_json",  # the JSON access log (--access-log json)
    "interlock.runtime.loaded.invalid",  # the words for a plan that does not validate
    "interlock.common.pattern_text",  # name patterns read from a config: the compiler's and the diff's
    "interlock.runtime.state.spare",  # a shared store's fallback counters
)
# The lines of every interlock module the smallest plan's gateway loads: measured 25,422 (142 modules)
# before the feature table, 24,440 (147) after it; 24,478 (147) -> 23,846 (145) without the config schema,
# 22,871 (141) with the ops app built by its first request, 22,467 (139) without caller keys and CORS,
# 17,608 (109) with the fleet a row (fleet/'s worker modules and telemetry/ out: -4,859 lines, -30 modules),
# 17,692 (109) with the route table per surface (server.surfaces), and a plan serving OpenAI only 14,656
# (98); 17,415 (107) without the workers' slot table (state/pool.py, state/fair.py), 17,458 (106) with
# nothing of fleet/ (its facts, fit and probes in books/, ServerLoad with them for a while), a plan serving
# OpenAI only 14,420 (95); 17,301 (106) with the workers' live facts the fleet's (fleet/live_facts.py),
# OpenAI only 14,266 (95); 16,444 with a format's caller side apart (wire/anthropic_caller.py), 16,198 (105)
# with a reload's reading read by the first reload (app/reading.py) and envnames' tables written as words,
# 16,001 (105) with the JSON access log's line its own (books/access_json.py) and the metrics' families one
# list, 15,932 with the surfaces' docstrings pointing to their wire modules, 15,243 (102) with an open
# circuit's checks imported by the first (books/checks.py: upstream/exchange.py, failures.py and
# net/http_errors.py then load when the gateway starts, with its adapters: started 17,315 (109)); +45 with
# the lifecycle's points for what watches a request (tracing, audit: hooks2), 15,160 (102) with a plan's
# caller keys checked by loaded/access.py and an invalid plan worded by loaded/invalid.py (imported only
# then), 15,032 (100) with an open circuit's schedule and a reload's work made by the first (books/checks.py,
# app/reading.py), 14,945 (101) with the scrape-time gauges made by the first scrape (books/scrape.py),
# 14,879 with a plan's settings copied by one rule (loaded/plan.py), 14,839 (102) with the health reports
# the ops app's (books/health_report.py), 14,807 without what only the compiler reads of common/ (its
# pattern_text.py), 14,776 with a shared store's fallback counters its own (state/spare.py), 14,747 with
# the caller keys' naming rule in common/apikeys.py, 14,718 with the plan schema's six trimming
# serializers one, 14,509 with the callers' counters made by the budgets' row, 14,305 (100) with the
# assembly, the lifecycle and the router without their duplicates and the retry rules imported by the
# first failed call (slim3); the goal is 9,000. Fails when the core grows past it.
CORE_LINES = 14_410


def census(
    tmp_path: Path, plan: RuntimePlan, first: str, absent: tuple[str, ...]
) -> tuple[list[str], str, int, int]:
    """Run ``first`` (a program beside the plan's ``gateway``) in a fresh interpreter, then count the
    interlock modules loaded: the lines ``first`` printed, those of ``absent`` loaded (a list's text),
    and how many modules, of how many lines."""
    program = first + (
        "mods = sorted(m for m in sys.modules if m.startswith('interlock'))\n"
        "files = [getattr(sys.modules[m], '__file__', None) for m in mods]\n"
        "lines = sum(len(open(f, encoding='utf-8').read().splitlines()) for f in files if f)\n"
        f"print([m for m in mods if m.startswith({absent!r})])\n"
        "print(len(mods), lines)\n"
    )
    *said, loaded, figures = in_fresh_process(tmp_path, plan, program).splitlines()
    modules, lines = map(int, figures.split())
    return said, loaded, modules, lines


def test_the_smallest_plan_runs_the_core_only(tmp_path: Path) -> None:
    from interlock.runtime.loaded.plan import load_plan
    from tests.runtime.conftest import compile_text

    plan = load_plan(compile_text(tmp_path, SMALLEST), {"CLOUD_KEY": "k"})
    (names,), loaded, modules, lines = census(
        tmp_path, plan, "print(gateway.parts.services.current.hooks.names)\n", NOT_IN_THE_CORE
    )
    assert names == "('what answers teach', 'usage ledger')"
    assert loaded == "[]", f"the smallest plan imports feature modules: {loaded}"
    print(f"the smallest plan loads {modules} interlock modules, {lines} lines")
    assert lines <= CORE_LINES


# What a plan serving only OpenAI's API (``server.surfaces: [openai]``) never imports: the other surfaces,
# their wire formats' caller sides and their plain handlers.
OTHER_SURFACES = (
    "interlock.runtime.surfaces.anthropic",
    "interlock.runtime.surfaces.responses",
    "interlock.runtime.surfaces.ollama",
    "interlock.runtime.wire.anthropic_caller",
    "interlock.runtime.wire.ollama_caller",
    "interlock.runtime.request.listing",  # Ollama's listing routes
    "interlock.runtime.request.count_tokens",
)


def test_a_plan_serving_openai_only_imports_no_other_surface(tmp_path: Path) -> None:
    from interlock.runtime.loaded.plan import load_plan
    from tests.runtime.conftest import compile_text

    text = SMALLEST.replace("{default_alias: chat}", "{default_alias: chat, surfaces: [openai]}")
    plan = load_plan(compile_text(tmp_path, text), {"CLOUD_KEY": "k"})
    assert plan.source.server.surfaces == ["openai"]
    routes = "print(sorted({path for _, path in gateway.parts.routes.handlers}))\n"
    (paths,), loaded, modules, lines = census(tmp_path, plan, routes, OTHER_SURFACES + NOT_IN_THE_CORE)
    assert paths == "['/v1/chat/completions', '/v1/embeddings']"
    assert loaded == "[]", f"a plan serving OpenAI only imports: {loaded}"
    print(f"the smallest plan serving OpenAI only loads {modules} interlock modules, {lines} lines")
    assert lines <= CORE_LINES


def test_a_started_gateway_of_the_smallest_plan_runs_the_core_only(tmp_path: Path) -> None:
    """What starting adds (the upstream client, the adapter of each kind the plan names: ``openai``
    only) is no feature module either, nor another kind's adapter."""
    from interlock.runtime.loaded.plan import load_plan
    from tests.runtime.conftest import compile_text

    plan = load_plan(compile_text(tmp_path, SMALLEST), {"CLOUD_KEY": "k"})
    absent = (*NOT_IN_THE_CORE, "interlock.runtime.upstream.ollama", "interlock.runtime.upstream.anthropic")
    cycle = (
        "async def cycle():\n"
        "    await gateway.startup()\n"
        "    await gateway.shutdown()\n"
        "asyncio.run(cycle())\n"
    )
    _, loaded, modules, lines = census(tmp_path, plan, cycle, absent)
    assert loaded == "[]", f"a started gateway of the smallest plan imports: {loaded}"
    print(f"started, the smallest plan loads {modules} interlock modules, {lines} lines")
