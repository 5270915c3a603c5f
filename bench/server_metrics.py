"""Reading a server's ``/metrics`` for its load: the lean reader (``fleet.signals.exposition``) beside
``prometheus_client``'s parser, on a vLLM-sized answer. Outside the request path (once per worker per
probe round), so this is about the probe loop's CPU, not a request's.

    .venv/bin/python bench/server_metrics.py [--families 12] [--rounds 200]

The answer is the vLLM fixture (tests/fixtures/signals/vllm-metrics.txt, built from vLLM's docs) with
``--families`` more histograms of 20 buckets and two engines each, as a real vLLM's histograms (TTFT,
inter-token latency, queue time, prefill, decode, ... per engine) make it tens of kilobytes.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from interlock.runtime.fleet.signals import vllm
from interlock.runtime.fleet.signals.exposition import samples

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "signals" / "vllm-metrics.txt"
BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
BUCKETS += [20.0, 40.0, 80.0, 160.0]


def answer(families: int) -> str:
    lines = [FIXTURE.read_text()]
    for f in range(families):
        name = f"vllm:bench_histogram_{f}_seconds"
        lines.append(f"# HELP {name} A histogram as vLLM writes them.\n# TYPE {name} histogram\n")
        for engine in (0, 1):
            labels = f'engine="{engine}",model_name="unsloth/Llama-3.2-1B-Instruct"'
            for bound in [*map(str, BUCKETS), "+Inf"]:
                lines.append(f'{name}_bucket{{{labels},le="{bound}"}} 17.0\n')
            lines.append(f"{name}_count{{{labels}}} 17.0\n{name}_sum{{{labels}}} 3.25\n")
    return "".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--families", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    text = answer(args.families)
    body = text.encode()
    assert vllm.read({"/metrics": body}).running == 12  # the fixture's, whatever was added

    def lean() -> None:
        samples(text, vllm.NAMES)

    def reference() -> None:
        for family in text_string_to_metric_families(text):
            if family.name in vllm.NAMES:
                list(family.samples)

    print(f"/metrics answer: {len(body) / 1024:.0f} KiB, {text.count(chr(10))} lines")
    results = {}
    for name, run in (("lean reader (fleet.signals)", lean), ("prometheus_client parser", reference)):
        run()
        started = time.process_time()
        for _ in range(args.rounds):
            run()
        results[name] = (time.process_time() - started) / args.rounds
    lean_s = results["lean reader (fleet.signals)"]
    for name, per in results.items():
        print(f"{name:28} {per * 1e3:7.2f} ms CPU per answer  {per / lean_s:5.1f}x lean")


if __name__ == "__main__":
    main()
