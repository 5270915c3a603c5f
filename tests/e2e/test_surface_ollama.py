"""The Ollama native surface through a real `interlock serve`, driven by the real `ollama` client."""

from __future__ import annotations

import base64

import httpx
import ollama
import orjson
import pytest

from interlock.testing.faults import Fault
from tests.e2e.conftest import Fakes
from tests.e2e.harness import Served

HI = [{"role": "user", "content": "hi"}]
PIXEL = base64.b64encode(b"\\x89PNG\\r\\n\\x1a\\n" + b"\\0" * 16).decode()


def client(gateway: Served) -> ollama.Client:
    return ollama.Client(host=gateway.url)


def sent_to(fake: object, model: str) -> list[dict[str, object]]:
    return [r.body for r in fake.requests if isinstance(r.body, dict) and r.body.get("model") == model]  # type: ignore[attr-defined]


def test_chat_names_an_alias_with_a_slash_and_is_answered_by_the_worker(
    gateway: Served, fakes: Fakes
) -> None:
    answer = client(gateway).chat(model="e2e/local", messages=HI, stream=False, options={"num_ctx": 4096})
    assert answer.model == "e2e/local"
    assert answer.message.content == "Hello from box, model llama3.2:3b."
    assert answer.done
    assert answer.done_reason == "stop"
    assert answer.eval_count is not None
    assert answer.prompt_eval_count is not None
    native = sent_to(fakes.box, "llama3.2:3b")[-1]
    assert native["options"] == {"num_ctx": 4096}  # native options reach an Ollama worker as they are


def test_streaming_chat_ends_with_a_done_line(gateway: Served, fakes: Fakes) -> None:
    parts = list(client(gateway).chat(model="e2e/local", messages=HI, stream=True))
    assert "".join(p.message.content or "" for p in parts) == "Hello from box, model llama3.2:3b."
    assert [p.done for p in parts].count(True) == 1
    assert parts[-1].done
    assert parts[-1].done_reason == "stop"
    assert parts[-1].eval_count


def test_a_dead_worker_falls_back_to_an_openai_upstream_with_options_translated(
    gateway: Served, fakes: Fakes
) -> None:
    answer = client(gateway).chat(
        model="e2e/ol-cloud",
        messages=[{"role": "user", "content": "look", "images": [PIXEL]}],
        options={"temperature": 0.25, "num_predict": 12, "seed": 7},
        stream=False,
    )
    assert answer.message.content == "Hello from alpha, model a-ol."
    sent = sent_to(fakes.alpha, "a-ol")[-1]
    assert (sent["temperature"], sent["max_tokens"], sent["seed"]) == (0.25, 12, 7)
    assert "options" not in sent
    image = sent["messages"][0]["content"][1]  # type: ignore[index]
    assert image == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}


def test_tool_calls_and_a_tool_result_round_trip_in_ollama_shape(gateway: Served, fakes: Fakes) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": schema}}]
    answer = client(gateway).chat(model="e2e/local", messages=HI, tools=tools, stream=False)
    calls = answer.message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_weather"]
    assert isinstance(calls[0].function.arguments, dict)
    assert "city" in calls[0].function.arguments
    history = [
        *HI,
        {"role": "assistant", "content": "", "tool_calls": [c.model_dump() for c in calls]},
        {"role": "tool", "tool_name": "get_weather", "content": "sunny"},
    ]
    client(gateway).chat(model="e2e/local", messages=history, tools=tools, stream=False)
    sent = sent_to(fakes.box, "llama3.2:3b")[-1]["messages"]
    assert sent[-1] == {"role": "tool", "content": "sunny", "tool_name": "get_weather"}  # type: ignore[index]


def test_generate_and_embed_and_legacy_embeddings(gateway: Served) -> None:
    sdk = client(gateway)
    generated = sdk.generate(model="e2e/local", prompt="hi", system="be brief", stream=False)
    assert generated.response == "Hello from box, model llama3.2:3b."
    embedded = sdk.embed(model="e2e/embed", input=["one", "two"])
    assert len(embedded.embeddings) == 2
    assert len(embedded.embeddings[0]) > 0
    legacy = gateway.http.post("/api/embeddings", json={"model": "e2e/embed", "prompt": "one"})
    assert legacy.status_code == 200
    assert legacy.json()["embedding"] == list(embedded.embeddings[0])


DURATIONS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")


