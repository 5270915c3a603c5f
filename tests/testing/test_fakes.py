"""The fake upstreams themselves: wire shapes, lifecycle, fault switches, the out-of-process mode."""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import urllib.error
import urllib.request
from typing import Any

import aiohttp
import orjson
import pytest

from interlock.testing.fake_anthropic import FakeAnthropic
from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.fake_process import FakeProcess
from interlock.testing.faults import Fault, FaultBoard, FaultKind
from interlock.testing.replies import Reply, split_text
from tests.waiting import PATIENCE_S, wait_until

HI = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def _call(url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, bytes, Any]:
    data = orjson.dumps(body) if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers


def _get(conn: http.client.HTTPConnection, path: str) -> bytes:
    conn.request("GET", path)
    return conn.getresponse().read()


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_split_text_joins_back() -> None:
    text = "Hello from somewhere, model x."
    assert split_text(text, None) == ["Hello ", "from ", "somewhere, ", "model ", "x."]
    for n in (1, 3, 7, 100):
        assert "".join(split_text(text, n)) == text
    assert len(split_text(text, 3)) == 3


def test_fault_board_scopes_and_counts() -> None:
    board = FaultBoard()
    board.set(Fault.http_status(503))
    board.set(Fault.hang(), model="a", times=2)
    assert board.take("a") == Fault.hang()
    assert board.take("b") == Fault.http_status(503)
    assert board.take("a") == Fault.hang()
    assert board.take("a") == Fault.http_status(503)  # a's own fault is used up: the global one applies
    board.clear()
    assert board.take("a") is None
    with pytest.raises(ValueError, match=r"^times must be at least 1, got 0$"):
        board.set(Fault.hang(), times=0)


def test_openai_shapes_and_auth_in_a_thread() -> None:
    with FakeOpenAI(api_key="sk-k", models=["a", "b"]) as fake:
        status, body, _ = _call(fake.base_url + "/models", headers={"Authorization": "Bearer sk-k"})
        assert status == 200
        assert [m["id"] for m in orjson.loads(body)["data"]] == ["a", "b"]
        status, body, _ = _call(fake.base_url + "/models")
        assert status == 401
        assert orjson.loads(body)["error"]["message"] == "Incorrect API key provided: (none)."
        status, body, headers = _call(
            fake.base_url + "/chat/completions",
            {**HI, "model": "a", "stream": True},
            {"Authorization": "Bearer sk-k"},
        )
        assert headers["Content-Type"] == "text/event-stream"
        events = [e for e in body.decode().split("\n\n") if e]
        assert events[-1] == "data: [DONE]"
        first = orjson.loads(events[0].removeprefix("data: "))
        assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert [r.path for r in fake.requests] == ["/v1/models", "/v1/models", "/v1/chat/completions"]
        assert fake.requests[-1].body["model"] == "a"


def test_async_mode_and_keep_alive() -> None:
    async def go() -> list[int]:
        async with FakeOpenAI() as fake, aiohttp.ClientSession() as session:
            statuses = []
            for _ in range(3):
                async with session.post(fake.base_url + "/chat/completions", json=HI) as response:
                    statuses.append(response.status)
                    await response.read()
            return statuses

    assert asyncio.run(go()) == [200, 200, 200]


