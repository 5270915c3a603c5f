"""Prefix affinity on real servers: three C++ llama-servers (PyPI ``xllamacpp``, SmolLM2-135M, one CPU
thread and two slots each) on loopback, one agent-like workload, worker choice by round-robin,
least-connections and interlock, in one run; beside each, the simulator's prediction.

The workload (``agents``): sessions arrive over time (exponential gaps, mean ``--gap`` s), each with a
system prompt of its own (an agent's instructions and its tool list written out as text: SmolLM2's
chat template drops a request's ``tools``, so they would cost the server nothing) and 3-6 turns; a
turn is sent ``--think`` s after the previous answer ended (closed loop, as an agent waits for its
model). Answers are ``--answer`` tokens, streamed. Each policy gets fresh servers (empty caches) and
the same sessions. Round-robin and least-connections (the fewest requests in flight, ties in turn, as
nginx's ``least_conn``) call the servers directly; interlock's row goes through a real ``interlock
serve`` with the servers as one ``openai`` provider's workers (``server: llama.cpp``: its /slots and
/metrics read each probe round; ``max_concurrent: 2``, the servers' slots; ``routing.prefix`` with
``spare_prompts``: llama-server's default ``--cache-ram`` of 8 GiB keeps far more than that many of
these prompts beside its slots).

Measured: TTFT at the client (the first SSE chunk), of every turn and of the later turns (a first turn
is a cold prefill whatever the policy); the servers' own counts from each answer's ``timings``
(``cache_n`` prompt tokens read from the cache, ``prompt_n`` processed, ``prompt_ms``) where the stream
carries them, and from ``/metrics`` at the end (``llamacpp:prompt_tokens_cached_total``,
``prompt_tokens_total``, ``prompt_seconds_total``: all turns).

The prediction: bench/fleet.py's simulated boxes replay the same requests at the times and on the
workers the real run sent them (so it checks the server model, not the routing), with the prompt and
output speeds measured on one idle server first (``calibrate``), two slots, a prefix cache as large as
the real one, no batching gain.

    python bench/fleet_real.py [--sessions 6] [--seed 5] [--json FILE] [--launcher-root DIR]

The servers are started with ``python -m tests.inference.llama`` (the launcher of the real-server
tests) from ``--launcher-root`` (default: this checkout). On a 2-core machine shared with other work,
keep the sizes small; the figures move with the machine's load (printed).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet

from interlock.testing.fake_fleet import sim_model

ROOT = Path(__file__).resolve().parents[1]
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2"
POLICIES = ("round-robin", "least-connections", fleet.INTERLOCK)
GATEWAY = """\
version: 1
server: {{alias_namespace: real/}}
providers:
  llama:
    kind: openai
    probe: true
    timeouts: {{connect: 2s, first_byte: 900s, total: 1200s}}
    workers:
{workers}
health: {{probe_interval: 1s, probe_timeout: 900ms}}
preflight: {{mode: off}}
routing: {{on_saturation: queue, prefix: {{spare_prompts: {spare}}}}}
aliases:
  "real/{model}": {{chain: ["llama/{model}"]}}
