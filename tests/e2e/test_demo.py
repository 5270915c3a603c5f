"""`interlock demo` runs end to end and exits 0 only when everything it shows happened."""

from __future__ import annotations

import re
import subprocess
import sys


def test_the_demo_shows_fallback_and_exits_zero() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "interlock", "demo"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "X-Interlock-Resolved: local/llama3.2:3b" in out
    assert "X-Interlock-Resolved: cloud/gpt-4o-mini" in out
    assert "chunk.model values: ['local/llama3.2:3b']" in out
    summary = r"HTTP 503 \(Retry-After: \d+\): no candidate of demo/chat could answer \(1 of 2 attempted\)"
    assert re.search(summary, out)
    assert "sk-demo" not in out
    assert out.rstrip().endswith(
        "OK: every step behaved as described. Next: interlock compile / interlock serve (see README)."
    )
