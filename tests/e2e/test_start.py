"""`interlock serve` refuses to start on a plan it cannot serve, and says why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "interlock", "serve", *args, "--port", "0"],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "")},
        timeout=60,
        check=False,
    )


def test_a_configuration_with_errors_prints_its_diagnostics_and_stops(tmp_path: Path) -> None:
    config = tmp_path / "broken.yaml"
    config.write_text("version: 1\nproviders: {}\naliases:\n  a/x: {description: x, chain: [nowhere/m]}\n")
    done = serve(str(config))
    assert (done.returncode, done.stdout) == (1, "")
    assert "error" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"interlock serve: {config} does not compile (see the diagnostics above)"
    )


def test_a_missing_plan_file_is_named(tmp_path: Path) -> None:
    done = serve(str(tmp_path / "plan.json"))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"interlock serve: {tmp_path}/plan.json: cannot read the plan: No such file or directory"
    )
