"""Real inference: llama.cpp's ``llama-server`` with a real model on loopback, and `interlock serve` in front.

One chat server (one slot of 512 tokens, so a long prompt overflows it), one embedding server, two made
per test and started by it (one to kill, one the gateway sends everything to), and a fake
OpenAI-compatible "backup" with a large context for the walks that move on. ``llama`` holds the chat
server with one gateway slot and a queue, as its one server slot; ``bare`` is a server of its own with
one slot and no gateway limit, as an unprotected box is: the server itself defers what its slot cannot
run. Probes are off: a probe slower than its timeout on a loaded machine would mark a busy box dead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from interlock.testing.fake_openai import FakeOpenAI
from tests.e2e.harness import Served
from tests.inference.llama import LlamaServer, llama_server, require_parts

__all__ = ["llama_server"]  # the session's real llama-server of 8,192-token slots (tests/inference/llama.py)

CONFIG = """\
version: 1
server: {{default_alias: real/chat, alias_namespace: real/, direct_models: allow}}
preflight: {{default_output_tokens: 64}}
health: {{probe_interval: 30s, probe_timeout: 10s, failure_threshold: 3, open_for: 5s}}
providers:
  llama:  # one llama.cpp server runs one request at a time: one slot, the rest wait
    kind: openai
    probe: false
    timeouts: {{connect: 2s, first_byte: 300s, total: 600s}}
    workers:
      - {{name: llama1, url: "{chat}/v1", max_concurrent: 1, queue: {{max_waiting: 8, max_wait: 600s}}}}
  bare:  # a server with one slot and no gateway limit: it defers the rest itself
    kind: openai
    probe: false
    base_url: "{bare}/v1"
    timeouts: {{connect: 2s, first_byte: 300s, total: 600s}}
  emb:
    kind: openai
    probe: false
    base_url: "{embed}/v1"
    timeouts: {{connect: 2s, first_byte: 300s, total: 600s}}
  doomed:
    kind: openai
    probe: false
    base_url: "{doomed}/v1"
    timeouts: {{connect: 2s, first_byte: 300s, total: 600s}}
  backup:
    kind: openai
    probe: false
    base_url: "{backup}/v1"
models:
  backup/b-overflow: {{context_tokens: 131072}}
aliases:
  real/chat: {{description: the real model, chain: [llama/smollm2]}}
  real/embed: {{description: real embeddings, chain: [emb/smollm2]}}
  real/overflow: {{description: small context first, chain: [llama/smollm2, backup/b-overflow]}}
  real/bare: {{description: no gateway limit, chain: [bare/smollm2, backup/b-bare]}}
  real/doomed: {{description: killed, chain: [doomed/smollm2, backup/b-doomed]}}
"""


@dataclass
class Real:
    chat: LlamaServer
    embed: LlamaServer
    doomed: LlamaServer  # not started: the test that kills it starts it
    bare: LlamaServer  # not started: the test of a box without gateway slots starts it (and stops it)
    backup: FakeOpenAI
    gateway: Served


@pytest.fixture(scope="session")
def model() -> Path:
    return require_parts()


@pytest.fixture(scope="session")
def real(model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Real]:
    folder = tmp_path_factory.mktemp("inference")
    doomed = LlamaServer(model, folder / "doomed.log")
    bare = LlamaServer(model, folder / "bare.log")
    with (
        LlamaServer(model, folder / "chat.log") as chat,
        LlamaServer(model, folder / "embed.log", embedding=True) as embed,
        FakeOpenAI(name="backup") as backup,
    ):
        config = folder / "interlock.yaml"
        urls = {"chat": chat.url, "embed": embed.url, "doomed": doomed.url, "bare": bare.url}
        urls["backup"] = backup.url
        config.write_text(CONFIG.format(**urls))
        gateway = Served(config, {}, folder / "serve.log", "--log-level", "debug")
        try:
            yield Real(chat, embed, doomed, bare, backup, gateway)
        finally:
            gateway.stop()
            doomed.stop()
            bare.stop()
