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
from tests.inference.llama import AGENT_CTX, AGENT_SLOTS, ALIAS, LlamaServer


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
        assert f"  {ALIAS}: {AGENT_CTX} tokens; completion; loaded\n" in err
        config = YAML().load(out.read_text())
        worker = config["providers"]["llamacpp"]["workers"][0]
        assert (worker["url"], worker["server"], worker["max_concurrent"]) == (
            f"{llama_server.url}/v1",
            "llama.cpp",
            AGENT_SLOTS,  # its slots, as /props and /slots say
        )
        assert config["models"][f"llamacpp/{ALIAS}"]["context_tokens"] == AGENT_CTX  # per slot
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