"""
METRIC = re.compile(rb"^(llamacpp:[a-z_]+) ([0-9.e+-]+)$", re.M)
CACHED_COST = 73.0  # a processed prompt token costs this many cached ones (45.6 s vs 0.7 s, issue 32)
TOOL_NAMES = ("read_file", "write_file", "run_tests", "search", "list_dir", "apply_patch", "git_diff")


def model_path() -> Path:
    cache = Path(os.environ.get("INTERLOCK_CACHE", Path.home() / ".cache" / "interlock"))
    return Path(os.environ.get("INTERLOCK_LLAMA_MODEL", cache / "models" / MODEL_FILE))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# ----- the workload -----


@dataclass(frozen=True, slots=True)
class Session:
    at_s: float  # arrival of its first turn, after the start
    system: str
    turns: tuple[str, ...]


def agents(seed: int, sessions: int, gap_s: float, system_words: int, user_words: int) -> list[Session]:
    """``sessions`` agent sessions: a system prompt each (instructions, then 3-4 of ``TOOL_NAMES`` as
    JSON schemas in the text), 3-6 user turns; arrivals ``gap_s`` apart on average."""
    rng = random.Random(seed)
    out, at = [], 0.0
    for n in range(sessions):
        tools = rng.sample(TOOL_NAMES, rng.randint(3, 4))
        schemas = [
            {
                "name": f"{name}_{n}",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            }
            for name in tools
        ]
        words = " ".join(
            rng.choice(("code", "file", "test", "step", "plan", "repo")) for _ in range(system_words)
        )
        system = f"You are coding agent {n}. {words}\nTools: {json.dumps(schemas)}"
        turns = tuple(
            f"turn {t} of session {n}: "
            + " ".join(rng.choice(("fix", "the", "bug", "in", "main")) for _ in range(user_words))
            for t in range(rng.randint(3, 6))
        )
        out.append(Session(at, system, turns))
        at += rng.expovariate(1.0 / gap_s)
    return out


# ----- the servers -----


class Server:
    """One llama-server: ``python -m tests.inference.llama`` (the real-server tests' launcher)."""

    def __init__(self, root: Path, log: Path, threads: int, parallel: int, n_ctx: int) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        command = [sys.executable, "-m", "tests.inference.llama", "--model", str(model_path())]
        command += ["--port", str(self.port), "--ctx", str(n_ctx), "--parallel", str(parallel)]
        command += ["--threads", str(threads)]
        env = {**os.environ, "PYTHONPATH": str(root)}
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=root, env=env
            )

    async def ready(self, http: aiohttp.ClientSession) -> None:
        for _ in range(3000):
            if self.proc.poll() is not None:
                raise SystemExit(
                    f"llama-server exited {self.proc.returncode}: {self.log.read_text()[-2000:]}"
                )
            try:
                async with http.get(f"{self.url}/health") as answer:
                    if answer.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
        raise SystemExit(f"llama-server on {self.url} did not start")

    async def metrics(self, http: aiohttp.ClientSession) -> dict[str, float]:
        async with http.get(f"{self.url}/metrics") as answer:
            text = await answer.read()
        return {name.decode(): float(value) for name, value in METRIC.findall(text)}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)


# ----- one run -----


@dataclass
class Call:
    session: int
    turn: int
    sent_s: float  # after the start
    ttft_s: float | None
    worker: int
    error: str | None = None
    prompt_n: int | None = None  # the server's own counts, from the answer's `timings`
    cache_n: int | None = None
    prompt_ms: float | None = None
    words: int = 0  # prompt words (the simulator's unit)


@dataclass
class Row:
    policy: str
    calls: list[Call]
    metrics: dict[str, float]  # summed over the servers
    load: str
    summary: dict[str, float | int | None] = field(default_factory=dict)
    predicted: dict[str, float | None] = field(default_factory=dict)  # from the idle calibration
    predicted_in_run: dict[str, float | None] = field(default_factory=dict)  # from the run's own speeds


def summarise(row: Row) -> None:
    ok = [c for c in row.calls if c.error is None and c.ttft_s is not None]
    later = [c for c in ok if c.turn > 0]
    timed = [c for c in later if c.cache_n is not None and c.prompt_n is not None]
    cached = sum(c.cache_n or 0 for c in timed)
    total = cached + sum(c.prompt_n or 0 for c in timed)
    m = row.metrics
    all_cached = m.get("llamacpp:prompt_tokens_cached_total", 0.0)
    all_total = all_cached + m.get("llamacpp:prompt_tokens_total", 0.0)
    row.summary = {
        "requests": len(row.calls),
        "errors": len(row.calls) - len(ok),
        "later_p50_s": pct([c.ttft_s for c in later], 0.5),
        "later_p90_s": pct([c.ttft_s for c in later], 0.9),
        "all_p50_s": pct([c.ttft_s for c in ok], 0.5),
        "all_p90_s": pct([c.ttft_s for c in ok], 0.9),
        "later_cached_share": cached / total if total else None,
        "later_with_timings": len(timed),
        "later": len(later),
        "all_cached_share": all_cached / all_total if all_total else None,
        "prefill_s": m.get("llamacpp:prompt_seconds_total"),
        "per_worker": "/".join(str(sum(1 for c in row.calls if c.worker == i)) for i in range(3)),
    }


