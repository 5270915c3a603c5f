"""Record what the real CLIs send, as the fixtures in ``tests/fixtures/clients/`` (``record.py`` of the
README there): the pinned Claude Code and Codex (``.ci/run``'s ``AGENT_CLIS``) run headless through the
recording proxy (``interlock.testing.recorder``) into `interlock serve` in front of loopback fakes, each
with its defaults; every JSON request is one record, credentials removed.

    python -m tests.clients.record OUT_FOLDER

writes ``claude-code-<version>.jsonl`` and ``codex-<version>.jsonl`` (one line per request, in the
order sent) into ``OUT_FOLDER`` and prints what each run sent; choosing the records that become
fixtures is a person's job (the README says which request each one is).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.replies import Reply
from tests.clients.clis import VERSIONS, claude, codex
from tests.clients.conftest import SAMPLE_TEXT, tool_reply
from tests.e2e.harness import Served

PLAN = """\
version: 1
server: {{default_alias: mana/chat, alias_namespace: mana/}}
providers:
  claude:
    kind: anthropic
    base_url: "{claude}"
    api_key_env: null
  alpha:
    kind: openai
    base_url: "{alpha}/v1"
  claudetools:
    kind: anthropic
    base_url: "{claudetools}"
    api_key_env: null
  alphatools:
    kind: openai
    base_url: "{alphatools}/v1"
aliases:
  mana/chat: {{description: Anthropic upstream, chain: [claude/claude-fake]}}
  mana/code: {{description: OpenAI upstream, chain: [alpha/gpt-fake]}}
  mana/chat-tools: {{description: Anthropic upstream calls a tool, chain: [claudetools/claude-fake]}}
  mana/code-tools: {{description: OpenAI upstream calls a tool, chain: [alphatools/gpt-fake]}}
"""


@contextmanager
def recorder(target: str, out: Path, client: str) -> Iterator[str]:
    """The recording proxy in front of ``target``, appending to ``out``; yields its URL."""
    command = [sys.executable, "-m", "interlock.testing.recorder", "--target", target, "--out", str(out)]
    proc = subprocess.Popen([*command, "--client", client], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().decode().strip()
    finally:
        proc.terminate()
        proc.wait(10)


def summary(out: Path) -> str:
    lines = []
    for number, line in enumerate(out.read_bytes().splitlines()):
        item = orjson.loads(line)
        body = item["body"]
        tools = [t.get("name") or t.get("type") for t in body.get("tools") or ()]
        lines.append(
            f"  {number}: {item['method']} {item['path']}?{item['query']} -> "
            f"{item['interlock_answered']['status']}; {len(line)} bytes, stream={body.get('stream')}, "
            f"{len(tools)} tools {tools}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.clients.record", description=__doc__)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    text = Reply(tool_calls=())
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        sample = folder / "sample.txt"
        sample.write_text(SAMPLE_TEXT + "\n")
        tools = tool_reply(sample)
        with (
            FakeAnthropic(name="claude", reply=text) as upstream,
            FakeOpenAI(name="alpha", reply=text) as alpha,
            FakeAnthropic(name="claudetools", reply=tools) as claudetools,
            FakeOpenAI(name="alphatools", reply=tools) as alphatools,
        ):
            urls = {"claude": upstream.url, "alpha": alpha.url}
            urls |= {"claudetools": claudetools.url, "alphatools": alphatools.url}
            record_all(args.out, folder, PLAN.format(**urls))


def record_all(out_folder: Path, folder: Path, plan_text: str) -> None:
    plan = folder / "interlock.yaml"
    plan.write_text(plan_text)
    served = Served(plan, {}, folder / "serve.log")
    read = "read the file sample.txt"
    try:
        runs = [
            ("claude-code", VERSIONS["claude"], lambda url, home: claude(url, "mana/chat", "say hi", home)),
            ("codex", VERSIONS["codex"], lambda url, home: codex(url, "mana/code", "say hi", home)),
            (
                "claude-code-tool",
                VERSIONS["claude"],
                lambda url, home: claude(url, "mana/chat-tools", read, home, "--allowedTools", "Read"),
            ),
            ("codex-tool", VERSIONS["codex"], lambda url, home: codex(url, "mana/code-tools", read, home)),
        ]
        for client, version, run in runs:
            out = out_folder / f"{client}-{version}.jsonl"
            out.unlink(missing_ok=True)
            with recorder(served.url, out, f"{client} {version}") as url:
                ran = run(url, folder / client)
            print(f"{client} {version}: exit {ran.returncode}, printed {ran.stdout.strip()!r}")
            print(summary(out))
    finally:
        served.stop()


if __name__ == "__main__":
    main()
