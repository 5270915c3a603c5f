"""Credits under a real ``interlock serve``, called with the real SDKs: a key whose budget runs out is
refused with 402 in each surface's error shape, a key and tenant with ``0`` are never refused, money is
priced by the plan, /v1/health shows every budget (``∞`` when unlimited), and a restart reads the
month's balance back from the ledger."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from interlock.testing.fake_openai import FakeOpenAI
from interlock.testing.faults import Fault
from tests.e2e.harness import Served, wait_until
from tests.redis_server import RedisServer

CONFIG = """\
version: 1
server: {{default_alias: c/chat, alias_namespace: c/, auth: required}}
providers:
  cloud:
    kind: openai
    base_url: "{cloud}/v1"
    timeouts: {{connect: 1s, first_byte: 60s, total: 90s}}  # a held stream waits out the 30
aliases:
  c/chat: {{description: the one model, chain: [cloud/gpt-4o-mini]}}
tenants:
  free: {{description: no budget at all}}
  lab: {{credits: 0}}
  shop: {{credits: 0.00003, credits_unit: money}}
keys:
  open-key: {{tenant: free, key_env: OPEN_KEY}}
  small-key: {{tenant: lab, key_env: SMALL_KEY, credits: 40}}
  shop-key: {{tenant: shop, key_env: SHOP_KEY}}
  crowd-key: {{tenant: lab, key_env: CROWD_KEY, credits: 100}}
  rate-key: {{tenant: lab, key_env: RATE_KEY, tokens_per_minute: 100}}
pricing:
  currency: EUR
  models:
    "cloud/*": {{input: 1.0, output: 2.0}}
"""

ENV = {
    "OPEN_KEY": "sk-open-7a1c9e-SECRET",
    "SMALL_KEY": "sk-small-0b2d4f-SECRET",
    "SHOP_KEY": "sk-shop-93ce51-SECRET",
    "CROWD_KEY": "sk-crowd-5e0a17-SECRET",
    "RATE_KEY": "sk-rate-c3f8d2-SECRET",
}
HI = [{"role": "user", "content": "hello there, how are you"}]


@pytest.fixture(scope="module")
def cloud() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(name="cloud") as fake:
        yield fake


@pytest.fixture
def state(tmp_path: Path) -> Path:
    folder = tmp_path / "state"
    folder.mkdir()
    return folder


@pytest.fixture
def config(cloud: FakeOpenAI, tmp_path: Path) -> Path:
    path = tmp_path / "interlock.yaml"
    path.write_text(CONFIG.format(cloud=cloud.url))
    return path


def serve(config: Path, state: Path, log: Path, *more: str) -> Served:
    return Served(config, ENV, log, "--state-dir", str(state), "--usage-flush-ms", "50", *more)


def usage(gateway: Served) -> Any:
    """/v1/health's usage section (behind the keys: any key may read it)."""
    headers = {"authorization": f"Bearer {ENV['OPEN_KEY']}"}
    return gateway.http.get("/v1/health", headers=headers).json()["usage"]


def sdk(gateway: Served, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=ENV[key], max_retries=0)


def test_a_key_out_of_credits_is_refused_with_402_and_one_with_0_never(
    config: Path, state: Path, tmp_path: Path
) -> None:
    gateway = serve(config, state, tmp_path / "serve.log")
    try:
        small = sdk(gateway, "SMALL_KEY")
        used = 0
        for _ in range(40):  # 40 tokens: a few answers of ~12 tokens
            try:
                answer = small.chat.completions.create(model="c/chat", messages=HI)
            except openai.APIStatusError as exc:
                refusal = exc
                break
            assert answer.usage is not None
            used += answer.usage.total_tokens
        else:
            pytest.fail("the key was never refused")
        assert refusal.status_code == 402
        body = refusal.body
        assert isinstance(body, dict)
        assert (body["type"], body["code"]) == ("insufficient_quota", "credits_exhausted")
        assert re.fullmatch(
            rf"key `small-key` (has used|would pass its budget with this request: it has used) {used} of its "
            r"40 tokens of credits this month \(since \d{4}-\d{2}-01 UTC\); the budget starts again on "
            r"\d{4}-\d{2}-01",
            body["message"],
        )
        assert used > 40 - 12  # refused only once the budget is (about to be) used up

        for _ in range(3):  # the other surfaces word the same refusal in their own shape
            refused = httpx.post(
                f"{gateway.url}/api/chat",
                headers={"authorization": f"Bearer {ENV['SMALL_KEY']}"},
                json={"model": "c/chat", "messages": HI, "stream": False},
            )
            assert refused.status_code == 402
            assert refused.json()["error"] == body["message"]
        with pytest.raises(anthropic.APIStatusError) as caught:
            anthropic.Anthropic(
                base_url=gateway.url, api_key=ENV["SMALL_KEY"], max_retries=0
            ).messages.create(model="c/chat", max_tokens=50, messages=HI)  # type: ignore[arg-type]
        assert caught.value.status_code == 402

        unlimited = sdk(gateway, "OPEN_KEY")
        for _ in range(12):  # credits 0 at both levels: never refused, still counted
            unlimited.chat.completions.create(model="c/chat", messages=HI)
        budgets = usage(gateway)
        assert budgets["keys"]["open-key"]["credits"] == "∞"
        assert budgets["keys"]["open-key"]["remaining"] == "∞"
        assert budgets["keys"]["open-key"]["requests"] == 12
        assert budgets["tenants"]["lab"]["credits"] == "∞"
        assert budgets["keys"]["small-key"]["credits"] == 40
        assert budgets["keys"]["small-key"]["remaining"] == max(0, 40 - used)
    finally:
        gateway.stop()

    again = serve(config, state, tmp_path / "serve2.log")  # the month's balance is read back
    try:
        with pytest.raises(openai.APIStatusError) as caught_again:
            sdk(again, "SMALL_KEY").chat.completions.create(model="c/chat", messages=HI)
        assert caught_again.value.status_code == 402
        assert usage(again)["keys"]["small-key"]["used"] == used
    finally:
        again.stop()


