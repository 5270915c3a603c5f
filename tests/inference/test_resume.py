"""`resume: same_model` on two real llama-servers serving one model (issue 40 item 7): the first is killed
(SIGKILL, as a crash ends it) after half its answer has reached the caller, and the second continues the
answer from what was said, sent as an assistant prefill (llama-server's default: a final assistant
message is continued, not answered). The caller reads one answer, with one finish reason and no error."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest

from tests.e2e.harness import Served, compile_to
from tests.inference.llama import LlamaServer, require_parts

CONFIG = """\
version: 1
server: {{alias_namespace: rs/, direct_models: allow}}
health: {{failure_threshold: 3, open_for: 5s}}
providers:
  first:
    kind: openai
    probe: false
    base_url: "{first}/v1"
    timeouts: {{connect: 2s, first_byte: 300s, total: 600s}}
  second:
    kind: openai
    probe: false
    base_url: "{second}/v1"
    timeouts: {{connect: 2s, first_byte: 300s, total: 600s}}
aliases:
  rs/story: {{chain: [first/smollm2, second/smollm2], resume: same_model}}
"""

ASK = {
    "messages": [{"role": "user", "content": "Tell me a long story about a lighthouse keeper and a storm."}],
    "max_tokens": 120,
    "temperature": 0,
    "seed": 7,
}
CUT_AFTER = 40  # content chunks the caller has read when the first server dies (about a third)


@dataclass
class Pair:
    first: LlamaServer
    second: LlamaServer
    gateway: Served


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    model = require_parts()
    with (
        LlamaServer(model, tmp_path / "first.log", n_ctx=1024, threads=1) as first,
        LlamaServer(model, tmp_path / "second.log", n_ctx=1024, threads=1) as second,
    ):
        text = CONFIG.format(first=first.url, second=second.url)
        plan = compile_to(tmp_path / "config.yaml", text, tmp_path / "plan.json")
        gateway = Served(plan, {}, tmp_path / "gateway.log")
        try:
            yield Pair(first, second, gateway)
        finally:
            gateway.stop()


def test_a_stream_cut_mid_answer_ends_whole_from_a_replica_of_the_same_model(pair: Pair) -> None:
    whole = httpx.post(
        f"{pair.second.url}/v1/chat/completions", json={**ASK, "model": "smollm2"}, timeout=300
    ).json()["choices"][0]
    assert whole["finish_reason"] == "length"  # the reference: the whole answer, from the second alone

    chunks: list[dict[str, object]] = []
    said = 0
    with pair.gateway.http.stream(
        "POST", "/v1/chat/completions", json={**ASK, "model": "rs/story", "stream": True}, timeout=300
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = orjson.loads(line[len("data: ") :])
            chunks.append(chunk)
            choices = chunk.get("choices") or [{}]
            if choices[0].get("delta", {}).get("content"):
                said += 1
                if said == CUT_AFTER:
                    pair.first.kill()  # the first server dies mid-answer
    assert all("error" not in chunk for chunk in chunks)
    finishes = [
        c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]
    ]
    assert len(finishes) == 1
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert said > CUT_AFTER  # more came after the cut: the second server's continuation
    assert pair.gateway.metric("interlock_stream_resumed_total", candidate="second/smollm2") == 1
    # one answer: greedy decoding from the same weights continues where the first stopped, so the
    # whole reads as the second server's own answer (the join at most a token's spacing apart)
    assert " ".join(text.split()) == " ".join(whole["message"]["content"].split())
