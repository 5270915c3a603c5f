"""OpenAIAdapter against the fake OpenAI upstream on loopback: answers, streams, faults, credentials."""

from __future__ import annotations

import asyncio
import copy
import re
import time
from email.utils import formatdate

import pytest

from interlock.runtime.base.errors import (
    ClientError,
    ConnectFailed,
    ConnectTimeout,
    FirstByteTimeout,
    MalformedResponse,
    ProtocolFailure,
    RateLimited,
    ServerError,
    TotalTimeout,
    UpstreamError,
)
from interlock.testing.blackhole import SaturatedListener
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from interlock.testing.replies import Reply

from .helpers import API_KEY, chat, embed, endpoint, probe, stream, text_of

HI = {"model": "my-alias", "messages": [{"role": "user", "content": "hello there"}]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def test_chat_replaces_model_and_sends_the_endpoints_headers(openai_fake: FakeOpenAI) -> None:
    body = {**HI, "temperature": 0.2, "stream": False, "stream_options": {"include_usage": True}}
    before = copy.deepcopy(body)
    answer = chat(endpoint("openai", openai_fake.base_url), "llama-3.1-8b", body)
    assert answer["choices"][0]["message"]["content"] == "Hello from groq-fake, model llama-3.1-8b."
    assert answer["usage"] == {"prompt_tokens": 2, "completion_tokens": 5, "total_tokens": 7}
    assert body == before  # the caller's body is not mutated
    (sent,) = openai_fake.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body == {"model": "llama-3.1-8b", "messages": HI["messages"], "temperature": 0.2}
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.headers["content-type"] == "application/json"


def test_a_base_url_with_a_trailing_slash_gets_no_double_slash(openai_fake: FakeOpenAI) -> None:
    embed(endpoint("openai", openai_fake.base_url + "/"), "e1", {"input": "hi"})
    probe(endpoint("openai", openai_fake.base_url + "/"))
    assert [r.path for r in openai_fake.requests] == ["/v1/embeddings", "/v1/models"]


def test_stream_yields_role_first_then_content_then_finish_and_usage(openai_fake: FakeOpenAI) -> None:
    body = {**HI, "stream_options": {"include_usage": True}}
    chunks, error = stream(endpoint("openai", openai_fake.base_url), "m1", body)
    assert error is None
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert text_of(chunks) == "Hello from groq-fake, model m1."
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 2, "completion_tokens": 5, "total_tokens": 7}
    assert openai_fake.requests[0].body["stream"] is True


def test_tools_non_stream_and_stream(openai_fake: FakeOpenAI) -> None:
    ep = endpoint("openai", openai_fake.base_url)
    answer = chat(ep, "m1", {**HI, "tools": TOOLS})
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (call,) = choice["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    chunks, error = stream(ep, "m1", {**HI, "tools": TOOLS})
    assert error is None
    deltas = [c["choices"][0]["delta"] for c in chunks]
    arguments = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas if "tool_calls" in d)
    assert arguments == '{"city":"Paris"}'
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_length_finish_reason_passes_through(openai_fake: FakeOpenAI) -> None:
    answer = chat(endpoint("openai", openai_fake.base_url), "m1", {**HI, "max_tokens": 2})
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["choices"][0]["message"]["content"] == "Hello from "


def test_embeddings_floats_and_base64(openai_fake: FakeOpenAI) -> None:
    ep = endpoint("openai", openai_fake.base_url)
    floats = embed(ep, "text-embedding-3-small", {"model": "emb", "input": ["a", "b"]})
    assert [d["index"] for d in floats["data"]] == [0, 1]
    assert len(floats["data"][0]["embedding"]) == 8
    encoded = embed(ep, "text-embedding-3-small", {"input": "a", "encoding_format": "base64"})
    assert isinstance(encoded["data"][0]["embedding"], str)
    assert openai_fake.requests[-1].body["model"] == "text-embedding-3-small"


def test_probe_lists_models(openai_fake: FakeOpenAI) -> None:
    probe(endpoint("openai", openai_fake.base_url))
    assert openai_fake.requests[0].method == "GET"
    assert openai_fake.requests[0].path == "/v1/models"


def test_refused_connection_is_connect_failed() -> None:
    with FakeOpenAI() as fake:
        ep = endpoint("openai", fake.base_url)
        fake.refuse_connections()
        with pytest.raises(ConnectFailed, match=r"^connection refused or unreachable$"):
            chat(ep, "m1", HI)
        with pytest.raises(ConnectFailed):
            probe(ep)
        fake.accept_connections()
        assert chat(ep, "m1", HI)["choices"][0]["finish_reason"] == "stop"


