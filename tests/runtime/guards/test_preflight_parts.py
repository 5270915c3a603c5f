"""The preflight's parts on their own: the needs of a request, Ollama metadata parsing, effective context."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from interlock.runtime.base.errors import InvalidRequest
from interlock.runtime.books.estimate import needs_of, text_tokens
from interlock.runtime.books.facts import ModelInfo
from interlock.runtime.books.fit import capabilities_on, effective_context
from interlock.runtime.fleet.live_facts import LiveFacts
from interlock.runtime.fleet.metadata import parse_ps, parse_show, parse_sizes, parse_tags
from interlock.runtime.loaded.tables import PreflightSettings
from tests.runtime.conftest import build, compile_text

SETTINGS = PreflightSettings(
    mode="enforce",
    metadata_ttl_s=600,
    default_context_tokens=None,
    max_context_tokens=65536,
    default_output_tokens=1000,
    image_reserve_tokens=2000,
    margin_percent=10,
    caller_num_ctx=True,
)

IMAGE_PART = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 30000}}


def test_text_is_estimated_at_three_and_a_half_utf8_bytes_a_token() -> None:
    assert text_tokens("abcdefg") == 2
    assert text_tokens("abcdefgh") == 3  # rounded up
    assert text_tokens("日本語") == 4  # 9 bytes + a sixth of the 6 extra: CJK runs over a token a character


def test_a_plain_chat_needs_completion_and_its_estimate_adds_output_and_margin() -> None:
    needs = needs_of({"messages": [{"role": "user", "content": "x" * 300}]}, "chat", SETTINGS)
    assert needs.capabilities == {"completion"}
    assert needs.prompt_tokens == 4 + 86  # 300 bytes / 3.5, rounded up
    assert needs.output_tokens == 1000
    assert needs.tokens == 1199  # (90 + 1000) * 1.10, rounded up
    assert needs.thinking == "none"


def test_images_count_as_a_reserve_each_and_not_as_their_base64() -> None:
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "what?"}, IMAGE_PART]}]}
    needs = needs_of({**body, "max_tokens": 10}, "chat", SETTINGS)
    assert needs.capabilities == {"completion", "vision"}
    assert needs.images == 1
    assert needs.prompt_tokens == 4 + 2
    assert needs.tokens == 2218  # (6 + 2000 + 10) * 1.10, rounded up


def test_tools_are_needed_unless_tool_choice_is_none_and_their_schemas_count() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    base = {"messages": [{"role": "user", "content": "hi"}], "tools": tools}
    assert "tools" in needs_of(base, "chat", SETTINGS).capabilities
    assert (
        needs_of(base, "chat", SETTINGS).prompt_tokens
        > needs_of({**base, "tools": []}, "chat", SETTINGS).prompt_tokens
    )
    assert "tools" not in needs_of({**base, "tool_choice": "none"}, "chat", SETTINGS).capabilities


@pytest.mark.parametrize(
    ("extra", "thinking"),
    [
        ({"reasoning_effort": "high"}, "required"),
        ({"reasoning_effort": "minimal"}, "optional"),
        ({"reasoning_effort": "none"}, "none"),
        ({"think": True}, "required"),
        ({"think": "low"}, "required"),
        ({"think": False}, "none"),
    ],
)
def test_thinking_is_required_preferred_or_not_asked(extra: dict[str, object], thinking: str) -> None:
    needs = needs_of({"messages": [{"role": "user", "content": "hi"}], **extra}, "chat", SETTINGS)
    assert needs.thinking == thinking
    assert ("thinking" in needs.capabilities) == (thinking == "required")


def test_the_requested_output_replaces_the_default() -> None:
    hi = {"messages": [{"role": "user", "content": "hi"}]}
    assert needs_of({**hi, "max_completion_tokens": 7}, "chat", SETTINGS).output_tokens == 7
    assert needs_of({**hi, "max_output_tokens": 8}, "chat", SETTINGS).output_tokens == 8
    assert needs_of({**hi, "options": {"num_predict": 9}}, "chat", SETTINGS).output_tokens == 9
    assert needs_of({**hi, "options": {"num_predict": -1}}, "chat", SETTINGS).output_tokens == 1000


def test_embeddings_need_embedding_and_count_their_input() -> None:
    needs = needs_of({"input": ["abc", "defghi", [1, 2, 3, 4]]}, "embeddings", SETTINGS)
    assert needs.capabilities == {"embedding"}
    assert needs.prompt_tokens == 1 + 2 + 4
    assert needs.output_tokens == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, r"^`options.num_ctx` must be a positive integer, not 0$"),
        (True, r"^`options.num_ctx` must be a positive integer, not true$"),
        ("8k", r'^`options.num_ctx` must be a positive integer, not "8k"$'),
        (
            70000,
            r"^`options.num_ctx` 70000 is above this gateway's limit of 65536 tokens "
            r"\(preflight.max_context_tokens\)$",
        ),
    ],
)
def test_a_callers_num_ctx_must_be_a_positive_int_within_the_cap(value: object, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        needs_of({"messages": [], "options": {"num_ctx": value}}, "chat", SETTINGS)
    assert needs_of({"messages": [], "options": {"num_ctx": 4096}}, "chat", SETTINGS).num_ctx == 4096


def test_a_callers_num_ctx_is_refused_where_the_plan_does_not_allow_it() -> None:
    closed = dataclasses.replace(SETTINGS, caller_num_ctx=False)
    with pytest.raises(InvalidRequest, match=r"^`options.num_ctx` is not accepted by this gateway"):
        needs_of({"messages": [], "options": {"num_ctx": 4096}}, "chat", closed)


def test_api_show_is_parsed_as_ollama_writes_it() -> None:
    answer = {
        "parameters": 'num_ctx                        32768\nstop                           "<|eot_id|>"',
        "capabilities": ["completion", "vision"],
        "model_info": {"general.architecture": "gemma3", "gemma3.context_length": 131072},
    }
    assert parse_show(answer, 5.0) == ModelInfo(frozenset({"completion", "vision"}), 131072, 32768, 5.0)
    assert parse_show({"parameters": "temperature 0.7"}, 1.0) == ModelInfo(None, None, None, 1.0)
    assert parse_show("nonsense", 1.0) == ModelInfo(None, None, None, 1.0)


def test_absurd_numbers_from_ollama_are_unknown_not_a_crash() -> None:
    """A 5,000-digit `num_ctx` raised in `int()` and ended the worker's metadata round; a window of
    2^62, `True` or other digits than ASCII are no windows either (``interlock.common.bounds``)."""
    for parameters in ("num_ctx " + "9" * 5000, "num_ctx ²", "num_ctx ٣", "num_ctx 0", "num_ctx -5"):
        assert parse_show({"parameters": parameters}, 1.0) == ModelInfo(None, None, None, 1.0)
    for trained in (2**62, True, -1, 8192.5, "8192"):
        info = {"general.architecture": "llama", "llama.context_length": trained}
        assert parse_show({"model_info": info}, 1.0).max_context is None
    ps = {"models": [{"name": "a", "context_length": 2**62, "size_vram": 2**62}, {"name": "b", "size": True}]}
    assert parse_ps(ps) == {"a:latest": None, "b:latest": None}
    assert parse_sizes(ps) == {}


def test_api_ps_and_tags_name_models_with_their_tag() -> None:
    ps = {"models": [{"name": "gemma3", "context_length": 8192}, {"name": "qwen3:8b"}]}
    assert parse_ps(ps) == {"gemma3:latest": 8192, "qwen3:8b": None}  # older servers: no context_length
    assert parse_ps({"error": "x"}) is None
    assert parse_tags({"models": [{"name": "llama3.2:3b"}, {"model": "gemma3"}]}) == {
        "llama3.2:3b",
        "gemma3:latest",
    }


CONFIG = """\
version: 1
preflight: {default_context_tokens: 2048, max_context_tokens: 100000}
providers:
  local:
    kind: ollama
    timeouts: {first_byte: 60s}
    workers:
      - {name: a, url: "http://127.0.0.1:9", default_context_tokens: 8192, context_limits: {"m:1b": 16384}}
      - {name: b, url: "http://127.0.0.1:8"}
  cloud: {kind: openai, base_url: "http://127.0.0.1:7/v1"}
