"""A longer fuzzing run than CI's: tests/fuzz with many random cases per operation (docs/openapi.md).

CI runs a few derandomized cases per operation, mode and front; this runs ``--examples`` of them from
``--seed`` (a different seed finds different requests), and prints the time it took. A failure prints
the request as a `curl` line to replay against a gateway.

    .venv/bin/python bench/fuzz.py [--examples 200] [--seed 1] [-- PYTEST ARGS...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=200, help="cases per operation, mode and front")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --), e.g. -k open")
    args = parser.parse_args()
    env = {**os.environ, "INTERLOCK_FUZZ_EXAMPLES": str(args.examples), "INTERLOCK_FUZZ_SEED": str(args.seed)}
    command = [sys.executable, "-m", "pytest", "-q", "tests/fuzz/test_fuzz.py", *args.pytest_args]
    started = time.perf_counter()
    code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
    print(
        f"{args.examples} cases per operation, mode and front, seed {args.seed}: "
        f"{'clean' if code == 0 else 'FAILED'} in {time.perf_counter() - started:.0f} s"
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
