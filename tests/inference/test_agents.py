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

Not here: a tool-call round trip with the real model. With a ChatML template that renders tools
(``tests/inference/chatml_tools.jinja``) and Claude Code's ``--tools Read``, none of 3 runs ended
within 90 s; the CLIs' tool round trips through the gateway run against the fakes (tests/clients), and
the server's own tool-call wire in ``test_wire_round_trips.py``.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.inference.agents import CLAUDE_LEAN, RUN_S, SYSTEM_PROMPT, AgentGateway, AgentRun
from tests.inference.llama import AGENT_SERVER, LlamaServer, agent_model

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
