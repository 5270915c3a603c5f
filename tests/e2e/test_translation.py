"""Request fields an Ollama candidate cannot carry, through a real `interlock serve`, with the real SDKs.

The gateway translates, emulates or refuses each field (docs/upstream-adapters.md); a refusal moves on to
the next candidate without a mark on the refusing one's health, and is a 400 naming each candidate when
none can serve the request.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from interlock.testing.fake_ollama import FakeOllama
from interlock.testing.replies import Reply
from tests.e2e.conftest import Fakes
from tests.e2e.harness import Served
from tests.waiting import wait_until

HI = [{"role": "user", "content": "hi"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
            "required": ["city", "unit"],
        },
    },
}
CLOCK = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]},
    },
}
PNG = base64.b64encode(b"\x89PNG fake").decode()


def client(gateway: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="caller-key", max_retries=0)


def chats(fake: FakeOllama) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if r.path == "/api/chat"]


def sent_to(fake: Any, model: str) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if isinstance(r.body, dict) and r.body.get("model") == model]


class Marks:
    """What a refusal must not touch: the candidate's health report and its upstream error counter."""

    def __init__(self, gateway: Served, cid: str) -> None:
        self.gateway, self.cid = gateway, cid
        self.before = self.now()

    def now(self) -> tuple[Any, ...]:
        report = self.gateway.health()["candidates"][self.cid]
        errors = sum(
            self.gateway.metric("interlock_upstream_errors_total", candidate=self.cid, error_class=cls)
            for cls in ("client_error", "server_error", "connect", "malformed", "protocol")
        )
        return report["last_error_at"], report["last_error_class"], report["consecutive_failures"], errors

    def untouched(self) -> bool:
        return self.now() == self.before


@pytest.fixture
def box(fakes: Fakes) -> Iterator[FakeOllama]:
    fakes.box.clear_requests()
    yield fakes.box
    fakes.box.reply = Reply()


def test_n_on_ollama_falls_back_to_a_candidate_that_honours_it(
    gateway: Served, fakes: Fakes, box: FakeOllama
) -> None:
    marks = Marks(gateway, "box/llama3.2:3b")
    raw = client(gateway).chat.completions.with_raw_response.create(model="e2e/n", messages=HI, n=2)
    completion = raw.parse()
    assert raw.headers["x-interlock-resolved"] == "bravo/b-n"
    assert raw.headers["x-interlock-skipped"] == "box/llama3.2:3b (unsupported_n)"
    assert [c.index for c in completion.choices] == [0, 1]
    assert chats(box) == []
    assert sent_to(fakes.bravo, "b-n")[0]["n"] == 2
    assert marks.untouched()
    reason = "unsupported_n"
    assert gateway.metric("interlock_fallback_total", from_candidate="box/llama3.2:3b", reason=reason) == 1
    with client(gateway).chat.completions.create(model="e2e/n", messages=HI, n=2, stream=True) as stream:
        finished = [c.choices[0].index for c in stream if c.choices and c.choices[0].finish_reason]
    assert finished == [0, 1]
    assert chats(box) == []


def test_n_where_no_candidate_can_serve_it_is_400_naming_the_parameter(
    gateway: Served, box: FakeOllama
) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client(gateway).chat.completions.create(model="e2e/local", messages=HI, n=3)
    error = info.value.body
    assert error == {
        "message": "no candidate of e2e/local can serve this request: box/llama3.2:3b: "
        "Ollama answers one choice per request; `n` is 3",
        "type": "invalid_request_error",
        "param": "n",
        "code": "unsupported_by_candidates",
    }
    assert chats(box) == []


def test_tool_choice_naming_a_function_sends_only_that_tool(gateway: Served, box: FakeOllama) -> None:
    completion = client(gateway).chat.completions.create(
        model="e2e/local",
        messages=HI,
        tools=[WEATHER, CLOCK],  # type: ignore[list-item]
        tool_choice={"type": "function", "function": {"name": "get_time"}},
    )
    (call,) = completion.choices[0].message.tool_calls or []
    assert call.function.name == "get_time"  # type: ignore[union-attr]
    assert call.function.arguments == '{"zone":"text"}'  # type: ignore[union-attr]
    (sent,) = chats(box)
    assert sent["tools"] == [CLOCK]
    completion = client(gateway).chat.completions.create(
        model="e2e/local",
        messages=HI,
        tools=[WEATHER, CLOCK],  # type: ignore[list-item]
        tool_choice="none",
    )
    assert completion.choices[0].message.tool_calls is None
    assert "tools" not in chats(box)[1]


