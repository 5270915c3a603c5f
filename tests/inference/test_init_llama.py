"""`interlock init --discover` against the real llama.cpp server (``llama_server``, tests/inference/llama.py):
what it says on /props, /v1/models and /slots becomes a worker with its slots and the model's window, the
file lints clean with `--strict` (beside a fake Ollama box, so `local/chat` has a second candidate), and
`interlock serve` answers through it with the real model."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from interlock.cli import main
from interlock.testing.fake_ollama import FakeOllama
from tests.e2e.harness import Served
from tests.inference.llama import AGENT_CTX, AGENT_SLOTS, ALIAS, LlamaServer, require_parts


def test_init_finds_the_real_server_and_its_config_lints_and_serves(
    llama_server: LlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "interlock.yaml"
    with FakeOllama(name="box") as box:
        assert (
            main(["init", "--discover", f"{llama_server.url}/v1", "--discover", box.url, "-o", str(out)]) == 0
        )
        err = capsys.readouterr().err
        assert err.startswith(f"{llama_server.url}: llama-server ")
        assert f"  {ALIAS}: {AGENT_CTX} tokens; completion, tools; loaded\n" in err
        config = YAML().load(out.read_text())
        worker = config["providers"]["llamacpp"]["workers"][0]
        assert (worker["url"], worker["server"], worker["max_concurrent"]) == (
            f"{llama_server.url}/v1",
            "llama.cpp",
            AGENT_SLOTS,  # its slots, as /props and /slots say
        )
        assert config["models"][f"llamacpp/{ALIAS}"]["context_tokens"] == AGENT_CTX  # per slot
        assert config["models"][f"llamacpp/{ALIAS}"]["capabilities"] == ["completion", "tools"]
        assert config["aliases"]["local/chat"]["chain"][0] == f"llamacpp/{ALIAS}"  # in memory: first
        assert main(["lint", str(out), "--strict"]) == 0
        served = Served(out, {"LLAMACPP_KEY": "no-key-on-this-server"}, tmp_path / "serve.log")
        try:
            answer = served.http.post(
                "/v1/chat/completions",
                json={
                    "model": "local/chat",
                    "max_tokens": 4,
                    "messages": [{"role": "user", "content": "Hi"}],
                },
                timeout=600,
            )
        finally:
            served.stop()
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-interlock-resolved"] == f"llamacpp/{ALIAS}"
    assert answer.json()["usage"]["completion_tokens"] >= 1  # the real model wrote something


def test_init_declares_tools_names_the_model_by_its_file_and_writes_a_slot_s_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a new user starts llama-server: no `--alias` (the model named by its .gguf path), two slots
    sharing `--ctx-size`, a chat template without tool support. An agent's request with tools is served."""
    model = require_parts()
    out = tmp_path / "interlock.yaml"
    with LlamaServer(model, tmp_path / "llama.log", n_ctx=1024, parallel=2, alias="") as server:
        assert main(["init", "--discover", server.url, "-o", str(out)]) == 0
        err = capsys.readouterr().err
        name = model.name.removesuffix(".gguf")  # SmolLM2-135M-Instruct.Q4_1
        assert f"  {name}: 1024 tokens; completion, tools; loaded\n" in err
        assert f"note: it names its model by its file ({model}) and answers any name: `{name}`" in err
        text = out.read_text()
        assert (
            f"  llamacpp/{name}:\n"
            "    capabilities: [completion, tools]  # tools: llama-server accepts them, but its chat "
            "template leaves them out of the prompt (/apply-template): the model never sees the tools and "
            "answers in text\n"
            "    context_tokens: 1024 # a slot's, of 2: llama-server splits --ctx-size over --parallel (not "
            "with --kv-unified)\n"
        ) in text
        served = Served(out, {"LLAMACPP_KEY": "no-key-on-this-server"}, tmp_path / "serve.log")
        try:
            tool = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
            answer = served.http.post(
                "/v1/chat/completions",
                json={
                    "model": "local/chat",
                    "max_tokens": 4,
                    "messages": [{"role": "user", "content": "Hi"}],
                    "tools": [tool],
                },
                timeout=600,
            )
        finally:
            served.stop()
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-interlock-resolved"] == f"llamacpp/{name}"
