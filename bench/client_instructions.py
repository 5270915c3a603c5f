"""Instructions per upstream call of the adapter and the own client alone, by valgrind's callgrind.

bench/served_instructions.py counts the whole served gateway; this counts only what one
``OpenAIAdapter.chat`` costs on the client side (the exchange, the transport border, the pool, the
HTTP/1.1 connection, orjson), against bench/compare.py's nginx upstream: a process runs N1 and then N2
calls under callgrind, and (N2 total - N1 total) / (N2 - N1) is one call, start-up and warm-up
cancelled. With ``--before DIR`` (a source tree: ``git archive COMMIT interlock | tar -x -C DIR``) the
same for that tree, in the same run.

    .venv/bin/python bench/client_instructions.py [--calls 300 2300] [--before DIR]

Needs valgrind and nginx (bench/peers.sh installs nginx).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from compare import nginx_program, upstream_server

CALLS = """
import asyncio, sys
import uvloop
try:  # the tree's own client, wherever it lives
    from interlock.runtime.net.client import UpstreamClient
    from interlock.runtime.upstream.base import adapter_for
except ImportError:
    from interlock.runtime.upstream.client import UpstreamClient, adapter_for
from interlock.runtime.wire.base import Endpoint

BODY = {"model": "x", "messages": [{"role": "user", "content": "hello there"}]}

async def main(url: str, n: int) -> None:
    client = UpstreamClient.create()
    adapter = adapter_for("openai", client)
    headers = {"Authorization": "Bearer sk-bench"}
    ep = Endpoint(provider="fake", kind="openai", url=url, label="fake", headers=headers,
                  connect_s=5, first_byte_s=30, total_s=60)
    for _ in range(n):
        await adapter.chat(ep, "bench-model", BODY)
    await client.aclose()

uvloop.run(main(sys.argv[1], int(sys.argv[2])))
"""


def total(script: Path, url: str, calls: int, source: Path | None) -> int:
    """The instructions of one process making ``calls`` calls (callgrind's ``Collected``)."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source.resolve())
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    command += [sys.executable, str(script), url, str(calls)]
    out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=script.parent, check=True)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(out.stderr[-2000:])
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, nargs=2, default=[300, 2300], metavar=("N1", "N2"))
    parser.add_argument("--before", type=Path, default=None, help="also: this source tree, first")
    args = parser.parse_args()
    program = nginx_program()
    if program is None:
        sys.exit("nginx not found (bash bench/peers.sh installs it)")
    n1, n2 = args.calls
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        script = folder / "calls.py"
        script.write_text(CALLS)
        figures = {}
        with upstream_server(program, folder) as (url, _):
            trees = [("before", args.before)] if args.before is not None else []
            trees.append(("this", None if args.before is None else Path(__file__).resolve().parents[1]))
            for name, source in trees:
                per_call = (total(script, url, n2, source) - total(script, url, n1, source)) / (n2 - n1)
                figures[name] = per_call
                print(f"{name:<7} {per_call:,.0f} instructions per call")
    if "before" in figures:
        before, this = figures["before"], figures["this"]
        change = (this - before) / before
        print(f"before {before:,.0f} -> this {this:,.0f} instructions per call ({change:+.1%})")


if __name__ == "__main__":
    main()
