"""The real Codex CLI (``codex exec``, ``wire_api = "responses"``) through the gateway, with Codex's
defaults: its ``namespace`` tool group and hosted ``web_search`` tool come with every request.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.testing.faults import Fault
from tests.clients.clis import codex
from tests.clients.conftest import CUT_STREAMS, SAMPLE_TEXT, Fakes, tool_results
from tests.e2e.harness import Served

UPSTREAMS = [
    ("cl/claude", "Hello from claude, model claude-fake."),
    ("cl/openai", "Hello from alpha, model gpt-fake."),
    ("cl/local", "Hello from box, model llama3.2:3b."),
    ("cl/responses", "Hello from alpha, model gpt-fake."),  # its own format: relayed as it came
]


def _answer(stdout: str) -> str:
    """What ``codex exec`` printed as the final answer: its last non-empty line of stdout."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


@pytest.mark.parametrize(("alias", "answer"), UPSTREAMS, ids=["anthropic", "openai", "ollama", "responses"])
def test_say_hi_prints_the_upstream_s_answer(
    gateway: Served, alias: str, answer: str, tmp_path: Path
) -> None:
    ran = codex(gateway.url, alias, "say hi", tmp_path)
    assert ran.returncode == 0, ran.explain()
    assert _answer(ran.stdout) == answer, ran.explain()


def test_to_a_responses_upstream_its_request_goes_as_it_came(
    gateway: Served, fakes: Fakes, tmp_path: Path
) -> None:
    """Its own format: the hosted ``web_search`` tool and the ``namespace`` group reach the upstream."""
    fakes.alpha.clear_requests()
    ran = codex(gateway.url, "cl/responses", "say hi", tmp_path)
    assert ran.returncode == 0, ran.explain()
    sent = [r for r in fakes.alpha.requests if r.path == "/v1/responses"]
    assert sent, [r.path for r in fakes.alpha.requests]
    kinds = {tool.get("type") for tool in sent[-1].body["tools"]}
    assert {"web_search", "namespace"} <= kinds, kinds


@pytest.mark.parametrize(
    ("alias", "fake"),
    [("cl/claude-tools", "claudetools"), ("cl/openai-tools", "alphatools"), ("cl/local-tools", "boxtools")],
    ids=["anthropic", "openai", "ollama"],
)
def test_a_tool_use_turn_runs_the_command_and_answers(
    gateway: Served, fakes: Fakes, alias: str, fake: str, tmp_path: Path
) -> None:
    server = getattr(fakes, fake)
    server.clear_requests()
    ran = codex(gateway.url, alias, "show the sample file", tmp_path)
    assert ran.returncode == 0, ran.explain()
    assert _answer(ran.stdout).startswith(f"Hello from {fake}"), ran.explain()
    bodies = [r.body for r in server.requests if isinstance(r.body, dict) and r.body.get("messages")]
    results = [text for body in bodies for text in tool_results(body)]
    # the exec_command call ran (in Codex's read-only sandbox) and its output came back to the upstream
    assert any(SAMPLE_TEXT in text for text in results), (results, ran.explain())


@CUT_STREAMS
def test_a_stream_cut_part_way_is_an_error_and_the_retry_answers_whole(
    gateway: Served, fakes: Fakes, alias: str, fake: str, model: str, answer: str, tmp_path: Path
) -> None:
    """The cut comes after two words of six: Codex must see the stream fail (no ``response.completed``),
    not a short answer, and its one retry gets the whole answer."""
    server = getattr(fakes, fake)
    server.clear_requests()
    server.set_fault(Fault.cut_stream(after_chunks=4), model=model, times=1)
    try:
        ran = codex(gateway.url, alias, "say hi", tmp_path, stream_retries=1)
    finally:
        server.clear_faults()
    assert ran.returncode == 0, ran.explain()
    assert _answer(ran.stdout) == answer, ran.explain()
    assert len([r for r in server.requests if r.model == model]) == 2
    assert f"stream from {fake}/{model} broke after the first byte" in gateway.log()  # provider = fake