def test_connect_that_never_completes_is_connect_timeout() -> None:
    with SaturatedListener() as url:
        ep = endpoint("openai", f"{url}/v1", connect_s=0.3, first_byte_s=5)
        # the class proves which deadline fired: first_byte (5 s) would be FirstByteTimeout
        with pytest.raises(ConnectTimeout, match=r"^connect timed out$"):
            chat(ep, "m1", HI)


@pytest.mark.parametrize("streaming", [False, True])
def test_primary_that_never_answers_fails_after_first_byte_timeout(
    openai_fake: FakeOpenAI, streaming: bool
) -> None:
    openai_fake.set_fault(Fault.hang())
    ep = endpoint("openai", openai_fake.base_url, first_byte_s=0.3, total_s=30)
    # the message names the 0.3 s first-byte deadline; the 30 s total one would be TotalTimeout
    with pytest.raises(FirstByteTimeout, match=r"^no answer within 0\.3 s$"):
        stream(ep, "m1", HI) if streaming else chat(ep, "m1", HI)


def test_slow_first_byte_within_and_past_the_deadline(openai_fake: FakeOpenAI) -> None:
    # each side of the deadline by far: the fake's thread and this one share a busy CPU
    openai_fake.set_fault(Fault.slow_first_byte(0.2))
    assert chat(endpoint("openai", openai_fake.base_url, first_byte_s=30), "m1", HI)["choices"]
    openai_fake.set_fault(Fault.slow_first_byte(60))
    with pytest.raises(FirstByteTimeout):
        stream(endpoint("openai", openai_fake.base_url, first_byte_s=0.2), "m1", HI)


def test_total_deadline_covers_the_whole_stream() -> None:
    words = " ".join(["word"] * 600)  # 90 s of chunks: the 2 s deadline falls well inside the stream
    with FakeOpenAI(reply=Reply(text=words, chunk_delay_s=0.15)) as fake:
        ep = endpoint("openai", fake.base_url, key=None, first_byte_s=2, total_s=2)
        chunks, error = stream(ep, "m1", HI)
    assert isinstance(error, TotalTimeout)
    assert error.message == "exchange exceeded 2 s"
    assert 1 <= len(chunks) < 600


def test_total_deadline_holds_for_a_stream_read_late() -> None:
    """Past ``total_s`` the next read fails, even when the upstream's chunks already arrived."""
    from interlock.runtime.net.client import UpstreamClient
    from interlock.runtime.upstream.base import adapter_for

    from .helpers import run

    async def go(base_url: str) -> tuple[str, UpstreamError]:
        async with UpstreamClient.create() as client:
            ep = endpoint("openai", base_url, key=None, first_byte_s=2, total_s=2)
            upstream = await adapter_for("openai", client).chat_stream(ep, "m1", HI)
            try:
                first = await upstream.__aiter__().__anext__()
                await asyncio.sleep(2.1)  # past total_s; the fake is done after ~0.1 s: the rest waits unread
                with pytest.raises(TotalTimeout) as info:
                    async for _ in upstream:
                        pass
            finally:
                await upstream.aclose()
            return first["choices"][0]["delta"]["role"], info.value

    with FakeOpenAI(reply=Reply(text="one two three four", chunk_delay_s=0.02)) as fake:
        role, error = run(go(fake.base_url))
    assert (role, error.message) == ("assistant", "exchange exceeded 2 s")


@pytest.mark.parametrize("status", [500, 502, 503, 520])
def test_server_errors(openai_fake: FakeOpenAI, status: int) -> None:
    openai_fake.set_fault(Fault.http_status(status))
    with pytest.raises(ServerError, match=rf"^upstream server error \(HTTP {status}\)$") as info:
        chat(endpoint("openai", openai_fake.base_url), "m1", HI)
    assert info.value.status == status


