"""Real fake upstreams (threads, loopback) and one shared `interlock serve` subprocess in front of them.

Each scenario uses its own alias and model names, so circuits opened by one test never touch another.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.replies import Reply
from tests.e2e.harness import Served

ALPHA_KEY = "sk-alpha-SECRET-7f3a9c"
CLAUDE_KEY = "sk-ant-SECRET-0c4e2b"
WRONG_KEY = "sk-wrong-SECRET-51d2e8"
SECRETS = (ALPHA_KEY, WRONG_KEY, CLAUDE_KEY)
ENV = {"ALPHA_KEY": ALPHA_KEY, "WRONG_KEY": WRONG_KEY, "CLAUDE_KEY": CLAUDE_KEY}

SHARED = """\
version: 1
server:
  default_alias: e2e/default
  alias_namespace: e2e/
  direct_models: allow
  max_body_bytes: 65536
  max_upstream_body_bytes: 1048576
  max_stream_line_bytes: 65536
providers:
  dead:
    kind: ollama
    probe: false
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
    workers: [{{name: dead-box, url: "{dead}"}}]
  void:  # the dead box again under another name: the surface tests' own endpoint circuit
    kind: ollama
    probe: false
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
    workers: [{{name: void-box, url: "{void}"}}]
  gone:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
    workers: [{{name: gone-box, url: "{gone}"}}]
  box:  # tests/e2e/test_slots.py holds requests here until it lets go: long timeouts, a long queue wait
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 60s, total: 60s}}
    workers:
      - name: box1
        url: "{box}"
        max_concurrent: 2
        model_concurrency: {{"gemma3:12b": 1, "*": 2}}
        queue: {{max_waiting: 1, max_wait: 60s}}
  tight:  # the same, but a queue wait of 300 ms: the one test_slots.py sees run out
    kind: ollama
    probe: false
    timeouts: {{connect: 1s, first_byte: 60s, total: 60s}}
    workers:
      - name: tight1
        url: "{tight}"
        max_concurrent: 1
        model_concurrency: {{"*": 1}}
        queue: {{max_waiting: 4, max_wait: 300ms}}
  slowbox:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 5s, total: 120s}}
    workers: [{{name: slow1, url: "{slow}"}}]
  crowd:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 5s, total: 30s}}
    workers: [{{name: crowd1, url: "{crowd}", max_concurrent: 20, model_concurrency: {{"*": 20}}}}]
  alpha:
    kind: openai
    base_url: "{alpha}/v1"
    api_key_env: ALPHA_KEY
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
  bravo:
    kind: openai
    base_url: "{bravo}/v1"
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
  hang:
    kind: openai
    base_url: "{hang}/v1"
    timeouts: {{connect: 1s, first_byte: 1s, total: 5s}}
  wrongkey:
    kind: openai
    probe: false  # a probe would see the 401 first and mark it unhealthy: this test wants the call
    base_url: "{wrong}/v1"
    api_key_env: WRONG_KEY
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
  claude:
    kind: anthropic
    base_url: "{claude}"
    api_key_env: CLAUDE_KEY
    timeouts: {{connect: 1s, first_byte: 5s, total: 10s}}
health:
  # One slow probe marks a box unusable until the next one: at 900 ms, a loaded 2-core machine (load 10,
  # the gateway just started) failed every probe of live fakes at once, and a request got a 503.
  probe_interval: 5s
  probe_timeout: 4s
  failure_threshold: 1
  open_for: 60s
  rate_limit_open_for: 30s