def test_tool_choice_required_falls_back(gateway: Served, fakes: Fakes, box: FakeOllama) -> None:
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="e2e/required",
        messages=HI,
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="required",
    )
    assert raw.headers["x-interlock-resolved"] == "bravo/b-required"
    assert raw.parse().choices[0].finish_reason == "tool_calls"
    assert chats(box) == []
    assert sent_to(fakes.bravo, "b-required")[0]["tool_choice"] == "required"


def test_parallel_tool_calls_false_keeps_one_call_streamed_or_not(gateway: Served, box: FakeOllama) -> None:
    box.reply = Reply(
        tool_calls=(("get_weather", {"city": "Oslo", "unit": "c"}), ("get_time", {"zone": "CET"}))
    )
    sdk = client(gateway)
    tools: Any = [WEATHER, CLOCK]
    both = sdk.chat.completions.create(model="e2e/local", messages=HI, tools=tools)
    assert [c.function.name for c in both.choices[0].message.tool_calls or []] == ["get_weather", "get_time"]  # type: ignore[union-attr]
    one = sdk.chat.completions.create(model="e2e/local", messages=HI, tools=tools, parallel_tool_calls=False)
    assert [c.function.name for c in one.choices[0].message.tool_calls or []] == ["get_weather"]  # type: ignore[union-attr]
    names = []
    with sdk.chat.completions.create(
        model="e2e/local", messages=HI, tools=tools, parallel_tool_calls=False, stream=True
    ) as stream:
        for chunk in stream:
            for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                names.append(call.function.name if call.function else None)
    assert names == ["get_weather"]
    assert all("parallel_tool_calls" not in body for body in chats(box))


def test_logprobs_fall_back_before_a_stream_starts(gateway: Served, fakes: Fakes, box: FakeOllama) -> None:
    marks = Marks(gateway, "box/llama3.2:3b")
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="e2e/logprobs", messages=HI, logprobs=True, top_logprobs=2, stream=True
    )
    assert raw.headers["x-interlock-resolved"] == "bravo/b-logprobs"
    text = "".join(chunk.choices[0].delta.content or "" for chunk in raw.parse() if chunk.choices)
    assert text == "Hello from bravo, model b-logprobs."
    assert chats(box) == []
    assert marks.untouched()


def test_a_remote_image_url_falls_back_without_a_mark_on_the_ollama_candidate(
    gateway: Served, fakes: Fakes, box: FakeOllama
) -> None:
    marks = Marks(gateway, "box/gemma3:12b")
    content: Any = [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    ]
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="e2e/image", messages=[{"role": "user", "content": content}]
    )
    assert raw.headers["x-interlock-resolved"] == "bravo/b-image"
    assert chats(box) == []
    assert marks.untouched()
    reason = "unsupported_messages"
    assert gateway.metric("interlock_fallback_total", from_candidate="box/gemma3:12b", reason=reason) == 1
    inline: Any = [{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}]
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="e2e/image", messages=[{"role": "user", "content": inline}]
    )
    assert raw.headers["x-interlock-resolved"] == "box/gemma3:12b"
    assert chats(box)[0]["messages"][0]["images"] == [PNG]


def test_token_array_embeddings_fall_back(gateway: Served, fakes: Fakes, box: FakeOllama) -> None:
    marks = Marks(gateway, "box/nomic-embed-text")
    raw = client(gateway).embeddings.with_raw_response.create(model="e2e/embedtok", input=[[1, 2, 3], [4, 5]])
    assert raw.headers["x-interlock-resolved"] == "bravo/b-embedtok"
    assert len(raw.parse().data) == 2
    assert [r for r in box.requests if r.path == "/api/embed"] == []
    assert sent_to(fakes.bravo, "b-embedtok")[0]["input"] == [[1, 2, 3], [4, 5]]
    assert marks.untouched()


