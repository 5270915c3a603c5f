"""`interlock connect CLIENT`: the printed settings, run as printed, make each real client answer.

A gateway of its own (`interlock serve`, caller keys required) in front of a fake Ollama worker whose
model has a 100,000-token window: the window the clients are told, and the output ceiling derived from
it (a quarter: 25,000 for Claude Code, whose own default is 32,000), are visible in what reaches the
upstream. Shell lines are run by bash, as a user pastes them; the caller key is only ever named.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from interlock.cli import main
from interlock.connect import CLIENTS
from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.replies import Reply
from tests.clients.clis import CLAUDE_QUIET, RUN_S, cli_path
from tests.e2e.harness import Served

WINDOW = 100_000
KEY = "sk-dev-caller-5e1f0c2a"
ANSWER = "Hello from box, model llama3.2:3b."
PLAN = """\
version: 1
server: {{auth: required}}
providers:
  box:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
    workers: [{{name: box1, url: "{box}"}}]
tenants:
  dev: {{}}
keys:
  laptop: {{tenant: dev, key_env: DEV_KEY}}
aliases:
  co/local: {{description: the box, chain: [box/llama3.2:3b]}}
"""


@pytest.fixture(scope="module")
def box() -> Iterator[FakeOllama]:
    model = ModelSpec("llama3.2:3b", ("completion", "tools"), context_length=WINDOW, num_ctx=WINDOW)
    with FakeOllama(name="box", models=(model,), reply=Reply(tool_calls=())) as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(box: FakeOllama, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("connect-gateway")
    plan = folder / "interlock.yaml"
    plan.write_text(PLAN.format(box=box.url))
    served = Served(plan, {"DEV_KEY": KEY}, folder / "serve.log")
    try:
        yield served
    finally:
        served.stop()


def connect(
    client: str, gateway: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    monkeypatch.setenv("INTERLOCK_API_KEY", KEY)
    capsys.readouterr()
    assert main(["connect", client, "--url", gateway.url, "--alias", "co/local"]) == 0
    printed = capsys.readouterr().out
    assert KEY not in printed  # only the variable's name
    return printed


def bash_env(printed: str) -> dict[str, str]:
    """The environment after bash runs the printed lines (with the caller key in INTERLOCK_API_KEY)."""
    done = subprocess.run(
        ["bash", "-c", printed + "\nenv -0"],
        env={"PATH": os.environ.get("PATH", ""), "INTERLOCK_API_KEY": KEY},
        capture_output=True,
        check=True,
        timeout=30,
    )
    pairs = (item.split("=", 1) for item in done.stdout.decode().split("\0") if "=" in item)
    return {
        name: value for name, value in pairs if name not in ("PATH", "PWD", "SHLVL", "_", "INTERLOCK_API_KEY")
    }


def chats(box: FakeOllama) -> list[Any]:
    return [r.body for r in box.requests if r.path == "/api/chat" and isinstance(r.body, dict)]


def test_every_client_has_its_settings() -> None:
    expected = {"claude-code", "codex", "open-webui", "openai-sdk", "anthropic-sdk", "agents-sdk", "litellm"}
    assert set(CLIENTS) == expected


def test_claude_code_answers_with_the_alias_s_window_and_ceiling(
    gateway: Served,
    box: FakeOllama,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    printed = connect("claude-code", gateway, monkeypatch, capsys)
    env = bash_env(printed)
    assert env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == env["CLAUDE_CODE_AUTO_COMPACT_WINDOW"] == str(WINDOW)
    assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == str(WINDOW // 4)
    box.clear_requests()
    claude = cli_path("claude")
    done = subprocess.run(
        ["bash", "-c", f'{printed}\nexec "{claude}" -p "say hi"'],
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "INTERLOCK_API_KEY": KEY,
            "CLAUDE_CODE_MAX_RETRIES": "0",
            **CLAUDE_QUIET,
        },
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=RUN_S,
        check=False,
    )
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    assert done.returncode == 0, out + err
    assert out.strip() == ANSWER, out + err
    for warning in ("recognize the model", "assumes a context window"):
        assert warning not in out + err
    sent = chats(box)
    assert sent
    assert {body["model"] for body in sent} == {"llama3.2:3b"}  # every model Claude Code picked: the alias
    assert {body["options"]["num_predict"] for body in sent} == {WINDOW // 4}  # its max_tokens, the ceiling


def test_codex_answers_with_the_printed_config(
    gateway: Served,
    box: FakeOllama,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    printed = connect("codex", gateway, monkeypatch, capsys)
    assert f"model_context_window = {WINDOW}\n" in printed
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(printed + "\n[analytics]\nenabled = false\n")  # as the suite's
    codex = cli_path("codex")
    box.clear_requests()
    done = subprocess.run(
        [str(codex), "exec", "--skip-git-repo-check", "say hi"],
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "CODEX_HOME": str(codex_home),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "INTERLOCK_API_KEY": KEY,
        },
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=RUN_S,
        check=False,
    )
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    assert done.returncode == 0, out + err
    assert ANSWER in out, out + err
    assert chats(box)


def test_the_openai_sdk_answers_from_the_printed_environment(
    gateway: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from openai import OpenAI

    printed = connect("openai-sdk", gateway, monkeypatch, capsys)
    for name, value in bash_env(printed).items():
        monkeypatch.setenv(name, value)
    answer = OpenAI(max_retries=0).chat.completions.create(
        model="co/local", max_tokens=4096, messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.choices[0].message.content == ANSWER
    assert "max_tokens=4096" in printed


def test_the_anthropic_sdk_answers_from_the_printed_environment(
    gateway: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from anthropic import Anthropic

    printed = connect("anthropic-sdk", gateway, monkeypatch, capsys)
    for name, value in bash_env(printed).items():
        monkeypatch.setenv(name, value)
    answer = Anthropic(max_retries=0).messages.create(
        model="co/local", max_tokens=4096, messages=[{"role": "user", "content": "hi"}]
    )
    assert answer.content[0].text == ANSWER  # type: ignore[union-attr]


def test_the_agents_sdk_answers_from_the_printed_environment(
    gateway: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    printed = connect("agents-sdk", gateway, monkeypatch, capsys)
    env = bash_env(printed)
    assert env["OPENAI_AGENTS_DISABLE_TRACING"] == "1"
    assert 'model="openai/co/local", model_settings=ModelSettings(max_tokens=4096)' in printed
    script = (
        "from agents import Agent, ModelSettings, Runner\n"
        "agent = Agent(name='a', instructions='Be brief.', model='openai/co/local', "
        "model_settings=ModelSettings(max_tokens=4096))\n"
        "print(Runner.run_sync(agent, 'hi').final_output)\n"
    )
    import sys

    done = subprocess.run(  # a fresh interpreter: the SDK reads its environment once, at import
        [sys.executable, "-c", script],
        env={"PATH": os.environ.get("PATH", ""), **env},
        capture_output=True,
        timeout=RUN_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert done.stdout.decode().strip() == ANSWER


def test_litellm_answers_with_the_printed_model_list(
    gateway: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import litellm

    printed = connect("litellm", gateway, monkeypatch, capsys)
    model_list = yaml.safe_load(printed)["model_list"]
    assert model_list[0]["model_info"] == {"max_input_tokens": WINDOW, "max_output_tokens": 4096}
    router = litellm.Router(model_list=model_list)
    answer = router.completion(model="co/local", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content == ANSWER


def test_open_webui_gets_both_connections(
    gateway: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Open WebUI itself runs in `examples/open_webui/run.sh`, not in the suite (docs/clients.md)."""
    env = bash_env(connect("open-webui", gateway, monkeypatch, capsys))
    assert env == {
        "OLLAMA_BASE_URL": gateway.url,
        "OPENAI_API_BASE_URL": f"{gateway.url}/v1",
        "OPENAI_API_KEY": KEY,
    }


def test_an_unknown_alias_and_a_missing_key_are_said(
    gateway: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("INTERLOCK_API_KEY", raising=False)
    assert main(["connect", "codex", "--url", gateway.url, "--alias", "co/local"]) == 1
    assert capsys.readouterr().err == (
        f"interlock connect: {gateway.url} answered 401: the gateway needs a caller key; put one in "
        "INTERLOCK_API_KEY (or the variable named by --api-key-env)\n"
    )
    monkeypatch.setenv("INTERLOCK_API_KEY", KEY)
    assert main(["connect", "codex", "--url", gateway.url, "--alias", "co/nope"]) == 1
    assert capsys.readouterr().err == (
        f"interlock connect: {gateway.url} has no alias `co/nope` (that this key may use); "
        f"GET {gateway.url}/v1/models lists them\n"
    )
