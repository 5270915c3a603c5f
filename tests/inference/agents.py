"""Coding agents on a real local model, as a user sets them up: llama-server, `interlock serve` in front
of it, and the real Claude Code and Codex configured with what `interlock connect` prints, applied as
printed (bash runs the export lines; Codex gets the printed ``config.toml``).

The gateway's config is what ``interlock init --discover`` writes for the server (``lint`` checks it),
served as written but for one line (``FIRST_BYTE``, below). Shared by ``tests/inference/test_agents.py``
and ``bench/agent_models.py`` (which measures the models against each other with it)::

    with LlamaServer(model, log, n_ctx=8192) as server, AgentGateway(server, folder) as gateway:
        printed = gateway.connect("claude-code")
        ran = gateway.claude(printed, "say hi", folder / "home")

Only 127.0.0.1 is ever asked: the CLIs run with every switch against traffic of their own
(``tests/clients/clis.py``).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self

import httpx
import orjson
from ruamel.yaml import YAML

from tests.clients.clis import CLAUDE_QUIET, Ran, cli_path, node_prefix
from tests.e2e.harness import Served
from tests.inference.record_wire import ECHO

ALIAS = "local/chat"  # the alias `interlock init --discover` writes for a llama-server's chat model
KEY_VARIABLE = "LLAMACPP_KEY"  # the variable init names for the server's key (it asked for none)

# The one setting the agent tier changes in init's file: a first-byte deadline that covers a cold prefill
# of a CLI's 4-5k-token prompt on a loaded 2-core machine (11 prompt tokens/s at load 14: minutes). The
# default (60 s for workers) is right once the deadline follows the server's own progress (its /slots,
# issue 38 item 5); until then a cold prompt on a busy machine times out again and again, and the
# circuit opens on a server that is working (seen: 503s for 6 minutes, then a failed run)
FIRST_BYTE = "900s"

# A failure bound on one CLI run, not a speed: each measured run of the tier ended within 22 s at load 3 to
# 6, the tool round trip's within 74 s at load 4 (docs/clients.md); a run that does not end (the model
# writing to its ceiling, the CLI resuming) is cut here, so the tier's seven runs hold CI for at most 18
# minutes when every one fails
RUN_S = 150

# The short prompt the tier gives both CLIs in place of their own (Claude Code 2.1.337's is ~4,100 tokens,
# Codex 0.171.0's ~4,400: a 135M model rarely ends a turn after either, and a cold prefill of one takes
# minutes on a loaded 2-core machine), each CLI's own way, beside connect's settings (used as printed).
# Claude Code: ``--bare`` (no environment block: no working folder, no date), ``--system-prompt``,
# ``--tools ""`` (no tool schemas). Codex: ``CODEX_LEAN`` in its config.toml. The request is then the
# same in every run (Claude Code's 74 prompt tokens, Codex's 19: a preamble, this prompt, the user's
# words), so at the server's temperature 0 the answer is the same too: with the working folder and the
# date in the prompt, a run in another folder could write to the ceiling (docs/clients.md)
SYSTEM_PROMPT = "You are a helpful assistant."
CLAUDE_LEAN = ("--bare", "--system-prompt", SYSTEM_PROMPT, "--tools", "")
# The tool-call round trip (test_agents.py, bench/agent_tasks.py's ``claude-read``): Claude Code with one
# tool, Read, the server on a ChatML template that renders tools (tests/inference/chatml_tools.jinja), and
# the user asking the model to write the call back (test_wire_round_trips.py's words): SmolLM2 does not
# decide to call a tool (told to read the file, it wrote a JavaScript function to the 512-token ceiling,
# and a system prompt holding the call was not followed). A relative path: Claude Code reads it in its
# working folder, and the request is the same in every run
CLAUDE_READ = ("--bare", "--system-prompt", SYSTEM_PROMPT, "--tools", "Read")
READ_FILE = "hello.txt"
SECRET = "The secret word is banana."  # the file's text, which must reach the model as the tool's result
READ_CALL = json.dumps({"name": "Read", "arguments": {"file_path": READ_FILE}})
READ_WORDS = f"{ECHO}<tool_call>\n{READ_CALL}\n</tool_call>"
# Codex 0.171.0's keys (top-level, so written above connect's tables): its instructions from a file, and
# none of its environment (working folder, date), permissions, apps or skills messages
CODEX_LEAN = """\
model_instructions_file = {instructions}
include_environment_context = false
include_permissions_instructions = false
include_apps_instructions = false
skills.include_instructions = false
skills.bundled.enabled = false
"""


def _tally(text: str, name: str) -> float:
    """The sum of a metric's samples in a Prometheus text (every label set)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name)] in " {":
            total += float(line.rsplit(" ", 1)[1])
    return total


class Upstream(Protocol):
    """What the gateway is put in front of: a ``LlamaServer``, or a recording proxy in front of one."""

    @property
    def url(self) -> str: ...