def test_several_requests_on_one_connection_and_a_bad_one() -> None:
    with FakeOpenAI() as fake:
        conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
        for _ in range(3):
            conn.request(
                "POST", "/v1/chat/completions", orjson.dumps(HI), {"Content-Type": "application/json"}
            )
            assert conn.getresponse().read().startswith(b'{"id":"chatcmpl-')
        conn.request("POST", "/v1/chat/completions", b"{not json", {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 400
        assert orjson.loads(response.read())["error"]["message"] == "request body is not valid JSON"
        conn.close()
        with socket.create_connection(("127.0.0.1", fake.port), timeout=5) as raw:
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            assert raw.recv(100).startswith(b"HTTP/1.1 400 Bad Request")


def test_refuse_and_accept_from_another_thread() -> None:
    with FakeOpenAI() as fake:
        port = fake.port
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        _get(conn, "/v1/models")
        fake.refuse_connections()
        assert _refused(port)
        with pytest.raises((ConnectionError, http.client.HTTPException)):
            _get(conn, "/v1/models")  # the open keep-alive connection was reset too
        fake.accept_connections()
        assert _call(fake.base_url + "/models")[0] == 200


def test_faults_per_model_and_counted() -> None:
    with FakeOpenAI() as fake:
        fake.set_fault(Fault.rate_limited("3", retry_after_ms="3000"), model="m", times=1)
        status, _, headers = _call(fake.base_url + "/chat/completions", HI)
        assert (status, headers["Retry-After"], headers["retry-after-ms"]) == (429, "3", "3000")
        assert _call(fake.base_url + "/chat/completions", HI)[0] == 200
        fake.set_fault(Fault.http_status(520, body=b"error code: 520"))
        status, body, _ = _call(fake.base_url + "/chat/completions", {**HI, "model": "other"})
        assert (status, body) == (520, b"error code: 520")


def test_hanging_request_ends_when_the_fake_stops() -> None:
    fake = FakeOpenAI().start()
    fake.set_fault(Fault.hang())
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            _call(fake.base_url + "/chat/completions", HI)
        except BaseException as exc:  # the connection is dropped: urllib raises
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    wait_until(lambda: fake.in_flight == 1, what="the request to reach the fake")
    assert caller.is_alive()  # really hanging
    fake.stop()
    caller.join(PATIENCE_S)
    assert not caller.is_alive()
    assert outcome


def test_a_held_request_is_answered_when_its_gate_opens() -> None:
    gate = threading.Event()
    with FakeOpenAI() as fake:
        fake.set_fault(Fault.hold(gate), times=1)
        answers: list[int] = []
        caller = threading.Thread(
            target=lambda: answers.append(_call(fake.base_url + "/chat/completions", HI)[0])
        )
        caller.start()
        wait_until(lambda: fake.in_flight == 1, what="the request to be held")
        assert answers == []  # held: nothing comes back before the gate opens
        gate.set()
        caller.join(PATIENCE_S)
        assert answers == [200]
        status, body, _ = _call(fake.url + "/_fake/fault", {"kind": "hold"})
        assert (status, b"hold needs a gate" in body) == (400, True)


def test_ollama_shapes() -> None:
    models = [
        ModelSpec(
            "qwen3:8b",
            ("completion", "tools", "thinking"),
            context_length=40960,
            family="qwen3",
            num_ctx=16384,
        ),
        ModelSpec("all-minilm", ("embedding",)),
    ]
    with FakeOllama(models=models) as fake:
        status, body, _ = _call(fake.url + "/api/tags")
        tags = orjson.loads(body)["models"]
        assert [m["name"] for m in tags] == ["qwen3:8b", "all-minilm:latest"]
        assert set(tags[0]) == {"name", "model", "modified_at", "size", "digest", "details"}
        show = orjson.loads(_call(fake.url + "/api/show", {"model": "qwen3:8b"})[1])
        assert show["capabilities"] == ["completion", "tools", "thinking"]
        assert show["model_info"]["qwen3.context_length"] == 40960
        assert show["parameters"].splitlines()[0].split() == ["num_ctx", "16384"]
        assert orjson.loads(_call(fake.url + "/api/ps")[1]) == {"models": []}
        hi = [{"role": "user", "content": "hi"}]
        status, body, headers = _call(fake.url + "/api/chat", {"model": "qwen3:8b", "messages": hi})
        assert headers["Content-Type"] == "application/x-ndjson"
        lines = [orjson.loads(line) for line in body.splitlines()]
        assert lines[-1]["done"] is True
        assert lines[-1]["done_reason"] == "stop"
        assert {"total_duration", "eval_count", "eval_duration", "prompt_eval_count"} <= set(lines[-1])
        (loaded,) = orjson.loads(_call(fake.url + "/api/ps")[1])["models"]
        assert loaded["name"] == "qwen3:8b"
        assert loaded["context_length"] == 16384
        assert orjson.loads(_call(fake.url + "/api/version")[1]) == {"version": "0.12.6"}
        status, body, _ = _call(fake.url + "/api/embed", {"model": "qwen3:8b", "input": "x"})
        assert (status, orjson.loads(body)) == (400, {"error": '"qwen3:8b" does not support embeddings'})
        status, body, _ = _call(fake.url + "/api/show", {"model": "nope"})
        assert (status, orjson.loads(body)) == (
            404,
            {"error": 'model "nope" not found, try pulling it first'},
        )


def test_ollama_load_requests_answer_as_ollama_does() -> None:
    """A load request (a warm-up): ``/api/generate`` without a prompt, or ``/api/chat`` with no messages,
    loads the model and answers one JSON object (stream or not), as Ollama's handlers do; ``keep_alive``
    0 unloads it; an embedding-only model cannot generate; the keep_alive each request set is kept."""
    models = [
        ModelSpec("qwen3:8b", ("completion", "tools"), num_ctx=8192),
        ModelSpec("all-minilm", ("embedding",)),
    ]
    with FakeOllama(models=models) as fake:
        load = {"model": "qwen3:8b", "keep_alive": -1, "options": {"num_ctx": 4096}}
        status, body, headers = _call(fake.url + "/api/generate", load)
        answer = orjson.loads(body)
        assert status == 200
        assert headers["Content-Type"].startswith("application/json")
        assert set(answer) == {"model", "created_at", "response", "done", "done_reason"}
        assert (answer["model"], answer["response"], answer["done"], answer["done_reason"]) == (
            "qwen3:8b",
            "",
            True,
            "load",
        )
        assert fake.loaded() == {"qwen3:8b": 4096}
        assert fake.keep_alive == {"qwen3:8b": -1}
        unload = orjson.loads(_call(fake.url + "/api/generate", {"model": "qwen3:8b", "keep_alive": 0})[1])
        assert unload["done_reason"] == "unload"
        assert fake.loaded() == {}
        chat = orjson.loads(_call(fake.url + "/api/chat", {"model": "qwen3:8b", "messages": []})[1])
        assert chat["message"] == {"role": "assistant", "content": ""}
        assert (chat["done"], chat["done_reason"]) == (True, "load")
        assert fake.loaded() == {"qwen3:8b": 8192}  # the Modelfile's num_ctx
        assert fake.keep_alive == {"qwen3:8b": None}  # none named: Ollama's default timer
        status, body, _ = _call(fake.url + "/api/generate", {"model": "all-minilm"})
        assert (status, orjson.loads(body)) == (400, {"error": '"all-minilm" does not support generate'})
        status, body, _ = _call(
            fake.url + "/api/generate", {"model": "qwen3:8b", "prompt": "hi", "stream": False}
        )
        done = orjson.loads(body)
        assert (status, done["done_reason"], bool(done["response"])) == (200, "stop", True)


def test_the_official_ollama_client_loads_and_unloads_through_the_fake() -> None:
    """What Ollama's own client documents for loading a model (an empty prompt, or no messages, with
    ``keep_alive``) is parsed by it from the fake's answers."""
    import ollama

    with FakeOllama(models=[ModelSpec("qwen3:8b")]) as fake:
        client = ollama.Client(host=fake.url)
        loaded = client.generate(model="qwen3:8b", prompt="", keep_alive=-1)
        assert (loaded.done, loaded.done_reason, loaded.response) == (True, "load", "")
        assert fake.loaded() == {"qwen3:8b": 4096}
        assert fake.keep_alive == {"qwen3:8b": -1}
        unloaded = client.generate(model="qwen3:8b", keep_alive=0)
        assert unloaded.done_reason == "unload"
        assert fake.loaded() == {}
        chat = client.chat(model="qwen3:8b", messages=[], keep_alive="30m")
        assert (chat.done_reason, chat.message.role, chat.message.content) == ("load", "assistant", "")
        assert fake.keep_alive == {"qwen3:8b": "30m"}


def test_reply_settings() -> None:
    with FakeOllama(reply=Reply(text="a b c d", chunks=2, chunk_delay_s=0.01)) as fake:
        hi = [{"role": "user", "content": "hi"}]
        body = _call(fake.url + "/api/chat", {"model": "llama3.2:3b", "messages": hi})[1]
        contents = [orjson.loads(line)["message"]["content"] for line in body.splitlines()]
        assert contents == ["a b ", "c d", ""]


def test_out_of_process_fake_prints_its_url_and_takes_faults() -> None:
    with FakeProcess("openai", "--api-key", "sk-p", "--reply", "pong") as fake:
        assert fake.url.startswith("http://127.0.0.1:")
        auth = {"Authorization": "Bearer sk-p"}
        body = _call(fake.base_url + "/chat/completions", HI, auth)[1]
        assert orjson.loads(body)["choices"][0]["message"]["content"] == "pong"
        fake.set_fault(Fault.http_status(503, "busy"), times=1)
        assert _call(fake.base_url + "/chat/completions", HI, auth)[0] == 503
        assert _call(fake.base_url + "/chat/completions", HI, auth)[0] == 200
        seen = fake.requests()
        assert [r["headers"]["authorization"] for r in seen] == ["Bearer sk-p"] * 3
        fake.clear_requests()
        assert fake.requests() == []
        port = int(fake.url.rsplit(":", 1)[1])
    assert _refused(port)


def test_every_fault_kind_has_a_constructor() -> None:
    built = {
        Fault.hang().kind,
        Fault.hold(threading.Event()).kind,
        Fault.slow_first_byte(1).kind,
        Fault.http_status(500).kind,
        Fault.disconnect().kind,
        Fault.cut_stream(1).kind,
        Fault.truncate(1).kind,
        Fault.unfinished(1).kind,
        Fault.malformed().kind,
        Fault.stream_error().kind,
        Fault.endless().kind,
        Fault.recorded(b"{}").kind,
        Fault.stall(1).kind,
        Fault.trickle(0.01).kind,
    }
    assert built == set(FaultKind)


def test_an_endless_body_keeps_coming_until_the_client_leaves() -> None:
    with FakeOpenAI() as fake:
        fake.set_fault(Fault.endless())
        conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
        conn.request("POST", "/v1/chat/completions", orjson.dumps(HI), {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert (response.status, response.getheader("transfer-encoding")) == (200, "chunked")
        head = response.read(4 * 1024 * 1024)  # far more than any answer: it is still coming
        assert head.startswith(b'{"endless": "xxxx')
        assert len(head) == 4 * 1024 * 1024
        conn.close()
        fake.set_fault(Fault.endless(after_chunks=2))
        status, body, _ = _call_prefix(fake.url + "/v1/chat/completions", {**HI, "stream": True}, 256 * 1024)
        frames = body.split(b"\n\n")
        assert status == 200
        assert frames[0].startswith(b"data: {")
        assert frames[1].startswith(b"data: {")
        assert frames[2].startswith(b'data: {"endless": "xxxx')


def _call_prefix(url: str, body: Any, size: int) -> tuple[int, bytes, Any]:
    """The status and the first ``size`` bytes of an answer, then the connection is dropped."""
    request = urllib.request.Request(url, data=orjson.dumps(body), method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.read(size), response.headers


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
                "note": {"type": "string"},
            },
            "required": ["city", "unit", "days"],
        },
    },
}


def test_ollama_fake_calls_a_tool_with_the_arguments_its_schema_implies() -> None:
    with FakeOllama() as fake:
        body = {
            "model": "llama3.2:3b",
            "messages": [{"role": "user", "content": "weather?"}],
            "tools": [WEATHER_TOOL],
            "stream": False,
        }
        (call,) = orjson.loads(_call(fake.url + "/api/chat", body)[1])["message"]["tool_calls"]
        assert call == {
            "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 1}}
        }


def test_ollama_fake_answers_scripted_tool_calls_for_the_tools_offered() -> None:
    script: tuple[tuple[str, dict[str, str]], ...] = (
        ("get_time", {"zone": "CET"}),
        ("get_weather", {"city": "Oslo"}),
        ("not_offered", {}),
    )
    clock = {"type": "function", "function": {"name": "get_time"}}
    with FakeOllama(reply=Reply(tool_calls=script)) as fake:
        body = {
            "model": "llama3.2:3b",
            "messages": [{"role": "user", "content": "weather?"}],
            "tools": [WEATHER_TOOL, clock],
        }
        lines = [orjson.loads(line) for line in _call(fake.url + "/api/chat", body)[1].splitlines()]
        assert [c["function"] for c in lines[0]["message"]["tool_calls"]] == [
            {"name": "get_time", "arguments": {"zone": "CET"}},
            {"name": "get_weather", "arguments": {"city": "Oslo"}},
        ]


def test_openai_fake_honours_n_and_token_array_embeddings() -> None:
    with FakeOpenAI() as fake:
        answer = orjson.loads(_call(fake.base_url + "/chat/completions", {**HI, "n": 3})[1])
        assert [c["index"] for c in answer["choices"]] == [0, 1, 2]
        assert answer["usage"]["completion_tokens"] == 3 * 5  # "Hello from <name>, model m." each
        body = _call(fake.base_url + "/chat/completions", {**HI, "n": 2, "stream": True})[1]
        events = [orjson.loads(line[6:]) for line in body.split(b"\n\n") if line.startswith(b"data: {")]
        finished = [c["choices"][0]["index"] for c in events if c["choices"][0]["finish_reason"]]
        assert finished == [0, 1]
        status, body, _ = _call(fake.base_url + "/chat/completions", {**HI, "n": 0})
        assert status == 400
        for tokens, count in (([1, 2, 3], 1), ([[1, 2], [3]], 2)):
            answer = orjson.loads(_call(fake.base_url + "/embeddings", {"model": "e", "input": tokens})[1])
            assert len(answer["data"]) == count
            assert answer["usage"]["prompt_tokens"] == 3
        status, _, _ = _call(fake.base_url + "/embeddings", {"model": "e", "input": [[1], "a"]})
        assert status == 400


def test_a_strict_openai_fake_refuses_fields_openai_does_not_define() -> None:
    with FakeOpenAI(strict=True) as fake:
        status, body, _ = _call(fake.base_url + "/chat/completions", {**HI, "top_k": 5})
        assert (status, orjson.loads(body)["error"]["message"]) == (
            400,
            "Unrecognized request argument supplied: top_k",
        )
        status, _, _ = _call(fake.base_url + "/embeddings", {"model": "e", "input": "a", "keep_alive": "5m"})
        assert status == 400
        assert _call(fake.base_url + "/chat/completions", {**HI, "n": 2, "store": True})[0] == 200


SCRIPT: tuple[tuple[str, dict[str, str]], ...] = (
    ("get_time", {"zone": "CET"}),
    ("get_weather", {"city": "Oslo"}),
    ("not_offered", {}),
)
CLOCK = {"type": "function", "function": {"name": "get_time"}}


def test_openai_fake_answers_scripted_tool_calls_whole_and_streamed() -> None:
    with FakeOpenAI(reply=Reply(tool_calls=SCRIPT)) as fake:
        body = {**HI, "tools": [WEATHER_TOOL, CLOCK]}
        message = orjson.loads(_call(fake.base_url + "/chat/completions", body)[1])["choices"][0]["message"]
        assert [
            (c["function"]["name"], orjson.loads(c["function"]["arguments"])) for c in message["tool_calls"]
        ] == [
            ("get_time", {"zone": "CET"}),
            ("get_weather", {"city": "Oslo"}),
        ]
        raw = _call(fake.base_url + "/chat/completions", {**body, "stream": True})[1]
        chunks = [orjson.loads(line[6:]) for line in raw.split(b"\n\n") if line.startswith(b"data: {")]
        calls: dict[int, dict[str, str]] = {}
        for chunk in chunks:
            for delta in chunk["choices"][0]["delta"].get("tool_calls", ()):
                call = calls.setdefault(delta["index"], {"name": "", "arguments": ""})
                call["name"] += delta["function"].get("name", "")
                call["arguments"] += delta["function"]["arguments"]
        assert [(c["name"], orjson.loads(c["arguments"])) for c in calls.values()] == [
            ("get_time", {"zone": "CET"}),
            ("get_weather", {"city": "Oslo"}),
        ]
        after = {
            **body,
            "messages": [*HI["messages"], {"role": "tool", "tool_call_id": "x", "content": "ok"}],
        }
        answer = orjson.loads(_call(fake.base_url + "/chat/completions", after)[1])
        assert answer["choices"][0]["message"]["content"].startswith("Hello from")


ANTHROPIC_TOOLS = [
    {"name": "get_weather", "input_schema": WEATHER_TOOL["function"]["parameters"]},  # type: ignore[index]
    {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
]
ANTHROPIC = {"anthropic-version": "2023-06-01"}


def test_anthropic_fake_calls_tools_as_scripted_or_implied() -> None:
    body = {"model": "c", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    with FakeAnthropic() as implied, FakeAnthropic(reply=Reply(tool_calls=SCRIPT)) as scripted:
        answer = orjson.loads(
            _call(implied.url + "/v1/messages", {**body, "tools": ANTHROPIC_TOOLS}, ANTHROPIC)[1]
        )
        assert [(b["name"], b["input"]) for b in answer["content"]] == [
            ("get_weather", {"city": "Paris", "unit": "celsius", "days": 1})
        ]
        assert answer["stop_reason"] == "tool_use"
        streamed = {**body, "tools": ANTHROPIC_TOOLS, "stream": True}
        raw = _call(scripted.url + "/v1/messages", streamed, ANTHROPIC)[1]
        events = [orjson.loads(line[6:]) for line in raw.splitlines() if line.startswith(b"data: ")]
        names = [e["content_block"]["name"] for e in events if e["type"] == "content_block_start"]
        inputs: dict[int, str] = {}
        for event in events:
            if event["type"] == "content_block_delta":
                inputs[event["index"]] = inputs.get(event["index"], "") + event["delta"]["partial_json"]
        assert names == ["get_time", "get_weather"]
        assert [orjson.loads(text) for text in inputs.values()] == [{"zone": "CET"}, {"city": "Oslo"}]
        result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "ok"}]}
        after = {**body, "tools": ANTHROPIC_TOOLS, "messages": [*body["messages"], result]}  # type: ignore[list-item]
        answer = orjson.loads(_call(scripted.url + "/v1/messages", after, ANTHROPIC)[1])
        assert answer["content"][0]["type"] == "text"


