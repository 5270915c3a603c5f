"""Prefix affinity on real servers: three llama.cpp servers (llama-cpp-python's, SmolLM2-135M, CPU) on
loopback, one multi-turn shared-prefix schedule, worker choice by round-robin, least-connections,
prefix-only and interlock, in one run; beside each, the simulator's prediction for the same schedule.

Each policy gets fresh servers (empty caches) and replays the same schedule (``fleet.sessions``: a few
sessions sharing long system prompts, several turns each, short answers), streamed. Round-robin,
least-connections and prefix-only (``fleet.prefix_only_policy``) call the servers directly, as a proxy
would; interlock's row goes through a real ``interlock serve`` with the servers as one `openai`
provider's workers (``max_concurrent: 1`` each: a llama-cpp-python server runs one request at a time;
the rest wait in the fleet line). TTFT is measured at the client, on the first SSE chunk.

The servers' own cached-token counts: llama.cpp keeps the last prompt's KV cache and reuses its longest
common prefix with the next prompt (``Llama.generate: N prefix-match hit`` in each server's log); the
prompt tokens it evaluated are in its ``prompt eval time = ... / N tokens`` lines. ``cached`` is the
hits over hits + evaluated, summed over the three servers.

The prediction: the same schedule and policies on ``FakeGpuBox``es with the speeds measured here
(one calibration request per run: prompt and output tokens/s from a server's log, words per token from
its usage), one slot per box (parallel 1), a prefix cache of one context (``--n-ctx`` tokens: one slot's
KV cache, least recently used blocks dropped rather than the whole slot replaced) and no batching gain.

    python bench/fleet_real.py [--requests 60] [--seed 11] [--threads 1] [--json FILE]

It needs ``llama_cpp.server`` importable by ``--python`` (default: this interpreter; ``.ci/llama.sh``
installs it) and the model under ``~/.cache/interlock/models``. On a 2-core machine shared with other
work, three servers are slow: keep ``--requests`` small.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet

from interlock.testing.fake_fleet import sim_model

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2"
PREDICT_SCALE = 0.25  # the simulator replays 4x faster than real time (its figures are scaled back)
# one line per request that shares any prefix with the last prompt (every one here: the chat template's
# first tokens are the same); its perf lines are unreliable (a first request's prompt time reads 0.2 ms)
HIT = re.compile(rb"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
GENERATED = re.compile(rb"  eval time =\s*([\d.]+) ms /\s*(\d+) runs")
SHAPE = fleet.Sessions(
    rate=0.08,  # sessions per second
    system_prompts=3,
    system_words=(60, 100),
    turns=(2, 5),
    user_words=(4, 12),
    answer_tokens=(4, 4),
    think_s=10.0,
    model=MODEL,
)
GATEWAY = """\
version: 1
server: {{alias_namespace: real/}}
providers:
  llama:
    kind: openai
    probe: false
    timeouts: {{connect: 2s, first_byte: 600s, total: 900s}}
    workers:
{workers}
preflight: {{mode: off}}
aliases:
  "real/{model}": {{chain: ["llama/{model}"]}}
"""


def model_path() -> Path:
    cache = Path(os.environ.get("INTERLOCK_CACHE", Path.home() / ".cache" / "interlock"))
    return Path(os.environ.get("INTERLOCK_LLAMA_MODEL", cache / "models" / MODEL_FILE))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """One ``python -m llama_cpp.server`` on loopback; its log is where its cache counts are read."""

    def __init__(self, python: str, folder: Path, index: int, threads: int, n_ctx: int) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / f"llama{index}.log"
        command = [python, "-m", "llama_cpp.server", "--model", str(model_path()), "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--n_ctx", str(n_ctx), "--n_threads", str(threads)]
        # queue concurrent requests (the default interrupts the running one when another arrives)
        command += ["--model_alias", MODEL, "--interrupt_requests", "false"]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    async def ready(self, http: aiohttp.ClientSession) -> None:
        for _ in range(1800):
            if self.proc.poll() is not None:
                raise SystemExit(f"llama.cpp server exited {self.proc.returncode}: {self.log}")
            try:
                async with http.get(f"{self.url}/v1/models") as answer:
                    if answer.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        raise SystemExit(f"llama.cpp server on {self.url} did not start")

    def counts(self) -> tuple[int, int, int]:
        """(prompt tokens found in its cache, prompt tokens it evaluated, requests counted), its log's."""
        found = HIT.findall(self.log.read_bytes())
        return sum(int(h) for h, _ in found), sum(int(e) for _, e in found), len(found)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


@dataclass
class Row:
    policy: str
    requests: int
    errors: int
    ttft_s: dict[str, float]
    cached_share: float
    per_worker: list[int]
    counted: int = 0  # requests whose cache lines the servers' logs have
    error_kinds: dict[str, int] = field(default_factory=dict)
    predicted_ttft_s: dict[str, float] | None = None
    predicted_cached_share: float | None = None