models:
  local/m:1b: {capabilities: [completion], context_tokens: 32768}
  cloud/c: {capabilities: [completion, vision], context_tokens: 128000}
aliases:
  t: {chain: [local/m:1b, cloud/c]}
"""


def test_the_effective_context_follows_loaded_then_modelfile_then_defaults_capped(tmp_path: Path) -> None:
    plan = build(compile_text(tmp_path, CONFIG))
    local, cloud = plan.candidates["local/m:1b"], plan.candidates["cloud/c"]
    on_a, on_b = local.routes
    live = LiveFacts()  # the workers' facts, seated in the core's table that fit reads
    facts = live.table
    assert effective_context(on_a, local, facts) == (8192, "default")  # the worker's own default
    assert effective_context(on_b, local, facts) == (2048, "default")  # the plan's
    assert effective_context(cloud.routes[0], cloud, facts) == (128000, "declared")
    live.put_model("local@a", "m:1b", ModelInfo(frozenset({"completion", "tools"}), 65536, 12000, 0.0))
    assert effective_context(on_a, local, facts) == (12000, "modelfile")
    live.put_loaded("local@a", {"m:1b": 40000}, 0.0)
    assert effective_context(on_a, local, facts) == (16384, "loaded, capped")  # the worker's limit
    assert effective_context(on_a, local, facts, num_ctx=9000) == (9000, "caller")
    assert capabilities_on(on_a, local, facts) == {"completion", "tools"}  # live wins over declared
    assert capabilities_on(on_b, local, facts) == {"completion"}  # nothing live there: declared
    live.put_loaded("local@a", None, 1.0)  # /api/ps failed: loaded contexts unknown, not stale
    assert effective_context(on_a, local, facts) == (12000, "modelfile")


def test_the_fetcher_reads_ps_every_round_and_show_and_tags_once_per_ttl(tmp_path: Path) -> None:
    """A real fake Ollama, the real client and adapter; time advances by hand, nothing sleeps."""
    from interlock.runtime.books.health import HealthBook
    from interlock.runtime.books.metrics import Metrics, StateView
    from interlock.runtime.fleet.metadata import MetadataFetcher
    from interlock.runtime.net.client import UpstreamClient
    from interlock.runtime.state.memory import MemorySlots
    from interlock.runtime.upstream.ollama import OllamaAdapter
    from interlock.testing.fake_ollama import FakeOllama, ModelSpec

    models = (
        ModelSpec("m:1b", ("completion", "tools"), context_length=32768, num_ctx=12000, loaded_context=6000),
    )
    now = [100.0]
    with FakeOllama(name="meta", models=models) as fake:
        config = CONFIG.replace("http://127.0.0.1:9", fake.url).replace(
            "preflight: {", "preflight: {metadata_ttl: 10m, "
        )
        plan = build(compile_text(tmp_path, config))
        facts = LiveFacts()
        metrics = Metrics(StateView(lambda: plan, HealthBook(plan.health), MemorySlots()))

        async def rounds() -> None:
            client = UpstreamClient.create()
            try:
                fetcher = MetadataFetcher(facts, lambda: OllamaAdapter(client), metrics, lambda: now[0])
                await fetcher.refresh(plan)
                now[0] += 60  # within the TTL
                await fetcher.refresh(plan)
                now[0] += 600  # past it
                await fetcher.refresh(plan)
            finally:
                await client.aclose()

        asyncio.run(rounds())
        paths = [r.path for r in fake.requests]
    assert paths.count("/api/ps") == 3
    assert paths.count("/api/tags") == 2
    assert paths.count("/api/show") == 2
    assert facts.model("local@a", "m:1b") == ModelInfo(
        frozenset({"completion", "tools"}), 32768, 12000, 760.0
    )
    assert facts.loaded_context("local@a", "m:1b") == 6000
    assert facts.worker("local@a").installed == {"m:1b"}
    # worker b (port 8) refuses: unknown, counted, never an exception
    assert facts.worker("local@b").loaded is None
    assert metrics.metadata_fetches.labels("local@b", "/api/ps", "connect").value == 3
    # ... and, unreachable, it is asked nothing else in those rounds
    assert metrics.metadata_fetches.labels("local@b", "/api/tags", "connect").value == 0
    assert metrics.metadata_fetches.labels("local@b", "/api/show", "connect").value == 0


def test_a_top_level_num_ctx_is_the_callers_too_and_checked_the_same_way() -> None:
    """LiteLLM and others send Ollama's options at the top level; the Ollama adapter lifts them into
    ``options``, where a top-level ``num_ctx`` wins: so it is the one checked."""
    body = {"messages": [], "num_ctx": 8192, "options": {"num_ctx": 2048}}
    assert needs_of(body, "chat", SETTINGS).num_ctx == 8192
    with pytest.raises(InvalidRequest, match=r"^`num_ctx` must be a positive integer, not 0$") as info:
        needs_of({"messages": [], "num_ctx": 0}, "chat", SETTINGS)
    assert info.value.param == "num_ctx"
    closed = dataclasses.replace(SETTINGS, caller_num_ctx=False)
    with pytest.raises(InvalidRequest, match=r"^`num_ctx` is not accepted by this gateway"):
        needs_of({"messages": [], "num_ctx": 4096}, "chat", closed)


def test_a_top_level_num_predict_counts_as_the_requested_output() -> None:
    assert needs_of({"messages": [], "num_predict": 321}, "chat", SETTINGS).output_tokens == 321
    both = {"messages": [], "max_tokens": 50, "num_predict": 321, "options": {"num_predict": 7}}
    assert needs_of(both, "chat", SETTINGS).output_tokens == 50  # what the Ollama adapter sends wins
