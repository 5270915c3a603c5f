"""`interlock init --discover`: the fakes' answers become a commented configuration that lints clean
with `--strict` and serves; nothing is sent but to the URLs given, and no credential is written."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from interlock.cli import main
from interlock.discover import PROBES, Found, discover, root_of
from interlock.discover.starter import serve_port, starter
from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI
from tests.e2e.harness import Served

DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens there


@dataclass
class Fleet:
    ollama: FakeOllama
    llama: FakeOpenAI  # as llama-server: /props, /slots, /v1/models in its shapes
    other: FakeOpenAI  # any OpenAI-compatible server
    claude: FakeAnthropic

    def urls(self) -> list[str]:
        return [self.ollama.url, self.llama.base_url, self.other.url, self.claude.url]


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    ollama = FakeOllama(name="box").start()
    llama = FakeOpenAI(name="llama", server="llama.cpp", models=["smollm2"]).start()
    llama.reported.slots = 2
    other = FakeOpenAI(name="studio", models=["qwen2.5-7b-instruct", "phi-4"]).start()
    claude = FakeAnthropic(name="claude", api_key="sk-ant-upstream").start()
    try:
        yield Fleet(ollama, llama, other, claude)
    finally:
        for server in (ollama, llama, other, claude):
            server.stop()


def init(tmp_path: Path, urls: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    out = tmp_path / "interlock.yaml"
    argv = ["init", *(part for url in urls for part in ("--discover", url)), "-o", str(out)]
    assert main(argv) == 0
    return out, capsys.readouterr().err


def test_every_kind_of_server_is_recognised(fleet: Fleet) -> None:
    found = discover([*fleet.urls(), DEAD], timeout_s=5)
    assert [getattr(f, "server", f) for f in found] == [
        "Ollama 0.12.6",
        "llama-server b0-unknown",
        "an OpenAI-compatible server",
        "an Anthropic-compatible Messages API",
        f"{DEAD}: does not answer",
    ]
    ollama, llama, other, claude = found[:4]
    assert {m.name: (m.context_tokens, m.capabilities) for m in ollama.models} == {  # type: ignore[union-attr]
        "llama3.2:3b": (8192, ("completion", "tools")),
        "gemma3:12b": (131072, ("completion", "vision")),
        "nomic-embed-text:latest": (2048, ("embedding",)),
    }
    assert (llama.slots, llama.signals, llama.worker_url) == (2, "llama.cpp", f"{fleet.llama.url}/v1")  # type: ignore[union-attr]
    assert [(m.name, m.context_tokens) for m in llama.models] == [("smollm2", 4096)]  # type: ignore[union-attr]
    assert [m.name for m in other.models] == ["qwen2.5-7b-instruct", "phi-4"]  # type: ignore[union-attr]
    assert claude.needs_key  # type: ignore[union-attr]
    assert len(PROBES) == 4


def test_the_written_config_names_what_was_found_and_lints_clean_with_strict(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, err = init(tmp_path, fleet.urls(), capsys)
    assert err.splitlines()[:6] == [
        f"{fleet.ollama.url}: Ollama 0.12.6",
        "  llama3.2:3b: 8192 tokens; completion, tools",
        "  gemma3:12b: 131072 tokens; completion, vision",
        "  nomic-embed-text:latest: 2048 tokens; embedding",
        f"{fleet.llama.url}: llama-server b0-unknown, 2 slots",
        "  smollm2: 4096 tokens; completion, tools; loaded",
    ]
    text = out.read_text()
    config = YAML().load(text)
    assert list(config["providers"]) == ["ollama", "llamacpp", "compat"]  # the Anthropic one: commented
    llama = config["providers"]["llamacpp"]
    assert llama["api_key_env"] == "LLAMACPP_KEY"
    assert dict(llama["workers"][0]) == {
        "name": "llamacpp-1",
        "url": f"{fleet.llama.url}/v1",
        "server": "llama.cpp",
        "max_concurrent": 2,
    }
    assert dict(config["models"]["llamacpp/smollm2"]) == {
        "capabilities": ["completion", "tools"],  # llama-server accepts tools whatever its template says
        "context_tokens": 4096,
    }
    assert list(config["aliases"]["local/chat"]["chain"]) == [
        "llamacpp/smollm2",  # in memory first (llama-server's one model always is), then the larger window
        "ollama/gemma3:12b",
        "ollama/llama3.2:3b",
        "compat/phi-4",
        "compat/qwen2.5-7b-instruct",
    ]
    assert f"# Ollama 0.12.6 at {fleet.ollama.url}\n" in text
    assert (
        "    capabilities: [completion, tools]  # tools: llama-server accepts them, but its chat template "
        "leaves them out of the prompt (/apply-template): the model never sees the tools and answers in "
        "text\n"
    ) in text
    assert (
        "    context_tokens: 4096 # a slot's, of 2: llama-server splits --ctx-size over --parallel (not with "
        "--kv-unified)\n"
    ) in text
    assert "#     kind: anthropic\n" in text
    assert "sk-ant-upstream" not in text
    assert main(["lint", str(out), "--strict"]) == 0
    assert capsys.readouterr().out == f"{out}: ok (0 errors, 0 warnings)\n"


def test_the_written_config_serves(fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = init(tmp_path, [fleet.ollama.url, fleet.other.url], capsys)
    env = {"COMPAT_KEY": "none"}
    served = Served(out, env, tmp_path / "serve.log")
    try:
        answer = served.http.post(
            "/v1/chat/completions",
            json={"model": "local/chat", "messages": [{"role": "user", "content": "hi"}]},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["choices"][0]["message"]["content"] == "Hello from box, model gemma3:12b."
        assert answer.headers["x-interlock-resolved"] == "ollama/gemma3:12b"
    finally:
        served.stop()


def test_nothing_is_sent_but_to_the_urls_given(
    fleet: Fleet, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAI(name="proxy") as proxy:
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            monkeypatch.setenv(name, proxy.url)  # a client that honoured them would go through it
        monkeypatch.setenv("NO_PROXY", "")
        for fake in (fleet.ollama, fleet.llama, fleet.other, fleet.claude):
            fake.clear_requests()
        init(tmp_path, fleet.urls(), capsys)
        assert proxy.requests == []
    sent = [r for fake in (fleet.ollama, fleet.llama, fleet.other, fleet.claude) for r in fake.requests]
    assert sent
    for request in sent:
        assert not {"authorization", "x-api-key"} & set(request.headers)


def test_an_existing_file_is_kept_and_no_server_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "interlock.yaml"
    out.write_text("# mine\n")
    assert main(["init", "--discover", DEAD, "-o", str(out)]) == 2
    assert (
        capsys.readouterr().err
        == f"interlock init: {out} exists; give another -o, or --force to replace it\n"
    )
    assert out.read_text() == "# mine\n"
    assert main(["init", "--discover", DEAD, "-o", str(tmp_path / "new.yaml")]) == 1
    assert capsys.readouterr().err == (
        f"{DEAD}: does not answer\ninterlock init: no server found; nothing written\n"
    )
    assert not (tmp_path / "new.yaml").exists()


def test_a_base_url_given_with_v1_is_the_same_server() -> None:
    assert root_of("http://10.0.0.5:8080/v1/") == root_of("http://10.0.0.5:8080") == "http://10.0.0.5:8080"


def test_a_fleet_of_one_model_says_that_its_alias_has_nothing_to_fall_back_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI(name="llama", server="llama.cpp", models=["smollm2"]) as llama:
        out, _ = init(tmp_path, [llama.url], capsys)
    text = out.read_text()
    assert "# Aliases with one candidate (local/chat) warn in `lint --strict` (IL502)" in text
    assert main(["lint", str(out)]) == 0  # without --strict: a warning only
    assert "IL502" in capsys.readouterr().out


def test_an_agent_s_request_with_tools_is_served_by_llama_server_whatever_its_template_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """llama-server's /props says `supports_tools: false` for SmolLM2's and Gemma's templates, and the
    server accepts `tools` all the same: a config with `capabilities: [completion]` answered every
    Claude Code request 400 ("lacks tools")."""
    with FakeOpenAI(name="llama", server="llama.cpp", models=["smollm2"]) as llama:
        out, _ = init(tmp_path, [llama.url], capsys)
        served = Served(out, {"LLAMACPP_KEY": "none"}, tmp_path / "serve.log")
        try:
            tool = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
            hi = [{"role": "user", "content": "hi"}]
            answer = served.http.post(
                "/v1/chat/completions", json={"model": "local/chat", "messages": hi, "tools": [tool]}
            )
        finally:
            served.stop()
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-interlock-resolved"] == "llamacpp/smollm2"


def test_a_model_named_by_its_file_gets_the_file_s_name() -> None:
    path = "/root/.cache/interlock/models/SmolLM2-135M-Instruct.Q4_1.gguf"  # llama-server without --alias
    with FakeOpenAI(name="llama", server="llama.cpp", models=[path]) as llama:
        (found,) = discover([llama.url], timeout_s=5)
    assert isinstance(found, Found)
    assert [m.name for m in found.models] == ["SmolLM2-135M-Instruct.Q4_1"]
    assert (
        f"it names its model by its file ({path}) and answers any name: `SmolLM2-135M-Instruct.Q4_1` is "
        "written (`--alias NAME` names it)"
    ) in found.notes


def test_interlock_is_served_on_another_port_than_a_server_found_on_this_machine() -> None:
    def at(url: str) -> Found:
        return Found(url=url, server="llama-server", kind="openai", worker_url=f"{url}/v1")

    assert serve_port([at("http://127.0.0.1:8080")]) == 4000  # llama-server's default port is interlock's
    assert serve_port([at("http://localhost:8080"), at("http://[::1]:4000")]) == 8081
    assert serve_port([at("http://10.0.0.5:8080"), at("http://127.0.0.1:11434")]) == 8080
    every = [at(f"http://127.0.0.1:{port}") for port in (8080, 4000, 8081, 8090, 8091)]
    assert serve_port(every) == 8092  # each of its own taken: the next free one, not a StopIteration
    config, _ = starter([at("http://127.0.0.1:8080")], "interlock init --discover http://127.0.0.1:8080")
    header = config.ca.comment[1]
    lines = [token.value for token in header]
    assert "# Serve it:  interlock serve <this file> --port 4000\n" in lines
    connect = "interlock connect claude-code --url http://127.0.0.1:4000 --alias local/chat"
    assert f"# Connect:   {connect}\n" in lines


def test_a_server_off_this_network_is_listed_for_its_variable() -> None:
    """`LLAMACPP_KEY`-like variables are no vendor's: off this network they go only to a listed host
    (IL120), so the file lists the host the person discovered, and lints clean."""
    far = Found(
        url="https://vllm.example.com", server="vLLM", kind="openai", worker_url="https://vllm.example.com/v1"
    )
    near = Found(
        url="http://10.0.0.5:8000", server="vLLM", kind="openai", worker_url="http://10.0.0.5:8000/v1"
    )
    config, _ = starter([far, near], "interlock init")
    assert list(config["providers"]["compat"]["api_key_hosts"]) == ["vllm.example.com"]
    assert "api_key_hosts" not in config["providers"]["compat2"]