def test_anthropic_fake_words_a_misplaced_system_turn_as_anthropic_does() -> None:
    system = {"role": "system", "content": "be brief"}
    body = {"model": "c", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}, system]}
    with FakeAnthropic() as fake:
        status, raw, _ = _call(fake.url + "/v1/messages", body, ANTHROPIC)
        assert status == 400
        assert 'Unexpected role "system"' in orjson.loads(raw)["error"]["message"]
        beta = {**ANTHROPIC, "anthropic-beta": "claude-code-20250219,mid-conversation-system-2026-04-07"}
        assert _call(fake.url + "/v1/messages", body, beta)[0] == 200


def test_anthropic_fake_runs_out_of_process_with_scripted_calls() -> None:
    args = ("--api-key", "sk-a", "--reply", "pong", "--tool-call", 'get_time={"zone": "UTC"}')
    with FakeProcess("anthropic", *args) as fake:
        headers = {**ANTHROPIC, "x-api-key": "sk-a"}
        body = {"model": "c", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
        answer = orjson.loads(_call(fake.base_url + "/v1/messages", body, headers)[1])
        assert answer["content"] == [{"type": "text", "text": "pong"}]
        answer = orjson.loads(
            _call(fake.base_url + "/v1/messages", {**body, "tools": ANTHROPIC_TOOLS}, headers)[1]
        )
        assert [(b["name"], b["input"]) for b in answer["content"]] == [("get_time", {"zone": "UTC"})]
        assert _call(fake.base_url + "/v1/messages", body, ANTHROPIC)[0] == 401
