"""A coding agent's requests against a small local window (issue 29): counted as the server counts,
``max_tokens`` as a ceiling, the first-byte deadline stretched by the learned prefill.

The upstream is a fake llama-server that answers what the real one answered for the same requests (its
usage and timings, recorded in ``tests/fixtures/clients/answers/llama_server_counts.json``): SmolLM2-135M,
8,192 tokens a slot, declared so (``context_tokens: 8192``) as the docs recommend.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from interlock.commands.gateway import build_gateway
from interlock.runtime.app.gateway import Gateway
from interlock.runtime.books.estimate import Needs
from interlock.runtime.books.learned import STRETCH_STEP
from interlock.testing.fake_ollama import FakeOllama, ModelSpec
from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.runtime.conftest import build
from tests.waiting import until

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "clients"
COUNTS = orjson.loads((FIXTURES / "answers" / "llama_server_counts.json").read_bytes())["answers"]
CLAUDE = orjson.loads((FIXTURES / "claude-code-2.1.197_v1_messages.json").read_bytes())

CONFIG = """\
version: 1
server: {{default_alias: t/agent, alias_namespace: t/}}
preflight: {{max_tokens: {max_tokens}}}
providers:
  llama:
    kind: openai
    base_url: "{llama}"
    probe: false
    timeouts: {{connect: 1s, first_byte: {first_byte}, total: 120s}}
  big: {{kind: openai, base_url: "{big}", probe: false}}
  box:
    kind: ollama
    probe: false
    workers: [{{name: box1, url: "{box}", default_context_tokens: 2048}}]
models:
  llama/smol: {{context_tokens: 8192}}
  big/large: {{context_tokens: 131072}}
health: {{failure_threshold: 3, open_for: 60s}}
aliases:
  t/agent: {{description: the local model alone, chain: [llama/smol], retry: {{count: 0}}}}  # timeouts tested
  t/either: {{description: small first, chain: [llama/smol, big/large]}}
  t/ollama: {{description: a silently truncating worker, chain: [box/qwen3:8b]}}
