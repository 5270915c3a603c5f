"""A gateway in front of healthy fake upstreams (one of each kind), for fuzzing its HTTP surfaces.

Each provider's credential is set through the environment, as in production; the fuzz checks that no
answer ever holds one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI
from tests.e2e.harness import Served

CLOUD_KEY = "sk-fuzz-cloud-SECRET-4b1e77"
CLAUDE_KEY = "sk-ant-fuzz-SECRET-93c0d5"
CALLER_KEY = "il-fuzz-caller-SECRET-6a20f1"  # a caller's key to the keyed gateway
SECRETS = (CLOUD_KEY, CLAUDE_KEY, CALLER_KEY)
ENV = {"FUZZ_CLOUD_KEY": CLOUD_KEY, "FUZZ_CLAUDE_KEY": CLAUDE_KEY, "FUZZ_CALLER_KEY": CALLER_KEY}

KEYED = """\
  auth: required
tenants:
  team: {allowed: ["fuzz/*", "cloud/*"]}  # not fuzz's Anthropic direct model: the ACL is fuzzed too
keys:
  fuzzer: {tenant: team, key_env: FUZZ_CALLER_KEY}
"""

CONFIG = """\
version: 1
server:
  default_alias: fuzz/chat
  alias_namespace: fuzz/
  direct_models: allow
  max_body_bytes: 65536
{keyed}providers:
  box:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
    workers: [{{name: box1, url: "{box}", max_concurrent: 8, model_concurrency: {{"*": 8}}}}]
  cloud:
    kind: openai
    base_url: "{cloud}/v1"
    api_key_env: FUZZ_CLOUD_KEY
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
  claude:
    kind: anthropic
    base_url: "{claude}"
    api_key_env: FUZZ_CLAUDE_KEY
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
health:
  failure_threshold: 1000  # the fakes are healthy: a fuzzed request must not open a circuit for the next
aliases:
  fuzz/chat: {{description: an Ollama worker then a cloud fallback, chain: [box/llama3.2:3b, cloud/c-chat]}}
  fuzz/cloud: {{description: an OpenAI-compatible cloud, chain: [cloud/c-cloud]}}
  fuzz/claude: {{description: Anthropic, chain: [claude/claude-fuzz]}}
  fuzz/embed: {{description: embeddings, chain: [box/nomic-embed-text, cloud/c-embed]}}
"""


@dataclass
class Upstreams:
    box: FakeOllama
    cloud: FakeOpenAI
    claude: FakeAnthropic


@pytest.fixture(scope="session")
def upstreams() -> Iterator[Upstreams]:
    servers = Upstreams(
        box=FakeOllama(name="fuzz-box").start(),
        cloud=FakeOpenAI(name="fuzz-cloud", api_key=CLOUD_KEY).start(),
        claude=FakeAnthropic(name="fuzz-claude", api_key=CLAUDE_KEY).start(),
    )
    try:
        yield servers
    finally:
        for server in vars(servers).values():
            server.stop()


def serve(upstreams: Upstreams, folder: Path, *, keyed: bool) -> Served:
    config = folder / "interlock.yaml"
    urls = {"box": upstreams.box.url, "cloud": upstreams.cloud.url, "claude": upstreams.claude.url}
    config.write_text(CONFIG.format(keyed=KEYED if keyed else "", **urls))
    return Served(config, ENV, folder / "serve.log")


@pytest.fixture(scope="session")
def fuzzed(upstreams: Upstreams, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The gateway with `auth: off` (as every configuration without `server.auth`)."""
    served = serve(upstreams, tmp_path_factory.mktemp("fuzzed-gateway"), keyed=False)
    try:
        yield served
    finally:
        served.stop()


@pytest.fixture(scope="session")
def keyed(upstreams: Upstreams, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The same gateway with `auth: required` and one caller key."""
    served = serve(upstreams, tmp_path_factory.mktemp("keyed-gateway"), keyed=True)
    try:
        yield served
    finally:
        served.stop()
