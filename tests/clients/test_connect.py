"""`interlock connect CLIENT`: the printed settings, run as printed, make each real client answer.

A gateway of its own (`interlock serve`, caller keys required) in front of two OpenAI-compatible
fakes, as llama-server and a cloud would be: alias `co/local` is an 8,192-token model, and `co/chain`
falls back from it to a 131,072-token one, so its guaranteed window is 8,192 too (the smallest of its
chain: what a fallback can hold). Claude Code is told that window and an output ceiling that leaves
room for its own prompt (512 at 8,192), and the ceiling is what reaches the upstream; the coding
agents run as the newest releases do (the CLIs under ``$INTERLOCK_NODE_PREFIX``,
tests/clients/clis.py), within the version range the printed lines say were checked. A second
gateway without caller keys gets no key variable in Codex's config. Shell lines are run by bash, as
a user pastes them; the caller key is only ever named.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from interlock.cli import main
from interlock.connect import CLIENTS
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.replies import Reply
from tests.clients.clis import CLAUDE_QUIET, RUN_S, cli_path
from tests.e2e.harness import Served

WINDOW = 8_192  # the guaranteed window: the smaller of co/local's two
CLAUDE_OUTPUT = 512  # what `connect` prints for Claude Code on it (agents.claude_code_output)
KEY = "sk-dev-caller-5e1f0c2a"
ANSWER = "Hello from llama, model smollm2."
SAMPLE = "interlock-connect-sample-71c2"  # the file Claude Code reads on the scripted tool call
PLAN = """\
version: 1
server: {{auth: {auth}}}
providers:
  llama: {{kind: openai, base_url: "{llama}", timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}}}
  cloud: {{kind: openai, base_url: "{cloud}", api_key_env: CLOUD_KEY}}
models:
  llama/smollm2: {{capabilities: [completion, tools], context_tokens: {window}}}
  llama/tiny: {{capabilities: [completion, tools], context_tokens: 4096}}
  cloud/big: {{capabilities: [completion, tools], context_tokens: 131072, max_output_tokens: 400}}
tenants:
  dev: {{}}
keys:
  laptop: {{tenant: dev, key_env: DEV_KEY}}
aliases:
  co/local: {{description: the box, chain: [llama/smollm2]}}
  co/chain: {{description: "the box, then the cloud", chain: [llama/smollm2, cloud/big]}}
  co/tiny: {{description: too small for an agent, chain: [llama/tiny, cloud/big]}}
"""


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeOpenAI]:
    """The 8,192-token server; asked with a `Read` tool it reads the sample file first (a round trip)."""
    sample = tmp_path_factory.mktemp("connect-sample") / "sample.txt"
    sample.write_text(SAMPLE)
    reply = Reply(tool_calls=(("Read", {"file_path": str(sample)}),))
    with FakeOpenAI(name="llama", models=("smollm2", "tiny"), reply=reply) as fake:
        yield fake


@pytest.fixture(scope="module")
def cloud() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(name="cloud", models=("big",)) as fake:
        yield fake


def _serve(auth: str, llama: FakeOpenAI, cloud: FakeOpenAI, folder: Path) -> Served:
    plan = folder / "interlock.yaml"
    plan.write_text(PLAN.format(auth=auth, llama=llama.base_url, cloud=cloud.base_url, window=WINDOW))
    return Served(plan, {"DEV_KEY": KEY, "CLOUD_KEY": "sk-cloud"}, folder / "serve.log")


@pytest.fixture(scope="module")
def gateway(
    llama: FakeOpenAI, cloud: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    served = _serve("required", llama, cloud, tmp_path_factory.mktemp("connect-gateway"))
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="module")
def open_gateway(
    llama: FakeOpenAI, cloud: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """The same aliases with no caller keys (``server.auth: off``)."""
    served = _serve("off", llama, cloud, tmp_path_factory.mktemp("connect-open"))
    try:
        yield served
    finally:
        served.stop()


def connect(
    client: str,
    gateway: Served,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: str | None = KEY,
    alias: str = "co/local",
) -> str:
    if key is None:
        monkeypatch.delenv("INTERLOCK_API_KEY", raising=False)
    else:
        monkeypatch.setenv("INTERLOCK_API_KEY", key)
    capsys.readouterr()
    assert main(["connect", client, "--url", gateway.url, "--alias", alias]) == 0
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


def chats(fake: FakeOpenAI) -> list[Any]:
    return [
        r.body for r in fake.requests if r.path.endswith("/chat/completions") and isinstance(r.body, dict)
    ]


def version_of(cli: Path) -> tuple[int, ...]:
    done = subprocess.run([str(cli), "--version"], capture_output=True, timeout=60, check=True)
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", done.stdout.decode())
    assert found, done.stdout
    return tuple(int(part) for part in found.groups())


def assert_checked(printed: str, client: str, version: tuple[int, ...]) -> None:
    """The installed CLI is within the versions the printed lines say were checked."""
    found = re.search(rf"checked with {client} (\S+)(?: to (\S+))?", printed)
    assert found, printed
    low, high = (tuple(int(p) for p in v.split(".")) for v in (found[1], found[2] or found[1]))
    assert low <= version <= high, f"{client} {version} is outside the checked range: re-run and re-check"


def test_every_client_has_its_settings() -> None:
    expected = {"claude-code", "codex", "open-webui", "openai-sdk", "anthropic-sdk", "agents-sdk", "litellm"}
    assert set(CLIENTS) == expected


def test_the_window_is_the_smallest_of_the_chain(
    gateway: Served, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fallback gets the same prompts: the window a client is told is one every candidate holds."""
    printed = connect("litellm", gateway, monkeypatch, capsys, alias="co/chain")
    assert yaml.safe_load(printed)["model_list"][0]["model_info"]["max_input_tokens"] == WINDOW
    printed = connect("claude-code", gateway, monkeypatch, capsys, alias="co/chain")
    env = bash_env(printed)
    assert env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == str(WINDOW)
    assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == "400"  # the chain's output ceiling: the cloud's