def test_cloudflare_style_html_5xx_is_a_server_error(openai_fake: FakeOpenAI) -> None:
    openai_fake.set_fault(Fault.http_status(520, body=b"<html>error code: 520</html>"))
    with pytest.raises(ServerError, match=r"^upstream server error \(HTTP 520\)$"):
        stream(endpoint("openai", openai_fake.base_url), "m1", HI)


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        (Fault.rate_limited("7"), 7.0),
        (Fault.rate_limited("7", retry_after_ms="1500"), 1.5),
        (Fault.rate_limited(None), None),
    ],
)
def test_rate_limited_carries_retry_after(
    openai_fake: FakeOpenAI, fault: Fault, expected: float | None
) -> None:
    openai_fake.set_fault(fault)
    with pytest.raises(RateLimited, match=r"^rate limited \(HTTP 429\)$") as info:
        chat(endpoint("openai", openai_fake.base_url), "m1", HI)
    assert info.value.retry_after == expected
    assert info.value.status == 429


def test_rate_limited_retry_after_as_http_date(openai_fake: FakeOpenAI) -> None:
    openai_fake.set_fault(Fault.rate_limited(formatdate(time.time() + 30, usegmt=True)))
    with pytest.raises(RateLimited) as info:
        stream(endpoint("openai", openai_fake.base_url), "m1", HI)
    assert info.value.retry_after is not None
    assert 25 <= info.value.retry_after <= 31


def test_cut_stream_raises_protocol_failure_after_the_chunks_that_arrived(openai_fake: FakeOpenAI) -> None:
    openai_fake.set_fault(Fault.cut_stream(after_chunks=3))
    chunks, error = stream(endpoint("openai", openai_fake.base_url), "m1", HI)
    assert isinstance(error, ProtocolFailure)
    assert len(chunks) == 3
    assert text_of(chunks) == "Hello from "


def test_cut_json_body_is_protocol_failure(openai_fake: FakeOpenAI) -> None:
    openai_fake.set_fault(Fault.cut_stream(after_chunks=0))
    with pytest.raises(ProtocolFailure, match=r"^response body cut short$"):
        chat(endpoint("openai", openai_fake.base_url), "m1", HI)


def test_stream_ending_without_done_or_finish_is_protocol_failure(openai_fake: FakeOpenAI) -> None:
    openai_fake.set_fault(Fault.truncate(after_chunks=2))
    chunks, error = stream(endpoint("openai", openai_fake.base_url), "m1", HI)
    assert len(chunks) == 2
    assert isinstance(error, ProtocolFailure)
    assert error.message == "stream ended before its last chunk"


def test_disconnect_without_answer_is_protocol_failure(openai_fake: FakeOpenAI) -> None:
    openai_fake.set_fault(Fault.disconnect())
    with pytest.raises(ProtocolFailure, match=r"^server disconnected$"):
        chat(endpoint("openai", openai_fake.base_url), "m1", HI)


def test_malformed_body_and_malformed_chunk(openai_fake: FakeOpenAI) -> None:
    ep = endpoint("openai", openai_fake.base_url)
    openai_fake.set_fault(Fault.malformed())
    with pytest.raises(MalformedResponse, match=r"^response is not valid JSON \(.+\)$"):
        chat(ep, "m1", HI)
    with pytest.raises(MalformedResponse, match=r"^stream chunk is not valid JSON \(.+\)$"):
        stream(ep, "m1", HI)
    openai_fake.set_fault(Fault.malformed(after_chunks=2))
    chunks, error = stream(ep, "m1", HI)
    assert len(chunks) == 2
    assert isinstance(error, MalformedResponse)


@pytest.mark.parametrize("call", ["chat", "probe"])
def test_a_2xx_answer_that_is_json_but_no_object_is_refused_in_the_one_wording(
    openai_fake: FakeOpenAI, call: str
) -> None:
    ep = endpoint("openai", openai_fake.base_url)
    openai_fake.set_fault(Fault.http_status(200, body=b"[1, 2]"))
    ask = (lambda: chat(ep, "m1", HI)) if call == "chat" else (lambda: probe(ep))
    with pytest.raises(MalformedResponse, match=r"^response must be a JSON object, not an array$"):
        ask()


def test_error_event_in_stream_after_chunks(openai_fake: FakeOpenAI) -> None:
    openai_fake.set_fault(Fault.stream_error("model crashed", after_chunks=2))
    chunks, error = stream(endpoint("openai", openai_fake.base_url), "m1", HI)
    assert len(chunks) == 2
    assert isinstance(error, ServerError)
    assert error.message == "upstream reported an error in its response"


