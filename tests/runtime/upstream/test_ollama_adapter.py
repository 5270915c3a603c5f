"""OllamaAdapter against the fake Ollama worker: translation both ways, streams, faults."""

from __future__ import annotations

import base64
import copy
import struct
from collections import deque

import orjson
import pytest

from interlock.runtime.base.errors import (
    CannotServe,
    ClientError,
    ConnectFailed,
    FirstByteTimeout,
    InvalidRequest,
    MalformedResponse,
    ProtocolFailure,
    ServerError,
)
from interlock.runtime.wire import ollama as ollama_wire
from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.faults import Fault
from interlock.testing.replies import Reply

from .helpers import chat, embed, endpoint, probe, stream, text_of

TOOL_MODEL = "llama3.2:3b"
VISION_MODEL = "gemma3:12b"
HI = {"model": "local/fast", "messages": [{"role": "user", "content": "hello there"}]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
PNG = base64.b64encode(b"\x89PNG fake image bytes").decode()


def test_request_translation(ollama_fake: FakeOllama) -> None:
    body = {
        "model": "local/vision",
        "messages": [
            {"role": "developer", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
                    {"type": "text", "text": "and why?"},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "look", "arguments": '{"x": 1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        ],
        "temperature": 0.3,
        "top_p": 0.9,
        "max_tokens": 50,
        "stop": "END",
        "seed": 7,
        "response_format": {"type": "json_object"},
        "options": {"num_ctx": 8192},
    }
    before = copy.deepcopy(body)
    chat(endpoint("ollama", ollama_fake.url, key=None), VISION_MODEL, body)
    assert body == before
    (sent,) = ollama_fake.requests
    assert sent.path == "/api/chat"
    assert sent.body == {
        "model": VISION_MODEL,
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "what is this?\nand why?", "images": [PNG]},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"function": {"name": "look", "arguments": {"x": 1}}}],
            },
            {"role": "tool", "content": "a cat", "tool_name": "look"},
        ],
        "stream": False,
        "format": "json",
        "options": {
            "num_ctx": 8192,
            "temperature": 0.3,
            "top_p": 0.9,
            "seed": 7,
            "num_predict": 50,
            "stop": ["END"],
        },
    }


def test_json_schema_becomes_format(ollama_fake: FakeOllama) -> None:
    schema = {"type": "object", "properties": {"reply": {"type": "string"}}}
    body = {**HI, "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}}
    answer = chat(endpoint("ollama", ollama_fake.url), TOOL_MODEL, body)
    assert ollama_fake.requests[0].body["format"] == schema
    assert answer["choices"][0]["message"]["content"].startswith('{"reply":')


def test_chat_answer_translation(ollama_fake: FakeOllama) -> None:
    answer = chat(endpoint("ollama", ollama_fake.url), TOOL_MODEL, HI)
    assert answer["object"] == "chat.completion"
    assert answer["model"] == TOOL_MODEL
    assert answer["choices"][0] == {
        "index": 0,
        "message": {"role": "assistant", "content": "Hello from gpu0, model llama3.2:3b."},
        "finish_reason": "stop",
    }
    assert answer["usage"] == {"prompt_tokens": 2, "completion_tokens": 5, "total_tokens": 7}


def test_length_from_done_reason(ollama_fake: FakeOllama) -> None:
    answer = chat(endpoint("ollama", ollama_fake.url), TOOL_MODEL, {**HI, "max_completion_tokens": 2})
    assert ollama_fake.requests[0].body["options"] == {"num_predict": 2}
    assert answer["choices"][0]["finish_reason"] == "length"
    chunks, error = stream(endpoint("ollama", ollama_fake.url), TOOL_MODEL, {**HI, "max_tokens": 2})
    assert error is None
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"


def test_tool_calls_non_stream(ollama_fake: FakeOllama) -> None:
    answer = chat(endpoint("ollama", ollama_fake.url), TOOL_MODEL, {**HI, "tools": TOOLS})
    assert ollama_fake.requests[0].body["tools"] == TOOLS
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["id"].startswith("call_")
    assert call["type"] == "function"
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}


def test_tool_choice_none_sends_no_tools(ollama_fake: FakeOllama) -> None:
    chat(endpoint("ollama", ollama_fake.url), VISION_MODEL, {**HI, "tools": TOOLS, "tool_choice": "none"})
    assert "tools" not in ollama_fake.requests[0].body


