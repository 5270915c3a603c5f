"""Fakes of each wire format and one `interlock serve` in front of them, for the real CLIs.

Aliases (``cl/``): each upstream format on its own (``cl/claude``: Anthropic, ``cl/openai``: OpenAI
chat, ``cl/responses``: the same OpenAI fake declared to serve the Responses API, ``cl/local``: an
Ollama worker); ``*-tools`` aliases answer the first turn with a scripted tool
call (reading ``SAMPLE``'s file, which the CLI does, so the next turn carries its text back); ``*-cut``
models are the ones a test cuts streams of.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.replies import Reply
from tests.e2e.harness import Served

CLAUDE_KEY = "sk-ant-upstream-SECRET-4b1d"
# The workers' models load with a context that holds what the CLIs ask: Claude Code's first request is
# ~25k prompt tokens plus max_tokens 32000, Codex's ~6k (with the fake's default, 4096, or a 32k
# Modelfile, the gateway rightly refuses them with a 400 that names the context they need)
MODELS = (
    *(
        ModelSpec(name, ("completion", "tools"), context_length=131072, num_ctx=131072)
        for name in ("llama3.2:3b", "llama-cut:1b")
    ),
    ModelSpec("qwen3:4b", ("completion", "tools", "thinking"), context_length=131072, num_ctx=131072),
)
SAMPLE_TEXT = "interlock-sample-3e9f1c"  # what the sample file holds: proof a tool really ran

PLAN = """\
version: 1
server: {{default_alias: cl/claude, alias_namespace: cl/, direct_models: allow}}
providers:
  claude:
    kind: anthropic
    base_url: "{claude}"
    api_key_env: CLAUDE_KEY
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
  claudetools:
    kind: anthropic
    base_url: "{claudetools}"
    api_key_env: CLAUDE_KEY
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
  alpha:
    kind: openai
    base_url: "{alpha}/v1"
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
  alpharesp:
    kind: openai
    base_url: "{alpha}/v1"
    responses: true
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
  alphatools:
    kind: openai
    base_url: "{alphatools}/v1"
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
  box:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
    workers: [{{name: box1, url: "{box}"}}]
  boxtools:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
    workers: [{{name: boxtools1, url: "{boxtools}"}}]
aliases:
  cl/claude: {{description: Anthropic upstream, chain: [claude/claude-fake]}}
  cl/openai: {{description: OpenAI upstream, chain: [alpha/gpt-fake]}}
  cl/responses: {{description: OpenAI upstream serving the Responses API, chain: [alpharesp/gpt-fake]}}
  cl/local: {{description: Ollama worker, chain: [box/llama3.2:3b]}}
  cl/local-think: {{description: Ollama worker with a thinking model, chain: [box/qwen3:4b]}}
  cl/claude-tools: {{description: Anthropic upstream calls a tool, chain: [claudetools/claude-fake]}}
  cl/openai-tools: {{description: OpenAI upstream calls a tool, chain: [alphatools/gpt-fake]}}
  cl/local-tools: {{description: Ollama worker calls a tool, chain: [boxtools/llama3.2:3b]}}
  cl/claude-cut: {{description: cut streams, chain: [claude/claude-cut]}}
  cl/openai-cut: {{description: cut streams, chain: [alpha/gpt-cut]}}
  cl/local-cut: {{description: cut streams, chain: [box/llama-cut:1b]}}
"""


@dataclass
class Fakes:
    claude: FakeAnthropic
    claudetools: FakeAnthropic
    alpha: FakeOpenAI
    alphatools: FakeOpenAI
    box: FakeOllama
    boxtools: FakeOllama
    sample: Path

    def plan(self) -> str:
        return PLAN.format(
            claude=self.claude.url,
            claudetools=self.claudetools.url,
            alpha=self.alpha.url,
            alphatools=self.alphatools.url,
            box=self.box.url,
            boxtools=self.boxtools.url,
        )


def tool_reply(sample: Path) -> Reply:
    """The first turn calls the CLIs' file-reading tools on ``sample`` (each CLI offers one of them)."""
    return Reply(
        tool_calls=(
            ("Read", {"file_path": str(sample)}),  # Claude Code
            ("exec_command", {"cmd": f"cat {sample}"}),  # Codex
            ("get_weather", {"city": "Paris"}),  # the Agents SDK test's tool
        )
    )


@pytest.fixture(scope="session")
def fakes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fakes]:
    sample = tmp_path_factory.mktemp("sample") / "sample.txt"
    sample.write_text(SAMPLE_TEXT + "\n")
    tools = tool_reply(sample)
    text = Reply(tool_calls=())  # a text answer, whatever tools the CLI offers
    servers = Fakes(
        claude=FakeAnthropic(name="claude", api_key=CLAUDE_KEY, reply=text).start(),
        claudetools=FakeAnthropic(name="claudetools", api_key=CLAUDE_KEY, reply=tools).start(),
        alpha=FakeOpenAI(name="alpha", reply=text).start(),
        alphatools=FakeOpenAI(name="alphatools", reply=tools).start(),
        box=FakeOllama(name="box", models=MODELS, reply=text).start(),
        boxtools=FakeOllama(name="boxtools", models=MODELS, reply=tools).start(),
        sample=sample,
    )
    try:
        yield servers
    finally:
        for server in vars(servers).values():
            if not isinstance(server, Path):
                server.stop()


@pytest.fixture(scope="session")
def gateway(fakes: Fakes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("clients-gateway")
    plan = folder / "interlock.yaml"
    plan.write_text(fakes.plan())
    served = Served(plan, {"CLAUDE_KEY": CLAUDE_KEY}, folder / "serve.log", "--access-log")
    try:
        yield served
    finally:
        served.stop()


def tool_results(body: Any) -> list[str]:
    """Every tool result a request carries back to its upstream, in any of the three formats."""
    out: list[str] = []
    for message in body.get("messages") or ():
        content = message.get("content")
        if message.get("role") == "tool" and isinstance(content, str):
            out.append(content)
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                out.append(str(block.get("content")))
    return out


CUT_STREAMS = pytest.mark.parametrize(  # the cut-stream case of each CLI, one per upstream format
    ("alias", "fake", "model", "answer"),
    [
        ("cl/claude-cut", "claude", "claude-cut", "Hello from claude, model claude-cut."),
        ("cl/openai-cut", "alpha", "gpt-cut", "Hello from alpha, model gpt-cut."),
        ("cl/local-cut", "box", "llama-cut:1b", "Hello from box, model llama-cut:1b."),
    ],
    ids=["anthropic", "openai", "ollama"],
)