def pct(values: Sequence[float | None], q: float) -> float | None:
    known = sorted(v for v in values if v is not None)
    return fleet._percentile(known, q) if known else None


def payload(session: Session, upto: int, model: str, answer: int, replies: list[str]) -> dict[str, object]:
    messages: list[dict[str, str]] = [{"role": "system", "content": session.system}]
    for t in range(upto + 1):
        messages.append({"role": "user", "content": session.turns[t]})
        if t < upto:
            messages.append({"role": "assistant", "content": replies[t]})
    return {
        "model": model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},  # the server's own cached count, in the last chunk
        "max_tokens": answer,
        "temperature": 0,
    }


async def stream(http: aiohttp.ClientSession, url: str, body: dict[str, object], call: Call) -> str:
    """Send one streamed chat; fill ``call`` (TTFT, the server's timings); the answer's text."""
    started = time.perf_counter()
    text: list[str] = []
    try:
        async with http.post(
            url, data=orjson.dumps(body), headers={"content-type": "application/json"}
        ) as answer:
            worker = answer.headers.get("x-interlock-worker", "")
            if worker.startswith("llama"):
                call.worker = int(worker.removeprefix("llama"))
            if answer.status != 200:
                call.error = f"HTTP {answer.status}: {(await answer.read())[:200]!r}"
                return ""
            async for line in answer.content:
                if not line.startswith(b"data: {"):
                    continue
                if call.ttft_s is None:
                    call.ttft_s = time.perf_counter() - started
                chunk = orjson.loads(line[6:])
                for choice in chunk.get("choices") or ():
                    text.append((choice.get("delta") or {}).get("content") or "")
                timings, usage = chunk.get("timings"), chunk.get("usage")
                if isinstance(timings, dict):
                    call.prompt_n, call.cache_n = timings.get("prompt_n"), timings.get("cache_n")
                    call.prompt_ms = timings.get("prompt_ms")
                elif isinstance(usage, dict) and call.cache_n is None:  # relayed: the usage the server sent
                    details = usage.get("prompt_tokens_details") or {}
                    cached = details.get("cached_tokens")
                    if isinstance(cached, int) and isinstance(usage.get("prompt_tokens"), int):
                        call.cache_n, call.prompt_n = cached, usage["prompt_tokens"] - cached
    except (aiohttp.ClientError, TimeoutError) as exc:
        call.error = type(exc).__name__
    return "".join(text) or "ok"


def least_connections() -> Callable[[list[int]], int]:
    """The fewest requests in flight; ties in turn (nginx's ``least_conn``)."""
    turn = itertools.count()

    def choose(in_flight: list[int]) -> int:
        fewest = min(in_flight)
        tied = [i for i, n in enumerate(in_flight) if n == fewest]
        return tied[next(turn) % len(tied)]

    return choose


def round_robin() -> Callable[[list[int]], int]:
    turn = itertools.count()
    return lambda in_flight: next(turn) % len(in_flight)