def test_stream_translation_with_usage(ollama_fake: FakeOllama) -> None:
    body = {**HI, "stream_options": {"include_usage": True}}
    chunks, error = stream(endpoint("ollama", ollama_fake.url), TOOL_MODEL, body)
    assert error is None
    assert ollama_fake.requests[0].body["stream"] is True
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": "Hello "}
    assert {c["id"] for c in chunks} == {chunks[0]["id"]}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert text_of(chunks) == "Hello from gpu0, model llama3.2:3b."
    assert chunks[-2]["choices"][0] == {"index": 0, "delta": {}, "finish_reason": "stop"}
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 2, "completion_tokens": 5, "total_tokens": 7}


def test_stream_tool_call(ollama_fake: FakeOllama) -> None:
    chunks, error = stream(endpoint("ollama", ollama_fake.url), TOOL_MODEL, {**HI, "tools": TOOLS})
    assert error is None
    (call,) = chunks[0]["choices"][0]["delta"]["tool_calls"]
    assert call["index"] == 0
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_remote_image_url_is_refused_before_sending(ollama_fake: FakeOllama) -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    body = {"messages": [{"role": "user", "content": [image]}]}
    with pytest.raises(
        CannotServe,
        match=r"^Ollama models take images as data: URLs only; remote image URLs are not fetched$",
    ) as info:
        chat(endpoint("ollama", ollama_fake.url), VISION_MODEL, body)
    assert (info.value.param, info.value.reason) == (
        "messages[0].content[0].image_url",
        "unsupported_messages",
    )
    assert ollama_fake.requests == []


def test_unknown_model_is_client_error_404(ollama_fake: FakeOllama) -> None:
    with pytest.raises(ClientError, match=r'^model "qwen9:99b" not found, try pulling it first$') as info:
        stream(endpoint("ollama", ollama_fake.url), "qwen9:99b", HI)
    assert info.value.status == 404


def test_tools_to_a_model_without_tools_is_client_error_400(ollama_fake: FakeOllama) -> None:
    with pytest.raises(
        ClientError, match=r"^registry\.ollama\.ai/library/gemma3:12b does not support tools$"
    ) as info:
        chat(endpoint("ollama", ollama_fake.url), VISION_MODEL, {**HI, "tools": TOOLS})
    assert info.value.status == 400


def test_error_line_mid_stream_after_chunks(ollama_fake: FakeOllama) -> None:
    ollama_fake.set_fault(Fault.stream_error("llama runner process has terminated", after_chunks=2))
    chunks, error = stream(endpoint("ollama", ollama_fake.url), TOOL_MODEL, HI)
    assert text_of(chunks) == "Hello from "
    assert isinstance(error, ServerError)
    assert error.message == "upstream reported an error in its response"


def test_a_4xx_error_object_in_the_stream_is_masked_with_the_endpoints_credentials() -> None:
    key = "sk-ollama-proxy-5e1d"
    decoder = ollama_wire.NDJSONDecoder(TOOL_MODEL, False, {"Authorization": f"Bearer {key}"})
    line = orjson.dumps({"error": {"code": 401, "message": f"key {key} was revoked"}})
    with pytest.raises(ClientError, match=r"^key \[redacted\] was revoked$") as info:
        decoder.feed(line, deque())
    assert info.value.status == 401


def test_stream_without_done_is_protocol_failure(ollama_fake: FakeOllama) -> None:
    ollama_fake.set_fault(Fault.truncate(after_chunks=3))
    chunks, error = stream(endpoint("ollama", ollama_fake.url), TOOL_MODEL, HI)
    assert len(chunks) == 3
    assert isinstance(error, ProtocolFailure)


def test_cut_stream_and_malformed_line(ollama_fake: FakeOllama) -> None:
    ep = endpoint("ollama", ollama_fake.url)
    ollama_fake.set_fault(Fault.cut_stream(after_chunks=1))
    chunks, error = stream(ep, TOOL_MODEL, HI)
    assert len(chunks) == 1
    assert isinstance(error, ProtocolFailure)
    ollama_fake.set_fault(Fault.malformed())
    with pytest.raises(MalformedResponse, match=r"^stream line is not valid JSON \(.+\)$"):
        stream(ep, TOOL_MODEL, HI)
    with pytest.raises(MalformedResponse, match=r"^response is not valid JSON \(.+\)$"):
        chat(ep, TOOL_MODEL, HI)


def test_queue_full_503_is_server_error(ollama_fake: FakeOllama) -> None:
    ollama_fake.set_fault(Fault.http_status(503, "server busy, please try again"), model=TOOL_MODEL)
    with pytest.raises(ServerError, match=r"^upstream server error \(HTTP 503\)$"):
        chat(endpoint("ollama", ollama_fake.url), TOOL_MODEL, HI)
    assert chat(endpoint("ollama", ollama_fake.url), VISION_MODEL, HI)["choices"]  # other models unaffected