@pytest.mark.parametrize("status", [400, 403, 404, 422])
def test_client_errors_carry_the_upstreams_own_message(openai_fake: FakeOpenAI, status: int) -> None:
    openai_fake.set_fault(Fault.http_status(status, f"bad thing {status}: messages[0].content is required"))
    with pytest.raises(
        ClientError, match=rf"^bad thing {status}: messages\[0\]\.content is required$"
    ) as info:
        chat(endpoint("openai", openai_fake.base_url), "m1", HI)
    assert info.value.status == status


def test_unknown_model_is_client_error_404() -> None:
    with FakeOpenAI(models=["gpt-4o-mini"]) as fake, pytest.raises(ClientError) as info:
        chat(endpoint("openai", fake.base_url, key=None), "gpt-5-typo", HI)
    assert info.value.status == 404
    assert info.value.message == "The model `gpt-5-typo` does not exist or you do not have access to it."


def test_wrong_key_is_401_and_the_echoed_key_is_masked(openai_fake: FakeOpenAI) -> None:
    wrong = "sk-other-provider-key-9d2f"
    ep = endpoint("openai", openai_fake.base_url, key=wrong)
    with pytest.raises(ClientError, match=r"^Incorrect API key provided: \[redacted\]\.$") as info:
        chat(ep, "m1", HI)
    assert info.value.status == 401
    assert openai_fake.requests[0].headers["authorization"] == f"Bearer {wrong}"
    with pytest.raises(ClientError, match=r"^Incorrect API key provided: \[redacted\]\.$"):
        probe(ep)


def test_endpoint_without_key_sends_no_authorization(openai_fake: FakeOpenAI) -> None:
    with pytest.raises(ClientError, match=r"^Incorrect API key provided: \(none\)\.$"):
        chat(endpoint("openai", openai_fake.base_url, key=None), "m1", HI)
    assert "authorization" not in openai_fake.requests[0].headers


@pytest.mark.parametrize(
    "fault",
    [
        Fault.http_status(500, f"internal error, key {API_KEY}"),
        Fault.http_status(400, f"you sent Bearer {API_KEY}"),
        Fault.rate_limited("1", message=f"slow down {API_KEY}"),
        Fault.stream_error(f"crash {API_KEY}"),
        Fault.malformed(),
        Fault.cut_stream(1),
    ],
)
def test_error_messages_never_hold_the_credential(openai_fake: FakeOpenAI, fault: Fault) -> None:
    openai_fake.set_fault(fault)
    ep = endpoint("openai", openai_fake.base_url)
    errors: list[UpstreamError] = []
    try:
        chat(ep, "m1", HI)
    except UpstreamError as exc:
        errors.append(exc)
    try:
        _, error = stream(ep, "m1", HI)
    except UpstreamError as exc:
        error = exc
    if error is not None:
        errors.append(error)
    assert len(errors) == 2
    for error in errors:
        assert API_KEY not in str(error)
        assert API_KEY not in repr(error.args)


def test_aclose_is_idempotent_and_ends_the_iteration(openai_fake: FakeOpenAI) -> None:
    from interlock.runtime.net.client import UpstreamClient
    from interlock.runtime.upstream.base import adapter_for

    from .helpers import run

    async def go() -> list[str]:
        async with UpstreamClient.create() as client:
            adapter = adapter_for("openai", client)
            ep = endpoint("openai", openai_fake.base_url)
            upstream = await adapter.chat_stream(ep, "m1", HI)
            first = await upstream.__aiter__().__anext__()
            await upstream.aclose()
            await upstream.aclose()
            rest = [chunk async for chunk in upstream]
            answer = await adapter.chat(ep, "m1", HI)
            return [
                first["choices"][0]["delta"]["role"],
                str(len(rest)),
                answer["choices"][0]["finish_reason"],
            ]

    assert run(go()) == ["assistant", "0", "stop"]


def test_streams_and_answers_reuse_one_keep_alive_connection() -> None:
    from interlock.runtime.net.client import UpstreamClient
    from interlock.runtime.upstream.base import adapter_for

    from .helpers import run

    with FakeOpenAI(reply=Reply(text="a b c d", chunk_delay_s=0.01)) as fake:

        async def go() -> list[str]:
            async with UpstreamClient.create() as client:
                adapter = adapter_for("openai", client)
                ep = endpoint("openai", fake.base_url, key=None)
                texts = []
                for _ in range(5):
                    upstream = await adapter.chat_stream(ep, "m1", HI)
                    texts.append(text_of([chunk async for chunk in upstream]))
                    answer = await adapter.chat(ep, "m1", HI)
                    texts.append(answer["choices"][0]["message"]["content"])
                return texts

        assert run(go()) == ["a b c d"] * 10
        # A stream whose last bytes are still in flight hands its connection back from a background
        # drain, so the very next request may open a second one; never one per request.
        assert fake.connections_opened <= 2