def test_claude_code_answers_with_the_alias_s_window_and_ceiling(
    gateway: Served,
    llama: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    printed = connect("claude-code", gateway, monkeypatch, capsys)
    env = bash_env(printed)
    assert env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"] == str(WINDOW)
    assert env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] == str(CLAUDE_OUTPUT)
    assert "CLAUDE_CODE_AUTO_COMPACT_WINDOW" not in env  # 2.1.337 raises any value under 100k to 100k
    claude = cli_path("claude")
    assert_checked(printed, "Claude Code", version_of(claude))
    llama.clear_requests()
    done = subprocess.run(
        ["bash", "-c", f'{printed}\nexec "{claude}" -p "say hi" --allowedTools Read'],
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
    for warning in ("recognize the model", "assumes a context window", "Prompt is too long"):
        assert warning not in out + err
    sent = chats(llama)
    assert len(sent) == 2, sent  # the tool call, then the answer to its result
    assert SAMPLE in str(sent[1]["messages"])  # the file Claude Code read went back
    assert {body["model"] for body in sent} == {"smollm2"}  # every model Claude Code picked: the alias
    assert {body["max_tokens"] for body in sent} == {CLAUDE_OUTPUT}  # its max_tokens, the ceiling


def codex_runs(printed: str, tmp_path: Path, key: str | None) -> tuple[int, str]:
    codex_home = tmp_path / "codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(printed + "\n[analytics]\nenabled = false\n")  # as the suite's
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "CODEX_HOME": str(codex_home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
    }
    if key is not None:
        env["INTERLOCK_API_KEY"] = key
    done = subprocess.run(
        [str(cli_path("codex")), "exec", "--skip-git-repo-check", "say hi"],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=RUN_S,
        check=False,
    )
    return done.returncode, done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")


def test_codex_answers_with_the_printed_config(
    gateway: Served,
    llama: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    printed = connect("codex", gateway, monkeypatch, capsys)
    config = tomllib.loads(printed)
    assert config["model_context_window"] == WINDOW
    assert config["model_auto_compact_token_limit"] == WINDOW * 9 // 10
    provider = config["model_providers"]["interlock"]
    assert provider["supports_websockets"] is False  # the gateway serves Responses over HTTP only
    assert provider["env_key"] == "INTERLOCK_API_KEY"
    assert_checked(printed, "Codex", version_of(cli_path("codex")))
    llama.clear_requests()
    code, output = codex_runs(printed, tmp_path, KEY)
    assert code == 0, output
    assert ANSWER in output, output
    assert chats(llama)


def test_codex_gets_no_key_variable_when_the_gateway_needs_none(
    open_gateway: Served,
    llama: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With a named `env_key` unset, Codex exits "Missing environment variable": none is named."""
    printed = connect("codex", open_gateway, monkeypatch, capsys, key=None)
    assert "env_key" not in tomllib.loads(printed)["model_providers"]["interlock"]
    assert "INTERLOCK_API_KEY" not in printed
    code, output = codex_runs(printed, tmp_path, None)
    assert code == 0, output
    assert ANSWER in output, output


@pytest.mark.parametrize(("client", "needs"), [("claude-code", "7,836"), ("codex", "6,092")])
def test_a_window_too_small_for_the_agent_is_refused_with_the_numbers(
    gateway: Served,
    client: str,
    needs: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("INTERLOCK_API_KEY", KEY)
    assert main(["connect", client, "--url", gateway.url, "--alias", "co/tiny"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(
        "interlock connect: alias `co/tiny` guarantees a window of 4,096 tokens; "
    ), captured.err
    assert f"needs at least {needs}: its own prompt is about " in captured.err


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
    assert "max_tokens=2048" in printed  # the SDK's 4,096 capped at a quarter of the window


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
    assert 'model="openai/co/local", model_settings=ModelSettings(max_tokens=2048)' in printed
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
    assert model_list[0]["model_info"] == {"max_input_tokens": WINDOW, "max_output_tokens": 2048}
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


def test_the_gateway_shows_each_alias_s_contract(gateway: Served) -> None:
    """`/api/show`, `/v1/aliases` and `/v1/models` carry the compiled contract: the smallest window."""
    auth = {"authorization": f"Bearer {KEY}"}
    shown = gateway.http.post("/api/show", json={"model": "co/chain"}, headers=auth).json()
    assert shown["model_info"]["interlock.context_length"] == WINDOW
    aliases = {a["name"]: a for a in gateway.http.get("/v1/aliases", headers=auth).json()["data"]}
    chain = aliases["co/chain"]
    assert chain["window_tokens"] == WINDOW
    assert chain["contract"]["window_tokens"] == WINDOW
    assert chain["contract"]["largest_window_tokens"] == 131_072
    assert [r["contract"] for r in chain["contract"]["reasoning"]] == ["none", "none"]
    assert shown["model_info"]["interlock.output_tokens"] == 400
    assert chain["contract"]["output_tokens"] == 400
    models = {m["id"]: m for m in gateway.http.get("/v1/models", headers=auth).json()["data"]}
    assert models["co/chain"]["max_input_tokens"] == WINDOW
    assert models["co/chain"]["max_tokens"] == 400
    assert models["co/chain"]["display_name"] == "co/chain"  # what Claude Code's model picker shows
    assert models["co/tiny"]["max_input_tokens"] == 4096
