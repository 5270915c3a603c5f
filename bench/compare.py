"""Side by side, in one run: the fake upstream direct, interlock, and LiteLLM's proxy in front of it.

One fast fake OpenAI upstream (its own process) serves every target. interlock (`interlock serve`, one
worker) and LiteLLM (`litellm --num_workers 1`, its own virtual environment) run as processes of their own.
The load comes from wrk when it is on PATH (C, cheap: it leaves the CPU to what is measured), else from
bench/load.py's aiohttp client in this process; `--load` chooses. Each round drives every target in
turn, so a noisy neighbour hurts all of them alike; the table shows the median of the rounds.

- requests/s with 16 concurrent clients (closed loop, keep-alive), after a warm-up;
- p50 and p99 latency with one client, and the p50 each gateway adds to the direct call;
- CPU per request of the gateway, the fake and the load generator (from /proc, at 16 clients);
- time to first success when an alias's primary is dead: refusing connections (a port with nothing
  listening), and accepting but never answering (the fake's hang fault), with each gateway's timeouts.

    bench/litellm_setup.sh                          # once: LiteLLM in bench/.litellm-venv
    .venv/bin/python bench/compare.py [--seconds 5] [--rounds 3] [--litellm PATH/bin/litellm]

Without LiteLLM installed, its rows are skipped with a message. Figures from one machine only compare
with each other: on two cores the load generator, the fake and the gateway share the CPU (the output
says how much CPU everything else on the machine took meanwhile).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gateway import cpu_seconds, start_gateway, tree_cpu_seconds
from load import LoadResult, chat_body, run_load, run_wrk

from interlock.testing.faults import Fault
from interlock.testing.process import FakeProcess

HERE = Path(__file__).resolve().parent
DEFAULT_LITELLM = HERE / ".litellm-venv" / "bin" / "litellm"
HANG_MODEL = "hang-model"  # the fake hangs (accepts, never answers) for this model only; probes pass

INTERLOCK_CONFIG = """\
version: 1
server: {{default_alias: bench/chat, alias_namespace: bench/}}
timeouts: {{connect: {connect_s:g}s, first_byte: 60s, total: 600s}}
providers:
  fake: {{kind: openai, base_url: "{url}", api_key_env: BENCH_KEY}}
  refusing: {{kind: openai, base_url: "{dead_url}", api_key_env: BENCH_KEY}}
  refusing_unprobed: {{kind: openai, base_url: "{dead_url}", api_key_env: BENCH_KEY, probe: false}}
  hanging: {{kind: openai, base_url: "{url}", api_key_env: BENCH_KEY, timeouts: {{first_byte: {hang_s:g}s}}}}
aliases:
  bench/chat: {{description: one healthy candidate, chain: [fake/bench-model]}}
  bench/refused: {{description: dead primary, chain: [refusing/bench-model, fake/bench-model]}}
  bench/refused-unprobed:
    {{description: dead primary, chain: [refusing_unprobed/bench-model, fake/bench-model]}}
  bench/hang: {{description: hanging primary, chain: [hanging/{hang_model}, fake/bench-model]}}
"""

LITELLM_CONFIG = """\
model_list:
  - model_name: fast
    litellm_params: {{model: openai/bench-model, api_base: "{url}", api_key: sk-fake}}
  - model_name: secondary
    litellm_params: {{model: openai/bench-model-2, api_base: "{url}", api_key: sk-fake}}
  - model_name: refused
    litellm_params: {{model: openai/bench-model, api_base: "{dead_url}", api_key: sk-fake}}
  - model_name: refused-no-retry
    litellm_params: {{model: openai/bench-model-3, api_base: "{dead_url}", api_key: sk-fake, num_retries: 0}}
  - model_name: hang
    litellm_params: {{model: openai/{hang_model}, api_base: "{url}", api_key: sk-fake, timeout: {hang_s:g}}}
  - model_name: hang-no-retry
    litellm_params:
      {{model: openai/{hang_model}, api_base: "{url}", api_key: sk-fake, timeout: {hang_s:g}, num_retries: 0}}
router_settings:
  fallbacks:
    - {{refused: [secondary]}}
    - {{refused-no-retry: [secondary]}}
    - {{hang: [secondary]}}
    - {{hang-no-retry: [secondary]}}
