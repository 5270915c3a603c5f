"""The real Claude Code CLI (``claude -p``) through the gateway, to each upstream format.

Claude Code sends what a new user's first request holds: ``anthropic-beta`` and ``anthropic-version``
headers, ``?beta=true``, a ``role: "system"`` turn in the middle of ``messages`` (for a model name it
does not know), ``cache_control`` blocks, ``thinking``, ``metadata``, ``context_management`` and ~24
tools; its first answer must be the upstream's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interlock.testing.faults import Fault
from tests.clients.clis import claude
from tests.clients.conftest import CUT_STREAMS, SAMPLE_TEXT, Fakes
from tests.e2e.harness import Served

UPSTREAMS = [
    ("cl/claude", "Hello from claude, model claude-fake."),
    ("cl/openai", "Hello from alpha, model gpt-fake."),
    ("cl/local", "Hello from box, model llama3.2:3b."),
]


@pytest.mark.parametrize(("alias", "answer"), UPSTREAMS, ids=["anthropic", "openai", "ollama"])
def test_say_hi_prints_the_upstream_s_answer(
    gateway: Served, alias: str, answer: str, tmp_path: Path
) -> None:
    ran = claude(gateway.url, alias, "say hi", tmp_path)
    assert ran.returncode == 0, ran.explain()
    assert ran.stdout.strip() == answer, ran.explain()


def test_an_anthropic_upstream_gets_the_request_as_claude_code_sent_it(
    gateway: Served, fakes: Fakes, tmp_path: Path
) -> None:
    fakes.claude.clear_requests()
    ran = claude(gateway.url, "cl/claude", "say hi", tmp_path)
    assert ran.returncode == 0, ran.explain()
    (sent,) = [r for r in fakes.claude.requests if r.model == "claude-fake"]
    assert "mid-conversation-tool-changes-2026-07-01" in sent.headers["anthropic-beta"]  # 2.1.337's
    assert "system" in [m["role"] for m in sent.body["messages"]]  # where Claude Code put it
    assert {"metadata", "thinking", "context_management", "output_config"} <= set(sent.body)
    assert any("cache_control" in block for block in sent.body["system"])


def _texts(body: Any) -> list[str]:
    """Every text a request's messages carry, in any of the three formats."""
    out: list[str] = []
    for message in body.get("messages") or ():
        content = message.get("content")
        if isinstance(content, str):
            out.append(content)
        for block in content if isinstance(content, list) else ():
            inner = block.get("content") if isinstance(block, dict) else None
            if isinstance(inner, str):
                out.append(inner)
            for part in inner if isinstance(inner, list) else ():
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    out.append(part["text"])
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                out.append(block["text"])
    return out


@pytest.mark.parametrize(
    ("alias", "fake"),
    [("cl/claude-tools", "claudetools"), ("cl/openai-tools", "alphatools"), ("cl/local-tools", "boxtools")],
    ids=["anthropic", "openai", "ollama"],
)
def test_a_tool_use_turn_reads_the_file_and_answers(
    gateway: Served, fakes: Fakes, alias: str, fake: str, tmp_path: Path
) -> None:
    server = getattr(fakes, fake)
    server.clear_requests()
    ran = claude(gateway.url, alias, "read the sample file", tmp_path, "--allowedTools", "Read")
    assert ran.returncode == 0, ran.explain()
    assert ran.stdout.strip().startswith(f"Hello from {fake}"), ran.explain()
    # the upstream got the tool's result back: the file's text, read by Claude Code's own Read tool
    bodies = [r.body for r in server.requests if isinstance(r.body, dict) and r.body.get("messages")]
    assert any(SAMPLE_TEXT in text for body in bodies for text in _texts(body)), ran.explain()


@CUT_STREAMS
def test_a_stream_cut_part_way_is_an_error_and_the_retry_answers_whole(
    gateway: Served, fakes: Fakes, alias: str, fake: str, model: str, answer: str, tmp_path: Path
) -> None:
    """The cut comes after two words of six: Claude Code must see an error event, not a short answer
    (it then asks again without streaming, and that answer is whole)."""
    server = getattr(fakes, fake)
    server.clear_requests()
    server.set_fault(Fault.cut_stream(after_chunks=4), model=model, times=1)
    try:
        ran = claude(gateway.url, alias, "say hi", tmp_path)
    finally:
        server.clear_faults()
    assert ran.returncode == 0, ran.explain()
    assert ran.stdout.strip() == answer, ran.explain()
    streamed = [r.body.get("stream") is True for r in server.requests if r.model == model]
    assert streamed[0], streamed  # the cut one
    assert len(streamed) >= 2, streamed  # and Claude Code's retry
    assert f"stream from {fake}/{model} broke after the first byte" in gateway.log()  # provider = fake
