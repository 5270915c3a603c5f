"""One real session per surface: fake upstreams on loopback, a real `interlock serve`, the real clients.

    python examples/surfaces_session.py

Starts a dead Ollama worker, a live one, an OpenAI-compatible cloud and an Anthropic upstream (all fakes
from ``interlock.testing``), serves a plan whose aliases put the dead worker first, and talks to the
gateway with the `ollama`, `openai` (Chat Completions and Responses) and `anthropic` clients. Every
answer below comes after a fallback from the dead worker. Needs the dev extra (`ollama`, `anthropic`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anthropic
import httpx
import ollama
import openai

from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.fake_openai import FakeOpenAI

CONFIG = """\
version: 1
server: {{alias_namespace: mana/, direct_models: allow}}
providers:
  dead: {{kind: ollama, probe: false, workers: [{{name: dead-box, url: "{dead}"}}]}}
  local: {{kind: ollama, workers: [{{name: gpu-box, url: "{box}"}}]}}
  cloud: {{kind: openai, base_url: "{cloud}/v1", api_key_env: CLOUD_KEY}}
  claude: {{kind: anthropic, base_url: "{claude}", api_key_env: CLAUDE_KEY}}
aliases:
  mana/chat: {{description: local first, chain: [dead/llama3.2:3b, local/llama3.2:3b]}}
  mana/cloud: {{description: cloud after a dead box, chain: [dead/llama3.2:3b, cloud/gpt-4o-mini]}}
  mana/claude: {{description: Claude after a dead box, chain: [dead/llama3.2:3b, claude/claude-sonnet]}}
"""
ENV = {"CLOUD_KEY": "sk-cloud-example", "CLAUDE_KEY": "sk-ant-example"}


def main() -> None:
    dead, box = FakeOllama(name="dead").start(), FakeOllama(name="box").start()
    cloud = FakeOpenAI(name="cloud", api_key=ENV["CLOUD_KEY"]).start()
    claude = FakeAnthropic(name="claude", api_key=ENV["CLAUDE_KEY"]).start()
    dead.refuse_connections()
    folder = Path(tempfile.mkdtemp())
    plan = folder / "interlock.yaml"
    plan.write_text(CONFIG.format(dead=dead.url, box=box.url, cloud=cloud.url, claude=claude.url))
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock", "serve", str(plan), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"PATH": os.environ.get("PATH", ""), **ENV},
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().split()[2]
        for _ in range(100):
            if httpx.get(f"{url}/readyz").status_code == 200:
                break
            time.sleep(0.1)
        session(url)
    finally:
        proc.terminate()
        proc.wait(10)
        for fake in (dead, box, cloud, claude):
            fake.stop()


def session(url: str) -> None:
    print("## ollama client -> /api/*")
    client = ollama.Client(host=url)
    print(">>> ollama.Client(host=url).list()")
    print([m.model for m in client.list().models])
    print('>>> chat(model="mana/claude", messages=[...], options={"num_predict": 64})')
    answer = client.chat(
        model="mana/claude", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 64}
    )
    print(repr(answer.message.content), answer.done_reason, answer.eval_count)
    print('>>> [p.message.content for p in chat(model="mana/chat", ..., stream=True)]')
    print(
        [
            p.message.content
            for p in client.chat(model="mana/chat", messages=[{"role": "user", "content": "hi"}], stream=True)
        ]
    )

    print("\n## openai SDK -> /v1/responses")
    sdk = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    print('>>> responses.create(model="mana/cloud", input="hi", instructions="be brief")')
    raw = sdk.responses.with_raw_response.create(model="mana/cloud", input="hi", instructions="be brief")
    print(repr(raw.parse().output_text), "| X-Interlock-Resolved:", raw.headers["x-interlock-resolved"])
    print('>>> [e.type for e in responses.create(model="mana/cloud", input="hi", stream=True)]')
    print([e.type for e in sdk.responses.create(model="mana/cloud", input="hi", stream=True)])

    print("\n## anthropic SDK -> /v1/messages")
    claude_sdk = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)
    print('>>> messages.create(model="mana/chat", max_tokens=64, messages=[...])')
    message = claude_sdk.messages.create(
        model="mana/chat", max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    usage = message.usage
    print(repr(message.content[0].text), message.stop_reason, usage.input_tokens, usage.output_tokens)  # type: ignore[union-attr]
    print('>>> messages.count_tokens(model="mana/chat", messages=[...])')
    print(claude_sdk.messages.count_tokens(model="mana/chat", messages=[{"role": "user", "content": "hi"}]))

    print("\n## openai SDK -> /v1/chat/completions")
    print('>>> chat.completions.create(model="mana/claude", messages=[...])')
    completion = sdk.chat.completions.create(
        model="mana/claude", messages=[{"role": "user", "content": "hi"}]
    )
    print(repr(completion.choices[0].message.content), "| model:", completion.model)


if __name__ == "__main__":
    main()
