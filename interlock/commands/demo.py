"""`demo`: fallback in a few seconds, on loopback, with the real OpenAI SDK.

Starts two fake upstreams (an Ollama "GPU box" and an OpenAI-compatible "cloud") and a gateway in front
of them, sends requests the way a consumer does, kills the GPU box, shows the answering model switch,
then takes the cloud down too and shows the 503 summary. Exits 1 when anything it shows did not happen
as expected, so it doubles as a smoke test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

DEMO_KEY = "sk-demo-0000-not-a-real-key"
ALIAS = "demo/chat"
PRIMARY = "local/llama3.2:3b"
FALLBACK = "cloud/gpt-4o-mini"

CONFIG = """\
version: 1
server: {{default_alias: demo/chat, alias_namespace: demo/, direct_models: allow}}
providers:
  local:
    kind: ollama
    timeouts: {{connect: 1s, first_byte: 30s, total: 60s}}
    workers:
      - {{name: gpu-box, url: "{gpu}", max_concurrent: 2, model_concurrency: {{"*": 2}}}}
  cloud:
    kind: openai
    base_url: "{cloud}/v1"
    api_key_env: DEMO_CLOUD_KEY
    timeouts: {{connect: 1s, first_byte: 10s, total: 60s}}
health:
  {{probe_interval: 30s, probe_timeout: 1s, failure_threshold: 1, open_for: 30s, rate_limit_open_for: 5s}}
aliases:
  demo/chat:
    description: "Local GPU first, cloud when it is down"
    chain: [{primary}, {fallback}]
"""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("demo", help="watch fallback happen: fake upstreams, a gateway, the openai SDK")
    p.set_defaults(handler=run_demo)


class Demo:
    """Prints what it does and remembers every expectation that did not hold."""

    def __init__(self, out: Any = sys.stdout) -> None:
        self.out = out
        self.failures: list[str] = []

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def expect(self, ok: bool, what: str) -> None:
        if not ok:
            self.failures.append(what)
            self.say(f"   !! expected {what}")


def run_demo(args: argparse.Namespace) -> int:
    from interlock.testing.fake_ollama import FakeOllama
    from interlock.testing.fake_openai import FakeOpenAI

    demo = Demo()
    with (
        FakeOllama(name="gpu-box") as gpu,
        FakeOpenAI(name="cloud", api_key=DEMO_KEY) as cloud,
        tempfile.TemporaryDirectory() as folder,
    ):
        plan = _plan(Path(folder), gpu.url, cloud.url)
        with _gateway(plan) as url:
            demo.say("interlock demo: two fake upstreams on loopback, and a gateway in front of them")
            demo.say(f"   gpu-box   fake Ollama worker        {gpu.url}")
            demo.say(f"   cloud     fake OpenAI-compatible    {cloud.url}/v1")
            demo.say(f"   gateway   interlock                 {url}")
            demo.say(f"   alias     {ALIAS} = {PRIMARY} -> {FALLBACK}")
            _walkthrough(demo, url, gpu.refuse_connections, cloud.refuse_connections)
    if demo.failures:
        demo.say(f"\nFAILED: {len(demo.failures)} expectation(s) did not hold: " + "; ".join(demo.failures))
        return 1
    demo.say("\nOK: every step behaved as described. Next: interlock compile / interlock serve (see README).")
    return 0


def _walkthrough(demo: Demo, url: str, kill_gpu: Callable[[], None], kill_cloud: Callable[[], None]) -> None:
    import openai

    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused-by-the-gateway", max_retries=0)
    messages: Any = [{"role": "user", "content": "Say hello."}]

    demo.say('\n1. Both upstreams are up. client.chat.completions.create(model="demo/chat", ...)')
    resolved, answer, ms = _ask(client, messages)
    demo.say(f"   X-Interlock-Resolved: {resolved}   ({ms:.0f} ms)   {answer!r}")
    demo.expect(resolved == PRIMARY, f"the primary {PRIMARY} to answer, got {resolved}")

    demo.say("\n2. Streaming: every chunk names the model that actually answered.")
    models = {
        chunk.model for chunk in client.chat.completions.create(model=ALIAS, messages=messages, stream=True)
    }
    demo.say(f"   chunk.model values: {sorted(models)}")
    demo.expect(models == {PRIMARY}, f"every chunk to name {PRIMARY}, got {sorted(models)}")

    demo.say("\n3. The GPU box dies: it refuses connections from now on.")
    _settle(url)
    kill_gpu()
    for note in ("tries the GPU box, is refused, falls back", "skips the GPU box: its circuit is open"):
        resolved, answer, ms = _ask(client, messages)
        demo.say(f"   X-Interlock-Resolved: {resolved}   ({ms:.0f} ms)   {answer!r}   <- {note}")
        demo.expect(resolved == FALLBACK, f"the fallback {FALLBACK} to answer, got {resolved}")
    health = _get_json(f"{url}/v1/health")["candidates"][PRIMARY]
    demo.say(
        f"   GET /v1/health: {PRIMARY} healthy={str(health['healthy']).lower()} "
        f"last_error_class={health['last_error_class']} circuit_open_until={health['circuit_open_until']}"
    )
    demo.expect(health["healthy"] is False, f"/v1/health to report {PRIMARY} unhealthy")
    demo.expect(health["last_error_class"] == "connect", f"{PRIMARY} refused (connect), not timed out")
    demo.expect(health["circuit_open_until"] is not None, f"the circuit of {PRIMARY} to be open")

    demo.say(
        "\n4. The cloud goes down too: a 503 with a short summary, no upstream bodies, and Retry-After:\n"
        "   when the first circuit closes."
    )
    kill_cloud()
    try:
        client.chat.completions.create(model=ALIAS, messages=messages)
    except openai.APIStatusError as exc:
        message = (exc.body or {}).get("message", "") if isinstance(exc.body, dict) else str(exc)
        retry_after = exc.response.headers.get("retry-after")
        demo.say(f"   HTTP {exc.status_code} (Retry-After: {retry_after}): {message}")
        demo.expect(exc.status_code == 503, f"HTTP 503, got {exc.status_code}")
        demo.expect(retry_after is not None, "Retry-After: when the first circuit closes")
        demo.expect(PRIMARY in message and FALLBACK in message, "the summary to name both candidates")
        demo.expect(DEMO_KEY not in message, "no credential in the error")
    else:
        demo.expect(False, "a 503 when every upstream is down")


def _ask(client: Any, messages: Any) -> tuple[str, str, float]:
    started = time.perf_counter()
    raw = client.chat.completions.with_raw_response.create(model=ALIAS, messages=messages)
    ms = (time.perf_counter() - started) * 1000
    completion = raw.parse()
    return raw.headers.get("x-interlock-resolved", "(none)"), completion.choices[0].message.content or "", ms


def _settle(url: str, timeout_s: float = 30.0) -> None:
    """Wait until the gateway holds no slot on the GPU box: step 2's stream is over on its side too. The
    client can read the last chunk before the gateway has read the upstream's end; killing the box then
    would cut that stream (a protocol failure, opening the circuit) instead of refusing step 3's call."""
    deadline = time.monotonic() + timeout_s
    while _get_json(f"{url}/v1/health")["workers"]["gpu-box"]["slots_in_use"] and time.monotonic() < deadline:
        time.sleep(0.01)