def body(job: fleet.Job, model: str) -> bytes:
    return orjson.dumps(
        {
            "model": model,
            "messages": job.body_messages(),
            "stream": True,
            "max_tokens": job.answer_tokens,
            "temperature": 0,
        }
    )


async def timed_call(
    http: aiohttp.ClientSession, url: str, payload: bytes
) -> tuple[float | None, str, str | None]:
    """(TTFT, worker header, error) of one streamed chat completion."""
    sent = time.perf_counter()
    ttft: float | None = None
    try:
        async with http.post(url, data=payload, headers={"content-type": "application/json"}) as answer:
            worker = answer.headers.get("x-interlock-worker", "")
            if answer.status != 200:
                await answer.read()
                return None, worker, f"HTTP {answer.status}"
            async for line in answer.content:
                if ttft is None and line.startswith(b"data: {"):
                    ttft = time.perf_counter() - sent
            return ttft, worker, None
    except (aiohttp.ClientError, TimeoutError) as exc:
        return ttft, "", type(exc).__name__


async def run_policy(
    name: str, jobs: Sequence[fleet.Job], args: argparse.Namespace, folder: Path
) -> tuple[Row, list[Server]]:
    servers = [Server(args.python, folder / name, i, args.threads, args.n_ctx) for i in range(args.servers)]
    timeout = aiohttp.ClientTimeout(total=1800)
    gateway: subprocess.Popen[bytes] | None = None
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as http:
            for server in servers:
                await server.ready(http)
            in_flight = [0] * len(servers)
            worker_of: list[int] = []
            ttfts: list[float] = []
            errors = 0
            kinds: dict[str, int] = {}
            if name == fleet.INTERLOCK:
                workers = "\n".join(
                    f'      - {{name: llama{i}, url: "{s.url}/v1", max_concurrent: 1, '
                    "queue: {max_waiting: 1000, max_wait: 900s}}"
                    for i, s in enumerate(servers)
                )
                gateway, url = fleet.start_gateway(
                    GATEWAY.format(workers=workers, model=MODEL), folder / name
                )
                policy = None
            else:
                policy = fleet.POLICIES[name]()
            started = time.perf_counter()

            async def one(job: fleet.Job) -> None:
                nonlocal errors
                await asyncio.sleep(max(0.0, started + job.at_s - time.perf_counter()))
                if policy is None:
                    ttft, worker, error = await timed_call(
                        http, f"{url}/v1/chat/completions", body(job, f"real/{MODEL}")
                    )
                    index = int(worker.removeprefix("llama")) if worker.startswith("llama") else -1
                else:
                    index = policy(in_flight, job)
                    in_flight[index] += 1
                    try:
                        target = f"{servers[index].url}/v1/chat/completions"
                        ttft, _, error = await timed_call(http, target, body(job, MODEL))
                    finally:
                        in_flight[index] -= 1
                worker_of.append(index)
                if error is not None or ttft is None:
                    errors += 1
                    kinds[error or "no chunk"] = kinds.get(error or "no chunk", 0) + 1
                else:
                    ttfts.append(ttft)

            await asyncio.gather(*(one(job) for job in jobs))
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(15)
            if gateway.stdout is not None:
                gateway.stdout.close()
        for server in servers:
            server.stop()
    counts = [s.counts() for s in servers]
    hits, evaluated = sum(c[0] for c in counts), sum(c[1] for c in counts)
    row = Row(
        name,
        len(jobs),
        errors,
        fleet._percentiles(ttfts),
        hits / max(1, hits + evaluated),
        [worker_of.count(i) for i in range(len(servers))],
        sum(c[2] for c in counts),
        kinds,
    )
    return row, servers


async def calibrate(args: argparse.Namespace, folder: Path) -> tuple[float, float, float]:
    """(prompt tokens/s, output tokens/s, tokens per word) of one server here, from one request: its
    output speed from the server's log, its prompt speed from the rest of the request's time."""
    server = Server(args.python, folder, 0, args.threads, args.n_ctx)
    job = fleet.sessions(args.seed + 1, 1, replace(SHAPE, answer_tokens=(16, 16)))[0]
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1800)) as http:
            await server.ready(http)
            payload = orjson.loads(body(job, MODEL))
            payload["stream"] = False
            sent = time.perf_counter()
            async with http.post(f"{server.url}/v1/chat/completions", json=payload) as answer:
                usage = (await answer.json())["usage"]
            took_ms = (time.perf_counter() - sent) * 1000
    finally:
        server.stop()
    eval_ms, eval_n = (float(x) for x in GENERATED.findall(server.log.read_bytes())[-1])
    prompt_tps = usage["prompt_tokens"] / max(took_ms - eval_ms, 1.0) * 1000
    return prompt_tps, eval_n / eval_ms * 1000, usage["prompt_tokens"] / job.prompt_words