# -- sizes: an upstream cannot make the gateway read without bound (issue 7, item 2) -------------------


def test_an_endless_json_body_is_cut_at_the_limit(openai_fake: FakeOpenAI) -> None:
    ep = endpoint("openai", openai_fake.base_url, max_body_bytes=256 * 1024)
    openai_fake.set_fault(Fault.endless())
    with pytest.raises(ProtocolFailure, match=r"^answer is over the 262144-byte limit$"):
        chat(ep, "m1", HI)


def test_a_declared_body_over_the_limit_is_refused_before_reading(openai_fake: FakeOpenAI) -> None:
    ep = endpoint("openai", openai_fake.base_url, max_body_bytes=64)
    with pytest.raises(ProtocolFailure, match=r"^answer of \d+ bytes is over the 64-byte limit$"):
        chat(ep, "m1", HI)
    assert chat(endpoint("openai", openai_fake.base_url), "m1", HI)["choices"]  # the default fits


def test_an_endless_stream_line_fails_before_or_after_the_first_chunk(openai_fake: FakeOpenAI) -> None:
    ep = endpoint("openai", openai_fake.base_url, max_line_bytes=64 * 1024)
    openai_fake.set_fault(Fault.endless())
    with pytest.raises(ProtocolFailure, match=r"^stream line is over the 65536-byte limit$"):
        stream(ep, "m1", HI)
    openai_fake.set_fault(Fault.endless(after_chunks=2))
    chunks, error = stream(ep, "m1", HI)
    assert len(chunks) == 2
    assert isinstance(error, ProtocolFailure)
    assert error.message == "stream line is over the 65536-byte limit"


def test_an_event_of_endless_data_lines_is_held_to_the_line_limit() -> None:
    from collections import deque

    from interlock.runtime.wire.openai_chat import SSEDecoder

    decoder = SSEDecoder(endpoint("openai", "http://127.0.0.1:9", max_line_bytes=1000))
    out: deque[dict[str, object]] = deque()
    for _ in range(90):  # each line is short (11 bytes of data), and the event does not end
        decoder.feed(b"data: " + b"x" * 10, out)
    with pytest.raises(ProtocolFailure, match=r"^stream event is over the 1000-byte limit$"):
        decoder.feed(b"data: " + b"x" * 10, out)
    decoder = SSEDecoder(endpoint("openai", "http://127.0.0.1:9", max_line_bytes=1000))
    for _ in range(200):  # the same amount, as events that do end: fine
        decoder.feed(b'data: {"choices": []}', out)
        decoder.feed(b"", out)
    assert len(out) == 200


def test_per_token_embeddings_are_pooled_by_their_mean() -> None:
    """llama.cpp's server answers some models with one vector per token (issue 22)."""
    from interlock.runtime.base.errors import MalformedResponse as Malformed
    from interlock.runtime.wire.openai_chat import pooled

    answer = {"data": [{"embedding": [[1.0, 2.0], [3.0, 6.0]]}, {"embedding": [0.5, 0.5]}]}
    assert pooled(answer)["data"] == [{"embedding": [2.0, 4.0]}, {"embedding": [0.5, 0.5]}]
    with pytest.raises(Malformed, match=r"^per-token embeddings of different lengths$"):
        pooled({"data": [{"embedding": [[1.0, 2.0], [3.0]]}]})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"choices": "none"}', "response's 'choices' is not a list of objects"),
        (b'{"choices": [1]}', "response's 'choices' is not a list of objects"),
        (b'{"choices": []}', "response's 'choices' hold no message"),
        (b'{"choices": [{"index": 0, "text": "hi"}]}', "response's 'choices' hold no message"),
    ],
)
def test_a_2xx_answer_in_the_wrong_shape_is_malformed(
    openai_fake: FakeOpenAI, body: bytes, message: str
) -> None:
    """Shape-broken, not only unparseable: an upstream failure the walk falls back from (issue 40)."""
    openai_fake.set_fault(Fault.http_status(200, body=body))
    with pytest.raises(MalformedResponse, match=f"^{re.escape(message)}$"):
        chat(endpoint("openai", openai_fake.base_url), "m1", HI)
