"""Coding agents on a local model, end to end, in CI (issue 38, item 9), as a new user sets them up: a
real llama-server (8,192 tokens a slot, CPU), `interlock init --discover` on it, `lint`, `serve`, and
the newest Claude Code and Codex (``.ci/run``'s ``AGENT_CLIS``) each configured with what
`interlock connect` prints, applied as printed (``tests/inference/agents.py``; init's file served as
written but for a first-byte deadline long enough for a cold prefill on a loaded machine, until the
deadline follows the server's progress), each on its own wire
format: Claude Code on ``/v1/messages``, Codex on ``/v1/responses`` (both translated to the server's
Chat Completions, the provider init writes).

For each: a one-shot answer and a two-turn session (the second run resumes the first: the same session,
its prompt holds the first turn). Each run must exit 0 with the model's words (whatever they are: an
answer is checked as an answer, never for its words), in one request the gateway answered (no retry, no
"resume" after a cut answer, no compaction loop), the server having written them, the circuit closed.
Every check reads state the CLI or the server reports (the CLI's own JSON transcript, the gateway's and
the server's counters), never a clock. So a wrong setting from `connect` (Claude Code refuses a prompt
too long for its window, exit 1; a wrong model or base URL is an error answer), a field the gateway drops
or an error answer fails a test.

**One change beside connect's settings: a short, fixed prompt.** Both CLIs are given ``SYSTEM_PROMPT``
in place of their own, in each one's documented way (Claude Code's ``--bare``, ``--system-prompt`` and
``--tools ""``; Codex's ``model_instructions_file`` and its ``include_*`` and ``skills`` keys:
``CODEX_LEAN``): with their own ~4,100 and ~4,400-token prompts SmolLM2-135M rarely ended Claude Code's
turn (1 of 8 at temperature 0.8), and a cold prefill took minutes. With it their first requests are
74 and 19 prompt tokens and hold nothing of the run (no working folder, no date), so at temperature 0
every run is the same run: 8 of 8 ended per test (``bench/agent_tasks.py``; docs/clients.md, "The tier
in CI"). With only the system prompt replaced, the folder and the date still in it, 2 of 3 runs of this
file's tests failed (a Claude Code run in a pytest folder not ended within 150 s). A user on a real
model needs none of it. The words
are "say hi" and, for the session, "say hi" then "say hi again".

And a tool-call round trip with Claude Code (``CLAUDE_READ``: one tool, Read), on a server of its own
with a ChatML template that renders tools (``tests/inference/chatml_tools.jinja``) and a recording proxy
between the gateway and the server: the model calls Read, Claude Code reads ``hello.txt`` in its working
folder and sends its text back as the tool's result, the model answers, exit 0. SmolLM2 does not decide
to call a tool: asked to read the file (a system prompt holding the call, or none), it wrote a
JavaScript function to the 512-token ceiling, 0 of 3 ended; asked to write the call back
(``READ_WORDS``, the wording of ``test_wire_round_trips.py``), it does at temperature 0, 8 of 8 ended.
Codex's tool round trip runs against the fakes (tests/clients) and on the wire only.

The model is the one that stops best on these tasks (``AGENT_MODEL``, figures in docs/clients.md,
measured with ``bench/agent_models.py``), served as ``AGENT_SERVER`` says: the server's default
temperature 0 (the CLIs send none), so a run is the same run each time; two slots, one per CLI, each
finding its own long prompt's prefix in its slot's cache on its next request; prefill steps of 512
tokens, so a prefill cut by a first-byte timeout keeps what it read for the retry.

In ``.ci/run``'s ``python -m pytest -q``: skipped without the CLIs or llama-server's parts (failed in CI,
which requires them), and with ``INTERLOCK_AGENTS=0`` (an explicit opt-out, for a quick local run).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.inference.agents import (
    CLAUDE_LEAN,
    CLAUDE_READ,
    READ_FILE,
    READ_WORDS,
    RUN_S,
    SECRET,
    SYSTEM_PROMPT,
    AgentGateway,
    AgentRun,
)
from tests.inference.llama import AGENT_SERVER, LlamaServer, agent_model
from tests.inference.record_wire import TEMPLATE

pytestmark = [
    # a failure bound on each test (two CLI runs of at most RUN_S each, and the module's server and
    # gateway starting), not a speed: every measured run ended within 22 s
    pytest.mark.timeout(2 * RUN_S + 180),
    pytest.mark.skipif(os.environ.get("INTERLOCK_AGENTS") == "0", reason="INTERLOCK_AGENTS=0: opted out"),
]

JSON_OUT = ("--output-format", "stream-json", "--verbose")


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentGateway]:
    folder = tmp_path_factory.mktemp("agents")
    model = agent_model()
    with (
        LlamaServer(model.path, folder / "llama.log", **AGENT_SERVER, alias=model.alias) as server,
        AgentGateway(server, folder) as gateway,
    ):
        yield gateway


@dataclass(frozen=True)
class Recorded:
    """A recording proxy (``interlock.testing.recorder``, a process of its own) in front of ``server``:
    the gateway is pointed at ``url``, and each JSON request it sent the server is a line of ``out``,
    written before the answer's end is relayed (so it is there once the CLI has its answer)."""

    url: str
    out: Path

    def chats(self) -> list[dict[str, Any]]:
        """The chat request bodies the server got, in order."""
        lines = self.out.read_text().splitlines() if self.out.exists() else []
        records = [orjson.loads(line) for line in lines]
        return [r["body"] for r in records if r["path"].endswith("/chat/completions")]


