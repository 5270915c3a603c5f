"""The ops app built by its first cold request (``ops/on_demand.py``): FastAPI imported off the event loop,
and built once however many cold requests arrive while it is imported."""

from __future__ import annotations

from pathlib import Path

from interlock.runtime.loaded.plan import RuntimePlan
from tests.runtime.conftest import in_fresh_process

# ``interlock.runtime.ops.admin`` (and FastAPI under it) imported through a loader that waits, in the
# importing thread, for the event loop to say it ran meanwhile: an import on the loop itself waits out
# its timeout (the loop cannot run) and records False.
SLOW_IMPORT = """\
import threading, importlib.abc, importlib.machinery
gate, seen, builds = threading.Event(), [], []
class Slow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != 'interlock.runtime.ops.admin':
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        real = spec.loader
        class Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return None
            def exec_module(self, module):
                seen.append(gate.wait(5))
                real.exec_module(module)
                build = module.build_admin
                def counted(live):
                    builds.append(live)
                    return build(live)
                module.build_admin = counted
        spec.loader = Loader()
        return spec
sys.meta_path.insert(0, Slow())
async def receive(): return {'type': 'http.request', 'body': b''}
async def get(path):
    sent = []
    async def send(m): sent.append(m)
    scope = {'type': 'http', 'method': 'GET', 'path': path, 'raw_path': path.encode(),
             'query_string': b'', 'headers': [], 'http_version': '1.1', 'scheme': 'http', 'root_path': ''}
    await gateway(scope, receive, send)
    return sent[0]['status']
"""


def test_the_first_cold_requests_import_the_ops_app_off_the_event_loop(
    tmp_path: Path, basic_plan: RuntimePlan
) -> None:
    """Two cold requests at once, the first of the process: the event loop runs while FastAPI is imported
    (0.3-0.6 s: every stream in flight would stall that long), both are answered by one app."""
    program = SLOW_IMPORT + (
        "async def main():\n"
        "    first = asyncio.ensure_future(get('/healthz'))\n"
        "    second = asyncio.ensure_future(get('/v1/models'))\n"
        "    await asyncio.sleep(0)\n"
        "    await asyncio.sleep(0)\n"
        "    gate.set()\n"  # the loop ran: the import is not on it
        "    print(await first, await second, seen, len(builds))\n"
        "asyncio.run(main())\n"
        "print(asyncio.run(get('/healthz')), len(builds))\n"  # later: the app built
    )
    assert in_fresh_process(tmp_path, basic_plan, program).splitlines() == ["200 200 [True] 1", "200 1"]