def test_a_money_budget_is_priced_by_the_plan(config: Path, state: Path, tmp_path: Path) -> None:
    gateway = serve(config, state, tmp_path / "serve.log")
    try:
        shop = sdk(gateway, "SHOP_KEY")
        answer = shop.chat.completions.create(model="c/chat", messages=HI)
        assert answer.usage is not None
        cost = answer.usage.prompt_tokens * 1.0 + answer.usage.completion_tokens * 2.0  # millionths of EUR
        tenant = usage(gateway)["tenants"]["shop"]
        assert tenant["unit"] == "EUR"
        assert tenant["used"] == pytest.approx(cost / 1_000_000)
        for _ in range(5):
            try:
                shop.chat.completions.create(model="c/chat", messages=HI)
            except openai.APIStatusError as exc:
                refusal = exc
                break
        else:
            pytest.fail("the tenant was never refused")
        assert refusal.status_code == 402
        message = refusal.body["message"]  # type: ignore[index]
        assert message.startswith("tenant `shop` ")
        assert " of its 0.00003 EUR of credits this month (since " in message
    finally:
        gateway.stop()


def test_budgets_kept_in_memory_only_are_said_to_be_so(config: Path, tmp_path: Path) -> None:
    gateway = Served(config, ENV, tmp_path / "serve.log")
    try:
        assert usage(gateway)["store"] == "memory"
    finally:
        gateway.stop()
    assert (
        "usage is kept in memory only: credits hold per process and start again at every start "
        "(give --state-dir DIR or --usage-url URL to keep them)"
    ) in gateway.log()


MAX_TOKENS = 40


@pytest.mark.parametrize("mode", ["one", "workers", "replicas"])
@pytest.mark.parametrize(("key", "refused"), [("CROWD_KEY", 402), ("RATE_KEY", 429)])
def test_thirty_concurrent_streams_reserve_their_estimate_so_at_most_one_passes_the_budget(
    config: Path, tmp_path: Path, cloud: FakeOpenAI, key: str, refused: int, mode: str
) -> None:
    """Every admitted stream is held at the upstream until all 30 were answered or refused: without
    reservations all 30 were admitted against the same 100 tokens (credits, or tokens per minute);
    with credits held per process, each of ``--workers 2``'s workers (or each of two replicas) admitted
    its own share. The holds are one count: the supervisor's table, or Redis (``--state-url``). Each
    replica here keeps its own SQLite ledger, so what was used is the sum of the two."""
    gateways: list[Served] = []
    redis: RedisServer | None = None
    if mode == "replicas":
        redis = RedisServer(tmp_path).start()
    try:
        for n in range(2 if mode == "replicas" else 1):
            state = tmp_path / f"state{n}"
            state.mkdir()
            more: tuple[str, ...] = ("--state-url", redis.url) if redis is not None else ()
            if mode == "workers":
                more = ("--workers", "2", "--usage-refresh-ms", "100")
            gateways.append(serve(config, state, tmp_path / f"serve{n}.log", *more))
        admitted = crowd(gateways, cloud, key, refused)
        name = "crowd-key" if key == "CROWD_KEY" else "rate-key"

        def spent(field: str) -> Any:
            return sum(usage(gateway)["keys"][name][field] for gateway in gateways)

        wait_until(lambda: spent("requests") == admitted, 30, "every debit")
        used = spent("used")
        # the bound, credits and tokens per minute alike: none. Each admitted stream holds its prompt's
        # estimate (12) and as much of its 40 as the 100 still leave, and goes upstream with its ceiling
        # cut to that; the fake counts a prompt as its 5 words and honours the ceiling, so the holds
        # cover every answer (before the cut: the budget plus one answer)
        assert used <= 100, (admitted, used)
    finally:
        for gateway in gateways:
            gateway.stop()
        if redis is not None:
            redis.stop()


def crowd(gateways: list[Served], cloud: FakeOpenAI, key: str, refused: int) -> int:
    """30 streams at once, spread over ``gateways``, held at the upstream until every one was admitted
    or refused: how many were admitted."""
    gate = threading.Event()
    cloud.set_fault(Fault.hold(gate), model="gpt-4o-mini")  # the chats: a worker's late probe is answered
    body = {"model": "c/chat", "messages": HI, "stream": True, "max_tokens": MAX_TOKENS}

    def stream(n: int) -> tuple[int, int]:
        headers = {"authorization": f"Bearer {ENV[key]}"}
        url = f"{gateways[n % len(gateways)].url}/v1/chat/completions"
        with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as answer:
            text = answer.read()
        return answer.status_code, text.count(b'"delta":{"content"')

    try:
        with ThreadPoolExecutor(30) as pool:
            futures = [pool.submit(stream, n) for n in range(30)]
            wait_until(
                lambda: sum(f.done() for f in futures) + cloud.in_flight == 30,
                60,
                "30 streams held or refused",
            )
            gate.set()
            results = [f.result() for f in futures]
    finally:
        gate.set()
        cloud.clear_faults()
    statuses = [status for status, _ in results]
    admitted = statuses.count(200)
    assert statuses.count(refused) == 30 - admitted
    assert 1 <= admitted < 30
    # all were in flight at once, each holding at least MAX_TOKENS: every one but the last admitted fit
    # in the 100 (with per-process holds, two workers or replicas each admitted their own pair)
    assert (admitted - 1) * MAX_TOKENS < 100, admitted
    return admitted
