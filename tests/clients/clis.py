"""The real Claude Code and Codex CLIs, run headless against a gateway on loopback.

Both come from npm at the versions ``.ci/run`` pins (its ``AGENT_CLIS`` line, read here: one place to
change them), into a prefix of their own, ``$INTERLOCK_NODE_PREFIX`` (default
``~/.cache/interlock/node/claude-code-2.1.337+codex-0.171.0``, one per pinned set), with node 22 from
npm where the machine's is older, the way ``.ci/run`` installs them::

    bash .ci/clis.sh @anthropic-ai/claude-code@2.1.337 @openai/codex@0.171.0

Each run has the prefix's ``node_modules/.bin`` first on its ``PATH``, so a CLI that runs on node
finds that node 22. A missing CLI skips its tests, unless ``INTERLOCK_REQUIRE_CLIS`` is set (CI): there
they fail.

Each run gets an empty home of its own and only the environment named here: the base URL and a key
for the gateway, and every switch the CLIs have against traffic of their own (telemetry, error
reports, update checks, feedback), so nothing but the gateway on 127.0.0.1 is ever asked.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def pinned() -> dict[str, str]:
    """The CLIs ``.ci/run`` installs, by command: ``{"claude": "@anthropic-ai/claude-code@2.1.337", ...}``."""
    line = re.search(r'^AGENT_CLIS="([^"]+)"$', (ROOT / ".ci" / "run").read_text(), re.MULTILINE)
    assert line is not None, ".ci/run has no AGENT_CLIS line"
    specs = line.group(1).split()
    return {
        "claude": next(s for s in specs if s.startswith("@anthropic-ai/claude-code@")),
        "codex": next(s for s in specs if s.startswith("@openai/codex@")),
    }


PACKAGES = pinned()
VERSIONS = {name: spec.rpartition("@")[2] for name, spec in PACKAGES.items()}
RUN_S = 120  # a bound on one CLI run (a failure bound, not a speed check)

# Claude Code: no telemetry, error reports, auto-update, feedback survey or other nonessential calls
CLAUDE_QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
}

CODEX_CONFIG = """\
model = "{model}"
model_provider = "interlock"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.interlock]
name = "interlock"
base_url = "{base_url}/v1"
wire_api = "responses"
env_key = "INTERLOCK_KEY"
request_max_retries = {request_retries}
stream_max_retries = {stream_retries}
"""


def node_prefix() -> Path:
    """Where ``.ci/clis.sh`` installs the pinned set (the same name from the same pins)."""
    named = os.environ.get("INTERLOCK_NODE_PREFIX")
    if named:
        return Path(named)
    key = "+".join(
        f"{spec.rpartition('@')[0].rpartition('/')[2]}-{VERSIONS[n]}" for n, spec in PACKAGES.items()
    )
    cache = Path(os.environ.get("INTERLOCK_CACHE", Path.home() / ".cache" / "interlock"))
    return cache / "node" / key


def cli_path(name: str) -> Path:
    """The installed CLI ``name`` (claude | codex); skipped (or, in CI, failed) when it is missing."""
    path = node_prefix() / "node_modules" / ".bin" / name
    if not path.exists():
        hint = f"bash .ci/clis.sh {' '.join(PACKAGES.values())}"
        if os.environ.get("INTERLOCK_REQUIRE_CLIS"):
            pytest.fail(f"no `{name}` CLI at {path}, and INTERLOCK_REQUIRE_CLIS is set ({hint})")
        pytest.skip(f"no `{name}` CLI at {path} ({hint})")
    return path


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str

    def explain(self) -> str:
        return f"exit {self.returncode}\n--- stdout\n{self.stdout}\n--- stderr\n{self.stderr[-4000:]}"


def run(command: list[str], env: dict[str, str], cwd: Path, run_s: float = RUN_S) -> Ran:
    path = f"{node_prefix() / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}"
    base = {"PATH": path, "LANG": "C.UTF-8", "TERM": "dumb"}
    done = subprocess.run(
        command,
        env={**base, **env},
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=run_s,
        check=False,
    )
    return Ran(done.returncode, done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))


def claude(
    gateway_url: str,
    model: str,
    prompt: str,
    home: Path,
    *args: str,
    retries: int = 0,
    run_s: float = RUN_S,
    max_output_tokens: int | None = None,
) -> Ran:
    """``claude -p <prompt> --model <model>`` with ``ANTHROPIC_BASE_URL`` at the gateway; ``retries``:
    how often Claude Code retries a failed request (its default, 10 with backoff, outlasts a test);
    ``run_s``: the bound on the run (a real model on a CPU takes longer than a fake);
    ``max_output_tokens``: Claude Code's own ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` (its ``max_tokens``,
    32000 unless set)."""
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": gateway_url,
        "ANTHROPIC_API_KEY": "sk-ant-caller",
        "CLAUDE_CODE_MAX_RETRIES": str(retries),
        **CLAUDE_QUIET,
    }
    if max_output_tokens is not None:
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(max_output_tokens)
    command = [str(cli_path("claude")), "-p", prompt, "--model", model, *args]
    return run(command, env, home, run_s)


def codex(
    gateway_url: str,
    model: str,
    prompt: str,
    home: Path,
    *,
    stream_retries: int = 0,
    request_retries: int = 0,
    run_s: float = RUN_S,
) -> Ran:
    """``codex exec <prompt>`` with Codex's defaults (no feature turned off) and a provider whose
    ``base_url`` is the gateway's ``/v1``, in a ``CODEX_HOME`` of its own."""
    codex_home = home / "codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    config = CODEX_CONFIG.format(
        model=model, base_url=gateway_url, stream_retries=stream_retries, request_retries=request_retries
    )
    (codex_home / "config.toml").write_text(config)
    env = {"HOME": str(home), "CODEX_HOME": str(codex_home), "INTERLOCK_KEY": "sk-caller"}
    command = [str(cli_path("codex")), "exec", "--skip-git-repo-check", prompt]
    return run(command, env, home, run_s)
