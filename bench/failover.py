"""The failover drill of issue 40, in real time: sixteen kinds of provider misbehaviour, each through
`interlock serve` with its default settings, a `[primary, fallback]` chain, streamed (and two rows with
a single-candidate alias: one 500, one 429 with `Retry-After: 2`).

For each: the chat requests each upstream saw, the wall time, the outcome (rescued / clean error / hang /
truncated), who answered, and whether the scenario's target was met. The scenarios and the raw asyncio
upstreams are in tests/e2e/drill.py (the same ones tests/e2e/test_failover_drill.py runs scaled down).

    .venv/bin/python bench/failover.py [--quick] [--scale S] [--only NAME ...] [--down S ...] [--json FILE]

Every scenario runs at once (each has its own alias and upstreams), so a full run takes as long as the
longest (the primary down for 60 s and 30 s of traffic after: about 95 s); ``--quick`` is ``--scale
0.25`` (every default duration of the plan and every delay of the scripts a quarter: about 25 s).
``--down 50 70 130`` adds a primary down for each of those lengths (issue 40's recovery targets).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import orjson

from tests.e2e.drill import SCENARIOS, Drill, Result, down, main_dir, table


async def run(scale: float, only: list[str], downs: list[int]) -> tuple[str, list[Result]]:
    scenarios = [s for s in (*SCENARIOS, *map(down, downs)) if not only or s.name in only]
    workdir = main_dir()
    try:
        async with Drill(scenarios, scale, workdir) as drill:
            results = await drill.run()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return table(results, scale), results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="every duration a quarter (--scale 0.25)")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--only", nargs="*", default=[], help="scenario names")
    parser.add_argument("--down", nargs="*", type=int, default=[], help="more outage lengths (s)")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    scale = 0.25 if args.quick else args.scale
    text, results = asyncio.run(run(scale, args.only, args.down))
    print(text)
    if args.json is not None:
        rows = [{k: v for k, v in dataclasses.asdict(r).items() if k not in ("seen", "log")} for r in results]
        args.json.write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