async def predict(
    jobs: Sequence[fleet.Job], args: argparse.Namespace, speeds: tuple[float, float, float]
) -> dict[str, fleet.Result]:
    """The simulator's rows for the same schedule, in words (the boxes count words as tokens)."""
    prompt_tps, output_tps, tokens_per_word = speeds
    scale = PREDICT_SCALE
    model = sim_model(
        MODEL,
        0.2,
        load_s=0.0,
        tokens_per_s=output_tps / scale,
        prompt_tokens_per_s=prompt_tps / tokens_per_word / scale,
        parallel=1,
    )
    physics = fleet.Physics(
        batching_gain=0.0,
        prefix_cache_tokens=int(args.n_ctx / tokens_per_word),
        models=(model,),
        parallel=1,
        preload=(f"{MODEL}:latest",),
    )
    out: dict[str, fleet.Result] = {}
    for name in args.policy:
        if name == fleet.INTERLOCK:
            out[name] = await fleet.replay_interlock(jobs, args.servers, scale, "{}", 1, physics)
        else:
            out[name] = await fleet.replay(name, fleet.POLICIES[name](), jobs, args.servers, scale, physics)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--threads", type=int, default=1, help="each server's --n_threads")
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--rate", type=float, default=SHAPE.rate, help="sessions per second")
    parser.add_argument("--python", default=sys.executable, help="the interpreter with llama_cpp.server")
    parser.add_argument(
        "--policy",
        action="append",
        choices=["round-robin", "least-connections", "prefix-only", fleet.INTERLOCK],
    )
    parser.add_argument("--no-predict", action="store_true", help="skip the simulator's prediction")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    args.policy = args.policy or ["round-robin", "least-connections", "prefix-only", fleet.INTERLOCK]
    if not model_path().is_file():
        raise SystemExit(f"no model at {model_path()}: run `bash .ci/llama.sh`")
    jobs = fleet.sessions(args.seed, args.requests, replace(SHAPE, rate=args.rate))
    words = sum(j.prompt_words for j in jobs)
    print(
        f"schedule: {len(jobs)} requests of {len({j.messages[1] for j in jobs if j.messages})} sessions over "
        f"{jobs[-1].at_s:.0f} s, {SHAPE.system_prompts} system prompts of {SHAPE.system_words[0]}-"
        f"{SHAPE.system_words[1]} words, {sum(j.cached_words for j in jobs) / words:.0%} of prompt words "
        f"sent before; {args.servers} llama.cpp servers x 1 slot, {args.threads} thread(s) each; "
        f"load average {fleet._load()}"
    )
    with tempfile.TemporaryDirectory(prefix="interlock-fleet-real-") as tmp:
        folder = Path(tmp)
        speeds = asyncio.run(calibrate(args, folder))
        print(
            f"calibration: prompt {speeds[0]:.0f} tokens/s, output {speeds[1]:.1f} tokens/s, "
            f"{speeds[2]:.2f} tokens per word (one server alone, load average {fleet._load()})"
        )
        rows: list[Row] = []
        for name in args.policy:
            (folder / name).mkdir()
            row, _ = asyncio.run(run_policy(name, jobs, args, folder))
            rows.append(row)
            print(f"  {name}: done, load average {fleet._load()}", flush=True)
        if not args.no_predict:
            predicted = asyncio.run(predict(jobs, args, speeds))
            for row in rows:
                sim = predicted[row.policy]
                row.predicted_ttft_s, row.predicted_cached_share = sim.ttft_s, sim.cached_share
    head = (
        f"{'policy':<22}| TTFT p50 | TTFT p90 | TTFT p95 | cached | errors | per server "
        "| predicted p50 / p90 / p95, cached"
    )
    print(head)
    print("-" * len(head))
    for row in rows:
        t, p = row.ttft_s, row.predicted_ttft_s
        predicted = (
            f"{p['p50']:.2f} / {p['p90']:.2f} / {p['p95']:.2f} s, {row.predicted_cached_share:.0%}"
            if p is not None and row.predicted_cached_share is not None
            else "-"
        )
        if row.error_kinds:
            print(f"  ({row.policy}: errors {row.error_kinds})")
        if row.counted != row.requests:
            print(f"  ({row.policy}: the servers' logs count {row.counted} of {row.requests} requests)")
        print(
            f"{row.policy:<22}| {t['p50']:>6.2f} s | {t['p90']:>6.2f} s | {t['p95']:>6.2f} s | "
            f"{row.cached_share:>6.0%} | {row.errors:>6} | {'/'.join(map(str, row.per_worker)):>10} "
            f"| {predicted}"
        )
    print(f"load average at the end {fleet._load()}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