def test_hang_is_first_byte_timeout(ollama_fake: FakeOllama) -> None:
    ollama_fake.set_fault(Fault.hang())
    with pytest.raises(FirstByteTimeout):
        stream(endpoint("ollama", ollama_fake.url, first_byte_s=0.2), TOOL_MODEL, HI)


def test_embeddings_translation(ollama_fake: FakeOllama) -> None:
    ep = endpoint("ollama", ollama_fake.url)
    floats = embed(ep, "nomic-embed-text", {"model": "emb", "input": ["a b", "c"], "dimensions": 4})
    assert ollama_fake.requests[0].path == "/api/embed"
    assert ollama_fake.requests[0].body == {
        "model": "nomic-embed-text",
        "input": ["a b", "c"],
        "dimensions": 4,
    }
    assert floats["object"] == "list"
    assert floats["usage"] == {"prompt_tokens": 3, "total_tokens": 3}
    vector = floats["data"][0]["embedding"]
    assert len(vector) == 4
    encoded = embed(ep, "nomic-embed-text", {"input": ["a b"], "dimensions": 4, "encoding_format": "base64"})
    decoded = struct.unpack("<4f", base64.b64decode(encoded["data"][0]["embedding"]))
    assert decoded == pytest.approx(vector, abs=1e-6)


def test_token_array_embeddings_are_refused(ollama_fake: FakeOllama) -> None:
    with pytest.raises(CannotServe, match=r"^Ollama embeddings take strings only, not token arrays$") as info:
        embed(endpoint("ollama", ollama_fake.url), "nomic-embed-text", {"input": [[1, 2, 3]]})
    assert (info.value.param, info.value.reason) == ("input", "unsupported_input")
    assert ollama_fake.requests == []


def test_probe(ollama_fake: FakeOllama) -> None:
    probe(endpoint("ollama", ollama_fake.url))
    assert ollama_fake.requests[0].path == "/api/tags"
    with FakeOllama() as fake:
        fake.refuse_connections()
        with pytest.raises(ConnectFailed):
            probe(endpoint("ollama", fake.url))
    ollama_fake.set_fault(Fault.hang())
    with pytest.raises(FirstByteTimeout, match=r"^no answer within 0\.2 s$"):
        probe(endpoint("ollama", ollama_fake.url), timeout_s=0.2)


def test_an_endless_body_or_ndjson_line_is_cut_at_the_limit(ollama_fake: FakeOllama) -> None:
    ep = endpoint("ollama", ollama_fake.url, max_body_bytes=128 * 1024, max_line_bytes=32 * 1024)
    ollama_fake.set_fault(Fault.endless())
    with pytest.raises(ProtocolFailure, match=r"^answer is over the 131072-byte limit$"):
        chat(ep, TOOL_MODEL, HI)
    ollama_fake.set_fault(Fault.endless(after_chunks=1))
    chunks, error = stream(ep, TOOL_MODEL, HI)
    assert len(chunks) == 1
    assert isinstance(error, ProtocolFailure)
    assert error.message == "stream line is over the 32768-byte limit"


def test_a_line_that_arrives_whole_is_held_to_the_limit_too(ollama_fake: FakeOllama) -> None:
    ep = endpoint("ollama", ollama_fake.url, max_line_bytes=16)  # every NDJSON line is longer
    with pytest.raises(ProtocolFailure, match=r"^stream line is over the 16-byte limit$"):
        stream(ep, TOOL_MODEL, HI)


def test_tool_choice_naming_a_function_sends_only_that_tool(ollama_fake: FakeOllama) -> None:
    clock = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
    choice = {"type": "function", "function": {"name": "get_time"}}
    answer = chat(
        endpoint("ollama", ollama_fake.url),
        TOOL_MODEL,
        {**HI, "tools": [*TOOLS, clock], "tool_choice": choice},
    )
    assert ollama_fake.requests[0].body["tools"] == [clock]
    assert answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_time"
    allowed = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [choice]}}
    chat(
        endpoint("ollama", ollama_fake.url),
        TOOL_MODEL,
        {**HI, "tools": [*TOOLS, clock], "tool_choice": allowed},
    )
    assert ollama_fake.requests[1].body["tools"] == [clock]


