"""A fake upstream in a process of its own, so its work never shares the event loop being measured.

``with FakeProcess("openai", "--api-key", "sk-test") as fake: fake.base_url`` starts
``python -m interlock.testing.fake_openai --port 0`` and reads the URL it prints. Faults are steered
over the fake's ``/_fake/`` control routes; refusing connections out of process is ``fake.stop()``.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from dataclasses import asdict
from types import TracebackType
from typing import Any, Literal, Self

import orjson

from interlock.testing.faults import Fault


class FakeProcess:
    """``kind`` is ``openai``, ``anthropic`` or ``ollama``; ``args`` go to the fake's command line."""

    def __init__(self, kind: Literal["openai", "anthropic", "ollama"], *args: str) -> None:
        self.kind = kind
        self.args = args
        self._proc: subprocess.Popen[bytes] | None = None
        self._url: str | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError(f"fake {self.kind} process is not started")
        return self._url

    @property
    def base_url(self) -> str:
        """What a client is configured with: ``<url>/v1`` for OpenAI, the URL itself for the others."""
        return f"{self.url}/v1" if self.kind == "openai" else self.url

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError(f"fake {self.kind} process is not started")
        return self._proc.pid

    def start(self, timeout_s: float = 20.0) -> Self:
        command = [sys.executable, "-m", f"interlock.testing.fake_{self.kind}", "--port", "0", *self.args]
        self._proc = subprocess.Popen(command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().decode().strip()
        if not line.startswith("http://"):
            self.stop()
            raise RuntimeError(f"fake {self.kind} process did not start: first line {line!r}")
        self._url = line
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout_s)
        if proc.stdout is not None:
            proc.stdout.close()

    def set_fault(self, fault: Fault, *, model: str | None = None, times: int | None = None) -> None:
        if fault.gate is not None:
            raise ValueError("Fault.hold() works in-process only: its gate cannot reach another process")
        spec: dict[str, Any] = {k: v for k, v in asdict(fault).items() if v is not None}
        if isinstance(spec.get("body"), bytes):
            spec["body"] = spec["body"].decode()
        self._control(
            "POST", "/_fake/fault", {**spec, "kind": str(fault.kind), "model": model, "times": times}
        )

    def clear_faults(self, *, model: str | None = None) -> None:
        self._control("POST", "/_fake/clear", {"model": model})

    def requests(self) -> list[dict[str, Any]]:
        """What the fake received (method, path, lower-cased headers, parsed body)."""
        result: list[dict[str, Any]] = self._control("GET", "/_fake/requests", None)
        return result

    def streams(self) -> dict[str, int]:
        """How the fake's streamed answers ended: ``started``, ``finished``, ``cut``, ``open``."""
        result: dict[str, int] = self._control("GET", "/_fake/streams", None)
        return result

    def clear_requests(self) -> None:
        self._control("POST", "/_fake/requests/clear", {})

    def _control(self, method: str, path: str, body: Any) -> Any:
        data = orjson.dumps(body) if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(request, timeout=10) as response:
            return orjson.loads(response.read())

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
