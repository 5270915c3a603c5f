"""The agent contract, compiled per alias (compiler/passes/contract.py): the guaranteed window (the
smallest of the chain, as the plan loader settles each route's), the output ceiling, the prefill
allowance, each candidate's reasoning contract; IL504 and IL505 where an agent would be misled."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.compiler.context import CompileContext
from tests.conftest import compile_text

PROVIDERS = """\
version: 1
preflight: {max_context_tokens: 16384}
providers:
  box:
    kind: ollama
    timeouts: {first_byte: 120s}
    workers:
      - name: a
        url: "http://10.0.0.1:11434"
        default_context_tokens: 32768
        context_limits: {"qwen3:8b": 12288}
      - {name: b, url: "http://10.0.0.2:11434", default_context_tokens: 8192}
  bare:
    kind: ollama
    workers: [{name: c, url: "http://10.0.0.3:11434"}]
  llama:
    kind: openai
    api_key_env: LLAMA_KEY
    timeouts: {first_byte: 90s}
    workers:
      - {name: l1, url: "http://10.0.0.6:8080/v1", server: llama.cpp, default_context_tokens: 4096}
      - {name: l2, url: "http://10.0.0.7:8080/v1", server: llama.cpp}
  claude: {kind: anthropic, base_url: "https://api.anthropic.com", api_key_env: ANTHROPIC_API_KEY}
  oai: {kind: openai, base_url: "https://api.openai.com/v1", api_key_env: OPENAI_API_KEY, responses: true}
  groq: {kind: openai, base_url: "https://api.groq.com/openai/v1", api_key_env: GROQ_API_KEY}
models:
  box/qwen3:8b: {capabilities: [completion, tools, thinking], context_tokens: 40960}
  llama/smollm2: {capabilities: [completion, tools], context_tokens: 8192}
  claude/claude-sonnet-4-6: {context_tokens: 200000, max_output_tokens: 64000}
  oai/gpt-5: {capabilities: [completion, tools, thinking], context_tokens: 400000, max_output_tokens: 128000}
  groq/qwen3-32b: {capabilities: [completion, tools, thinking], context_tokens: 131072}
  groq/llama-3.3-70b: {capabilities: [completion, tools], context_tokens: 131072}
"""


def compiled(tmp_path: Path, aliases: str) -> CompileContext:
    return compile_text(tmp_path, PROVIDERS + "aliases:\n" + aliases)


def codes(ctx: CompileContext) -> list[str]:
    return sorted(d.code for d in ctx.sink.items if d.code in ("IL504", "IL505"))


def test_the_guaranteed_window_is_the_smallest_route_of_the_smallest_candidate(tmp_path: Path) -> None:
    ctx = compiled(
        tmp_path,
        "  co/chat: {chain: [box/qwen3:8b, groq/llama-3.3-70b, claude/claude-sonnet-4-6]}\n"
        "  co/llama: {chain: [llama/smollm2, groq/llama-3.3-70b]}\n"
        "  co/bare: {chain: [bare/qwen3:8b, groq/llama-3.3-70b]}\n",
    )
    chat = ctx.contracts["co/chat"]
    # worker a: its 32,768 default capped by its limit (12,288) and the gateway's cap; b: 8,192
    assert (chat.window_tokens, chat.largest_window_tokens, chat.unknown_windows) == (8192, 200000, [])
    assert chat.output_tokens == 64000  # the only declared one
    assert chat.prefill_ms == 12000  # groq and claude keep a hosted API's default first_byte; box has 120 s
    llama = ctx.contracts["co/llama"]
    # an OpenAI-compatible worker takes the declared (per-slot) window, on every worker
    assert llama.window_tokens == 8192
    bare = ctx.contracts["co/bare"]  # an Ollama worker with no default: its window is known only live
    assert (bare.window_tokens, bare.unknown_windows) == (131072, ["bare/qwen3:8b"])
    assert ctx.plan is not None
    assert ctx.plan.aliases["co/chat"].contract == chat  # in the plan, for the runtime to read


@pytest.mark.parametrize(
    ("chain", "contracts"),
    [
        # unknown capabilities: every Claude model thinks when asked
        ("[claude/claude-sonnet-4-6]", [("anthropic-signed", "api.anthropic.com")]),
        ("[oai/gpt-5]", [("encrypted", "api.openai.com")]),  # a Responses relay hands back its items
        ("[groq/qwen3-32b, box/qwen3:8b]", [("reasoning_content", None)] * 2),
        ("[groq/llama-3.3-70b, llama/smollm2]", [("none", None)] * 2),
        ("[bare/phi3:mini]", [("unknown", None)]),
    ],
)
def test_each_candidate_s_reasoning_contract(
    tmp_path: Path, chain: str, contracts: list[tuple[str, str | None]]
) -> None:
    ctx = compiled(tmp_path, f"  co/x: {{chain: {chain}}}\n")
    assert [(r.contract, r.issuer) for r in ctx.contracts["co/x"].reasoning] == contracts


@pytest.mark.parametrize(
    ("chain", "expected"),
    [
        ("[claude/claude-sonnet-4-6, groq/qwen3-32b]", ["IL505"]),  # signed, then plain text: 400 back
        ("[oai/gpt-5, groq/qwen3-32b]", ["IL505"]),  # encrypted items, then plain text
        ("[oai/gpt-5, claude/claude-sonnet-4-6]", ["IL505"]),  # two issuers
        ("[groq/qwen3-32b, box/qwen3:8b]", []),  # plain text both ways: any model takes it
        ("[claude/claude-sonnet-4-6, groq/llama-3.3-70b]", []),  # the fallback does not think
        ("[claude/claude-sonnet-4-6, bare/phi3:mini]", []),  # unknown: not guessed
    ],
)
def test_a_chain_that_mixes_reasoning_contracts_is_a_finding(
    tmp_path: Path, chain: str, expected: list[str]
) -> None:
    assert codes(compiled(tmp_path, f"  co/x: {{chain: {chain}}}\n")) == expected


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("{requires: [tools], chain: [llama/smollm2, groq/llama-3.3-70b]}", ["IL504"]),  # 8k vs 131k
        ("{chain: [llama/smollm2, groq/llama-3.3-70b]}", []),  # not an agent's alias (no tools required)
        ("{requires: [tools], chain: [groq/llama-3.3-70b, oai/gpt-5]}", ["IL504"]),  # 131k vs 400k: 3x
        ("{requires: [tools], chain: [groq/llama-3.3-70b, groq/qwen3-32b]}", []),  # the same window
    ],
)
def test_windows_that_differ_enough_to_matter_to_an_agent_are_a_finding(
    tmp_path: Path, alias: str, expected: list[str]
) -> None:
    assert codes(compiled(tmp_path, f"  co/x: {alias}\n")) == expected


def test_the_finding_names_the_numbers(tmp_path: Path) -> None:
    ctx = compiled(tmp_path, "  co/x: {requires: [tools], chain: [llama/smollm2, groq/llama-3.3-70b]}\n")
    (finding,) = [d for d in ctx.sink.items if d.code == "IL504"]
    assert finding.message == (
        "alias `co/x` guarantees an agent 8,192 tokens (`llama/smollm2`) although `groq/llama-3.3-70b` "
        "holds 131,072: an agent told the guaranteed window compacts 16x too early there, one told the "
        "larger overflows the fallback"
    )
