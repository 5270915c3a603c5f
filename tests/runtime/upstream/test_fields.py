"""Every request field, through both adapters to the fakes: the handling ``fields`` (and the docs) name.

Completeness: the field names come from the installed ``openai`` SDK's request types; a field with no
row in ``fields``, in docs/upstream-adapters.md or in ``EXAMPLES`` below fails here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai.types import embedding_create_params
from openai.types.chat import completion_create_params

from interlock.runtime.base.errors import CannotServe
from interlock.runtime.wire import ollama as ollama_wire
from interlock.runtime.wire.fields import (
    CHAT_FIELDS,
    DROPS,
    EMBEDDING_FIELDS,
    NATIVE_FIELDS,
    OLLAMA_OPTION_FIELDS,
    Field,
    Handling,
)
from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_openai import FakeOpenAI

from .helpers import chat, embed, endpoint

DOCS = Path(__file__).resolve().parents[3] / "docs" / "upstream-adapters.md"
CHAT_MODEL, EMBED_MODEL = "qwen3:8b", "nomic-embed-text"  # a model that thinks: `think` is fine
HI = [{"role": "user", "content": "hello"}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
CLOCK = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}


class Ex:
    """One field's example: the value sent, other fields sent with it, and what each upstream must get
    (for translated/emulated/guard rows: a fragment of the upstream's request)."""

    def __init__(
        self,
        value: Any,
        *,
        extra: dict[str, Any] | None = None,
        openai: dict[str, Any] | None = None,
        ollama: dict[str, Any] | None = None,
    ) -> None:
        self.value, self.extra = value, extra or {}
        self.expected = {"openai": openai or {}, "ollama": ollama or {}}


def _options(**values: Any) -> dict[str, Any]:
    return {"options": values}


EXAMPLES: dict[str, Ex] = {
    "audio": Ex({"voice": "alloy", "format": "wav"}),
    "frequency_penalty": Ex(0.5, ollama=_options(frequency_penalty=0.5)),
    "function_call": Ex("auto"),
    "functions": Ex([{"name": "f", "parameters": {"type": "object"}}]),
    "logit_bias": Ex({"50256": -100}),
    "logprobs": Ex(True),
    "max_completion_tokens": Ex(7, ollama=_options(num_predict=7)),
    "max_tokens": Ex(7, ollama=_options(num_predict=7)),
    "messages": Ex(
        [{"role": "developer", "content": "be brief"}, *HI],
        ollama={
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
        },
    ),
    "metadata": Ex({"team": "a"}),
    "modalities": Ex(["text", "audio"]),
    "model": Ex("caller/alias", openai={"model": CHAT_MODEL}, ollama={"model": CHAT_MODEL}),
    "moderation": Ex({"model": "omni-moderation-latest"}),
    "n": Ex(2),
    "parallel_tool_calls": Ex(False, extra={"tools": [WEATHER]}, ollama={"tools": [WEATHER]}),
    "prediction": Ex({"type": "content", "content": "hello"}),
    "presence_penalty": Ex(0.5, ollama=_options(presence_penalty=0.5)),
    "prompt_cache_key": Ex("k1"),
    "prompt_cache_options": Ex({"mode": "auto"}),
    "prompt_cache_retention": Ex("24h"),
    "reasoning_effort": Ex("low", ollama={"think": "low"}),
    "response_format": Ex({"type": "json_object"}, ollama={"format": "json"}),
    "safety_identifier": Ex("user-1"),
    "seed": Ex(3, ollama=_options(seed=3)),
    "service_tier": Ex("flex"),
    "stop": Ex("END", ollama=_options(stop=["END"])),
    "store": Ex(True),
    "stream": Ex(False, ollama={"stream": False}),
    "stream_options": Ex({"include_usage": True}),
    "temperature": Ex(0.2, ollama=_options(temperature=0.2)),
    "tool_choice": Ex(
        {"type": "function", "function": {"name": "get_time"}},
        extra={"tools": [WEATHER, CLOCK]},
        ollama={"tools": [CLOCK]},
    ),
    "tools": Ex([WEATHER], ollama={"tools": [WEATHER]}),
    "top_logprobs": Ex(2),
    "top_p": Ex(0.9, ollama=_options(top_p=0.9)),
    "user": Ex("user-1"),
    "verbosity": Ex("low"),
    "web_search_options": Ex({"search_context_size": "low"}),
    # Ollama-native fields at the top level
    "options": Ex({"temperature": 0.1, "num_ctx": 4096}, openai={"temperature": 0.1}),
    "keep_alive": Ex("5m"),
    "think": Ex(True, ollama={"think": True}),
    "format": Ex("json", openai={"response_format": {"type": "json_object"}}),
    "num_ctx": Ex(4096, ollama=_options(num_ctx=4096)),
    "num_predict": Ex(9, openai={"max_tokens": 9}, ollama=_options(num_predict=9)),
    **{
        name: Ex(1, ollama=_options(**{name: 1}))
        for name in OLLAMA_OPTION_FIELDS
        if name not in ("num_ctx", "num_predict")
    },
}
EMBED_EXAMPLES: dict[str, Ex] = {
    "dimensions": Ex(4),
    "encoding_format": Ex("base64"),
    "input": Ex(["a b", "c"], ollama={"input": ["a b", "c"]}),
    "model": Ex("caller/alias", openai={"model": EMBED_MODEL}, ollama={"model": EMBED_MODEL}),
    "user": Ex("user-1"),
}


def _contains(whole: Any, part: Any) -> bool:
    if isinstance(part, dict):
        return isinstance(whole, dict) and all(k in whole and _contains(whole[k], v) for k, v in part.items())
    return bool(whole == part)


def _check(
    row: Field,
    example: Ex,
    kind: str,
    fake: FakeOpenAI | FakeOllama,
    send: Any,
    model: str,
    base: dict[str, Any],
) -> None:
    handling: Handling = getattr(row, kind)
    body = {**base, **example.extra, row.name: example.value}
    operation = "chat" if send is chat else "embeddings"
    said = DROPS[kind, operation].of(body)  # X-Interlock-Dropped
    assert (row.name in said) is (handling is Handling.DROPPED)
    early = ollama_wire.refusal(operation, body) if kind == "ollama" else None  # the router's pre-check
    assert (early.param if early else None) == (row.name if handling is Handling.REFUSED else None)
    if handling is Handling.REFUSED:
        with pytest.raises(CannotServe) as info:
            send(endpoint(kind, fake.base_url if isinstance(fake, FakeOpenAI) else fake.url), model, body)
        assert info.value.param == row.name
        assert fake.requests == []
        return
    send(endpoint(kind, fake.base_url if isinstance(fake, FakeOpenAI) else fake.url), model, body)
    (incoming,) = fake.requests
    sent = incoming.body
    expected = example.expected[kind]
    if handling is Handling.PASSED:
        assert sent[row.name] == example.value
    elif handling is Handling.DROPPED:
        assert row.name not in sent
        assert not expected
    else:  # translated, emulated, guard: the upstream's counterpart, and not the field itself
        assert _contains(sent, expected), sent
        if row.name not in expected:
            assert row.name not in sent, sent


@pytest.mark.parametrize("row", CHAT_FIELDS + NATIVE_FIELDS, ids=lambda row: row.name)
def test_each_chat_field_reaches_the_openai_upstream_as_the_table_says(
    openai_fake: FakeOpenAI, row: Field
) -> None:
    _check(row, EXAMPLES[row.name], "openai", openai_fake, chat, CHAT_MODEL, {"model": "x", "messages": HI})


@pytest.fixture(scope="module")
def _thinking_ollama_server() -> Iterator[FakeOllama]:
    models = (
        ModelSpec(CHAT_MODEL, ("completion", "tools", "thinking")),
        ModelSpec(EMBED_MODEL, ("embedding",)),
    )
    with FakeOllama(name="fields", models=models) as fake:
        yield fake


@pytest.fixture
def thinking_ollama(_thinking_ollama_server: FakeOllama) -> FakeOllama:
    _thinking_ollama_server.clear_requests()
    return _thinking_ollama_server


@pytest.mark.parametrize("row", CHAT_FIELDS + NATIVE_FIELDS, ids=lambda row: row.name)
def test_each_chat_field_reaches_ollama_as_the_table_says(thinking_ollama: FakeOllama, row: Field) -> None:
    _check(
        row, EXAMPLES[row.name], "ollama", thinking_ollama, chat, CHAT_MODEL, {"model": "x", "messages": HI}
    )


@pytest.mark.parametrize("row", EMBEDDING_FIELDS, ids=lambda row: row.name)
@pytest.mark.parametrize("kind", ["openai", "ollama"])
def test_each_embedding_field_reaches_the_upstream_as_the_table_says(
    openai_fake: FakeOpenAI, ollama_fake: FakeOllama, row: Field, kind: str
) -> None:
    fake = openai_fake if kind == "openai" else ollama_fake
    _check(row, EMBED_EXAMPLES[row.name], kind, fake, embed, EMBED_MODEL, {"model": "x", "input": "hello"})


def test_every_sdk_request_field_has_a_row_and_an_example() -> None:
    chat_fields = set(completion_create_params.CompletionCreateParamsBase.__annotations__)
    chat_fields |= set(completion_create_params.CompletionCreateParamsStreaming.__annotations__)
    embedding_fields = set(embedding_create_params.EmbeddingCreateParams.__annotations__)
    assert chat_fields - {row.name for row in CHAT_FIELDS} == set()
    assert embedding_fields - {row.name for row in EMBEDDING_FIELDS} == set()
    assert {row.name for row in CHAT_FIELDS + NATIVE_FIELDS} == set(EXAMPLES)
    assert {row.name for row in EMBEDDING_FIELDS} == set(EMBED_EXAMPLES)


def _docs_rows(heading: str) -> list[tuple[str, str, str, str]]:
    text = DOCS.read_text()
    section = text.split(heading, 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \| (\w+) \| (\w+) \| (.*) \|$", section, re.MULTILINE)


@pytest.mark.parametrize(
    ("heading", "rows"),
    [
        ("#### Chat Completions fields", CHAT_FIELDS),
        ("#### Ollama-native fields", NATIVE_FIELDS),
        ("#### Embeddings fields", EMBEDDING_FIELDS),
    ],
)
def test_the_docs_table_matches_the_code(heading: str, rows: tuple[Field, ...]) -> None:
    assert _docs_rows(heading) == [(row.name, row.openai.value, row.ollama.value, row.note) for row in rows]