def _get_json(url: str) -> Any:
    import orjson

    with urllib.request.urlopen(url, timeout=5) as response:
        return orjson.loads(response.read())


def _plan(folder: Path, gpu: str, cloud: str) -> Any:
    from interlock.commands.serve import PlanLoader

    config = folder / "demo.yaml"
    config.write_text(CONFIG.format(gpu=gpu, cloud=cloud, primary=PRIMARY, fallback=FALLBACK))
    return PlanLoader(str(config), {"DEMO_CLOUD_KEY": DEMO_KEY}).first()


@contextlib.contextmanager
def _gateway(plan: Any) -> Iterator[str]:
    """The gateway on an ephemeral port, served from a background thread; yields its URL once ready."""
    import uvicorn

    from interlock.commands.gateway import build_gateway
    from interlock.runtime.app.server import bind, url_of, wait_ready

    gateway = build_gateway(plan)
    sock = bind("127.0.0.1", 0)
    config = uvicorn.Config(gateway, loop="uvloop", http="httptools", lifespan="on", log_config=None)
    server = uvicorn.Server(config)
    # uvloop as in `interlock serve` (with asyncio's own loop, answers here took ~50 ms more)
    thread = threading.Thread(target=lambda: _serve_in_thread(server, sock), daemon=True)
    thread.start()
    url = url_of(sock)
    if not wait_ready(url, 10, alive=thread.is_alive):
        raise RuntimeError("the demo gateway did not become ready within 10 s")
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def _serve_in_thread(server: Any, sock: Any) -> None:
    with asyncio.Runner(loop_factory=server.config.get_loop_factory()) as runner:
        runner.run(server.serve(sockets=[sock]))