def test_generate_to_an_ollama_worker_keeps_its_durations_and_writes_what_ollama_writes(
    gateway: Served, fakes: Fakes
) -> None:
    """Issue 29: the worker's durations and counts come back on /api/generate as on /api/chat, and no
    line carries `tool_calls` (Ollama's generate never does); the keys are the fake worker's own
    generate answer's, which are Ollama's."""
    ask = {"model": "llama3.2:3b", "prompt": "hi", "system": "be brief"}
    direct = httpx.post(f"{fakes.box.url}/api/generate", json={**ask, "stream": False}).json()
    through = gateway.http.post("/api/generate", json={**ask, "model": "e2e/local", "stream": False})
    assert through.status_code == 200, through.text
    answer = through.json()
    assert list(answer) == list(direct)  # the same fields, in Ollama's order
    assert {k: answer[k] for k in DURATIONS} == {k: direct[k] for k in DURATIONS}
    assert answer["response"] == direct["response"]
    sent = sent_to(fakes.box, "llama3.2:3b")[-1]
    assert sent["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert "prompt" not in sent

    streamed = gateway.http.post("/api/generate", json={**ask, "model": "e2e/local"})
    lines = [orjson.loads(line) for line in streamed.text.splitlines() if line]
    wanted = httpx.post(f"{fakes.box.url}/api/generate", json=ask).text.splitlines()
    assert [list(line) for line in lines] == [list(orjson.loads(line)) for line in wanted]
    assert all("tool_calls" not in line for line in lines)
    assert lines[-1]["done"] is True
    assert {k: lines[-1][k] for k in DURATIONS} == {k: direct[k] for k in DURATIONS}
    assert "".join(line["response"] for line in lines) == direct["response"]

    generated = client(gateway).generate(model="e2e/local", prompt="hi", stream=False)
    assert generated.total_duration == direct["total_duration"]
    assert generated.eval_duration == direct["eval_duration"]


def test_generate_on_a_translated_worker_has_no_tool_calls_on_its_last_line(gateway: Served) -> None:
    """The same surface before an OpenAI-compatible worker writes its own lines: none names tools."""
    streamed = gateway.http.post("/api/generate", json={"model": "e2e/ol-cloud", "prompt": "hi"})
    assert streamed.status_code == 200, streamed.text
    lines = [orjson.loads(line) for line in streamed.text.splitlines() if line]
    assert lines[-1]["done"] is True
    assert all("tool_calls" not in line for line in lines)
    assert "".join(line["response"] for line in lines)


def test_list_show_ps_version_and_root(gateway: Served) -> None:
    sdk = client(gateway)
    names = [m.model for m in sdk.list().models]
    assert "e2e/ol-cloud" in names
    assert "box/llama3.2:3b" in names
    shown = sdk.show("e2e/ol-cloud")
    assert shown.modelinfo is not None
    assert shown.modelinfo["general.description"] == "Ollama surface to a cloud fallback"
    assert shown.modelinfo["interlock.candidates"] == ["void/v-ol", "alpha/a-ol"]
    assert "completion" in (shown.capabilities or [])
    assert isinstance(sdk.ps().models, list)
    assert gateway.http.get("/api/version").json() == {"version": "0.9.0"}
    assert gateway.http.get("/").text == "Ollama is running"
    assert gateway.http.head("/").status_code == 200


def test_errors_are_in_ollama_shape(gateway: Served) -> None:
    with pytest.raises(ollama.ResponseError) as caught:
        client(gateway).chat(model="e2e/nope", messages=HI, stream=False)
    assert caught.value.status_code == 404
    assert "e2e/nope" in caught.value.error
    missing = gateway.http.post("/api/show", json={"model": "e2e/nope"})
    assert missing.status_code == 404
    assert missing.json() == {"error": "model 'e2e/nope' not found"}
    huge = gateway.http.post("/api/show", json={"model": "e2e/" + "x" * 20_000})  # echoed cut short
    assert huge.status_code == 404
    assert huge.json() == {"error": "model 'e2e/" + "x" * 95 + "…' not found"}
    wrong = gateway.http.get("/api/chat")
    assert wrong.status_code == 405
    assert set(wrong.json()) == {"error"}


def test_a_cut_stream_ends_with_an_error_line_and_no_done(gateway: Served, fakes: Fakes) -> None:
    fakes.alpha.set_fault(Fault.cut_stream(after_chunks=2), model="a-ol-cut")
    body = {"model": "e2e/ol-cut", "messages": HI}  # stream defaults to true
    with gateway.http.stream("POST", "/api/chat", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/x-ndjson"
        lines = [orjson.loads(line) for line in response.iter_lines() if line]
    assert lines[-1] == {
        "error": "the stream from alpha/a-ol-cut broke after it had started (protocol); "
        "the answer is incomplete"
    }
    assert not any(line.get("done") for line in lines)
    fakes.alpha.set_fault(Fault.cut_stream(after_chunks=2), model="a-ol-cut2")  # role chunk, one word
    parts = client(gateway).chat(model="e2e/ol-cut2", messages=HI, stream=True)
    with pytest.raises(ollama.ResponseError, match="broke after it had started"):
        list(parts)