@pytest.fixture(scope="module")
def tool_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AgentGateway, Recorded]]:
    """The tier's server on a ChatML template that renders tools (``chatml_tools.jinja``: SmolLM2's own
    leaves them out, and llama-server then parses no call), a recording proxy, and the gateway as init
    and connect set it up, in front of the proxy."""
    folder = tmp_path_factory.mktemp("agent-tools")
    model = agent_model()
    log = folder / "llama.log"
    with LlamaServer(model.path, log, **AGENT_SERVER, alias=model.alias, chat_template=TEMPLATE) as server:
        out = folder / "sent.jsonl"
        command = [sys.executable, "-m", "interlock.testing.recorder", "--target", server.url]
        proxy = subprocess.Popen([*command, "--out", str(out)], stdout=subprocess.PIPE)
        try:
            assert proxy.stdout is not None
            recorded = Recorded(proxy.stdout.readline().decode().strip(), out)  # it prints its URL first
            with AgentGateway(recorded, folder) as gateway:
                yield gateway, recorded
        finally:
            proxy.terminate()
            proxy.wait(timeout=30)


def events(run: AgentRun) -> list[dict[str, Any]]:
    """The JSON lines a CLI printed (Claude Code's ``stream-json``, Codex's ``--json``)."""
    out = []
    for line in run.ran.stdout.splitlines():
        if line.startswith("{"):
            out.append(orjson.loads(line))
    return out


def claude_result(run: AgentRun) -> dict[str, Any]:
    assert run.ran.returncode == 0, run.ran.explain()
    (result,) = [e for e in events(run) if e.get("type") == "result"]
    assert result["is_error"] is False, run.ran.explain()
    return result


def codex_usage(run: AgentRun) -> dict[str, Any]:
    assert run.ran.returncode == 0, run.ran.explain()
    turns = [e for e in events(run) if e.get("type") == "turn.completed"]
    assert turns, run.ran.explain()
    usage: dict[str, Any] = turns[-1]["usage"]
    return usage


def closed(rig: AgentGateway) -> bool:
    """The candidate in ``/v1/health`` (init's config has one): its circuit closed, no failure counted."""
    (report,) = rig.gateway.health()["candidates"].values()
    return report["circuit_open_until"] is None and report["consecutive_failures"] == 0


def answered_once(run: AgentRun) -> None:
    """One request to the gateway for the run (no retry, no "resume" after a cut answer, no compaction),
    and the server wrote the answer (not the gateway's own words)."""
    assert run.counts.requests == 1, run.ran.explain()
    assert run.counts.output_tokens > 0, run.ran.explain()


def claude_said(run: AgentRun) -> dict[str, Any]:
    """Claude Code's result: exit 0, not an error, the model's words (whatever they are), one request."""
    result = claude_result(run)
    assert result["result"].strip(), run.ran.explain()
    answered_once(run)
    return result