async def run_policy(name: str, sessions: Sequence[Session], args: argparse.Namespace, folder: Path) -> Row:
    servers = [
        Server(args.launcher_root, folder / f"llama{i}.log", args.threads, args.slots, args.n_ctx)
        for i in range(args.servers)
    ]
    gateway: subprocess.Popen[bytes] | None = None
    calls: list[Call] = []
    try:
        timeout = aiohttp.ClientTimeout(total=1800)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=timeout) as http:
            for server in servers:
                await server.ready(http)
            choose = None
            if name == fleet.INTERLOCK:
                workers = "\n".join(
                    f'      - {{name: llama{i}, url: "{s.url}/v1", server: llama.cpp, '
                    f"max_concurrent: {args.slots}, "
                    "queue: {max_waiting: 1000, max_wait: 1200s}}"
                    for i, s in enumerate(servers)
                )
                config = GATEWAY.format(workers=workers, model=MODEL, spare=args.spare_prompts)
                gateway, url = fleet.start_gateway(config, folder)
                await asyncio.sleep(2.0)  # a probe round: the servers' /slots read
            else:
                choose = round_robin() if name == "round-robin" else least_connections()
            in_flight = [0] * len(servers)
            started = time.perf_counter()

            async def agent(n: int, session: Session) -> None:
                await asyncio.sleep(session.at_s)
                replies: list[str] = []
                for t in range(len(session.turns)):
                    body = payload(
                        session, t, f"real/{MODEL}" if choose is None else MODEL, args.answer, replies
                    )
                    words = sum(len(str(m["content"]).split()) for m in body["messages"])  # type: ignore[attr-defined]
                    call = Call(n, t, time.perf_counter() - started, None, -1, words=words)
                    calls.append(call)
                    if choose is None:
                        replies.append(await stream(http, f"{url}/v1/chat/completions", body, call))
                    else:
                        call.worker = choose(in_flight)
                        in_flight[call.worker] += 1
                        try:
                            target = f"{servers[call.worker].url}/v1/chat/completions"
                            replies.append(await stream(http, target, body, call))
                        finally:
                            in_flight[call.worker] -= 1
                    await asyncio.sleep(args.think)

            await asyncio.gather(*(agent(n, s) for n, s in enumerate(sessions)))
            totals: dict[str, float] = {}
            for server in servers:
                for key, value in (await server.metrics(http)).items():
                    totals[key] = totals.get(key, 0.0) + value
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(15)
            if gateway.stdout is not None:
                gateway.stdout.close()
        for server in servers:
            server.stop()
    row = Row(name, calls, totals, fleet._load())
    summarise(row)
    return row


# ----- calibration and the simulator's prediction -----


async def calibrate(sessions: Sequence[Session], args: argparse.Namespace, folder: Path) -> dict[str, float]:
    """One idle server: a cold first turn and the same session's second turn; the prompt speed
    (``timings``), the output speed, the tokens a word, and what a hit costs."""
    server = Server(args.launcher_root, folder / "llama.log", args.threads, args.slots, args.n_ctx)
    out: dict[str, float] = {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1800)) as http:
            await server.ready(http)
            session, replies = sessions[0], []
            for t in range(2):
                body = payload(session, t, MODEL, args.answer, replies)
                body["stream"] = False
                sent = time.perf_counter()
                async with http.post(f"{server.url}/v1/chat/completions", json=body) as answer:
                    result = await answer.json()
                took = time.perf_counter() - sent
                replies.append(result["choices"][0]["message"]["content"])
                timings, usage = result["timings"], result["usage"]
                words = sum(len(str(m["content"]).split()) for m in body["messages"])  # type: ignore[attr-defined]
                out[f"turn{t}_prompt_n"] = timings["prompt_n"]
                out[f"turn{t}_cache_n"] = timings.get("cache_n", 0)
                out[f"turn{t}_prompt_s"] = timings["prompt_ms"] / 1000
                out[f"turn{t}_s"] = took
                if t == 0:
                    out["prompt_tokens_per_s"] = timings["prompt_per_second"]
                    out["output_tokens_per_s"] = timings["predicted_per_second"]
                    out["tokens_per_word"] = usage["prompt_tokens"] / words
    finally:
        server.stop()
    return out