def test_top_level_ollama_options_reach_ollama_and_never_a_cloud_fallback(
    gateway: Served, fakes: Fakes, box: FakeOllama
) -> None:
    native = {
        "top_k": 20,
        "min_p": 0.05,
        "repeat_penalty": 1.1,
        "keep_alive": "10m",
        "options": {"mirostat": 1},
    }

    def context_known() -> bool:  # the box's Modelfile sets none: known once /api/ps shows it loaded
        routes = gateway.http.get("/v1/metadata").json()["candidates"]["box/llama3.2:3b"]
        return all(route["context_tokens"] is not None for route in routes.values())

    if not context_known():  # alone (no earlier test loaded the model): load it, and wait for the probe
        client(gateway).chat.completions.create(model="e2e/local", messages=HI)
        wait_until(context_known, 30, "the worker's context to be known")
        box.clear_requests()
    client(gateway).chat.completions.create(model="e2e/local", messages=HI, extra_body=native)
    (sent,) = chats(box)
    context = sent["options"].pop("num_ctx")  # the worker's effective context, set by the preflight
    assert sent["options"] == {"mirostat": 1, "top_k": 20, "min_p": 0.05, "repeat_penalty": 1.1}
    assert isinstance(context, int)
    assert sent["keep_alive"] == "10m"
    extra = {**native, "options": {"temperature": 0.3, "num_ctx": 8192}, "format": "json", "think": True}
    raw = client(gateway).chat.completions.with_raw_response.create(
        model="e2e/native", messages=HI, extra_body=extra
    )
    assert raw.headers["x-interlock-resolved"] == "bravo/b-native"
    (cloud,) = sent_to(fakes.bravo, "b-native")
    assert cloud == {
        "model": "b-native",
        "messages": HI,
        "temperature": 0.3,
        "response_format": {"type": "json_object"},
    }


@pytest.mark.filterwarnings("ignore::UserWarning")  # pydantic, about LiteLLM's own TypedDicts
def test_litellm_sends_ollama_options_at_the_top_level_and_they_reach_options(
    gateway: Served, box: FakeOllama, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch from GitHub at import
    import litellm  # a dev dependency; imported here, after the environment is set

    answer = litellm.completion(
        model="openai/e2e/local",
        api_base=f"{gateway.url}/v1",
        api_key="caller-key",
        messages=HI,
        top_k=40,
        min_p=0.05,
        repeat_penalty=1.15,
        num_ctx=3000,  # the caller's own: the preflight leaves it (checked) instead of the worker's
        seed=7,
        max_tokens=50,
    )
    assert answer.choices[0].message.content == "Hello from box, model llama3.2:3b."
    (sent,) = chats(box)
    assert sent["options"] == {
        "top_k": 40,
        "min_p": 0.05,
        "repeat_penalty": 1.15,
        "num_ctx": 3000,
        "seed": 7,
        "num_predict": 50,
    }


def test_dropped_fields_are_named_in_a_header(gateway: Served, fakes: Fakes, box: FakeOllama) -> None:
    sdk = client(gateway)
    extra = {"chat_template_kwargs": {"enable_thinking": False}, "bad\r\nname": 1}
    raw = sdk.chat.completions.with_raw_response.create(
        model="e2e/local", messages=HI, store=True, user="u-1", temperature=0.5, extra_body=extra
    )
    assert raw.headers["x-interlock-dropped"] == "store, user, chat_template_kwargs, +1 more"
    with sdk.chat.completions.with_streaming_response.create(
        model="e2e/local", messages=HI, metadata={"team": "a"}, stream=True
    ) as streamed:
        assert streamed.headers["x-interlock-dropped"] == "metadata"
    raw = sdk.chat.completions.with_raw_response.create(model="e2e/local", messages=HI, temperature=0.5)
    assert "x-interlock-dropped" not in raw.headers
    native = {"keep_alive": "5m", "top_k": 3, "options": {"num_ctx": 4096}}
    raw = sdk.chat.completions.with_raw_response.create(model="e2e/native", messages=HI, extra_body=native)
    assert (raw.headers["x-interlock-resolved"], raw.headers["x-interlock-dropped"]) == (
        "bravo/b-native",
        "keep_alive, top_k, options.num_ctx",
    )
    raw = sdk.embeddings.with_raw_response.create(model="e2e/embed", input="a b", user="u-1")
    assert (raw.headers["x-interlock-resolved"], raw.headers["x-interlock-dropped"]) == (
        "box/nomic-embed-text",
        "user",
    )