"""


@dataclass(frozen=True)
class Scenario:
    """One dead-primary case: the model to ask for, and what the gateway was told."""

    label: str
    model: str
    settings: str


@dataclass
class Target:
    name: str
    url: str  # the chat completions URL
    model: str
    pid: int | None  # the process whose CPU (children included) is the target's
    scenarios: tuple[Scenario, ...] = ()


@dataclass
class Round:
    rps: float
    p50_ms: float
    p99_ms: float
    cpu_us: float  # the target's process, per request at high concurrency
    fake_us: float
    load_us: float
    other_pct: float  # CPU of everything else on the machine during the run, in % of one core
    errors: int


@dataclass
class Failover:
    target: str
    scenario: Scenario
    times_s: list[float] = field(default_factory=list)
    statuses: list[int | str] = field(default_factory=list)


# -- machine ---------------------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def command_output(command: list[str], timeout_s: float) -> str:
    """What ``command`` prints, stripped; ``unknown`` when it cannot run or fails."""
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def git_revision() -> str:
    return command_output(["git", "-C", str(HERE), "describe", "--always", "--dirty"], 5)


def litellm_version(executable: Path) -> str:
    python = str(executable.parent / "python")
    return command_output(
        [python, "-c", "from importlib.metadata import version; print(version('litellm'))"], 60
    )


def wrk_version() -> str:
    try:
        out = subprocess.run(["wrk", "--version"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "wrk (version unknown)"
    words = (out.stdout + out.stderr).split()
    return " ".join(words[:2]) if words else "wrk (version unknown)"


def self_cpu_seconds() -> float:
    """This process and its waited-for children (wrk, when it drives the load)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all cores, every process) since boot."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


# -- processes -------------------------------------------------------------------------------------