async def predict(row: Row, speeds: dict[str, float], args: argparse.Namespace) -> dict[str, float | None]:
    """The simulator replays the row's requests at the times and on the workers they were sent."""
    scale = args.predict_scale
    tpw = speeds["tokens_per_word"]
    model = sim_model(
        MODEL,
        0.2,
        load_s=0.0,
        tokens_per_s=speeds["output_tokens_per_s"] / scale,
        prompt_tokens_per_s=speeds["prompt_tokens_per_s"] / tpw / scale,
        parallel=args.slots,
        cached_token_s=tpw / speeds["prompt_tokens_per_s"] / CACHED_COST * scale,
    )
    physics = fleet.Physics(
        batching_gain=0.0,
        prefix_cache_tokens=10**7,  # --cache-ram: every prompt of the run fits
        models=(model,),
        parallel=args.slots,
        preload=(f"{MODEL}:latest",),
    )
    calls = sorted((c for c in row.calls if c.worker >= 0), key=lambda c: c.sent_s)
    jobs = []
    for c in calls:
        body = payload(args.sessions_drawn[c.session], c.turn, MODEL, args.answer, ["ok"] * c.turn)
        messages = tuple((str(m["role"]), str(m["content"])) for m in body["messages"])  # type: ignore[attr-defined]
        jobs.append(fleet.Job(c.sent_s, f"{MODEL}:latest", c.words, args.answer, messages))
    workers = iter([c.worker for c in calls])
    result = await fleet.replay(row.policy, lambda _, __: next(workers), jobs, args.servers, scale, physics)
    return {
        "all_p50_s": result.ttft_s.get("p50"),
        "all_p90_s": result.ttft_s.get("p90"),
        "cached_share": result.cached_share,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=2048, help="tokens a slot")
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--gap", type=float, default=6.0, help="mean seconds between session arrivals")
    parser.add_argument(
        "--think", type=float, default=1.0, help="seconds between an answer and the next turn"
    )
    parser.add_argument("--system-words", type=int, default=180)
    parser.add_argument("--user-words", type=int, default=12)
    parser.add_argument("--answer", type=int, default=8, help="max_tokens of every answer")
    parser.add_argument("--spare-prompts", type=int, default=32)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--policy", action="append", choices=POLICIES)
    parser.add_argument("--predict-scale", type=float, default=1.0)
    parser.add_argument("--no-predict", action="store_true")
    parser.add_argument("--launcher-root", type=Path, default=ROOT)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--predict-from", type=Path, help="predict a run saved with --json; start nothing")
    args = parser.parse_args(argv)
    policies = args.policy or list(POLICIES)
    if not model_path().is_file():
        raise SystemExit(f"no model at {model_path()}: run `bash .ci/llama.sh`")
    if not (args.launcher_root / "tests" / "inference" / "llama.py").is_file():
        raise SystemExit(f"no tests/inference/llama.py under {args.launcher_root} (--launcher-root)")
    sessions = agents(args.seed, args.sessions, args.gap, args.system_words, args.user_words)
    args.sessions_drawn = sessions
    if args.predict_from is not None:
        return predict_saved(args)
    turns = sum(len(s.turns) for s in sessions)
    print(
        f"workload: {len(sessions)} sessions, {turns} turns, arrivals {args.gap:g} s apart on average, "
        f"think {args.think:g} s, system prompts of {args.system_words} words + 3-4 tool schemas, "
        f"turns of {args.user_words} words, answers of {args.answer} tokens; {args.servers} llama-servers x "
        f"{args.slots} slots, {args.threads} thread(s) each; load average {fleet._load()}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="interlock-fleet-real-") as tmp:
        folder = Path(tmp)
        (folder / "calibrate").mkdir()
        speeds = asyncio.run(calibrate(sessions, args, folder / "calibrate"))
        print(
            f"calibration (one server, load average {fleet._load()}): "
            f"prompt {speeds['prompt_tokens_per_s']:.0f} "
            f"tokens/s, output {speeds['output_tokens_per_s']:.1f} tokens/s, {speeds['tokens_per_word']:.2f} "
            f"tokens a word; turn 1 {speeds['turn0_prompt_n']:.0f} tokens in "
            f"{speeds['turn0_prompt_s']:.2f} s, "
            f"turn 2 {speeds['turn1_cache_n']:.0f} cached + {speeds['turn1_prompt_n']:.0f} in "
            f"{speeds['turn1_prompt_s']:.2f} s",
            flush=True,
        )
        rows = []
        for name in policies:
            (folder / name.split()[0]).mkdir()
            row = asyncio.run(run_policy(name, sessions, args, folder / name.split()[0]))
            rows.append(row)
            print(f"  {name}: done, load average {row.load}", flush=True)
        if not args.no_predict:
            for row in rows:
                row.predicted = asyncio.run(predict(row, speeds, args))
                row.predicted_in_run = asyncio.run(predict(row, in_run(row, speeds), args))
    show(rows, speeds, args)
    return 0


def in_run(row: Row, speeds: dict[str, float]) -> dict[str, float]:
    """The speeds the servers themselves measured during the row's run (``/metrics``: prompt tokens
    over prompt seconds, predicted tokens over their seconds, summed over the servers): what the shared
    machine gave them, sharing between a server's two slots included."""
    m = row.metrics
    return {
        **speeds,
        "prompt_tokens_per_s": m["llamacpp:prompt_tokens_total"] / m["llamacpp:prompt_seconds_total"],
        "output_tokens_per_s": m["llamacpp:tokens_predicted_total"]
        / m["llamacpp:tokens_predicted_seconds_total"],
    }


def show(rows: Sequence[Row], speeds: dict[str, float], args: argparse.Namespace) -> None:
    head = (
        f"{'policy':<22}| later p50 | later p90 | all p50 | all p90 | later cached | all cached | "
        "prefill s | per server | predicted all p50 / p90, cached: idle speeds; in-run speeds"
    )
    print(head)
    print("-" * len(head))

    def s(value: object, unit: str = " s") -> str:
        if value is None:
            return "-"
        if unit == "%":
            return f"{float(value):.0%}"  # type: ignore[arg-type]
        return f"{float(value):.2f}{unit}"  # type: ignore[arg-type]

    for row in rows:
        m, p, q = row.summary, row.predicted, row.predicted_in_run
        print(
            f"{row.policy:<22}| {s(m['later_p50_s']):>9} | {s(m['later_p90_s']):>9} | "
            f"{s(m['all_p50_s']):>7} | {s(m['all_p90_s']):>7} | {s(m['later_cached_share'], '%'):>7} "
            f"({m['later_with_timings']}/{m['later']}) | "
            f"{s(m['all_cached_share'], '%'):>10} | {s(m['prefill_s'], ''):>9} | {m['per_worker']:>10} | "
            f"{s(p.get('all_p50_s'))} / {s(p.get('all_p90_s'))}, {s(p.get('cached_share'), '%')}; "
            f"{s(q.get('all_p50_s'))} / {s(q.get('all_p90_s'))}, {s(q.get('cached_share'), '%')}"
        )
        if m["errors"]:
            print(f"  ({row.policy}: {m['errors']} errors: {[c.error for c in row.calls if c.error][:3]})")
    print(f"load average at the end {fleet._load()}")
    if args.json:
        args.json.write_text(json.dumps({"speeds": speeds, "rows": [asdict(r) for r in rows]}, indent=2))


def predict_saved(args: argparse.Namespace) -> int:
    """``--predict-from FILE``: the simulator's predictions for a run saved with ``--json`` (same
    workload arguments), without starting a server."""
    saved = json.loads(args.predict_from.read_text())
    speeds, rows = saved["speeds"], []
    for data in saved["rows"]:
        row = Row(data["policy"], [Call(**c) for c in data["calls"]], data["metrics"], data["load"])
        summarise(row)
        row.predicted = asyncio.run(predict(row, speeds, args))
        row.predicted_in_run = asyncio.run(predict(row, in_run(row, speeds), args))
        rows.append(row)
    args.json = None
    show(rows, speeds, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