aliases:
  e2e/default: {{description: default, chain: [box/llama3.2:3b, alpha/a-default]}}
  e2e/refuse: {{description: dead primary, chain: [dead/llama3.2:3b, alpha/a-refuse]}}
  e2e/hang: {{description: hanging primary, chain: [hang/h-slow, bravo/b-after-hang]}}
  e2e/badreq: {{description: 400 from primary, chain: [alpha/a-400, bravo/b-400]}}
  e2e/cut: {{description: cut stream, chain: [alpha/a-cut, bravo/b-cut]}}
  e2e/cut2: {{description: cut stream seen by the SDK, chain: [alpha/a-cut2, bravo/b-cut2]}}
  e2e/rolecut: {{description: cut after the role chunk, chain: [alpha/a-rolecut, bravo/b-rolecut]}}
  e2e/rolecut2: {{description: ended after the role chunk, chain: [alpha/a-rolecut2, bravo/b-rolecut2]}}
  e2e/unf-chat: {{description: no finish reason, chain: [alpha/a-unf-chat, bravo/b-unf-chat]}}
  e2e/unf-responses: {{description: no finish reason, chain: [alpha/a-unf-responses, bravo/b-unf]}}
  e2e/unf-messages: {{description: no finish reason, chain: [alpha/a-unf-messages, bravo/b-unf]}}
  e2e/unf-ollama: {{description: no finish reason, chain: [alpha/a-unf-ollama, bravo/b-unf]}}
  e2e/prestream: {{description: stream fails before its first chunk, chain: [alpha/a-pre, bravo/b-pre]}}
  e2e/alldown: {{description: all down, chain: [alpha/a-500, bravo/b-502, hang/h-drop]}}
  e2e/limited: {{description: rate limited primary, chain: [alpha/a-429, bravo/b-429]}}
  e2e/keys: {{description: credentials, chain: [alpha/a-keys, bravo/b-keys]}}
  e2e/wrongkey: {{description: upstream refuses the key, chain: [wrongkey/w1, bravo/b-w]}}
  e2e/slots: {{description: one slot, chain: [box/gemma3:12b, bravo/b-slots], on_saturation: queue}}
  e2e/gone: {{description: dies later, chain: [gone/llama3.2:3b, bravo/b-gone]}}
  e2e/embed: {{description: embeddings, chain: [box/nomic-embed-text, alpha/a-embed]}}
  e2e/slowstream: {{description: slow stream, chain: [slowbox/llama3.2:3b]}}
  e2e/crowd: {{description: many slow streams, chain: [crowd/llama3.2:3b]}}
  e2e/malformed: {{description: unreadable answer, chain: [alpha/a-malformed, bravo/b-malformed]}}
  e2e/mal-pre: {{description: unreadable event before content, chain: [alpha/a-mal-pre, bravo/b-mal-pre]}}
  e2e/mal-post: {{description: unreadable event after content, chain: [alpha/a-mal-post, bravo/b-mal-post]}}
  e2e/endless: {{description: endless answer, chain: [alpha/a-endless, bravo/b-endless]}}
  e2e/endless2: {{description: endless stream line, chain: [alpha/a-endless2, bravo/b-endless2]}}
  e2e/local: {{description: Ollama only, chain: [box/llama3.2:3b]}}
  e2e/n: {{description: n on an Ollama primary, chain: [box/llama3.2:3b, bravo/b-n]}}
  e2e/required: {{description: tool_choice required, chain: [box/llama3.2:3b, bravo/b-required]}}
  e2e/logprobs: {{description: logprobs, chain: [box/llama3.2:3b, bravo/b-logprobs]}}
  e2e/image: {{description: remote image URL, chain: [box/gemma3:12b, bravo/b-image]}}
  e2e/embedtok: {{description: token-array embeddings, chain: [box/nomic-embed-text, bravo/b-embedtok]}}
  e2e/native: {{description: native fields to a cloud fallback, chain: [dead/llama3.2:3b, bravo/b-native]}}
  e2e/ol-cloud: {{description: Ollama surface to a cloud fallback, chain: [void/v-ol, alpha/a-ol]}}
  e2e/ol-cut: {{description: Ollama surface cut stream, chain: [alpha/a-ol-cut, bravo/b-ol-cut]}}
  e2e/an-local: {{description: Anthropic surface to a worker, chain: [void/v-an, box/llama3.2:3b]}}
  e2e/an-vision: {{description: Anthropic surface images, chain: [void/v-an-vision, box/gemma3:12b]}}
  e2e/an-cut: {{description: Anthropic surface cut stream, chain: [alpha/a-an-cut, bravo/b-an-cut]}}
  e2e/an-cut2: {{description: Anthropic SDK cut stream, chain: [alpha/a-an-cut2, bravo/b-an-cut2]}}
  e2e/rs-cloud: {{description: Responses surface to a cloud fallback, chain: [void/v-rs, alpha/a-rs]}}
  e2e/rs-cut: {{description: Responses surface cut stream, chain: [alpha/a-rs-cut, bravo/b-rs-cut]}}
  e2e/to-claude: {{description: Ollama surface to Anthropic, chain: [void/v-claude, claude/claude-fake]}}
  e2e/overloaded: {{description: Anthropic overloaded, chain: [claude/c-529, bravo/b-after-529]}}
  e2e/claude-cut: {{description: Anthropic stream cut, chain: [claude/c-cut, bravo/b-after-cut]}}
  e2e/ol-cut2: {{description: Ollama client cut stream, chain: [alpha/a-ol-cut2, bravo/b-ol-cut2]}}