def codex_said(run: AgentRun) -> dict[str, Any]:
    """Codex's usage of the turn: exit 0, the model's words (whatever they are), one request."""
    usage = codex_usage(run)
    items = [e["item"] for e in events(run) if e.get("type") == "item.completed"]
    said = [i.get("text") or "" for i in items if i.get("type") == "agent_message"]
    assert any(text.strip() for text in said), run.ran.explain()
    answered_once(run)
    return usage


# -- Claude Code on /v1/messages ---------------------------------------------------------------------


def test_claude_code_answers_from_the_local_model(rig: AgentGateway, tmp_path: Path) -> None:
    printed = rig.connect("claude-code")
    claude_said(rig.claude(printed, "say hi", tmp_path, *JSON_OUT, *CLAUDE_LEAN))
    assert closed(rig)


def test_claude_code_continues_a_session(rig: AgentGateway, tmp_path: Path) -> None:
    printed = rig.connect("claude-code")
    first = claude_said(rig.claude(printed, "say hi", tmp_path, *JSON_OUT, *CLAUDE_LEAN))
    run = rig.claude(printed, "say hi again", tmp_path, "--continue", *JSON_OUT, *CLAUDE_LEAN)
    second = claude_said(run)
    assert second["session_id"] == first["session_id"]  # the same session, resumed
    first_in = first["usage"]["input_tokens"] + first["usage"].get("cache_read_input_tokens", 0)
    second_in = second["usage"]["input_tokens"] + second["usage"].get("cache_read_input_tokens", 0)
    assert second_in > first_in  # its prompt held the first turn and its answer too
    assert closed(rig)


def test_claude_code_runs_a_tool_and_answers_from_its_result(
    tool_rig: tuple[AgentGateway, Recorded], tmp_path: Path
) -> None:
    """The model calls Read, Claude Code reads the file and sends its content back as the tool's result,
    the model answers, Claude Code exits 0: two requests, the second carrying the result (whatever the
    model then says: its words are not checked, only that the answer came after the tool ran)."""
    rig, recorded = tool_rig
    (tmp_path / READ_FILE).write_text(SECRET + "\n")
    printed = rig.connect("claude-code")
    seen = len(recorded.chats())
    run = rig.claude(printed, READ_WORDS, tmp_path, *JSON_OUT, *CLAUDE_READ)
    result = claude_result(run)
    assert result["result"].strip(), run.ran.explain()
    assert run.counts.requests == 2, run.ran.explain()  # the call, then the answer: no retry, no resume
    uses = [
        block
        for e in events(run)
        if e.get("type") == "assistant"
        for block in e["message"]["content"]
        if block.get("type") == "tool_use"
    ]
    assert [u["name"] for u in uses] == ["Read"], run.ran.explain()
    first, second = recorded.chats()[seen:]
    assert first["tools"][0]["function"]["name"] == "Read"
    call, answer = second["messages"][-2:]
    assert [c["function"]["name"] for c in call["tool_calls"]] == ["Read"]
    assert answer["role"] == "tool"
    assert answer["tool_call_id"] == uses[0]["id"]
    assert SECRET in answer["content"]  # the file Claude Code read, sent back to the model
    assert closed(rig)


# -- Codex on /v1/responses --------------------------------------------------------------------------


def test_codex_answers_from_the_local_model(rig: AgentGateway, tmp_path: Path) -> None:
    printed = rig.connect("codex")
    codex_said(rig.codex(printed, "say hi", tmp_path, "--json", instructions=SYSTEM_PROMPT))
    assert closed(rig)


def test_codex_resumes_a_session(rig: AgentGateway, tmp_path: Path) -> None:
    printed = rig.connect("codex")
    first = codex_said(rig.codex(printed, "say hi", tmp_path, "--json", instructions=SYSTEM_PROMPT))
    run = rig.codex(
        printed, "say hi again", tmp_path, "--json", "resume", "--last", instructions=SYSTEM_PROMPT
    )
    second = codex_said(run)
    assert second["input_tokens"] > first["input_tokens"]  # its prompt held the first turn
    assert closed(rig)
