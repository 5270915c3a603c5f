"""`interlock serve` as a real subprocess on an ephemeral port, for end-to-end tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from tests.waiting import wait_until


class Served:
    """A running gateway process. ``url`` is read from the line ``interlock serving <url> ...``."""

    def __init__(self, plan: Path, env: Mapping[str, str], log: Path, *args: str) -> None:
        self.plan = plan
        self.log_path = log
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "interlock", "serve", str(plan), "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=self._log,
            stdin=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", ""), **env},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        if not line.startswith("interlock serving http://"):
            self.stop()
            raise RuntimeError(f"interlock serve did not start: {line!r}\n{self.log()}")
        self.banner = line.strip()
        self.url = line.split()[2]
        self.http = httpx.Client(base_url=self.url, timeout=60)
        wait_until(lambda: self._ready(), 60, "the gateway to be ready")

    def _ready(self) -> bool:
        try:
            return self.http.get("/readyz").status_code == 200
        except httpx.TransportError:
            return False

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def health(self) -> Any:
        return self.http.get("/v1/health").json()

    def metric(self, name: str, **labels: str) -> float:
        """One sample from /metrics (0 when absent)."""
        from prometheus_client.parser import text_string_to_metric_families

        for family in text_string_to_metric_families(self.http.get("/metrics").text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    return float(sample.value)
        return 0.0

    def sighup(self) -> None:
        self.proc.send_signal(signal.SIGHUP)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._log.close()
        if hasattr(self, "http"):
            self.http.close()


def compile_to(config: Path, text: str, out: Path) -> Path:
    """Compile ``text`` with the real compiler (in this process); the canonical plan lands in ``out``."""
    from interlock.compiler import compile_config
    from interlock.schema.canonical import canonical_json

    config.write_text(text)
    ctx = compile_config(str(config))
    assert ctx.plan is not None, [str(d) for d in ctx.sink.items]
    out.write_text(canonical_json(ctx.plan.model_dump(mode="json")))
    return out