"""


@dataclass
class Fakes:
    dead: FakeOllama
    gone: FakeOllama
    box: FakeOllama
    alpha: FakeOpenAI
    bravo: FakeOpenAI
    hang: FakeOpenAI
    wrong: FakeOpenAI
    slow: FakeOllama
    tight: FakeOllama
    crowd: FakeOllama
    claude: FakeAnthropic
    void: FakeOllama

    def config(self) -> str:
        return SHARED.format(
            dead=self.dead.url,
            gone=self.gone.url,
            box=self.box.url,
            alpha=self.alpha.url,
            bravo=self.bravo.url,
            hang=self.hang.url,
            wrong=self.wrong.url,
            slow=self.slow.url,
            tight=self.tight.url,
            crowd=self.crowd.url,
            claude=self.claude.url,
            void=self.void.url,
        )


@pytest.fixture(scope="session")
def fakes() -> Iterator[Fakes]:
    servers = Fakes(
        dead=FakeOllama(name="dead").start(),
        gone=FakeOllama(name="gone").start(),
        box=FakeOllama(name="box").start(),
        alpha=FakeOpenAI(name="alpha", api_key=ALPHA_KEY).start(),
        bravo=FakeOpenAI(name="bravo", strict=True).start(),  # 400 to fields OpenAI does not define
        hang=FakeOpenAI(name="hang").start(),
        wrong=FakeOpenAI(name="wrong", api_key="sk-the-one-it-wants").start(),
        slow=FakeOllama(name="slow", reply=Reply(text=" ".join(["word"] * 600), chunk_delay_s=0.1)).start(),
        tight=FakeOllama(name="tight").start(),
        # 5 s a stream: a leaver's stream is still running when the gateway notices, on a busy machine too
        crowd=FakeOllama(
            name="crowd", reply=Reply(text=" ".join(["word"] * 100), chunk_delay_s=0.05)
        ).start(),
        claude=FakeAnthropic(name="claude", api_key=CLAUDE_KEY).start(),
        void=FakeOllama(name="void").start(),
    )
    servers.dead.refuse_connections()
    servers.void.refuse_connections()
    try:
        yield servers
    finally:
        for server in vars(servers).values():
            server.stop()


@pytest.fixture(scope="session")
def gateway(fakes: Fakes, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("shared-gateway")
    config = folder / "interlock.yaml"
    config.write_text(fakes.config())
    served = Served(config, ENV, folder / "serve.log", "--log-level", "debug", "--access-log")
    try:
        yield served
    finally:
        served.stop()