@pytest.mark.parametrize(
    ("choice", "tools", "error", "message", "param"),
    [
        (
            "required",
            TOOLS,
            CannotServe,
            r'^Ollama cannot force a tool call \(`tool_choice: "required"`\)$',
            "tool_choice",
        ),
        (
            {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": []}},
            TOOLS,
            CannotServe,
            r'^Ollama cannot force a tool call \(`tool_choice.allowed_tools.mode: "required"`\)$',
            "tool_choice",
        ),
        (
            "auto",
            [{"type": "custom", "custom": {"name": "grammar"}}],
            CannotServe,
            r"^Ollama takes function tools only, not 'custom' tools$",
            "tools[0]",
        ),
        (
            {"type": "function", "function": {"name": "missing"}},
            TOOLS,
            InvalidRequest,
            r"^`tool_choice` names no function that is in `tools`$",
            "tool_choice",
        ),
    ],
)
def test_tool_choice_without_an_ollama_counterpart_is_refused_before_sending(
    ollama_fake: FakeOllama, choice: object, tools: object, error: type[Exception], message: str, param: str
) -> None:
    with pytest.raises(error, match=message) as info:
        chat(endpoint("ollama", ollama_fake.url), TOOL_MODEL, {**HI, "tools": tools, "tool_choice": choice})
    assert getattr(info.value, "param", None) == param
    assert ollama_fake.requests == []


def test_parallel_tool_calls_false_keeps_the_first_call(ollama_fake: FakeOllama) -> None:
    clock = {"type": "function", "function": {"name": "get_time"}}
    script = (("get_weather", {"city": "Oslo"}), ("get_time", {"zone": "CET"}))
    with FakeOllama(reply=Reply(tool_calls=script)) as fake:
        ep = endpoint("ollama", fake.url)
        body = {**HI, "tools": [*TOOLS, clock]}
        assert len(chat(ep, TOOL_MODEL, body)["choices"][0]["message"]["tool_calls"]) == 2
        single = {**body, "parallel_tool_calls": False}
        (call,) = chat(ep, TOOL_MODEL, single)["choices"][0]["message"]["tool_calls"]
        assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Oslo"}'}
        chunks, error = stream(ep, TOOL_MODEL, single)
        assert error is None
        calls = [
            c
            for chunk in chunks
            if chunk["choices"]
            for c in chunk["choices"][0]["delta"].get("tool_calls", [])
        ]
        assert [c["function"]["name"] for c in calls] == ["get_weather"]
        assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_malformed_messages_are_the_gateways_invalid_request(ollama_fake: FakeOllama) -> None:
    body = {"messages": [{"role": "user", "content": 7}]}
    with pytest.raises(
        InvalidRequest, match=r"^`messages\[0\]\.content` must be a string or an array of parts$"
    ):
        chat(endpoint("ollama", ollama_fake.url), TOOL_MODEL, body)
    assert ollama_fake.requests == []


def test_top_level_ollama_options_go_into_options(ollama_fake: FakeOllama) -> None:
    body = {
        **HI,
        "top_k": 20,
        "min_p": 0.05,
        "repeat_penalty": 1.1,
        "num_ctx": 8192,
        "seed": 4,
        "options": {"top_k": 5, "mirostat": 1},
    }
    chat(endpoint("ollama", ollama_fake.url), TOOL_MODEL, body)
    sent = ollama_fake.requests[0].body
    assert sent["options"] == {
        "top_k": 20,
        "mirostat": 1,
        "min_p": 0.05,
        "repeat_penalty": 1.1,
        "num_ctx": 8192,
        "seed": 4,
    }
    assert not {"top_k", "min_p", "repeat_penalty", "num_ctx", "seed"} & set(sent)


def test_the_routers_early_look_finds_what_the_translation_refuses() -> None:
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    refused = [
        (
            "chat",
            {**HI, "messages": [{"role": "user", "content": [remote]}]},
            "messages[0].content[0].image_url",
        ),
        (
            "chat",
            {**HI, "messages": [{"role": "user", "content": [{"type": "input_audio"}]}]},
            "messages[0].content[0]",
        ),
        ("chat", {**HI, "tools": TOOLS, "tool_choice": "required"}, "tool_choice"),
        ("embeddings", {"input": [[1, 2]]}, "input"),
    ]
    for operation, body, param in refused:
        early = ollama_wire.refusal(operation, body)
        assert early is not None
        assert early.param == param
    for operation, body in [("chat", HI), ("chat", {"messages": [7]}), ("embeddings", {"input": 7})]:
        assert ollama_wire.refusal(operation, body) is None  # fine, or malformed: the call answers that


def test_an_assistants_refusal_part_is_its_text(ollama_fake: FakeOllama) -> None:
    refused = {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}
    chat(
        endpoint("ollama", ollama_fake.url),
        TOOL_MODEL,
        {"messages": [*HI["messages"], refused, *HI["messages"]]},
    )
    assert ollama_fake.requests[0].body["messages"][1] == {
        "role": "assistant",
        "content": "I can't help with that.",
    }