"""
SAY_HI = {"messages": [{"role": "user", "content": "say hi"}], "max_tokens": 32000}


def _answer(usage: dict[str, Any], timings: dict[str, Any] | None) -> bytes:
    """A chat.completion as llama-server answers it: its usage and timings beside the message."""
    body: dict[str, Any] = {
        "id": "chatcmpl-recorded",
        "object": "chat.completion",
        "created": 1764626400,
        "model": "smol",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
        "usage": usage,
    }
    if timings is not None:
        body["timings"] = timings
    return orjson.dumps(body)


CLAUDE_CHAT: dict[str, Any] = next(
    a for a in COUNTS if a["recording"].startswith("claude-code") and a["sent"] == "/v1/chat/completions"
)


@pytest.fixture
def fakes() -> Iterator[tuple[FakeOpenAI, FakeOpenAI, FakeOllama]]:
    with (
        FakeOpenAI(name="llama") as llama,
        FakeOpenAI(name="big") as big,
        FakeOllama(name="box", models=(ModelSpec("qwen3:8b", ("completion", "tools")),)) as box,
    ):
        yield llama, big, box


def _gateway(
    plan_data: Callable[[str], dict[str, Any]],
    fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama],
    *,
    max_tokens: str = "ceiling",
    first_byte: str = "30s",
    state_dir: str | None = None,
) -> Gateway:
    llama, big, box = fakes
    text = CONFIG.format(
        llama=llama.base_url, big=big.base_url, box=box.url, max_tokens=max_tokens, first_byte=first_byte
    )
    return build_gateway(build(plan_data(text)), state_dir=state_dir)


Step = Callable[[httpx.AsyncClient], Any]


def _run(gateway: Gateway, steps: list[Step]) -> list[Any]:
    async def scenario() -> list[Any]:
        await gateway.startup()
        try:
            transport = httpx.ASGITransport(app=gateway)
            async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as http:
                return [await step(http) for step in steps]
        finally:
            await gateway.shutdown()

    return asyncio.run(scenario())


def _post(body: dict[str, Any], path: str = "/v1/chat/completions", **headers: str) -> Step:
    async def step(http: httpx.AsyncClient) -> httpx.Response:
        return await http.post(path, json=body, headers=headers)

    return step


def _sent(fake: FakeOpenAI, model: str) -> list[dict[str, Any]]:
    return [r.body for r in fake.requests if isinstance(r.body, dict) and r.body.get("model") == model]


def test_say_hi_with_claude_code_s_32000_is_answered_with_the_ceiling_that_fits(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    llama, _, _ = fakes
    (chat,) = _run(_gateway(plan_data, fakes), [_post({"model": "t/agent", **SAY_HI})])
    assert chat.status_code == 200, chat.text
    (sent,) = _sent(llama, "smol")
    assert 7000 < sent["max_tokens"] < 8192  # the window less the prompt, the margin on the whole
    assert chat.headers["x-interlock-max-tokens"] == (f"{sent['max_tokens']}; clamped-by=context")


def test_on_the_messages_surface_the_relayed_body_gets_the_ceiling_too(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    llama, _, _ = fakes
    body = {"model": "t/agent", **SAY_HI, "stream": False}
    (answer,) = _run(
        _gateway(plan_data, fakes), [_post(body, "/v1/messages", **{"anthropic-version": "2023-06-01"})]
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["type"] == "message"
    (sent,) = _sent(llama, "smol")
    assert sent["max_tokens"] < 8192
    assert answer.headers["x-interlock-max-tokens"] == f"{sent['max_tokens']}; clamped-by=context"


def test_strict_keeps_the_whole_max_tokens_as_a_need_and_the_refusal_says_what_to_change(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    llama, _, _ = fakes
    (refused,) = _run(
        _gateway(plan_data, fakes, max_tokens="strict"), [_post({"model": "t/agent", **SAY_HI})]
    )
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "context_length_exceeded"
    message = error["message"]
    assert "(an estimate, not the server's count:" in message
    assert "the largest context available is 8192 tokens in t/agent" in message
    assert "context 8192 (declared) on llama" in message
    assert "declare the model's real window (`context_tokens`)" in message
    assert "set `preflight.max_tokens: ceiling`" in message
    assert _sent(llama, "smol") == []


def test_a_candidate_the_whole_request_fits_is_preferred_and_the_small_one_comes_back_after(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    llama, big, _ = fakes
    gateway = _gateway(plan_data, fakes)
    first, second = _run(
        gateway,
        [
            _post({"model": "t/either", **SAY_HI}),
            _post({"model": "t/either", **SAY_HI, "messages": [{"role": "user", "content": "again"}]}),
        ],
    )
    assert first.status_code == 200
    assert first.headers["x-interlock-resolved"] == "big/large"  # the whole 32000 fits there
    assert "x-interlock-max-tokens" not in first.headers
    assert _sent(llama, "smol") == []
    big.set_fault(Fault.http_status(503))
    (third,) = _run(_gateway(plan_data, fakes), [_post({"model": "t/either", **SAY_HI})])
    assert third.status_code == 200, third.text
    assert third.headers["x-interlock-resolved"] == "llama/smol"  # come back to, with the ceiling
    assert "x-interlock-max-tokens" in third.headers
    assert second.status_code == 200


def test_claude_code_s_recorded_request_is_answered_and_then_counted_as_the_server_counted_it(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    """77 kB of Claude Code's system prompt and tools: 19,457 tokens by the estimate, 3,030 by the real
    server (its template drops the tools). The estimate alone never refuses it on a server that says
    "too long" itself; after the answer, the next such request is counted as the server counted it."""
    llama, _, _ = fakes
    llama.set_fault(Fault.recorded(_answer(CLAUDE_CHAT["usage"], CLAUDE_CHAT["timings"])))
    body = {**copy.deepcopy(CLAUDE["body"]), "model": "t/agent", "stream": False}
    headers = {
        k: v for k, v in CLAUDE["headers"].items() if k.lower() in ("anthropic-beta", "anthropic-version")
    }
    gateway = _gateway(plan_data, fakes)

    async def health(http: httpx.AsyncClient) -> dict[str, Any]:
        return dict((await http.get("/v1/health")).json())

    async def page(http: httpx.AsyncClient) -> str:
        return (await http.get("/ui/models")).text

    first, second, report, shown = _run(
        gateway,
        [_post(body, "/v1/messages", **headers), _post(body, "/v1/messages", **headers), health, page],
    )
    assert first.status_code == 200, first.text
    assert second.status_code == 200, second.text
    before, after = (sent["max_tokens"] for sent in _sent(llama, "smol"))
    # before any answer the prompt alone is over 8192 by the estimate: the limit fits its fewest plausible
    # tokens (a quarter of the estimate); once counted as the server counts, the window less ~3,030
    assert before < after < 8192 - 3030
    assert first.headers["x-interlock-max-tokens"] == f"{before}; clamped-by=context"
    assert second.headers["x-interlock-max-tokens"] == f"{after}; clamped-by=context"
    learned = report["learned"]["llama"]["smol"]
    assert learned["prompt_counts"]["samples"] == 1  # the second answer was predicted: not solved again
    counted = gateway.parts.services.learned.counts.prompt("llama", "smol", *_parts(gateway, body), 0.0)
    assert abs(counted / CLAUDE_CHAT["usage"]["prompt_tokens"] - 1) <= 0.15
    speed = CLAUDE_CHAT["timings"]["prompt_n"] / (CLAUDE_CHAT["timings"]["prompt_ms"] / 1000)
    assert learned["prompt_tokens_per_s"] == pytest.approx(speed, rel=0.01)
    assert f"{learned['prompt_tokens_per_s']} tokens/s" in shown  # the status page's models section
    assert "(from 1 answer)" in shown


def _parts(gateway: Gateway, body: dict[str, Any]) -> tuple[int, int]:
    from interlock.runtime.books.estimate import needs_of
    from interlock.runtime.surfaces.anthropic import Messages

    needs = needs_of(Messages().parse(copy.deepcopy(body)).body, "chat", gateway.plan.preflight)
    return needs.prompt_tokens - needs.schema_tokens, needs.schema_tokens


def test_a_silently_truncating_worker_is_refused_on_the_estimate_a_reporting_server_decides_itself(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    llama, _, box = fakes
    long = {"messages": [{"role": "user", "content": "word " * 10000}]}  # ~14k tokens by the estimate
    llama.set_fault(Fault.context_overflow("llama-server", 8192, 10003))
    ollama, reporting = _run(
        _gateway(plan_data, fakes),
        [_post({"model": "t/ollama", **long}), _post({"model": "t/agent", **long})],
    )
    assert ollama.status_code == 400
    assert "context 2048 (default) on box@box1" in ollama.json()["error"]["message"]
    assert "set the worker's `default_context_tokens`" in ollama.json()["error"]["message"]
    assert not any(r.path == "/api/chat" for r in box.requests)  # never sent: Ollama would truncate it
    assert reporting.status_code == 400
    assert reporting.json()["error"]["code"] == "context_length_exceeded"
    assert len(_sent(llama, "smol")) == 1  # the server was asked, and said it did not fit


def test_the_first_byte_deadline_covers_the_prefill_at_the_speed_learned_there(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    """``first_byte: 300ms``; the real server read 3,027 tokens at 38.8 tokens/s. Before anything is
    learned a call held past 300 ms times out; once that speed is learned, the next call's deadline is
    300 ms plus the prompt at that speed, and a call held as long is answered."""
    llama, _, _ = fakes
    prompt = {"messages": [{"role": "user", "content": "lorem ipsum dolor " * 400}]}  # ~2k tokens

    def held(http: httpx.AsyncClient) -> Any:
        async def step() -> httpx.Response:
            gate = threading.Event()
            llama.set_fault(Fault.hold(gate), times=1)
            seen = len(llama.requests)
            call = asyncio.ensure_future(
                http.post("/v1/chat/completions", json={"model": "t/agent", **prompt})
            )
            await until(lambda: len(llama.requests) > seen, "the fake to hold the call")
            await asyncio.sleep(0.9)
            gate.set()
            return await call

        return step()

    def taught(http: httpx.AsyncClient) -> Any:
        llama.set_fault(Fault.recorded(_answer(CLAUDE_CHAT["usage"], CLAUDE_CHAT["timings"])), times=1)
        return http.post("/v1/chat/completions", json={"model": "t/agent", **prompt})

    untaught, lesson, answered = _run(_gateway(plan_data, fakes, first_byte="300ms"), [held, taught, held])
    assert untaught.status_code == 503, untaught.text  # timed out: nothing learned yet
    assert lesson.status_code == 200
    assert answered.status_code == 200, answered.text


def test_a_restarted_gateway_waits_for_a_prefill_the_speed_it_learned_before_covers(
    plan_data: Callable[[str], dict[str, Any]],
    fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama],
    tmp_path: Path,
) -> None:
    """Issue 38: the same prompt answered before a restart timed out after it (the speed lived in the
    process only). With ``--state-dir``, what the first gateway learned is what the second starts with."""
    llama, _, _ = fakes
    prompt = {"model": "t/agent", "messages": [{"role": "user", "content": "lorem ipsum dolor " * 400}]}
    llama.set_fault(Fault.recorded(_answer(CLAUDE_CHAT["usage"], CLAUDE_CHAT["timings"])), times=1)
    (lesson,) = _run(_gateway(plan_data, fakes, state_dir=str(tmp_path)), [_post(prompt)])
    assert lesson.status_code == 200
    assert (tmp_path / "learned.json").exists()

    async def held(http: httpx.AsyncClient) -> httpx.Response:
        gate = threading.Event()
        llama.set_fault(Fault.hold(gate), times=1)
        seen = len(llama.requests)
        call = asyncio.ensure_future(http.post("/v1/chat/completions", json=prompt))
        await until(lambda: len(llama.requests) > seen, "the fake to hold the call")
        await asyncio.sleep(0.9)
        gate.set()
        return await call

    restarted = _gateway(plan_data, fakes, first_byte="300ms", state_dir=str(tmp_path))
    (answered,) = _run(restarted, [held])
    assert answered.status_code == 200, answered.text


def test_a_stream_teaches_the_prompt_speed_from_the_timings_beside_its_usage(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    """The real llama-server's stream (recorded): its last chunk carries ``usage`` and ``timings``."""
    llama, _, _ = fakes
    recorded = (FIXTURES / "answers" / "llama_server_stream.sse").read_bytes()
    llama.set_fault(Fault.recorded(recorded, "text/event-stream"))
    gateway = _gateway(plan_data, fakes)
    body = {
        "model": "t/agent",
        "stream": True,
        "max_tokens": 4,
        "messages": [{"role": "user", "content": "hi"}],
    }
    (streamed,) = _run(gateway, [_post(body)])
    assert streamed.status_code == 200
    assert '"finish_reason":"length"' in streamed.text.replace(" ", "")
    timings = orjson.loads(recorded.split(b"data: ")[-2])["timings"]
    learned = gateway.parts.services.learned.report()["llama"]["smol"]
    assert learned["prompt_tokens_per_s"] == pytest.approx(
        timings["prompt_n"] / timings["prompt_ms"] * 1000, rel=0.01
    )
    assert learned["prompt_counts"]["samples"] == 1