@dataclass(frozen=True)
class Counts:
    """What the gateway and the server counted so far (each only grows)."""

    requests: float  # requests the gateway answered (any endpoint, any status)
    prompt_tokens: float  # tokens the server prefilled (its slot cache's hits are not counted)
    output_tokens: float  # tokens the server generated

    def __sub__(self, other: Counts) -> Counts:
        return Counts(
            self.requests - other.requests,
            self.prompt_tokens - other.prompt_tokens,
            self.output_tokens - other.output_tokens,
        )


@dataclass(frozen=True)
class AgentRun:
    ran: Ran
    seconds: float
    counts: Counts


class AgentGateway:
    """`interlock serve` in front of ``server``, its config as a new user makes it: written by
    ``interlock init --discover`` (exit 0), checked by ``interlock lint`` (exit 0), served unchanged."""

    def __init__(self, server: Upstream, folder: Path, *, first_byte: str | None = FIRST_BYTE) -> None:
        self.server = server
        self.folder = folder
        self.config = folder / "interlock.yaml"
        self.first_byte = first_byte
        self.served: Served | None = None

    def __enter__(self) -> Self:
        self._interlock("init", "--discover", self.server.url, "-o", str(self.config))
        if self.first_byte is not None:
            self._stretch_first_byte(self.first_byte)
        self.lint = self._interlock("lint", str(self.config))
        env = {KEY_VARIABLE: "no-key-on-this-server"}
        self.served = Served(self.config, env, self.folder / "serve.log", "--access-log")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.served is not None:
            self.served.stop()

    def _stretch_first_byte(self, first_byte: str) -> None:
        """The one change to init's file: ``timeouts.first_byte`` of its provider (``FIRST_BYTE``)."""
        yaml = YAML()
        config = yaml.load(self.config.read_text())
        for provider in config["providers"].values():
            provider["timeouts"] = {"first_byte": first_byte}
        with self.config.open("w") as out:
            yaml.dump(config, out)

    def _interlock(self, *args: str) -> str:
        """``interlock ARGS`` in a process of its own (exit 0 required); what it printed."""
        done = subprocess.run(
            [sys.executable, "-m", "interlock", *args],
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            capture_output=True,
            timeout=120,
            check=False,
        )
        said = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
        assert done.returncode == 0, f"interlock {' '.join(args)}: exit {done.returncode}\n{said}"
        return done.stdout.decode()

    @property
    def gateway(self) -> Served:
        assert self.served is not None, "not started"
        return self.served

    def counts(self) -> Counts:
        mine = self.gateway.http.get("/metrics").text
        theirs = httpx.get(f"{self.server.url}/metrics", timeout=60).text
        return Counts(
            _tally(mine, "interlock_requests_total"),
            _tally(theirs, "llamacpp:prompt_tokens_total"),
            _tally(theirs, "llamacpp:tokens_predicted_total"),
        )

    def connect(self, client: str, alias: str = ALIAS) -> str:
        """What ``interlock connect CLIENT --url <gateway> --alias ALIAS`` prints."""
        return self._interlock("connect", client, "--url", self.gateway.url, "--alias", alias)

    def claude(self, printed: str, prompt: str, home: Path, *args: str) -> AgentRun:
        """``claude -p PROMPT`` in a shell that ran ``printed`` (connect's lines, as a user pastes them);
        Claude Code's own retries, as a user has them."""
        home.mkdir(parents=True, exist_ok=True)
        claude = cli_path("claude")
        words = " ".join(shlex.quote(a) for a in args)
        script = f'{printed}\nexec "{claude}" -p "$1" {words}'
        env = {"HOME": str(home), **CLAUDE_QUIET}
        return self._timed(["bash", "-c", script, "claude", prompt], env, home)

    def codex(
        self, printed: str, prompt: str, home: Path, *args: str, instructions: str | None = None
    ) -> AgentRun:
        """``codex exec [ARGS] PROMPT`` with connect's ``config.toml`` as printed (and analytics off);
        ``args`` may end in a subcommand (``resume --last``). ``instructions``: Codex's system prompt in
        place of its own, with ``CODEX_LEAN`` (top-level keys, so written before the printed lines,
        whose tables would otherwise hold them)."""
        codex_home = home / "codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        lead = ""
        if instructions is not None:
            (codex_home / "instructions.md").write_text(instructions + "\n")
            path = orjson.dumps(str(codex_home / "instructions.md")).decode()  # a TOML basic string too
            lead = CODEX_LEAN.format(instructions=path)
        (codex_home / "config.toml").write_text(lead + printed + "\n[analytics]\nenabled = false\n")
        env = {"HOME": str(home), "CODEX_HOME": str(codex_home)}
        command = [str(cli_path("codex")), "exec", "--skip-git-repo-check", *args, prompt]
        return self._timed(command, env, home)

    def _timed(self, command: list[str], env: dict[str, str], cwd: Path) -> AgentRun:
        path = os.pathsep.join([str(node_prefix() / "node_modules" / ".bin"), os.environ.get("PATH", "")])
        before, started = self.counts(), time.monotonic()
        done = subprocess.run(
            command,
            env={"PATH": path, "LANG": "C.UTF-8", "TERM": "dumb", **env},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=RUN_S,
            check=False,
        )
        seconds = time.monotonic() - started
        ran = Ran(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))
        return AgentRun(ran, seconds, self.counts() - before)
