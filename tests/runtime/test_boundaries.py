"""Completeness and boundaries: the runtime imports no compiler, every metric is documented."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from interlock.runtime.books.health import HealthBook
from interlock.runtime.books.metrics import Metrics, StateView
from interlock.runtime.loaded.plan import RuntimePlan
from interlock.runtime.state.memory import MemorySlots
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


def test_every_metric_is_documented(basic_plan: RuntimePlan) -> None:
    health = HealthBook(basic_plan.health)
    metrics = Metrics(StateView(lambda: basic_plan, health, MemorySlots()))
    exposed = set()
    for family in metrics.registry.collect():
        exposed.add(family.name + "_total" if family.type == "counter" else family.name)
    documented = set(re.findall(r"`(interlock_[a-z_]+)`", (ROOT / "docs" / "runtime.md").read_text()))
    assert exposed - documented == set(), "document these metrics in docs/runtime.md"
    assert documented - exposed == set(), "these documented metrics do not exist"