@contextmanager
def refusing_port() -> Iterator[str]:
    """A loopback port held bound but not listening: every connection to it is refused at once."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        sock.close()


def free_port() -> int:
    """For LiteLLM, which takes a port number only (so it cannot be given a bound socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def interlock_gateway(
    folder: Path, fake_url: str, dead_url: str, args: argparse.Namespace
) -> Iterator[Target]:
    config = folder / "interlock.yaml"
    config.write_text(
        INTERLOCK_CONFIG.format(
            url=fake_url,
            dead_url=dead_url,
            connect_s=args.connect_s,
            hang_s=args.hang_s,
            hang_model=HANG_MODEL,
        )
    )
    proc, url = start_gateway(config, 1)
    try:
        connect, hang = f"connect {args.connect_s:g} s", f"first_byte {args.hang_s:g} s"
        yield Target(
            "interlock",
            f"{url}/v1/chat/completions",
            "bench/chat",
            proc.pid,
            (
                Scenario("refused, probed (default)", "bench/refused", f"{connect}; probe every 30 s"),
                Scenario("refused, probe: false", "bench/refused-unprobed", f"{connect}; no probe"),
                Scenario("accepts, never answers", "bench/hang", f"{hang}; probe passes"),
            ),
        )
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def litellm_process(
    executable: Path, config: Path, folder: Path, start_s: float
) -> Iterator[tuple[str, int]]:
    """LiteLLM's proxy on ``config`` with one worker, ready: ``(base URL, pid)``; stopped on exit."""
    port = free_port()
    env = {
        **os.environ,
        "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true",  # no master key: no auth, no DB
        "LITELLM_LOG": "ERROR",  # uvicorn's access log off, as interlock's is by default
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # do not fetch the cost map from the internet at start
    }
    log_path = folder / "litellm.log"
    command = [str(executable), "--config", str(config), "--port", str(port), "--num_workers", "1"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        started = time.monotonic()
        if not wait_ready(f"{base}/health/liveliness", proc, start_s):
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"LiteLLM did not get ready in {start_s:g} s; its log ends:\n{tail}")
        print(f"LiteLLM ready after {time.monotonic() - started:.1f} s on {base}", flush=True)
        yield base, proc.pid
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        except ProcessLookupError:
            pass


@contextmanager
def litellm_gateway(
    executable: Path, folder: Path, fake_url: str, dead_url: str, args: argparse.Namespace
) -> Iterator[Target]:
    config = folder / "litellm.yaml"
    config.write_text(
        LITELLM_CONFIG.format(url=fake_url, dead_url=dead_url, hang_s=args.hang_s, hang_model=HANG_MODEL)
    )
    with litellm_process(executable, config, folder, args.litellm_start_s) as (base, pid):
        hang = f"timeout {args.hang_s:g} s"
        yield Target(
            "LiteLLM",
            f"{base}/v1/chat/completions",
            "fast",
            pid,
            (
                Scenario("refused (default retries)", "refused", "router defaults (num_retries 2)"),
                Scenario("refused, num_retries: 0", "refused-no-retry", "num_retries 0"),
                Scenario("accepts, never answers (default retries)", "hang", f"{hang}; num_retries 2"),
                Scenario("accepts, never answers, num_retries: 0", "hang-no-retry", f"{hang}; num_retries 0"),
            ),
        )


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(0.25)
    return False


# -- measuring -------------------------------------------------------------------------------------


@dataclass
class Timed:
    """One measured run and the CPU seconds spent meanwhile, by whom."""

    result: LoadResult
    target_cpu: float
    fake_cpu: float
    load_cpu: float
    other_cpu: float  # the rest of the machine: other processes, the kernel's own threads
    wall_s: float


async def drive(url: str, body: bytes, concurrency: int, seconds: float, *, wrk: bool) -> LoadResult:
    """Closed-loop load without a warm-up of its own: wrk when asked, else bench/load.py's aiohttp."""
    if wrk:  # whole seconds: wrk's -d takes no fractions
        return await asyncio.to_thread(run_wrk, url, body, concurrency, max(1, round(seconds)))
    return await run_load(url, body, concurrency, seconds, warmup_s=0)


async def timed_load(target: Target, fake_pid: int, concurrency: int, seconds: float, *, wrk: bool) -> Timed:
    """One measured run with the CPU seconds each process spent meanwhile."""
    body = chat_body(target.model)
    gw0 = tree_cpu_seconds(target.pid) if target.pid else 0.0
    fake0, load0, busy0 = cpu_seconds(fake_pid), self_cpu_seconds(), machine_busy_seconds()
    started = time.perf_counter()
    result = await drive(target.url, body, concurrency, seconds, wrk=wrk)
    wall = time.perf_counter() - started
    gw = tree_cpu_seconds(target.pid) - gw0 if target.pid else 0.0
    fake, load = cpu_seconds(fake_pid) - fake0, self_cpu_seconds() - load0
    other = machine_busy_seconds() - busy0 - gw - fake - load
    return Timed(result, gw, fake, load, max(other, 0.0), wall)


async def measure_round(target: Target, fake_pid: int, args: argparse.Namespace, warmup_s: float) -> Round:
    body = chat_body(target.model)
    wrk = args.load == "wrk"
    await drive(target.url, body, args.concurrency, warmup_s, wrk=wrk)  # pools, caches, lazy imports
    timed = await timed_load(target, fake_pid, args.concurrency, args.seconds, wrk=wrk)
    await drive(target.url, body, 1, min(1.0, warmup_s), wrk=wrk)
    low = (await timed_load(target, fake_pid, 1, args.seconds, wrk=wrk)).result
    high = timed.result
    n = max(high.requests, 1)
    bad = sum(count for status, count in high.statuses.items() if status != 200)
    bad += sum(count for status, count in low.statuses.items() if status != 200)
    return Round(
        rps=high.rps,
        p50_ms=low.percentile_ms(0.5),
        p99_ms=low.percentile_ms(0.99),
        cpu_us=timed.target_cpu / n * 1e6,
        fake_us=timed.fake_cpu / n * 1e6,
        load_us=timed.load_cpu / n * 1e6,
        other_pct=timed.other_cpu / timed.wall_s * 100,
        errors=bad + sum(high.errors.values()) + sum(low.errors.values()),
    )


async def failover(target: Target, scenario: Scenario, requests: int, client_timeout_s: float) -> Failover:
    """Sequential requests for an alias whose primary is dead: the time each took to its answer."""
    outcome = Failover(target.name, scenario)
    body = chat_body(scenario.model)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    timeout = aiohttp.ClientTimeout(total=client_timeout_s)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for _ in range(requests):
            started = time.perf_counter()
            try:
                async with session.post(target.url, data=body, headers=headers) as response:
                    await response.read()
                    status: int | str = response.status
            except (aiohttp.ClientError, TimeoutError) as exc:
                status = type(exc).__name__
            outcome.times_s.append(time.perf_counter() - started)
            outcome.statuses.append(status)
    return outcome


async def warm_once(target: Target) -> None:
    await run_load(target.url, chat_body(target.model), 1, 0.3, warmup_s=0)


# -- report ----------------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(rounds: dict[str, list[Round]]) -> dict[str, dict[str, float]]:
    summary: dict[str, dict[str, float]] = {}
    for name, rows in rounds.items():
        summary[name] = {
            "rps": median([r.rps for r in rows]),
            "p50_ms": median([r.p50_ms for r in rows]),
            "p99_ms": median([r.p99_ms for r in rows]),
            "cpu_us": median([r.cpu_us for r in rows]),
            "fake_us": median([r.fake_us for r in rows]),
            "load_us": median([r.load_us for r in rows]),
            "other_pct": median([r.other_pct for r in rows]),
            "errors": float(sum(r.errors for r in rows)),
        }
    return summary


def print_table(summary: dict[str, dict[str, float]], rounds: dict[str, list[Round]], c: int) -> None:
    litellm = summary.get("LiteLLM", {}).get("rps")
    direct = summary.get("direct", {}).get("p50_ms")
    head = (
        f"{'target':<10} | {f'req/s @{c}':>9} | {'vs LiteLLM':>10} | {'p50 @1':>8} | {'p99 @1':>8} | "
        f"{'p50 added vs direct':>19}"
    )
    print(head)
    print("-" * len(head))
    for name, s in summary.items():
        ratio = f"{s['rps'] / litellm:.1f}x" if litellm else "n/a"
        added = "—" if name == "direct" or direct is None else f"{s['p50_ms'] - direct:+.2f} ms"
        print(
            f"{name:<10} | {s['rps']:>9.0f} | {ratio:>10} | {s['p50_ms']:>5.2f} ms | "
            f"{s['p99_ms']:>5.2f} ms | {added:>19}"
        )
    print()
    print(f"each round (req/s @{c}, p50 @1):")
    for name, rows in rounds.items():
        cells = "   ".join(f"{r.rps:6.0f} req/s {r.p50_ms:6.2f} ms" for r in rows)
        print(f"  {name:<10} {cells}")
    print()
    print(f"CPU @{c}, medians: µs per request of the target / the fake upstream / the load generator;")
    print("  and everything else on the machine meanwhile, in % of one core (other processes, kernel)")
    for name, s in summary.items():
        gw = "—" if name == "direct" else f"{s['cpu_us']:.0f}"
        print(
            f"  {name:<10} {gw:>7} / {s['fake_us']:>5.0f} / {s['load_us']:>5.0f}   "
            f"other {s['other_pct']:>3.0f} %"
        )
    errors = {name: int(s["errors"]) for name, s in summary.items() if s["errors"]}
    if errors:
        print(f"non-200 answers or client errors during the runs: {errors}")


def print_failover(results: list[Failover]) -> None:
    if not results:
        return
    print("dead primary: sequential requests, each timed from sending to the whole answer")
    head = (
        f"{'gateway':<10} | {'primary':<40} | {'1st success':>11} | {'the requests after it':<34} | settings"
    )
    print(head)
    print("-" * len(head))
    for f in results:
        first = _duration(f.times_s[0]) if f.times_s else "—"
        rest = ", ".join(_duration(t) for t in f.times_s[1:])
        odd = [s for s in f.statuses if s != 200]
        note = f"; answers {f.statuses}" if odd else ""
        print(
            f"{f.target:<10} | {f.scenario.label:<40} | {first:>11} | {rest:<34} | "
            f"{f.scenario.settings}{note}"
        )


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


# -- main ------------------------------------------------------------------------------------------


async def run(args: argparse.Namespace, targets: list[Target], fake: FakeProcess) -> dict[str, Any]:
    failovers: list[Failover] = []
    for target in targets:
        if not target.scenarios:
            continue
        await warm_once(target)
        for scenario in target.scenarios:
            print(f"  dead primary: {target.name}, {scenario.label} ...", flush=True)
            failovers.append(await failover(target, scenario, args.failover_requests, args.client_timeout_s))
    rounds: dict[str, list[Round]] = {t.name: [] for t in targets}
    for index in range(args.rounds):
        for target in targets:
            warmup = args.warmup_s if index == 0 else min(1.0, args.warmup_s)
            row = await measure_round(target, fake.pid, args, warmup)
            rounds[target.name].append(row)
            print(
                f"  round {index + 1}/{args.rounds} {target.name:<10} {row.rps:8.0f} req/s"
                f" @{args.concurrency}   p50 @1 {row.p50_ms:6.2f} ms   p99 @1 {row.p99_ms:6.2f} ms"
                f"   (other load {row.other_pct:.0f} % of a core)",
                flush=True,
            )
    return {"rounds": rounds, "failovers": failovers}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per target and level")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over all targets; the median is shown")
    parser.add_argument("--warmup-s", type=float, default=3.0, help="warm-up before a target's first round")
    parser.add_argument("--concurrency", type=int, default=16, help="clients for the requests/s figure")
    parser.add_argument(
        "--litellm",
        type=Path,
        default=DEFAULT_LITELLM,
        help="LiteLLM's `litellm` program (default: bench/.litellm-venv/bin/litellm; see litellm_setup.sh)",
    )
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM out")
    parser.add_argument(
        "--litellm-start-s", type=float, default=180.0, help="how long LiteLLM may take to start"
    )
    parser.add_argument("--connect-s", type=float, default=2.0, help="interlock's connect timeout")
    parser.add_argument(
        "--hang-s", type=float, default=2.0, help="both gateways' timeout for a hanging primary"
    )
    parser.add_argument(
        "--failover-requests", type=int, default=5, help="sequential requests per dead primary"
    )
    parser.add_argument("--no-failover", action="store_true", help="skip the dead-primary measurements")
    parser.add_argument(
        "--load",
        choices=("auto", "wrk", "aiohttp"),
        default="auto",
        help="load generator: wrk (C, cheap; auto when on PATH) or bench/load.py's aiohttp client",
    )
    parser.add_argument(
        "--client-timeout-s", type=float, default=120.0, help="the client's own limit per request"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    import uvloop

    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-ups: no orphaned servers
    use_litellm = not args.no_litellm
    if args.load == "auto":
        args.load = "wrk" if shutil.which("wrk") else "aiohttp"
    if args.load == "wrk" and not shutil.which("wrk"):
        print("--load wrk: wrk is not on PATH (apt-get install wrk)", file=sys.stderr)
        return 2
    if use_litellm and not args.litellm.exists():
        print(
            f"LiteLLM skipped: {args.litellm} does not exist (run bench/litellm_setup.sh, or pass "
            "--litellm PATH/bin/litellm)",
            flush=True,
        )
        use_litellm = False
    usable = len(os.sched_getaffinity(0))  # what nproc prints
    cpus = f"{usable} CPUs" if usable == os.cpu_count() else f"{usable} of {os.cpu_count()} CPUs usable"
    print(f"machine: {cpus}, {cpu_model()}, {platform.system()} {platform.release()}")
    print(f"load average before the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    versions = [
        f"Python {platform.python_version()}",
        f"interlock {version('interlock')} ({git_revision()})",
        *(f"{name} {version(name)}" for name in ("uvicorn", "uvloop", "httptools", "aiohttp")),
    ]
    if args.load == "wrk":
        versions.append(wrk_version())
    if use_litellm:
        versions.append(f"litellm {litellm_version(args.litellm)} ({args.litellm})")
    print("versions: " + ", ".join(versions))
    load_name = "wrk -t1 (bench/load.py run_wrk)" if args.load == "wrk" else "bench/load.py (aiohttp, uvloop)"
    print(
        f"method: {args.rounds} rounds x ({args.seconds:g} s @{args.concurrency} clients + {args.seconds:g} s"
        f" @1 client) per target, medians; one gateway worker each; load generator: {load_name}"
    )
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        fake = stack.enter_context(FakeProcess("openai", "--no-record"))
        fake.set_fault(Fault.hang(), model=HANG_MODEL)
        dead_url = stack.enter_context(refusing_port())
        targets = [Target("direct", f"{fake.base_url}/chat/completions", "bench-model", None)]
        targets.append(stack.enter_context(interlock_gateway(folder, fake.base_url, dead_url, args)))
        if use_litellm:
            targets.append(
                stack.enter_context(litellm_gateway(args.litellm, folder, fake.base_url, dead_url, args))
            )
        if args.no_failover:
            targets = [Target(t.name, t.url, t.model, t.pid) for t in targets]
        results = uvloop.run(run(args, targets, fake))
    print()
    print(f"load average after the run: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    summary = summarize(results["rounds"])
    print_table(summary, results["rounds"], args.concurrency)
    print()
    print_failover(results["failovers"])
    if args.json:
        payload = {
            "summary": summary,
            "rounds": {k: [vars(r) for r in v] for k, v in results["rounds"].items()},
            "failovers": [
                {"target": f.target, **vars(f.scenario), "times_s": f.times_s, "statuses": f.statuses}
                for f in results["failovers"]
            ],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(orjson.dumps(payload, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