def test_a_calibration_learned_on_other_traffic_never_refuses_the_last_candidate_that_says_overflow(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    """Seen with the real llama-server: one plain "say hi" answer taught the book, then Claude Code's
    request (its tools, which SmolLM2's template drops) was ~19k "as learned", clearly over 8,192, and
    refused with no call. The server says overflow itself: on the chain's last candidate it decides."""
    llama, _, _ = fakes
    llama.set_fault(
        Fault.recorded(_answer({"prompt_tokens": 31, "completion_tokens": 3, "total_tokens": 34}, None))
    )
    body = {**copy.deepcopy(CLAUDE["body"]), "model": "t/agent", "stream": False}
    headers = {
        k: v for k, v in CLAUDE["headers"].items() if k.lower() in ("anthropic-beta", "anthropic-version")
    }
    hi, agent = _run(
        _gateway(plan_data, fakes),
        [_post({"model": "t/agent", **SAY_HI}), _post(body, "/v1/messages", **headers)],
    )
    assert hi.status_code == 200, hi.text
    assert agent.status_code == 200, agent.text
    assert len(_sent(llama, "smol")) == 2  # asked: the server, not the estimate, decides


def _counting(prompt_tokens: int, timings: dict[str, Any] | None = None) -> Fault:
    return Fault.recorded(
        _answer(
            {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1},
            timings,
        )
    )


def test_one_answer_s_absurd_count_never_takes_the_candidate_out_of_service(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    """Issue 39 defect 5: an answer claiming 100,000 prompt tokens for "say hi" was learned, and every
    later request skipped the candidate as ``context_too_small`` until a restart. Refused where it
    enters: no template adds that much."""
    llama, big, _ = fakes
    llama.set_fault(_counting(100_000), times=1)
    gateway = _gateway(plan_data, fakes)
    say_hi = {"model": "t/either", "messages": [{"role": "user", "content": "say hi"}]}
    first, second = _run(gateway, [_post(say_hi), _post(say_hi)])
    assert first.headers["x-interlock-resolved"] == "llama/smol"
    assert second.headers["x-interlock-resolved"] == "llama/smol", second.headers.get("x-interlock-skipped")
    assert "prompt_counts" not in gateway.parts.services.learned.report().get("llama", {}).get("smol", {})
    assert not _sent(big, "large")


def test_a_candidate_skipped_only_as_learned_is_tried_and_its_answer_teaches_the_book_again(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    """A count within the border can still mislead: "say hi" counted 2,000 (a template's text, as
    learned) puts a 5,000-token prompt far over 8,192 (the fit's text part grows too). The estimate
    itself says it fits: the skip rests on what was learned alone, so the candidate is tried (once a
    minute at most); its answer (the prompt as the server counted it) teaches the book again, and the
    next such prompt goes there as learned, with no trial."""
    llama, big, _ = fakes
    llama.set_fault(_counting(2_000), times=1)
    gateway = _gateway(plan_data, fakes)
    say_hi = {"model": "t/either", "messages": [{"role": "user", "content": "say hi"}]}
    long = {"model": "t/either", "messages": [{"role": "user", "content": "lorem ipsum dolor " * 970}]}

    def answered_as_counted(http: httpx.AsyncClient) -> Any:
        llama.set_fault(_counting(5_000), times=1)
        return http.post("/v1/chat/completions", json=long)

    taught, tried, again = _run(gateway, [_post(say_hi), answered_as_counted, answered_as_counted])
    assert taught.headers["x-interlock-resolved"] == "llama/smol"
    assert tried.headers["x-interlock-resolved"] == "llama/smol", tried.headers.get("x-interlock-skipped")
    assert again.headers["x-interlock-resolved"] == "llama/smol", again.headers.get("x-interlock-skipped")
    assert len(_sent(llama, "smol")) == 3
    assert not _sent(big, "large")


def test_a_prompt_speed_an_answer_claims_is_bounded_by_the_call_s_total(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    """Issue 39 defect 11: ``timings.prompt_ms: 1e308`` taught a speed of ~0 tokens/s, and the next
    first-byte deadline became an hour (past the call's total). A prefill longer than the call's total
    could not have been answered: the speed learned is at least the prompt over that, so the next call
    of that size waits for its first byte at most that much longer."""
    llama, _, _ = fakes
    llama.set_fault(_counting(3_027, {"prompt_n": 3_027, "prompt_ms": 1e308}), times=1)
    gateway = _gateway(plan_data, fakes)
    (answer,) = _run(gateway, [_post({"model": "t/agent", "messages": [{"role": "user", "content": "hi"}]})])
    assert answer.status_code == 200
    learned = gateway.parts.services.learned
    assert learned.report()["llama"]["smol"]["prompt_tokens_per_s"] >= 25  # 3,027 tokens in at most 120 s
    (route,) = gateway.parts.live.plan.candidates["llama/smol"].routes
    prompt = Needs(frozenset({"completion"}), 3_016, 3_000, 0, 16, None, "none")
    stretched = learned.deadline(route.endpoint, "smol", prompt)
    stretch = stretched.first_byte_s - route.endpoint.first_byte_s
    assert stretch <= route.endpoint.total_s * STRETCH_STEP  # not the hour it was


def test_a_window_a_server_named_does_not_keep_it_out_of_service_once_it_answers_larger(
    plan_data: Callable[[str], dict[str, Any]], fakes: tuple[FakeOpenAI, FakeOpenAI, FakeOllama]
) -> None:
    """An overflow answer naming a 100-token window (a server restarted with a larger ``--ctx-size``
    since, or one that lied) lowered the window for good: every longer prompt skipped the candidate.
    A minute after, it is tried (its declared 8,192 fits the prompt); its answer, larger than the window
    it named, forgets that window."""
    llama, big, _ = fakes
    llama.set_fault(Fault.context_overflow("llama-cpp-python", 100, 2_500), times=1)
    now = [1000.0]
    llama_, big_, box = fakes
    text = CONFIG.format(
        llama=llama_.base_url, big=big_.base_url, box=box.url, max_tokens="ceiling", first_byte="30s"
    )
    gateway = build_gateway(build(plan_data(text)), clock=lambda: now[0])
    long = {"model": "t/either", "messages": [{"role": "user", "content": "lorem ipsum dolor " * 300}]}

    def later(http: httpx.AsyncClient) -> Any:
        now[0] += 61
        return http.post("/v1/chat/completions", json=long)

    refused, skipped, tried, again = _run(gateway, [_post(long), _post(long), later, _post(long)])
    assert refused.headers["x-interlock-resolved"] == "big/large"
    assert refused.headers["x-interlock-skipped"] == "llama/smol (context_too_small, called)"
    assert skipped.headers["x-interlock-skipped"] == "llama/smol (context_too_small)"  # no call
    assert tried.headers["x-interlock-resolved"] == "llama/smol", tried.headers.get("x-interlock-skipped")
    assert again.headers["x-interlock-resolved"] == "llama/smol", again.headers.get("x-interlock-skipped")
    assert len(_sent(llama, "smol")) == 3
    assert len(_sent(big, "large")) == 2
