"""An answer cut at the output ceiling `interlock connect` prints is said, never passed off as whole:
the newest Claude Code, run as printed, against a model that writes past the ceiling (issue 38, item 9).

What a small local model does when it does not end its turn (docs/clients.md, "A coding agent on a
local model"): it writes to the ceiling. The upstream says ``finish_reason: length``, the gateway
translates it to ``stop_reason: max_tokens``, and Claude Code 2.1.337 does what it does on a cut: it
asks the model to "resume directly", compacts, asks again, and gives up with an error that names the
ceiling, exit 1, its request count bounded. Never exit 0 with the truncated words as the answer.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from interlock.cli import main
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.replies import Reply
from tests.clients.clis import CLAUDE_QUIET, RUN_S, cli_path
from tests.e2e.harness import Served

WINDOW = 8_192
CEILING = 512  # what `connect claude-code` prints on an 8,192-token window (connect.agents)
ENDLESS = " ".join(["again"] * (CEILING * 2))  # one fake token a word: past the ceiling, every time
PLAN = """\
version: 1
server: {{auth: off}}
providers:
  llama: {{kind: openai, base_url: "{llama}", timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}}}
models:
  llama/smollm2: {{capabilities: [completion, tools], context_tokens: {window}}}
aliases:
  co/local: {{description: the box, chain: [llama/smollm2]}}
"""


@pytest.fixture(scope="module")
def llama() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(name="llama", models=("smollm2",), reply=Reply(text=ENDLESS, tool_calls=())) as fake:
        yield fake


@pytest.fixture(scope="module")
def gateway(llama: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("cut-gateway")
    plan = folder / "interlock.yaml"
    plan.write_text(PLAN.format(llama=llama.base_url, window=WINDOW))
    served = Served(plan, {}, folder / "serve.log")
    try:
        yield served
    finally:
        served.stop()


def printed(client: str, gateway: Served, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["connect", client, "--url", gateway.url, "--alias", "co/local"]) == 0
    return capsys.readouterr().out


def chats(fake: FakeOpenAI) -> list[Any]:
    return [
        r.body for r in fake.requests if r.path.endswith("/chat/completions") and isinstance(r.body, dict)
    ]


def test_claude_code_says_the_cut_and_stops(
    gateway: Served, llama: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = printed("claude-code", gateway, capsys)
    claude = cli_path("claude")
    llama.clear_requests()
    done = subprocess.run(
        ["bash", "-c", f'{lines}\nexec "{claude}" -p "say hi" --output-format stream-json --verbose'],
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
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
    assert done.returncode == 1, out + err  # not 0: the cut answer is not the task's answer
    (result,) = [e for e in map(orjson.loads, out.splitlines()) if e.get("type") == "result"]
    assert result["is_error"] is True
    assert f"exceeded the {CEILING} output token maximum" in result["result"]  # the ceiling, named
    sent = chats(llama)
    assert {body["max_tokens"] for body in sent} == {CEILING}  # each request carried the ceiling
    asked = orjson.dumps([body["messages"] for body in sent[1:]]).decode()
    assert "Output token limit hit" in asked  # Claude Code asked the model to resume past the cut
    assert 1 < len(sent) <= 16, len(sent)  # bounded: 12 requests with 2.1.337
