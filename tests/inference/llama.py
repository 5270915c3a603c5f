"""A real llama.cpp server (llama-cpp-python's ``python -m llama_cpp.server``) with a real model, on loopback.

The parts come from ``.ci/llama.sh``: the server built for any x86-64 CPU and SmolLM2-135M-Instruct
(Q4_1, 94 MB) under ``~/.cache/interlock/models``. Without them these tests are skipped, unless
``INTERLOCK_REQUIRE_LLAMA`` is set (CI): then they fail, so a CI machine that lost its parts says so.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Self

import httpx
import pytest

from tests.e2e.harness import wait_until

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_MODULES = (
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
READY_S = 180  # a failure bound for loading the model on a busy 2-core machine, not a speed


def model_path() -> Path:
    """The model file: ``$INTERLOCK_LLAMA_MODEL``, else where ``.ci/llama.sh`` puts it."""
    named = os.environ.get("INTERLOCK_LLAMA_MODEL")
    if named:
        return Path(named)
    cache = Path(os.environ.get("INTERLOCK_CACHE", Path.home() / ".cache" / "interlock"))
    return cache / "models" / MODEL_FILE


def require_parts() -> Path:
    """The model's path, once the server and the model are known to be here; else skip (fail in CI)."""
    missing = [name for name in SERVER_MODULES if importlib.util.find_spec(name) is None]
    model = model_path()
    if not model.is_file():
        missing.append(str(model))
    if missing:
        why = f"llama.cpp server parts missing ({', '.join(missing)}): run `bash .ci/llama.sh`"
        if os.environ.get("INTERLOCK_REQUIRE_LLAMA"):
            pytest.fail(f"{why}, and INTERLOCK_REQUIRE_LLAMA is set")
        pytest.skip(why)
    return model


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LlamaServer:
    """One ``llama_cpp.server`` process; ``url`` is its root (the OpenAI API is under ``/v1``)."""

    def __init__(self, model: Path, log: Path, *args: str, n_ctx: int = 512) -> None:
        self.model = model
        self.log_path = log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.args = ["--n_ctx", str(n_ctx), "--model_alias", "smollm2", "--n_threads", "2", *args]
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model)]
        command += ["--host", "127.0.0.1", "--port", str(self.port), *self.args]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        wait_until(self.ready, READY_S, f"llama.cpp server on {self.url} (log: {self.log_path})")
        return self

    def ready(self) -> bool:
        """The server answers its model list (it has loaded the model); a process that died fails."""
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"llama.cpp server exited {self.proc.returncode}:\n{self.log()}")
        try:
            return httpx.get(f"{self.url}/v1/models", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def kill(self) -> None:
        """SIGKILL, as a crash or an OOM kill would end it; the port then refuses connections."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
